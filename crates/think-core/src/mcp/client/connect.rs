//! Connecting: attempts with retries and backoff, discovery of a server's catalog, tool
//! pinning, session loss and the refresh a `list_changed` triggers.

use super::{
    is_list_changed, with_timeout, Catalog, ConnectionState, Inner, PendingToolChange, Server, Task,
};
use crate::mcp::session::Session;
use crate::mcp::store::{self, Pin};
use crate::mcp::tools;
use crate::mcp::transport::{Env, TransportKind};
use crate::mcp::McpError;
use crate::net;
use futures::FutureExt;
use serde_json::{json, Value};
use std::rc::Rc;

/// Clears a server's refreshing flag however the refresh ends, even if its future is dropped.
struct Refreshing<'a> {
    inner: &'a Inner,
    id: &'a str,
}

impl Drop for Refreshing<'_> {
    fn drop(&mut self) {
        if let Ok(mut servers) = self.inner.servers.try_borrow_mut() {
            if let Some(s) = servers.iter_mut().find(|s| s.row.id == self.id) {
                s.refreshing = false;
            }
        }
    }
}

impl Inner {
    /// The attempt already under way for `id`, or a new one making up to `attempts` tries.
    pub(super) fn start_connect(&self, id: &str, attempts: u32) -> Option<Task> {
        let (task, notify) = {
            let mut servers = self.servers.borrow_mut();
            let s = servers.iter_mut().find(|s| s.row.id == id)?;
            if let Some(t) = &s.task {
                return Some(t.clone());
            }
            s.attempt += 1;
            let notify = s.state != ConnectionState::Connecting || s.error.is_some();
            s.state = ConnectionState::Connecting;
            s.error = None;
            let (weak, sid, attempt) = (self.me.clone(), id.to_owned(), s.attempt);
            let task = async move {
                if let Some(inner) = weak.upgrade() {
                    inner.connect_task(&sid, attempt, attempts.max(1)).await;
                }
            }
            .boxed_local()
            .shared();
            s.task = Some(task.clone());
            (task, notify)
        };
        if notify {
            self.changed();
        }
        Some(task)
    }

    fn is_current(&self, id: &str, attempt: u64) -> bool {
        self.with_server(id, |s| s.attempt == attempt).unwrap_or(false)
    }

    async fn connect_task(&self, id: &str, attempt: u64, attempts: u32) {
        let mut tries = 0;
        let mut delay = 500;
        loop {
            tries += 1;
            match self.connect_once(id, attempt).await {
                Ok((session, catalog)) => {
                    if self.apply_connected(id, attempt, session.clone(), catalog) {
                        self.after_exchange(id, &session).await;
                    } else {
                        // Removed or superseded meanwhile: release the server's session.
                        session.close().await;
                    }
                    return;
                }
                Err(e) => {
                    let retry = !matches!(
                        e,
                        McpError::Url(_) | McpError::AuthorizationRequired(_) | McpError::OAuth(_)
                    );
                    if retry && tries < attempts && self.is_current(id, attempt) {
                        self.mark_state(id, attempt, ConnectionState::Connecting);
                        self.clock.sleep(delay).await;
                        delay = (delay * 2).min(5_000);
                        continue;
                    }
                    self.apply_failed(id, attempt, &e);
                    return;
                }
            }
        }
    }

    /// One connection attempt with the server's credentials: tokens due for refresh are
    /// refreshed first, a 401 refreshes them once more, and a 401 they cannot fix starts a
    /// new authorization (`AuthorizationRequired`).
    async fn connect_once(
        &self,
        id: &str,
        attempt: u64,
    ) -> Result<(Rc<Session>, Catalog), McpError> {
        self.refresh_if_due(id).await;
        let mut refreshed = false;
        loop {
            match self.connect_attempt(id, attempt).await {
                Err(McpError::Unauthorized { challenge }) => {
                    if !refreshed && self.has_refresh_token(id) {
                        refreshed = true;
                        let seen = self.bearer(id);
                        if self.refresh_tokens(id, seen.as_deref()).await.is_ok() {
                            continue;
                        }
                    }
                    return Err(self.begin_authorization(id, challenge.as_deref()).await);
                }
                other => return other,
            }
        }
    }

