//! The two HTTP transports of MCP over the `HttpClient` seam.
//!
//! Streamable HTTP: every message is a POST whose answer is JSON, an SSE stream carrying the
//! response among server notifications and requests, or 202 for notifications. An optional GET
//! stream carries server-initiated messages.
//!
//! Legacy HTTP+SSE: one long GET stream announces a POST `endpoint`, and every response comes
//! back on that stream. A Worker cannot spawn a reader task, so the stream is a shared pump:
//! whichever caller is waiting reads it, files what it finds for the others and wakes them, and
//! hands the stream on when its own answer arrives or when it gives up.

use super::jsonrpc::{self, Incoming};
use super::McpError;
use crate::net::Url;
use crate::platform::sse::{SseEvent, SseParser};
use crate::platform::{Clock, HttpClient, HttpError, HttpRequest, HttpResponse};
use futures::stream::LocalBoxStream;
use futures::StreamExt;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

type Body = LocalBoxStream<'static, Result<Vec<u8>, HttpError>>;

/// How many times a Streamable HTTP response stream that the server closed early (after an
/// event id, as 2025-11-25 allows) is resumed with `Last-Event-ID` before giving up.
const MAX_STREAM_RESUMES: u32 = 3;
/// Wait before resuming when the server gave no `retry:` hint, and the cap on hints.
const DEFAULT_RESUME_DELAY_MS: u64 = 1_000;
const MAX_RESUME_DELAY_MS: u64 = 30_000;
/// Bytes of an error response body kept for the error message.
const ERROR_BODY_LIMIT: usize = 500;
/// The largest single message accepted, so a misbehaving server cannot exhaust the isolate's
/// memory (128 MB on Workers).
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

fn too_large() -> McpError {
    McpError::Transport(format!(
        "a message from the server exceeded {} MB",
        MAX_MESSAGE_BYTES >> 20
    ))
}

/// Reads a whole body of at most `MAX_MESSAGE_BYTES`.
async fn read_capped(body: Body) -> Result<Vec<u8>, McpError> {
    let mut body = body;
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(&chunk?);
        if out.len() > MAX_MESSAGE_BYTES {
            return Err(too_large());
        }
    }
    Ok(out)
}

/// Counts bytes read since the last complete SSE event, to bound an event's size.
#[derive(Default)]
struct EventBudget(usize);

impl EventBudget {
    fn take(&mut self, chunk: usize, completed_events: usize) -> Result<(), McpError> {
        self.0 = if completed_events > 0 { 0 } else { self.0 + chunk };
        if self.0 > MAX_MESSAGE_BYTES {
            Err(too_large())
        } else {
            Ok(())
        }
    }
}

/// Notifications that arrived while the client waited for something else; the client drains
/// them after each exchange (a `tools/list_changed` triggers a refresh).
#[derive(Default)]
pub(crate) struct Inbox {
    methods: RefCell<Vec<String>>,
}

impl Inbox {
    pub fn push(&self, method: String) {
        self.methods.borrow_mut().push(method);
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.methods.borrow_mut())
    }
}

/// Answers what a server asks the client (elicitation), for whoever holds the client.
#[async_trait::async_trait(?Send)]
pub trait ServerRequests {
    /// `elicitation/create` from server `server_id` (its JSON-RPC request `request_id`):
    /// resolves with the `ElicitResult` to send back, `{action, content?}`.
    async fn elicit(&self, server_id: &str, request_id: &Value, params: Value) -> Value;
}

/// Which transport a server uses; `Auto` tries Streamable HTTP and falls back to SSE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportKind {
    /// Streamable HTTP (one endpoint, POST and optional GET stream).
    #[default]
    StreamableHttp,
    /// The legacy HTTP+SSE transport (a GET stream and a POST endpoint).
    Sse,
    /// Streamable HTTP, falling back to SSE when the server refuses it, as the reference does.
    Auto,
}

impl TransportKind {
    /// The name used in `addMcpServer` options and in storage.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::StreamableHttp => "streamable-http",
            TransportKind::Sse => "sse",
            TransportKind::Auto => "auto",
        }
    }

    /// Reads the option as `addMcpServer` callers and storage spell it.
    pub fn parse(s: &str) -> Option<TransportKind> {
        match s {
            "streamable-http" => Some(TransportKind::StreamableHttp),
            "sse" => Some(TransportKind::Sse),
            "auto" => Some(TransportKind::Auto),
            _ => None,
        }
    }
}

