//! The CDP client: one WebSocket to a browser, JSON-RPC commands with ids, replies matched to
//! their callers, events buffered for `waitForEvent`, a timeout per command, and a debug log.
//!
//! There is no reader task: whoever waits for a reply reads the socket (one reader at a time,
//! behind an async lock) and files what it reads for the others, so the client runs the same
//! on the host (tests script the peer) and in the Worker (no background task outlives a call).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use futures::stream::LocalBoxStream;
use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::BrowserError;
use crate::platform::Clock;

/// Events kept for `waitForEvent`; older ones are dropped first.
pub const MAX_BUFFERED_EVENTS: usize = 500;
/// Entries kept in the debug log.
pub const MAX_DEBUG_ENTRIES: usize = 200;

/// The sending half of a WebSocket to a browser.
pub trait WsSender {
    /// Sends one text frame.
    fn send(&self, text: &str) -> Result<(), BrowserError>;
    /// Closes the socket (idempotent).
    fn close(&self);
}

/// An open WebSocket: how to send, and the text frames as they arrive (the stream ends when
/// the socket closes).
pub struct WsConnection {
    /// The sending half.
    pub sender: Rc<dyn WsSender>,
    /// Incoming text frames.
    pub incoming: LocalBoxStream<'static, String>,
}

/// A command as it goes on the wire.
#[derive(Debug, Serialize)]
struct Command<'a> {
    id: u64,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
    #[serde(rename = "sessionId", skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
}

/// The error object of a failed command.
#[derive(Debug, Clone, Deserialize)]
struct WireError {
    code: i64,
    message: String,
    #[serde(default)]
    data: Option<String>,
}

/// Anything the browser sends: a reply (with `id`) or an event (with `method`).
#[derive(Debug, Deserialize)]
struct Incoming {
    id: Option<u64>,
    result: Option<Value>,
    error: Option<WireError>,
    method: Option<String>,
    params: Option<Value>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

/// An event the browser sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CdpEvent {
    /// `Page.loadEventFired`, …
    pub method: String,
    /// Its parameters.
    pub params: Value,
    /// The target session it came from, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// One line of the debug log: a command and how it went, or an event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DebugEntry {
    /// `command` or `event`.
    pub kind: &'static str,
    /// The CDP method.
    pub method: String,
    /// The target session, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// For a command: how long it took, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms: Option<f64>,
    /// For a failed command: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A command's reply: its result, or the browser's error code and message.
type Reply = Result<Value, (i64, String)>;

/// A command sent back at once in answer to an event (method, params, session), as the
/// allow-list answers `Fetch.requestPaused` while whoever reads the socket waits.
pub type Answer = (String, Value, Option<String>);

/// Decides which events are answered by the client itself, and how.
pub type Interceptor = Box<dyn Fn(&CdpEvent) -> Option<Answer>>;

/// A client over one browser WebSocket.
pub struct CdpClient {
    sender: Rc<dyn WsSender>,
    incoming: futures::lock::Mutex<LocalBoxStream<'static, String>>,
    clock: Rc<dyn Clock>,
    next_id: Cell<u64>,
    /// Replies read by one caller for another, by id.
    replies: RefCell<HashMap<u64, Reply>>,
    /// Ids whose callers gave up (timed out); their late replies are dropped.
    abandoned: RefCell<HashSet<u64>>,
    events: RefCell<VecDeque<CdpEvent>>,
    closed: RefCell<Option<String>>,
    debug: RefCell<VecDeque<DebugEntry>>,
    interceptor: RefCell<Option<Interceptor>>,
}

impl CdpClient {
    /// A client over `conn`, timing commands with `clock`.
    pub fn new(conn: WsConnection, clock: Rc<dyn Clock>) -> Self {
        Self {
            sender: conn.sender,
            incoming: futures::lock::Mutex::new(conn.incoming),
            clock,
            next_id: Cell::new(1),
            replies: RefCell::default(),
            abandoned: RefCell::default(),
            events: RefCell::default(),
            closed: RefCell::default(),
            debug: RefCell::default(),
            interceptor: RefCell::default(),
        }
    }

    /// Answers the events `f` picks as they are read (their replies are dropped), instead of
    /// buffering them.
    pub fn set_interceptor(&self, f: Interceptor) {
        *self.interceptor.borrow_mut() = Some(f);
    }

    /// Sends a command whose reply nobody waits for.
    fn send_unanswered(&self, (method, params, session_id): Answer) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let command = Command {
            id,
            method: &method,
            params: Some(&params),
            session_id: session_id.as_deref(),
        };
        if let Ok(frame) = serde_json::to_string(&command) {
            self.abandoned.borrow_mut().insert(id);
            let sent = self.sender.send(&frame);
            self.log(DebugEntry {
                kind: "command",
                method,
                session_id,
                ms: None,
                error: sent.err().map(|e| e.to_string()),
            });
        }
    }

    /// Why the connection is gone, once it is.
    pub fn closed(&self) -> Option<String> {
        self.closed.borrow().clone()
    }

    /// Closes the socket; later commands fail with [`BrowserError::Closed`].
    pub fn close(&self) {
        self.sender.close();
        self.closed.borrow_mut().get_or_insert_with(|| "the connection was closed".into());
    }

    fn log(&self, entry: DebugEntry) {
        let mut debug = self.debug.borrow_mut();
        if debug.len() == MAX_DEBUG_ENTRIES {
            debug.pop_front();
        }
        debug.push_back(entry);
    }

    /// The newest `limit` debug entries, oldest first.
    pub fn debug_log(&self, limit: usize) -> Vec<DebugEntry> {
        let debug = self.debug.borrow();
        debug.iter().skip(debug.len().saturating_sub(limit)).cloned().collect()
    }