    async fn connect_attempt(
        &self,
        id: &str,
        attempt: u64,
    ) -> Result<(Rc<Session>, Catalog), McpError> {
        let (row, bearer) = self
            .with_server(id, |s| (s.row.clone(), s.bearer.clone()))
            .ok_or_else(|| McpError::UnknownServer(id.into()))?;
        let url = net::check_url(&row.url, &self.config.net_policy())?;
        let env = Env {
            http: self.http.clone(),
            clock: self.clock.clone(),
            headers: row.headers.clone(),
            bearer,
            requests: self.requests_handler(id),
        };
        let info = json!({"name": self.config.client_name, "version": self.config.client_version});
        let timeout = self.config.connect_timeout_ms;
        let work = async {
            if let Some(saved) =
                row.session.as_ref().filter(|_| row.transport != TransportKind::Sse)
            {
                // Ids continue past any request the previous incarnation may have left open.
                let first_id = (self.clock.now_ms() as i64).rem_euclid(1 << 40);
                let session = Rc::new(Session::resume(&env, &url, saved, first_id));
                self.mark_state(id, attempt, ConnectionState::Discovering);
                match self.discover(&session).await {
                    Ok(catalog) => return Ok((session, catalog)),
                    // Forgotten by the server: start a new session below.
                    Err(McpError::SessionExpired) | Err(McpError::Http { status: 400, .. }) => {
                        self.with_server(id, |s| s.row.session = None);
                        self.mark_state(id, attempt, ConnectionState::Connecting);
                    }
                    Err(e) => return Err(e),
                }
            }
            let session = Rc::new(Session::connect(row.transport, &env, &url, &info).await?);
            self.mark_state(id, attempt, ConnectionState::Discovering);
            match self.discover(&session).await {
                Ok(catalog) => Ok((session, catalog)),
                Err(e) => {
                    session.close().await;
                    Err(e)
                }
            }
        };
        match with_timeout(self.clock.as_ref(), timeout, work).await {
            Some(r) => r,
            None => Err(McpError::Timeout(timeout)),
        }
    }

    fn mark_state(&self, id: &str, attempt: u64, state: ConnectionState) {
        let changed = self.with_server(id, |s| {
            let current = s.attempt == attempt && s.state != state;
            if current {
                s.state = state;
            }
            current
        });
        if changed == Some(true) {
            self.changed();
        }
    }

