//! Elicitation: a server asks for input, the tabs show a form, and a person's answer goes
//! back to the request that asked (or, after a restart, into the session it came in).

use super::{with_timeout, FrameSink, Inner, McpClient};
use crate::mcp::elicitation::{self, Waiting};
use crate::mcp::jsonrpc;
use crate::mcp::transport::{Env, ServerRequests, StreamableHttp};
use crate::mcp::McpError;
use crate::net;
use crate::platform::random_id;
use serde_json::{json, Value};
use std::cell::Cell;
use std::rc::{Rc, Weak};

/// Hands a server's requests to the client without keeping it alive (sessions hold this).
struct Elicitor(Weak<Inner>);

#[async_trait::async_trait(?Send)]
impl ServerRequests for Elicitor {
    async fn elicit(&self, server_id: &str, request_id: &Value, params: Value) -> Value {
        match self.0.upgrade() {
            Some(inner) => inner.elicit(server_id, request_id, params).await,
            None => json!({"action": "cancel"}),
        }
    }
}

/// Withdraws a pending input however its wait ends, unless a person answered it (then it is
/// gone already).
struct Unanswered<'a> {
    inner: &'a Inner,
    id: &'a str,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        self.inner.resolve_elicitation(self.id, "cancel");
    }
}

/// Counts an elicitation as waiting for as long as it lives.
struct Eliciting<'a>(&'a Cell<u32>);

impl<'a> Eliciting<'a> {
    fn new(c: &'a Cell<u32>) -> Self {
        c.set(c.get() + 1);
        Eliciting(c)
    }
}

impl Drop for Eliciting<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

impl Inner {
    /// Posts the answer to an elicitation made before a restart into the session it came in.
    async fn answer_later(&self, p: &elicitation::Pending, result: Value) -> Result<(), McpError> {
        let (Some(request_id), Some((session, version))) = (&p.request_id, &p.session) else {
            return Err(McpError::Transport("the request that asked is gone".into()));
        };
        let (url, headers, bearer) = self
            .with_server(&p.server_id, |s| {
                (s.row.url.clone(), s.row.headers.clone(), s.bearer.clone())
            })
            .ok_or_else(|| McpError::UnknownServer(p.server_id.clone()))?;
        let url = net::check_url(&url, &self.config.net_policy())?;
        let env = Env {
            http: self.http.clone(),
            clock: self.clock.clone(),
            headers,
            bearer,
            requests: None,
        };
        let msg = jsonrpc::result(request_id, result);
        StreamableHttp::post_into(env, &url, session, version, &msg).await
    }

    /// The handler sessions of server `id` pass server requests to, once the owner listens
    /// for elicitations.
    pub(super) fn requests_handler(&self, id: &str) -> Option<(Rc<dyn ServerRequests>, String)> {
        self.on_elicitation.borrow().as_ref()?;
        Some((Rc::new(Elicitor(self.me.clone())), id.to_owned()))
    }

    fn emit_elicitation(&self, frame: &str) {
        let cb = self.on_elicitation.borrow().clone();
        if let Some(cb) = cb {
            cb(frame);
        }
    }

    /// Takes a pending input out (in memory and in storage) and tells the tabs it is gone.
    fn resolve_elicitation(&self, id: &str, action: &str) -> Option<Waiting> {
        let taken = {
            let mut all = self.elicitations.borrow_mut();
            let i = all.iter().position(|w| w.pending.id == id)?;
            all.remove(i)
        };
        let _ = elicitation::delete(self.sql.as_ref(), id);
        self.emit_elicitation(&elicitation::resolved_frame(id, action));
        Some(taken)
    }

    /// `elicitation/create`: waits for a person's answer at the tabs, or the timeout.
    async fn elicit(&self, server_id: &str, request_id: &Value, params: Value) -> Value {
        let decline = json!({"action": "decline"});
        if params["mode"].as_str().is_some_and(|m| m != "form") {
            return decline;
        }
        let schema = params["requestedSchema"].clone();
        if elicitation::check_schema(&schema).is_err() {
            return decline;
        }
        let Some((server_name, session)) = self.with_server(server_id, |s| {
            let saved = s.session.as_ref().and_then(|x| x.saved());
            (s.row.name.clone(), saved.map(|x| (x.session_id, x.protocol_version)))
        }) else {
            return decline;
        };
        let now = self.clock.now_ms();
        let timeout = self.config.elicitation_timeout_ms;
        let pending = elicitation::Pending {
            id: format!("elicit_{}", random_id(self.clock.as_ref(), 16)),
            server_id: server_id.to_owned(),
            server_name,
            message: params["message"].as_str().unwrap_or_default().to_owned(),
            requested_schema: schema,
            created_at: now,
            expires_at: now + timeout as f64,
            request_id: Some(request_id.clone()),
            session,
        };
        let id = pending.id.clone();
        // Only needed to answer after a restart; the wait goes on without it.
        let _ = elicitation::save(self.sql.as_ref(), &pending);
        let (tx, rx) = futures::channel::oneshot::channel();
        let frame = pending.frame();
        self.elicitations.borrow_mut().push(Waiting { pending, reply: Some(tx) });
        let _busy = Eliciting::new(&self.eliciting);
        // Timed out, or the call was dropped (its turn aborted): the input goes away.
        let _unanswered = Unanswered { inner: self, id: &id };
        self.emit_elicitation(&frame);
        match with_timeout(self.clock.as_ref(), timeout, rx).await {
            Some(Ok(result)) => result,
            _ => json!({"action": "cancel"}),
        }
    }
}

impl McpClient {
    /// Lets servers ask for input (elicitation): `send` gets every `cf_agent_mcp_elicitation`
    /// and `..._resolved` frame, to push to all tabs. Connections made from now on declare
    /// the capability.
    pub fn set_on_elicitation(&self, send: FrameSink) {
        *self.inner.on_elicitation.borrow_mut() = Some(send);
    }

    /// The pending inputs, as frames for a tab that just connected. Ones left by a previous
    /// run that have expired are dropped (their server gave up on them).
    pub fn elicitation_frames(&self) -> Vec<String> {
        let now = self.inner.clock.now_ms();
        let expired: Vec<String> = self
            .inner
            .elicitations
            .borrow()
            .iter()
            .filter(|w| w.reply.is_none() && w.pending.expires_at <= now)
            .map(|w| w.pending.id.clone())
            .collect();
        for id in expired {
            self.inner.resolve_elicitation(&id, "cancel");
        }
        self.inner.elicitations.borrow().iter().map(|w| w.pending.frame()).collect()
    }

    /// A person's answer to pending input `id`: `accept` with `content` valid against the
    /// requested schema, `decline` or `cancel`. A bad answer is refused and the input stays
    /// pending. An input from before a restart is answered into the server's session.
    pub async fn answer_elicitation(
        &self,
        id: &str,
        action: &str,
        content: Option<&Value>,
    ) -> Result<(), McpError> {
        let inner = &self.inner;
        let schema = inner
            .elicitations
            .borrow()
            .iter()
            .find(|w| w.pending.id == id)
            .map(|w| w.pending.requested_schema.clone())
            .ok_or_else(|| McpError::Invalid(format!("no pending MCP input with id \"{id}\"")))?;
        let result = elicitation::answer(&schema, action, content).map_err(McpError::Invalid)?;
        let Some(waiting) = inner.resolve_elicitation(id, action) else { return Ok(()) };
        match waiting.reply {
            Some(tx) => {
                let _ = tx.send(result);
                Ok(())
            }
            None => inner.answer_later(&waiting.pending, result).await,
        }
    }
}