    /// Empties the debug log.
    pub fn clear_debug_log(&self) {
        self.debug.borrow_mut().clear();
    }

    /// Files one frame: a reply for its caller, an event in the buffer.
    fn file(&self, text: &str) {
        let Ok(msg) = serde_json::from_str::<Incoming>(text) else {
            crate::platform::log(&format!(
                "think-rs: an unreadable CDP frame was ignored: {}",
                text.chars().take(200).collect::<String>()
            ));
            return;
        };
        if let Some(id) = msg.id {
            if self.abandoned.borrow_mut().remove(&id) {
                return;
            }
            let reply = match msg.error {
                Some(e) => {
                    let message = match e.data {
                        Some(d) if !d.is_empty() => format!("{} ({d})", e.message),
                        _ => e.message,
                    };
                    Err((e.code, message))
                }
                None => Ok(msg.result.unwrap_or(Value::Null)),
            };
            self.replies.borrow_mut().insert(id, reply);
        } else if let Some(method) = msg.method {
            self.log(DebugEntry {
                kind: "event",
                method: method.clone(),
                session_id: msg.session_id.clone(),
                ms: None,
                error: None,
            });
            let event = CdpEvent {
                method,
                params: msg.params.unwrap_or(Value::Null),
                session_id: msg.session_id,
            };
            let answer = self.interceptor.borrow().as_ref().and_then(|f| f(&event));
            if let Some(answer) = answer {
                self.send_unanswered(answer);
                return;
            }
            let mut events = self.events.borrow_mut();
            if events.len() == MAX_BUFFERED_EVENTS {
                events.pop_front();
            }
            events.push_back(event);
        }
    }

    /// Reads one frame, unless `ready` says what the caller waits for came in while it
    /// waited for the reader's lock; false once the socket is closed.
    async fn pump(&self, ready: &dyn Fn() -> bool) -> bool {
        let mut incoming = self.incoming.lock().await;
        if ready() {
            return true;
        }
        if self.closed.borrow().is_some() {
            return false;
        }
        match incoming.next().await {
            Some(text) => {
                self.file(&text);
                true
            }
            None => {
                self.closed
                    .borrow_mut()
                    .get_or_insert_with(|| "the browser closed the connection".into());
                false
            }
        }
    }

    /// Sends `method` and waits up to `timeout_ms` for its result (the JSON-RPC envelope
    /// removed). A CDP error is [`BrowserError::Protocol`] with the browser's code and text.
    pub async fn send(
        &self,
        method: &str,
        params: Option<&Value>,
        session_id: Option<&str>,
        timeout_ms: u64,
    ) -> Result<Value, BrowserError> {
        if let Some(why) = self.closed() {
            return Err(BrowserError::Closed(why));
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let frame = serde_json::to_string(&Command { id, method, params, session_id })
            .map_err(|e| BrowserError::InvalidInput(e.to_string()))?;
        let started = self.clock.now_ms();
        self.sender.send(&frame)?;
        let wait = async {
            loop {
                if let Some(reply) = self.replies.borrow_mut().remove(&id) {
                    return Some(reply);
                }
                if !self.pump(&|| self.replies.borrow().contains_key(&id)).await {
                    // A reply read just before the close still counts.
                    return self.replies.borrow_mut().remove(&id);
                }
            }
        }
        .fuse();
        let timer = self.clock.sleep(timeout_ms).fuse();
        futures::pin_mut!(wait, timer);
        let outcome = futures::select! {
            r = wait => Some(r),
            _ = timer => None,
        };
        let ms = Some(self.clock.now_ms() - started);
        let result = match outcome {
            Some(Some(Ok(v))) => Ok(v),
            Some(Some(Err((code, message)))) => {
                Err(BrowserError::Protocol { method: method.to_owned(), code, message })
            }
            Some(None) => Err(BrowserError::Closed(self.closed().unwrap_or_default())),
            None => {
                self.abandoned.borrow_mut().insert(id);
                Err(BrowserError::Timeout { method: method.to_owned(), ms: timeout_ms })
            }
        };
        self.log(DebugEntry {
            kind: "command",
            method: method.to_owned(),
            session_id: session_id.map(str::to_owned),
            ms,
            error: result.as_ref().err().map(|e| e.to_string()),
        });
        result
    }

    /// Takes the oldest buffered event that matches, or waits up to `timeout_ms` for one.
    pub async fn wait_event(
        &self,
        method: &str,
        session_id: Option<&str>,
        timeout_ms: u64,
    ) -> Result<CdpEvent, BrowserError> {
        let matches = |e: &CdpEvent| {
            e.method == method && (session_id.is_none() || e.session_id.as_deref() == session_id)
        };
        let take = || {
            let mut events = self.events.borrow_mut();
            let at = events.iter().position(matches)?;
            events.remove(at)
        };
        let ready = || self.events.borrow().iter().any(matches);
        let wait = async {
            loop {
                if let Some(e) = take() {
                    return Some(e);
                }
                if !self.pump(&ready).await {
                    return take();
                }
            }
        }
        .fuse();
        let timer = self.clock.sleep(timeout_ms).fuse();
        futures::pin_mut!(wait, timer);
        futures::select! {
            r = wait => r.ok_or_else(|| BrowserError::Closed(self.closed().unwrap_or_default())),
            _ = timer => Err(BrowserError::Timeout { method: method.to_owned(), ms: timeout_ms }),
        }
    }

    /// Drops buffered events of `session_id` (all when `None`), before a step whose events
    /// should not be confused with earlier ones.
    pub fn clear_events(&self, session_id: Option<&str>) {
        self.events
            .borrow_mut()
            .retain(|e| session_id.is_some() && e.session_id.as_deref() != session_id);
    }
}