    /// Lists tools, prompts and resources, as far as the server declares them. Only tools are
    /// essential; prompts and resources are informational and tolerated missing.
    async fn discover(&self, session: &Session) -> Result<Catalog, McpError> {
        let list = |method: &'static str, field: &'static str, cap: &'static str| async move {
            if session.has_capability(cap) {
                session.list_all(method, field).await
            } else {
                Ok(Vec::new())
            }
        };
        let (tools, prompts, resources) = futures::join!(
            list("tools/list", "tools", "tools"),
            list("prompts/list", "prompts", "prompts"),
            list("resources/list", "resources", "resources"),
        );
        Ok(Catalog {
            capabilities: session.capabilities.clone(),
            instructions: session.instructions.clone(),
            tools: tools?,
            prompts: prompts.unwrap_or_default(),
            resources: resources.unwrap_or_default(),
        })
    }

    /// Installs a new catalog, pinning first-seen tools and holding back changed ones.
    /// Returns the pins to persist and whether the held-back set changed.
    fn apply_catalog(s: &mut Server, catalog: Catalog) -> (Vec<(String, Pin)>, bool) {
        let mut new_pins = Vec::new();
        let mut pending = Vec::new();
        for tool in &catalog.tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else { continue };
            let (description, input_schema) = tools::declared(tool);
            match s.pins.get(name) {
                None => {
                    let pin = Pin { description, input_schema };
                    s.pins.insert(name.to_owned(), pin.clone());
                    new_pins.push((name.to_owned(), pin));
                }
                Some(pin) if pin.description == description && pin.input_schema == input_schema => {
                }
                Some(pin) => {
                    let mut changes = Vec::new();
                    if pin.description != description {
                        changes.push("description");
                    }
                    if pin.input_schema != input_schema {
                        changes.push("inputSchema");
                    }
                    pending.push(PendingToolChange {
                        tool: name.to_owned(),
                        changes,
                        previous_description: pin.description.clone(),
                        previous_input_schema: pin.input_schema.clone(),
                        description,
                        input_schema,
                    });
                }
            }
        }
        let pending_changed = s.pending != pending;
        s.pending = pending;
        s.catalog = Some(catalog);
        (new_pins, pending_changed)
    }

    /// Installs a finished connection unless a newer attempt or a removal overtook it, and
    /// saves its session for resumption.
    fn apply_connected(
        &self,
        id: &str,
        attempt: u64,
        session: Rc<Session>,
        catalog: Catalog,
    ) -> bool {
        let saved = session.saved();
        let applied = self.with_server(id, |s| {
            if s.attempt != attempt {
                return None;
            }
            s.session = Some(session);
            s.state = ConnectionState::Ready;
            s.error = None;
            s.failed_at = None;
            s.task = None;
            let row = (s.row.session != saved).then(|| {
                s.row.session = saved;
                s.row.clone()
            });
            Some((Self::apply_catalog(s, catalog).0, row))
        });
        let Some(Some((pins, row))) = applied else { return false };
        if let Some(row) = row {
            // Only costs a re-initialisation after the next restart if it fails.
            let _ = store::save_server(self.sql.as_ref(), &row);
        }
        self.save_pins(id, &pins);
        self.invalidate_tools();
        self.changed();
        true
    }

    fn apply_failed(&self, id: &str, attempt: u64, e: &McpError) {
        let now = self.clock.now_ms();
        let applied = self.with_server(id, |s| {
            if s.attempt != attempt {
                return false;
            }
            s.session = None;
            s.task = None;
            if matches!(e, McpError::AuthorizationRequired(_)) {
                s.state = ConnectionState::Authenticating;
                s.error = None;
                s.failed_at = None;
            } else {
                s.state = ConnectionState::Failed;
                s.error = Some(e.to_string());
                s.failed_at = Some(now);
            }
            true
        });
        if applied == Some(true) {
            self.changed();
        }
    }

    /// Marks the server failed whatever attempt is current (a callback that went wrong).
    pub(super) fn apply_failed_now(&self, id: &str, e: &McpError) {
        let attempt = self.with_server(id, |s| s.attempt).unwrap_or_default();
        self.apply_failed(id, attempt, e);
    }

    /// Records that `session` broke, unless the server has moved on to another one. The next
    /// use reconnects at once; only a failed reconnection starts the cooldown.
    pub(super) fn mark_failed(&self, id: &str, session: &Rc<Session>, e: &McpError) {
        let applied = self.with_server(id, |s| {
            let current = s.session.as_ref().is_some_and(|c| Rc::ptr_eq(c, session));
            if current {
                s.session = None;
                s.state = ConnectionState::Failed;
                s.error = Some(e.to_string());
            }
            current
        });
        if applied == Some(true) {
            self.changed();
        }
    }

    /// Forgets an expired session so the next use initialises a new one straight away.
    pub(super) fn drop_session(&self, id: &str, session: &Rc<Session>) {
        self.with_server(id, |s| {
            if s.session.as_ref().is_some_and(|c| Rc::ptr_eq(c, session)) {
                s.session = None;
                s.row.session = None;
            }
        });
    }

    /// A live session for `id`, connecting (or waiting for the attempt under way) if needed.
    pub(super) async fn ready_session(&self, id: &str) -> Result<Rc<Session>, McpError> {
        for _ in 0..2 {
            let (session, task, failed, auth_url) = self
                .with_server(id, |s| {
                    (
                        s.session.clone(),
                        s.task.clone(),
                        s.failed_at.map(|t| (t, s.error.clone())),
                        s.auth_url(),
                    )
                })
                .ok_or_else(|| McpError::UnknownServer(id.into()))?;
            if let Some(session) = session {
                return Ok(session);
            }
            if let (None, Some(url)) = (&task, auth_url) {
                return Err(McpError::AuthorizationRequired(url));
            }
            let task = match task {
                Some(t) => t,
                None => {
                    if let Some((at, error)) = failed {
                        if self.clock.now_ms() - at < self.config.reconnect_cooldown_ms as f64 {
                            return Err(McpError::Transport(
                                error.unwrap_or_else(|| "connection failed".into()),
                            ));
                        }
                    }
                    self.start_connect(id, 1).ok_or_else(|| McpError::UnknownServer(id.into()))?
                }
            };
            // Each attempt bounds itself by connect_timeout_ms, but a restore may be retrying:
            // a call never waits longer than one request would.
            let limit = self.config.request_timeout_ms;
            if with_timeout(self.clock.as_ref(), limit, task).await.is_none() {
                return Err(McpError::Timeout(limit));
            }
        }
        let error = self.with_server(id, |s| s.error.clone()).flatten();
        Err(McpError::Transport(error.unwrap_or_else(|| "could not connect".into())))
    }

    /// Acts on what the server announced during an exchange: list changes trigger a refresh.
    pub(super) async fn after_exchange(&self, id: &str, session: &Rc<Session>) {
        if session.inbox.take().iter().any(|m| is_list_changed(m)) {
            self.refresh(id, session).await;
        }
    }

    /// Re-lists the catalog after a `list_changed`. One refresh runs at a time per server;
    /// announcements during it cause one more round.
    async fn refresh(&self, id: &str, session: &Rc<Session>) {
        let start = self.with_server(id, |s| {
            if s.refreshing {
                s.stale = true;
                false
            } else {
                s.refreshing = true;
                s.stale = false;
                true
            }
        });
        if start != Some(true) {
            return;
        }
        let _done = Refreshing { inner: self, id };
        for _ in 0..3 {
            let listed = with_timeout(
                self.clock.as_ref(),
                self.config.request_timeout_ms,
                self.discover(session),
            )
            .await;
            match listed {
                Some(Ok(catalog)) => {
                    let applied = self.with_server(id, |s| {
                        let current = s.session.as_ref().is_some_and(|c| Rc::ptr_eq(c, session));
                        current.then(|| Self::apply_catalog(s, catalog).0)
                    });
                    if let Some(Some(pins)) = applied {
                        self.save_pins(id, &pins);
                        self.invalidate_tools();
                        self.changed();
                    }
                }
                Some(Err(e)) if e.is_connection_failure() => self.mark_failed(id, session, &e),
                // A timed-out or refused listing keeps the previous catalog.
                _ => {}
            }
            if session.inbox.take().iter().any(|m| is_list_changed(m)) {
                self.with_server(id, |s| s.stale = true);
            }
            let again = self.with_server(id, |s| std::mem::take(&mut s.stale)).unwrap_or(false);
            if !again {
                break;
            }
        }
    }
}
