//! `Sockets` over the hibernation WebSocket API. Each socket carries its connection id as a
//! serialized attachment, so the id survives hibernation.

use std::cell::RefCell;
use std::rc::Rc;

use worker::{State, WebSocket};

use crate::platform::Sockets;

/// `Sockets` over the hibernation WebSocket API, with the open ids cached.
pub struct DoSockets {
    state: Rc<State>,
    /// (id, socket) of every open socket; rebuilt from the runtime after a wake or a change.
    cache: RefCell<Option<Vec<(String, WebSocket)>>>,
}

impl DoSockets {
    /// The sockets of the object behind `state`.
    pub fn new(state: Rc<State>) -> Self {
        Self { state, cache: RefCell::new(None) }
    }

    /// Forgets the cached socket list after a connect or close.
    pub fn invalidate(&self) {
        self.cache.replace(None);
    }

    fn with_sockets<R>(&self, f: impl FnOnce(&[(String, WebSocket)]) -> R) -> R {
        let mut cache = self.cache.borrow_mut();
        let sockets = cache.get_or_insert_with(|| {
            self.state
                .get_websockets()
                .into_iter()
                .filter_map(|ws| {
                    let id = ws.deserialize_attachment::<String>().ok().flatten()?;
                    Some((id, ws))
                })
                .collect()
        });
        f(sockets)
    }
}

impl Sockets for DoSockets {
    fn ids(&self) -> Vec<String> {
        self.with_sockets(|s| s.iter().map(|(id, _)| id.clone()).collect())
    }

    fn send(&self, id: &str, text: &str) {
        let stale = self.with_sockets(|s| match s.iter().find(|(i, _)| i == id) {
            Some((_, ws)) => ws.send_with_str(text).is_err(),
            None => false,
        });
        if stale {
            self.invalidate();
        }
    }
}
