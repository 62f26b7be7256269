//! `Sockets` over the hibernation WebSocket API. Each socket carries its connection id as a
//! serialized attachment, so the id survives hibernation.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::{State, WebSocket};

use think_core::platform::Sockets;

#[wasm_bindgen]
extern "C" {
    /// A WebSocket seen only for `send` with a string made once for every socket it goes to.
    type Socket;
    #[wasm_bindgen(method, js_name = send, catch)]
    fn send_value(this: &Socket, data: &JsValue) -> Result<(), JsValue>;
}

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

impl DoSockets {
    /// Whether a socket other than `ws` is open under connection id `id`: the tab reconnected
    /// (same `_pk`) before its old socket closed, so the old one's close ends nothing.
    pub fn open_elsewhere(&self, id: &str, ws: &WebSocket) -> bool {
        let this: &web_sys::WebSocket = ws.as_ref();
        self.with_sockets(|s| {
            s.iter().any(|(i, other)| {
                let other: &web_sys::WebSocket = other.as_ref();
                i == id && other != this && other.ready_state() == web_sys::WebSocket::OPEN
            })
        })
    }
}

/// A connection id can name two sockets for a moment: a tab that reconnects with the same
/// `_pk` before its old socket has closed (a dropped network). Each id is listed once and a
/// frame for it goes to each of its sockets, so the live one gets it once (the old one is
/// going away), as partyserver sends to each connection.
impl Sockets for DoSockets {
    fn ids(&self) -> Vec<String> {
        self.with_sockets(|s| {
            let mut seen = std::collections::BTreeSet::new();
            s.iter().filter(|(id, _)| seen.insert(id.as_str())).map(|(id, _)| id.clone()).collect()
        })
    }

    fn send(&self, id: &str, text: &str) {
        let stale = self.with_sockets(|s| {
            let mut stale = false;
            for (_, ws) in s.iter().filter(|(i, _)| i == id) {
                stale |= ws.send_with_str(text).is_err();
            }
            stale
        });
        if stale {
            self.invalidate();
        }
    }

    fn broadcast(&self, text: &str, to: &dyn Fn(&str) -> bool) {
        let mut frame = None;
        let stale = self.with_sockets(|s| {
            let mut stale = false;
            for (_, ws) in s.iter().filter(|(id, _)| to(id)) {
                let frame = frame.get_or_insert_with(|| JsValue::from_str(text));
                let ws: &web_sys::WebSocket = ws.as_ref();
                stale |= ws.unchecked_ref::<Socket>().send_value(frame).is_err();
            }
            stale
        });
        if stale {
            self.invalidate();
        }
    }
}