/// What every request needs: the HTTP seam, the clock, the caller's custom headers and the
/// server's OAuth access token.
#[derive(Clone)]
pub(crate) struct Env {
    pub http: Rc<dyn HttpClient>,
    pub clock: Rc<dyn Clock>,
    pub headers: Vec<(String, String)>,
    /// Shared with the client, which replaces the token when it refreshes it, so a live
    /// session sends the new one from its next request on.
    pub bearer: Rc<RefCell<Option<String>>>,
    /// Who answers the server's own requests (`elicitation/create`), and for which server.
    pub requests: Option<(Rc<dyn ServerRequests>, String)>,
}

impl Env {
    /// The reply to a server-initiated request: elicitations go to the handler (which may
    /// wait for a person), the rest is answered at once.
    async fn reply(&self, id: &Value, method: &str, params: Value) -> Value {
        match (&self.requests, method) {
            (Some((handler, server)), "elicitation/create") => {
                jsonrpc::result(id, handler.elicit(server, id, params).await)
            }
            _ => jsonrpc::answer(id, method),
        }
    }

    /// The caller's headers, minus any that `ours` sets, followed by `ours` and the OAuth
    /// access token, when there is one.
    fn headers(&self, mut ours: Vec<(&str, String)>) -> Vec<(String, String)> {
        if let Some(token) = self.bearer.borrow().as_ref() {
            ours.push(("authorization", format!("Bearer {token}")));
        }
        let mut out: Vec<(String, String)> = self
            .headers
            .iter()
            .filter(|(k, _)| !ours.iter().any(|(o, _)| o.eq_ignore_ascii_case(k)))
            .cloned()
            .collect();
        out.extend(ours.into_iter().map(|(k, v)| (k.to_owned(), v)));
        out
    }
}

fn media_type(resp: &HttpResponse) -> String {
    resp.header("content-type")
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Reads at most a few KB of an error body, as servers may stream forever.
async fn error_text(resp: HttpResponse) -> String {
    let mut body = resp.body;
    let mut bytes = Vec::new();
    while bytes.len() < 4 * ERROR_BODY_LIMIT {
        match body.next().await {
            Some(Ok(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    match text.char_indices().nth(ERROR_BODY_LIMIT) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}

async fn check_status(resp: HttpResponse) -> Result<HttpResponse, McpError> {
    if (200..300).contains(&resp.status) {
        Ok(resp)
    } else if resp.status == 401 {
        Err(McpError::Unauthorized {
            challenge: resp.header("www-authenticate").map(str::to_owned),
        })
    } else {
        let status = resp.status;
        Err(McpError::Http { status, body: error_text(resp).await })
    }
}

/// A connected transport.
pub(crate) enum Transport {
    Streamable(StreamableHttp),
    Sse(LegacySse),
}

impl Transport {
    /// Sends request `id` and waits for its response, filing notifications in `inbox` and
    /// answering server requests on the way.
    pub async fn request(&self, id: i64, msg: &Value, inbox: &Inbox) -> Result<Value, McpError> {
        match self {
            Transport::Streamable(t) => t.request(id, msg, inbox).await,
            Transport::Sse(t) => t.request(id, msg, inbox).await,
        }
    }

    pub async fn notify(&self, msg: &Value) -> Result<(), McpError> {
        match self {
            Transport::Streamable(t) => t.send(msg).await,
            Transport::Sse(t) => t.send(msg).await,
        }
    }

    /// Sends `MCP-Protocol-Version` with every later request.
    pub fn set_protocol_version(&self, v: &str) {
        match self {
            Transport::Streamable(t) => *t.protocol_version.borrow_mut() = Some(v.to_owned()),
            Transport::Sse(t) => *t.protocol_version.borrow_mut() = Some(v.to_owned()),
        }
    }

    pub fn kind(&self) -> TransportKind {
        match self {
            Transport::Streamable(_) => TransportKind::StreamableHttp,
            Transport::Sse(_) => TransportKind::Sse,
        }
    }

    /// The `Mcp-Session-Id`, for Streamable HTTP sessions that have one.
    pub fn session_id(&self) -> Option<String> {
        match self {
            Transport::Streamable(t) => t.session_id(),
            Transport::Sse(_) => None,
        }
    }

    /// Ends the session: DELETE for Streamable HTTP (best effort), dropping the stream for SSE.
    pub async fn close(&self) {
        match self {
            Transport::Streamable(t) => t.terminate().await,
            Transport::Sse(t) => t.close(),
        }
    }

    /// Opens the channel for server-initiated messages; `None` when the server offers none.
    pub async fn listen(&self) -> Result<Option<Listener>, McpError> {
        match self {
            Transport::Streamable(t) => Ok(t.open_stream(None).await?.map(|resp| Listener {
                body: Some(resp.body),
                parser: SseParser::new(),
                budget: EventBudget::default(),
            })),
            Transport::Sse(_) => Ok(Some(Listener {
                body: None,
                parser: SseParser::new(),
                budget: EventBudget::default(),
            })),
        }
    }

    /// Waits until server-initiated messages arrive (filed in `inbox`); `false` once the
    /// Streamable HTTP GET stream ends. A broken legacy SSE stream is an error: the server is
    /// unreachable until reconnected.
    pub async fn listen_next(&self, l: &mut Listener, inbox: &Inbox) -> Result<bool, McpError> {
        match self {
            Transport::Streamable(t) => t.listen_next(l, inbox).await,
            Transport::Sse(t) => t.listen_next(inbox).await,
        }
    }
}

/// An open channel for server-initiated messages.
pub(crate) struct Listener {
    body: Option<Body>,
    parser: SseParser,
    budget: EventBudget,
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP

pub(crate) struct StreamableHttp {
    env: Env,
    url: String,
    session_id: RefCell<Option<String>>,
    protocol_version: RefCell<Option<String>>,
}

impl StreamableHttp {
    pub fn new(env: Env, url: &Url) -> Self {
        Self {
            env,
            url: url.to_string(),
            session_id: RefCell::new(None),
            protocol_version: RefCell::new(None),
        }
    }

    /// Carries on an earlier session: the server knows the id, the version is agreed.
    pub fn resumed(env: Env, url: &Url, session_id: &str, protocol_version: &str) -> Self {
        let t = Self::new(env, url);
        *t.session_id.borrow_mut() = Some(session_id.to_owned());
        *t.protocol_version.borrow_mut() = Some(protocol_version.to_owned());
        t
    }

    pub fn session_id(&self) -> Option<String> {
        self.session_id.borrow().clone()
    }

    fn session_headers(&self, mut ours: Vec<(&'static str, String)>) -> Vec<(String, String)> {
        if let Some(s) = self.session_id.borrow().as_ref() {
            ours.push(("mcp-session-id", s.clone()));
        }
        if let Some(v) = self.protocol_version.borrow().as_ref() {
            ours.push(("mcp-protocol-version", v.clone()));
        }
        self.env.headers(ours)
    }

    async fn post(&self, msg: &Value) -> Result<HttpResponse, McpError> {
        let headers = self.session_headers(vec![
            ("content-type", "application/json".into()),
            ("accept", "application/json, text/event-stream".into()),
        ]);
        let body = serde_json::to_vec(msg).map_err(|e| McpError::Transport(e.to_string()))?;
        let req = HttpRequest {
            method: "POST".into(),
            url: self.url.clone(),
            headers,
            body: Some(body.into()),
            ..Default::default()
        };
        let resp = self.env.http.fetch(req).await?;
        if let Some(sid) = resp.header("mcp-session-id") {
            *self.session_id.borrow_mut() = Some(sid.to_owned());
        }
        if resp.status == 404 && self.session_id.borrow().is_some() {
            return Err(McpError::SessionExpired);
        }
        check_status(resp).await
    }

    /// Sends a notification or a response; the server answers 202 with no body.
    async fn send(&self, msg: &Value) -> Result<(), McpError> {
        self.post(msg).await.map(drop)
    }

    async fn request(&self, id: i64, msg: &Value, inbox: &Inbox) -> Result<Value, McpError> {
        let key = id.to_string();
        let resp = self.post(msg).await?;
        if resp.status == 202 {
            return Err(McpError::Transport(
                "the server accepted the request but sent no response".into(),
            ));
        }
        match media_type(&resp).as_str() {
            "application/json" => {
                let bytes = read_capped(resp.body).await?;
                let mut found = None;
                for m in jsonrpc::decode(&String::from_utf8_lossy(&bytes)) {
                    match m {
                        Incoming::Response { key: k, outcome } if k == key => found = Some(outcome),
                        other => self.handle(other, inbox).await,
                    }
                }
                found.unwrap_or_else(|| {
                    Err(McpError::Transport(
                        "the server's reply held no response to the request".into(),
                    ))
                })
            }
            "text/event-stream" => self.read_stream_for(&key, resp.body, inbox).await,
            other => {
                Err(McpError::Transport(format!("unexpected response content type \"{other}\"")))
            }
        }
    }

    /// Files a notification, answers a server request; stray responses are dropped.
    async fn handle(&self, m: Incoming, inbox: &Inbox) {
        match m {
            Incoming::Notification { method } => inbox.push(method),
            Incoming::Request { id, method, params } => {
                // Best effort: a failed answer shows up as the server's own timeout.
                let reply = self.env.reply(&id, &method, params).await;
                let _ = self.send(&reply).await;
            }
            Incoming::Response { .. } => {}
        }
    }

    async fn on_event(
        &self,
        key: &str,
        ev: SseEvent,
        inbox: &Inbox,
    ) -> Option<Result<Value, McpError>> {
        if !(ev.event.is_empty() || ev.event == "message") {
            return None;
        }
        let mut found = None;
        for m in jsonrpc::decode(&ev.data) {
            match m {
                Incoming::Response { key: k, outcome } if k == key => found = Some(outcome),
                other => self.handle(other, inbox).await,
            }
        }
        found
    }

    /// Reads an SSE response until the response to `key` arrives, resuming with
    /// `Last-Event-ID` if the server closes the stream early after giving an event id.
    async fn read_stream_for(
        &self,
        key: &str,
        body: Body,
        inbox: &Inbox,
    ) -> Result<Value, McpError> {
        let mut body = body;
        let mut resumes = 0;
        let mut last_id: Option<String> = None;
        let mut retry: Option<u64> = None;
        loop {
            let mut parser = SseParser::new();
            let mut budget = EventBudget::default();
            let mut failure = None;
            while let Some(chunk) = body.next().await {
                let bytes = match chunk {
                    Ok(b) => b,
                    Err(e) => {
                        failure = Some(e.to_string());
                        break;
                    }
                };
                let events = parser.push(&bytes);
                budget.take(bytes.len(), events.len())?;
                last_id = parser.last_event_id().map(str::to_owned).or(last_id);
                retry = parser.retry_ms().or(retry);
                for ev in events {
                    if let Some(outcome) = self.on_event(key, ev, inbox).await {
                        return outcome;
                    }
                }
            }
            if failure.is_none() {
                if let Some(ev) = parser.finish() {
                    if let Some(outcome) = self.on_event(key, ev, inbox).await {
                        return outcome;
                    }
                }
            }
            let why = failure.unwrap_or_else(|| "the server closed it".into());
            let Some(resume_from) = last_id.clone() else {
                return Err(McpError::Transport(format!(
                    "the response stream ended before the response ({why})"
                )));
            };
            if resumes >= MAX_STREAM_RESUMES {
                return Err(McpError::Transport(format!(
                    "the response stream ended before the response, {resumes} resumes later ({why})"
                )));
            }
            resumes += 1;
            self.env
                .clock
                .sleep(retry.unwrap_or(DEFAULT_RESUME_DELAY_MS).min(MAX_RESUME_DELAY_MS))
                .await;
            match self.open_stream(Some(&resume_from)).await? {
                Some(resp) => body = resp.body,
                None => {
                    return Err(McpError::Transport(
                        "the server closed the response stream and does not support resuming it"
                            .into(),
                    ))
                }
            }
        }
    }

    /// GETs the server's SSE stream; `None` on 405, the spec's way of saying "not offered".
    async fn open_stream(
        &self,
        last_event_id: Option<&str>,
    ) -> Result<Option<HttpResponse>, McpError> {
        let mut ours = vec![("accept", "text/event-stream".to_owned())];
        if let Some(id) = last_event_id {
            ours.push(("last-event-id", id.to_owned()));
        }
        let headers = self.session_headers(ours);
        let req = HttpRequest {
            method: "GET".into(),
            url: self.url.clone(),
            headers,
            ..Default::default()
        };
        let resp = self.env.http.fetch(req).await?;
        if resp.status == 405 {
            return Ok(None);
        }
        if resp.status == 404 && self.session_id.borrow().is_some() {
            return Err(McpError::SessionExpired);
        }
        let resp = check_status(resp).await?;
        let mt = media_type(&resp);
        if mt != "text/event-stream" {
            return Err(McpError::Transport(format!(
                "the GET stream has content type \"{mt}\", not text/event-stream"
            )));
        }
        Ok(Some(resp))
    }

    async fn listen_next(&self, l: &mut Listener, inbox: &Inbox) -> Result<bool, McpError> {
        loop {
            let Some(body) = l.body.as_mut() else { return Ok(false) };
            let events = match body.next().await {
                Some(Ok(bytes)) => {
                    let events = l.parser.push(&bytes);
                    if let Err(e) = l.budget.take(bytes.len(), events.len()) {
                        l.body = None;
                        return Err(e);
                    }
                    events
                }
                Some(Err(e)) => {
                    l.body = None;
                    return Err(McpError::Transport(format!("the server stream failed: {e}")));
                }
                None => {
                    l.body = None;
                    l.parser.finish().into_iter().collect()
                }
            };
            let before = inbox.methods.borrow().len();
            for ev in events {
                // No request of ours is waiting on this stream; the key never matches.
                self.on_event("", ev, inbox).await;
            }
            if inbox.methods.borrow().len() > before {
                return Ok(true);
            }
        }
    }

    /// Posts one message into an existing session (an answer to a server request made before
    /// the object restarted).
    pub async fn post_into(
        env: Env,
        url: &Url,
        session: &str,
        version: &str,
        msg: &Value,
    ) -> Result<(), McpError> {
        Self::resumed(env, url, session, version).send(msg).await
    }

    /// DELETE the session so the server can free it; failures are ignored.
    async fn terminate(&self) {
        if self.session_id.borrow().is_none() {
            return;
        }
        let headers = self.session_headers(vec![]);
        let req = HttpRequest {
            method: "DELETE".into(),
            url: self.url.clone(),
            headers,
            ..Default::default()
        };
        let _ = self.env.http.fetch(req).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Legacy HTTP+SSE

pub(crate) struct LegacySse {
    env: Env,
    endpoint: String,
    protocol_version: RefCell<Option<String>>,
    pump: Rc<RefCell<Pump>>,
}

impl LegacySse {
    /// Opens the SSE stream and waits for the `endpoint` event. The endpoint must share the
    /// stream's origin, so custom headers (bearer tokens) never go to another host.
    pub async fn open(env: Env, url: &Url) -> Result<LegacySse, McpError> {
        let headers = env.headers(vec![("accept", "text/event-stream".into())]);
        let req = HttpRequest {
            method: "GET".into(),
            url: url.to_string(),
            headers,
            ..Default::default()
        };
        let resp = check_status(env.http.fetch(req).await?).await?;
        let mt = media_type(&resp);
        if mt != "text/event-stream" {
            return Err(McpError::Transport(format!(
                "the SSE URL answered with content type \"{mt}\", not text/event-stream"
            )));
        }
        let pump = Rc::new(RefCell::new(Pump::new(resp.body)));
        let endpoint = match PumpWait::new(&pump, Want::Endpoint).await {
            Got::Endpoint(e) => e,
            Got::Closed(why) => {
                return Err(McpError::Transport(format!("{why} before announcing its endpoint")))
            }
            Got::Response(_) | Got::Inbox(_) => {
                return Err(McpError::Transport(
                    "the SSE stream did not announce an endpoint".into(),
                ))
            }
        };
        let mut resolved = url
            .join(&endpoint)
            .map_err(|e| McpError::Transport(format!("bad endpoint \"{endpoint}\": {e}")))?;
        resolved.set_fragment(None);
        if resolved.origin() != url.origin() {
            return Err(McpError::Transport(format!(
                "the endpoint {} is not on the server's origin {}",
                resolved.origin().ascii_serialization(),
                url.origin().ascii_serialization()
            )));
        }
        Ok(LegacySse {
            env,
            endpoint: resolved.to_string(),
            protocol_version: RefCell::new(None),
            pump,
        })
    }

    async fn send(&self, msg: &Value) -> Result<(), McpError> {
        let mut ours = vec![("content-type", "application/json".to_owned())];
        if let Some(v) = self.protocol_version.borrow().as_ref() {
            ours.push(("mcp-protocol-version", v.clone()));
        }
        let headers = self.env.headers(ours);
        let body = serde_json::to_vec(msg).map_err(|e| McpError::Transport(e.to_string()))?;
        let req = HttpRequest {
            method: "POST".into(),
            url: self.endpoint.clone(),
            headers,
            body: Some(body.into()),
            ..Default::default()
        };
        let resp = self.env.http.fetch(req).await?;
        if resp.status == 404 {
            // The server has forgotten this connection (it restarted): start a new one.
            self.close();
            return Err(McpError::SessionExpired);
        }
        check_status(resp).await.map(drop)
    }

    async fn request(&self, id: i64, msg: &Value, inbox: &Inbox) -> Result<Value, McpError> {
        let key = id.to_string();
        let _waiting = Waiting::new(&self.pump, key.clone());
        self.send(msg).await?;
        loop {
            match PumpWait::new(&self.pump, Want::Response(key.clone())).await {
                Got::Response(outcome) => return outcome,
                Got::Inbox(items) => self.handle(items, inbox).await,
                Got::Closed(why) => return Err(McpError::Transport(why)),
                Got::Endpoint(_) => {}
            }
        }
    }

    async fn handle(&self, items: Vec<Incoming>, inbox: &Inbox) {
        for m in items {
            match m {
                Incoming::Notification { method } => inbox.push(method),
                Incoming::Request { id, method, params } => {
                    let reply = self.env.reply(&id, &method, params).await;
                    let _ = self.send(&reply).await;
                }
                Incoming::Response { .. } => {}
            }
        }
    }

    async fn listen_next(&self, inbox: &Inbox) -> Result<bool, McpError> {
        loop {
            match PumpWait::new(&self.pump, Want::Inbox).await {
                Got::Inbox(items) => {
                    let before = inbox.methods.borrow().len();
                    self.handle(items, inbox).await;
                    if inbox.methods.borrow().len() > before {
                        return Ok(true);
                    }
                }
                Got::Closed(why) => return Err(McpError::Transport(why)),
                Got::Response(_) | Got::Endpoint(_) => {}
            }
        }
    }

    fn close(&self) {
        self.pump.borrow_mut().close("the SSE connection was closed".into());
    }
}

/// The shared state of a legacy SSE stream.
struct Pump {
    /// The stream while nobody reads it; a reading `PumpWait` holds it meanwhile.
    stream: Option<Body>,
    reading: bool,
    parser: SseParser,
    endpoint: Option<String>,
    /// Requests awaiting a response; responses to anything else (timed out) are dropped.
    waiting: HashSet<String>,
    responses: HashMap<String, Result<Value, McpError>>,
    /// Server notifications and requests for whichever waiter looks next.
    inbox: Vec<Incoming>,
    closed: Option<String>,
    wakers: Vec<Waker>,
    budget: EventBudget,
}

impl Pump {
    fn new(body: Body) -> Self {
        Pump {
            stream: Some(body),
            reading: false,
            parser: SseParser::new(),
            endpoint: None,
            waiting: HashSet::new(),
            responses: HashMap::new(),
            inbox: Vec::new(),
            closed: None,
            wakers: Vec::new(),
            budget: EventBudget::default(),
        }
    }

    fn dispatch(&mut self, events: Vec<SseEvent>) {
        for ev in events {
            match ev.event.as_str() {
                "endpoint" => self.endpoint = Some(ev.data.trim().to_owned()),
                "" | "message" => {
                    for m in jsonrpc::decode(&ev.data) {
                        match m {
                            Incoming::Response { key, outcome } => {
                                if self.waiting.contains(&key) {
                                    self.responses.insert(key, outcome);
                                }
                            }
                            other => self.inbox.push(other),
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn wake_all(&mut self) {
        for w in self.wakers.drain(..) {
            w.wake();
        }
    }

    fn close(&mut self, why: String) {
        if self.closed.is_none() {
            self.closed = Some(why);
        }
        self.stream = None;
        self.reading = false;
        self.wake_all();
    }
}

/// Registers a request as awaiting its response for as long as the guard lives, so a
/// timed-out or dropped request leaves nothing behind.
struct Waiting {
    pump: Rc<RefCell<Pump>>,
    key: String,
}

impl Waiting {
    fn new(pump: &Rc<RefCell<Pump>>, key: String) -> Self {
        pump.borrow_mut().waiting.insert(key.clone());
        Waiting { pump: pump.clone(), key }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut p = self.pump.borrow_mut();
        p.waiting.remove(&self.key);
        p.responses.remove(&self.key);
    }
}

enum Want {
    Endpoint,
    Response(String),
    Inbox,
}

enum Got {
    Endpoint(String),
    Response(Result<Value, McpError>),
    Inbox(Vec<Incoming>),
    Closed(String),
}

/// Resolves when what it wants has arrived on the shared stream, reading the stream itself
/// if no other waiter is.
struct PumpWait {
    pump: Rc<RefCell<Pump>>,
    want: Want,
    held: Option<Body>,
}

impl PumpWait {
    fn new(pump: &Rc<RefCell<Pump>>, want: Want) -> Self {
        PumpWait { pump: pump.clone(), want, held: None }
    }

    fn ready(&self, p: &mut Pump) -> Option<Got> {
        match &self.want {
            Want::Endpoint => {
                if let Some(e) = p.endpoint.clone() {
                    return Some(Got::Endpoint(e));
                }
            }
            Want::Response(key) => {
                if let Some(o) = p.responses.remove(key) {
                    return Some(Got::Response(o));
                }
            }
            Want::Inbox => {}
        }
        if !matches!(self.want, Want::Endpoint) && !p.inbox.is_empty() {
            return Some(Got::Inbox(std::mem::take(&mut p.inbox)));
        }
        p.closed.clone().map(Got::Closed)
    }

    /// Hands the stream back and wakes the others so one of them takes over reading.
    fn release(&mut self) {
        if let Some(body) = self.held.take() {
            let mut p = self.pump.borrow_mut();
            if p.closed.is_none() {
                p.stream = Some(body);
            }
            p.reading = false;
            p.wake_all();
        }
    }
}

impl Future for PumpWait {
    type Output = Got;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Got> {
        let this = self.get_mut();
        loop {
            {
                let mut p = this.pump.borrow_mut();
                if let Some(got) = this.ready(&mut p) {
                    drop(p);
                    this.release();
                    return Poll::Ready(got);
                }
                if this.held.is_none() {
                    match p.stream.take() {
                        Some(body) if !p.reading => {
                            this.held = Some(body);
                            p.reading = true;
                        }
                        other => {
                            p.stream = other;
                            p.wakers.push(cx.waker().clone());
                            return Poll::Pending;
                        }
                    }
                }
            }
            let Some(body) = this.held.as_mut() else { return Poll::Pending };
            match body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => {
                    let mut p = this.pump.borrow_mut();
                    let events = p.parser.push(&bytes);
                    let within = p.budget.take(bytes.len(), events.len());
                    p.dispatch(events);
                    match within {
                        Ok(()) => p.wake_all(),
                        Err(e) => {
                            this.held = None;
                            p.close(e.to_string());
                        }
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.held = None;
                    this.pump.borrow_mut().close(format!("the SSE stream failed: {e}"));
                }
                Poll::Ready(None) => {
                    this.held = None;
                    let mut p = this.pump.borrow_mut();
                    let tail: Vec<SseEvent> = p.parser.finish().into_iter().collect();
                    p.dispatch(tail);
                    p.close("the server closed the SSE stream".into());
                }
            }
        }
    }
}

impl Drop for PumpWait {
    fn drop(&mut self) {
        self.release();
    }
}
