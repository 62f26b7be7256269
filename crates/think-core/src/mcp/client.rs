//! The MCP client manager: the registered servers, their connections and catalogs, tool
//! pinning, persistence, and the `cf_agent_mcp_servers` state the agent pushes to every tab.
//!
//! Nothing here spawns tasks. A connection attempt is a shared future stored with its server:
//! `add_mcp_server`, `restore`, `wait_for_connections` and tool calls all await the same
//! future, so whoever is waiting drives it, which suits a single-threaded Worker.

use super::elicitation::{self, Waiting};
use super::oauth::{self, AuthRecord, CallbackParams, OAuth, OAuthError};
use super::resource_tools::{self, ResourceAccess};
use super::session::Session;
use super::store::{self, Pin, ServerRow};
use super::tools::{self, McpTool, ToolCaller};
use super::transport::{Env, ServerRequests, StreamableHttp, TransportKind};
use super::McpError;
use crate::net::{self, NetPolicy};
use crate::platform::{random_id, Clock, HttpClient};
use crate::store::Sql;
use crate::tools::{ToolError, ToolRef};
use futures::future::{join_all, select, Either, LocalBoxFuture, Shared};
use futures::FutureExt;
use serde_json::{json, Map, Value};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::rc::{Rc, Weak};

/// Tunables; the defaults follow the reference client and MCP SDK.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// `clientInfo` sent in `initialize`.
    pub client_name: String,
    /// `clientInfo.version` sent in `initialize`.
    pub client_version: String,
    /// Per request (`tools/call`, `tools/list`), like the SDK's 60 s default.
    pub request_timeout_ms: u64,
    /// Connecting, initialising and discovering together, like the reference's 15 s.
    pub connect_timeout_ms: u64,
    /// After a failed connection, calls fail fast with the stored error for this long rather
    /// than each waiting on a dead server.
    pub reconnect_cooldown_ms: u64,
    /// Connection attempts per server when restoring at start (backing off 0.5 s, 1 s, ...).
    pub restore_attempts: u32,
    /// Lets servers on private network addresses be added (refused by default, as in the
    /// reference, so a prompt-injected URL cannot reach internal services). Loopback is
    /// allowed either way; see [`crate::net`] for the classes refused.
    pub allow_private_addresses: bool,
    /// How long a server's `elicitation/create` waits for a person before it is answered
    /// `cancel`. Requests waiting on it are not timed out meanwhile.
    pub elicitation_timeout_ms: u64,
}

impl McpConfig {
    /// The address policy every server URL is checked against, when added and when connecting.
    fn net_policy(&self) -> NetPolicy {
        NetPolicy { allow_private: self.allow_private_addresses, ..NetPolicy::default() }
    }
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            client_name: "think-rs".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            request_timeout_ms: 60_000,
            connect_timeout_ms: 15_000,
            reconnect_cooldown_ms: 5_000,
            restore_attempts: 3,
            allow_private_addresses: false,
            elicitation_timeout_ms: 600_000,
        }
    }
}

/// Options of `add_mcp_server`.
#[derive(Debug, Clone, Default)]
pub struct AddServerOptions {
    /// Streamable HTTP unless given.
    pub transport: Option<TransportKind>,
    /// Sent with every request, e.g. `Authorization: Bearer ...`.
    pub headers: Vec<(String, String)>,
    /// A stable id instead of a random one, so tool names survive re-adding.
    pub id: Option<String>,
    /// The OAuth redirect URI, used if the server asks for authorization
    /// (`https://<host>/agents/<class>/<name>/callback`).
    pub callback_url: Option<String>,
    /// An OAuth client registered by hand (id, optional secret), for authorization servers
    /// without dynamic registration.
    pub oauth_client: Option<(String, Option<String>)>,
}

/// Where a server's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Waiting for the user to authorize the agent at the server's `auth_url`.
    Authenticating,
    /// Opening the transport and initialising the session.
    Connecting,
    /// Initialised; listing tools, prompts and resources.
    Discovering,
    /// Connected, with its tools offered to the model.
    Ready,
    /// The last attempt failed; retried on next use or restart.
    Failed,
}

impl ConnectionState {
    /// The name the reference uses in `cf_agent_mcp_servers`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Authenticating => "authenticating",
            ConnectionState::Connecting => "connecting",
            ConnectionState::Discovering => "discovering",
            ConnectionState::Ready => "ready",
            ConnectionState::Failed => "failed",
        }
    }
}

/// What `add_mcp_server` reports: the id to refer to the server by and how connecting went.
#[derive(Debug, Clone, PartialEq)]
pub struct AddedServer {
    /// The server's id, as tool names and the other callables use it.
    pub id: String,
    /// Where the connection stands after the attempt.
    pub state: ConnectionState,
    /// Why connecting failed, when it did.
    pub error: Option<String>,
    /// Where the user authorizes the agent, while `Authenticating`.
    pub auth_url: Option<String>,
}

/// A tool whose description or input schema changed after it was pinned; it stays out of
/// `tools()` until the app accepts the change.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingToolChange {
    /// The tool's name on the server.
    pub tool: String,
    /// `"description"` and/or `"inputSchema"`.
    pub changes: Vec<&'static str>,
    /// The pinned description.
    pub previous_description: String,
    /// The pinned input schema.
    pub previous_input_schema: Value,
    /// The description the server declares now.
    pub description: String,
    /// The input schema the server declares now.
    pub input_schema: Value,
}

impl PendingToolChange {
    fn to_json(&self) -> Value {
        json!({
            "tool": self.tool,
            "changes": self.changes,
            "previous": {"description": self.previous_description, "inputSchema": self.previous_input_schema},
            "current": {"description": self.description, "inputSchema": self.input_schema},
        })
    }
}

/// A typed snapshot of one server, for Rust callers (the frame carries the same facts).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    /// The server's id.
    pub id: String,
    /// The name it was added with.
    pub name: String,
    /// Its URL, as checked and fetched (canonical WHATWG form).
    pub url: String,
    /// The transport it was added with.
    pub transport: TransportKind,
    /// Where its connection stands.
    pub state: ConnectionState,
    /// The last connection error, while failed.
    pub error: Option<String>,
    /// Where the user authorizes the agent, while `Authenticating`.
    pub auth_url: Option<String>,
    /// Transport actually in use while connected (`auto` resolves to one of the two).
    pub connected_via: Option<TransportKind>,
    /// The negotiated MCP protocol version while connected.
    pub protocol_version: Option<String>,
    /// How many of its tools are offered to the model.
    pub tool_count: usize,
    /// Tools held back until the app accepts their changes.
    pub pending_tool_changes: Vec<PendingToolChange>,
}

/// How a `listen` call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenEnd {
    /// The server offers no stream for server-initiated messages (HTTP 405).
    Unsupported,
    /// The stream ended or the server was removed or reconnected; listening again is fine.
    Ended,
    /// Another `listen` already reads this server's current session; a second stream would
    /// be refused (Streamable HTTP allows one per session) or duplicate every notification.
    AlreadyListening,
}

type Task = Shared<LocalBoxFuture<'static, ()>>;

#[derive(Debug, Clone, Default)]
struct Catalog {
    capabilities: Value,
    instructions: Option<String>,
    tools: Vec<Value>,
    prompts: Vec<Value>,
    resources: Vec<Value>,
}

struct Server {
    row: ServerRow,
    state: ConnectionState,
    error: Option<String>,
    session: Option<Rc<Session>>,
    /// What the last successful discovery found; kept while reconnecting or failed so calls
    /// reach the model as "unavailable" errors rather than unknown tools.
    catalog: Option<Catalog>,
    pins: BTreeMap<String, Pin>,
    pending: Vec<PendingToolChange>,
    task: Option<Task>,
    /// Numbers connection attempts so a superseded attempt cannot overwrite a newer one.
    attempt: u64,
    failed_at: Option<f64>,
    refreshing: bool,
    stale: bool,
    /// The session a `listen` call is reading, so that a second caller steps aside.
    listener: Option<Weak<Session>>,
    /// OAuth registration, tokens and pending authorization, for servers that asked for it.
    auth: Option<AuthRecord>,
    /// The access token every request of this server's sessions sends.
    bearer: Rc<RefCell<Option<String>>>,
}

impl Server {
    fn new(
        row: ServerRow,
        pins: BTreeMap<String, Pin>,
        auth: Option<AuthRecord>,
        now: f64,
    ) -> Server {
        let token = auth.as_ref().and_then(|a| a.tokens.as_ref()).map(|t| t.access_token.clone());
        // An authorization left waiting before a restart keeps waiting for its callback.
        let waiting = auth.as_ref().is_some_and(|a| {
            a.tokens.is_none()
                && a.pending.as_ref().is_some_and(|p| now - p.created_at < oauth::PENDING_TTL_MS)
        });
        Server {
            row,
            state: if waiting {
                ConnectionState::Authenticating
            } else {
                ConnectionState::Connecting
            },
            error: None,
            session: None,
            catalog: None,
            pins,
            pending: Vec::new(),
            task: None,
            attempt: 0,
            failed_at: None,
            refreshing: false,
            stale: false,
            listener: None,
            auth,
            bearer: Rc::new(RefCell::new(token)),
        }
    }

    /// The URL the user should open, while the server waits for authorization.
    fn auth_url(&self) -> Option<String> {
        if self.state != ConnectionState::Authenticating {
            return None;
        }
        self.auth.as_ref()?.pending.as_ref().map(|p| p.auth_url.clone())
    }
}

/// The shared state behind an [`McpClient`] handle; tools hold it weakly.
struct Inner {
    me: Weak<Inner>,
    sql: Rc<dyn Sql>,
    http: Rc<dyn HttpClient>,
    clock: Rc<dyn Clock>,
    config: McpConfig,
    servers: RefCell<Vec<Server>>,
    on_change: RefCell<Option<Rc<dyn Fn()>>>,
    generation: Cell<u64>,
    tool_cache: RefCell<Option<Vec<ToolRef>>>,
    /// Serialises token refreshes and new authorizations, so concurrent calls that meet an
    /// expired token refresh it once.
    auth_lock: futures::lock::Mutex<()>,
    /// Inputs servers asked for (elicitation), oldest first.
    elicitations: RefCell<Vec<Waiting>>,
    /// Sends an elicitation frame to every tab; set, the client declares elicitation.
    on_elicitation: RefCell<Option<FrameSink>>,
    /// Elicitations waiting in this process; requests do not time out while any is.
    eliciting: Cell<u32>,
    /// Whether a tool declared destructive needs approval, by model-facing name (all do
    /// unless the owner says otherwise).
    destructive_gate: RefCell<Option<NameGate>>,
}

/// Where frames for the tabs go.
type FrameSink = Rc<dyn Fn(&str)>;

/// A yes/no decision by tool name.
type NameGate = Rc<dyn Fn(&str) -> bool>;

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

/// Like [`with_timeout`], but the time does not run out while `busy` is non-zero (a person is
/// filling in a form the request waits on).
async fn with_timeout_unless_busy<T>(
    clock: &dyn Clock,
    ms: u64,
    busy: &Cell<u32>,
    fut: impl Future<Output = T>,
) -> Option<T> {
    let mut fut = std::pin::pin!(fut);
    loop {
        let sleep = clock.sleep(ms);
        match select(fut.as_mut(), sleep).await {
            Either::Left((v, _)) => return Some(v),
            Either::Right(_) if busy.get() > 0 => continue,
            Either::Right(_) => return None,
        }
    }
}

#[async_trait::async_trait(?Send)]
impl ResourceAccess for Inner {
    fn list_resources(&self, server: Option<&str>) -> Vec<Value> {
        let servers = self.servers.borrow();
        servers
            .iter()
            .filter(|s| server.is_none_or(|id| id == s.row.id))
            .filter_map(|s| {
                Some(with_server_id(&s.catalog.as_ref()?.resources, &s.row.id).collect::<Vec<_>>())
            })
            .flatten()
            .collect()
    }

    async fn read_resource(&self, server: &str, uri: &str) -> Result<Value, McpError> {
        Inner::read_resource(self, server, uri).await
    }
}

#[async_trait::async_trait(?Send)]
impl ToolCaller for Inner {
    async fn call_tool(
        &self,
        server_id: &str,
        tool: &str,
        input: Value,
    ) -> Result<Value, ToolError> {
        Inner::call_tool(self, server_id, tool, input).await
    }
}

/// Runs `fut` for at most `ms` milliseconds.
async fn with_timeout<T>(clock: &dyn Clock, ms: u64, fut: impl Future<Output = T>) -> Option<T> {
    let fut = std::pin::pin!(fut);
    let sleep = clock.sleep(ms);
    match select(fut, sleep).await {
        Either::Left((v, _)) => Some(v),
        Either::Right(_) => None,
    }
}

/// Error text as the reference broadcasts it: control characters removed, at most 500 chars.
fn sanitize_error(e: &str) -> String {
    let clean: String = e
        .chars()
        .filter(|c| !matches!(*c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'))
        .collect();
    match clean.char_indices().nth(500) {
        Some((i, _)) => format!("{}...", &clean[..i]),
        None => clean,
    }
}

/// The reference's rule for caller-supplied ids: lower case, `[a-z0-9_-]`, starting with a
/// letter, at most 64 characters.
pub(crate) fn normalize_server_id(input: &str) -> String {
    let mut id = String::new();
    for c in input.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            id.push(c);
        } else if !id.ends_with('-') {
            id.push('-');
        }
    }
    let mut collapsed = String::new();
    for c in id.chars() {
        if !(c == '-' && collapsed.ends_with('-')) {
            collapsed.push(c);
        }
    }
    let mut id = collapsed.trim_matches(|c| c == '-' || c == '_').to_owned();
    if !id.starts_with(|c: char| c.is_ascii_lowercase()) {
        id = format!("id-{id}").trim_end_matches('-').to_owned();
    }
    if id.len() > 64 {
        id.truncate(64);
        id = id.trim_end_matches('-').to_owned();
    }
    id
}

fn with_server_id<'a>(items: &'a [Value], id: &str) -> impl Iterator<Item = Value> + 'a {
    let id = id.to_owned();
    items.iter().map(move |item| {
        let mut item = item.clone();
        if let Some(obj) = item.as_object_mut() {
            obj.insert("serverId".into(), json!(id));
        }
        item
    })
}

fn is_list_changed(method: &str) -> bool {
    matches!(
        method,
        "notifications/tools/list_changed"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
    )
}

impl Inner {
    /// Bumps the generation and tells the owner, outside any borrow, so it can push
    /// `cf_agent_mcp_servers`.
    fn changed(&self) {
        self.generation.set(self.generation.get() + 1);
        let cb = self.on_change.borrow().clone();
        if let Some(cb) = cb {
            cb();
        }
    }

    fn invalidate_tools(&self) {
        *self.tool_cache.borrow_mut() = None;
    }

    fn with_server<R>(&self, id: &str, f: impl FnOnce(&mut Server) -> R) -> Option<R> {
        self.servers.borrow_mut().iter_mut().find(|s| s.row.id == id).map(f)
    }

    fn save_pins(&self, id: &str, pins: &[(String, Pin)]) {
        let refs: Vec<(&str, &Pin)> = pins.iter().map(|(n, p)| (n.as_str(), p)).collect();
        // Pins also live in memory; a failed write only loses them across a restart.
        let _ = store::save_pins(self.sql.as_ref(), id, &refs);
    }

    /// The attempt already under way for `id`, or a new one making up to `attempts` tries.
    fn start_connect(&self, id: &str, attempts: u32) -> Option<Task> {
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
        let msg = super::jsonrpc::result(request_id, result);
        StreamableHttp::post_into(env, &url, session, version, &msg).await
    }

    /// Marks the server failed whatever attempt is current (a callback that went wrong).
    fn apply_failed_now(&self, id: &str, e: &McpError) {
        let attempt = self.with_server(id, |s| s.attempt).unwrap_or_default();
        self.apply_failed(id, attempt, e);
    }

    /// Records that `session` broke, unless the server has moved on to another one. The next
    /// use reconnects at once; only a failed reconnection starts the cooldown.
    fn mark_failed(&self, id: &str, session: &Rc<Session>, e: &McpError) {
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
    fn drop_session(&self, id: &str, session: &Rc<Session>) {
        self.with_server(id, |s| {
            if s.session.as_ref().is_some_and(|c| Rc::ptr_eq(c, session)) {
                s.session = None;
                s.row.session = None;
            }
        });
    }

    /// A live session for `id`, connecting (or waiting for the attempt under way) if needed.
    async fn ready_session(&self, id: &str) -> Result<Rc<Session>, McpError> {
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
    async fn after_exchange(&self, id: &str, session: &Rc<Session>) {
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

    /// The handler sessions of server `id` pass server requests to, once the owner listens
    /// for elicitations.
    fn requests_handler(&self, id: &str) -> Option<(Rc<dyn ServerRequests>, String)> {
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

    fn oauth(&self) -> OAuth<'_> {
        OAuth {
            http: self.http.as_ref(),
            clock: self.clock.as_ref(),
            policy: self.config.net_policy(),
            client_name: &self.config.client_name,
        }
    }

    /// The access token the server's requests send now.
    fn bearer(&self, id: &str) -> Option<String> {
        self.with_server(id, |s| s.bearer.borrow().clone()).flatten()
    }

    fn has_refresh_token(&self, id: &str) -> bool {
        self.with_server(id, |s| {
            s.auth
                .as_ref()
                .and_then(|a| a.tokens.as_ref())
                .is_some_and(|t| t.refresh_token.is_some())
        })
        .unwrap_or(false)
    }

    /// Persists `record` first, then installs it and its access token in memory.
    fn set_auth(&self, id: &str, record: AuthRecord) -> Result<(), McpError> {
        store::save_auth(self.sql.as_ref(), id, Some(&record))?;
        self.with_server(id, |s| {
            *s.bearer.borrow_mut() = record.tokens.as_ref().map(|t| t.access_token.clone());
            s.auth = Some(record);
        });
        Ok(())
    }

    /// Refreshes the tokens of `id`, unless someone refreshed them since the caller saw
    /// `seen` (then the caller just uses the new ones).
    async fn refresh_tokens(&self, id: &str, seen: Option<&str>) -> Result<(), McpError> {
        let _lock = self.auth_lock.lock().await;
        let record = self
            .with_server(id, |s| s.auth.clone())
            .flatten()
            .ok_or_else(|| McpError::UnknownServer(id.into()))?;
        let current = record.tokens.as_ref().map(|t| t.access_token.as_str());
        if current != seen {
            return Ok(());
        }
        let tokens = self.oauth().refresh(&record).await?;
        self.set_auth(id, AuthRecord { tokens: Some(tokens), ..record })
    }

    /// Refreshes tokens about to expire, before a request would be refused with them. A
    /// failed refresh is left to the request: its 401 starts a new authorization.
    async fn refresh_if_due(&self, id: &str) {
        let now = self.clock.now_ms();
        let due = self
            .with_server(id, |s| {
                let tokens = s.auth.as_ref()?.tokens.as_ref()?;
                tokens.refresh_due(now).then(|| tokens.access_token.clone())
            })
            .flatten();
        if let Some(seen) = due {
            let _ = self.refresh_tokens(id, Some(&seen)).await;
        }
    }

    /// After a 401 the tokens could not fix: discovers the authorization server, registers a
    /// client if needed and stores a new pending authorization. Returns
    /// `AuthorizationRequired(url)`, or why OAuth could not start.
    async fn begin_authorization(&self, id: &str, challenge: Option<&str>) -> McpError {
        let started = self.clock.now_ms();
        let _lock = self.auth_lock.lock().await;
        self.begin_locked(id, challenge, started).await
    }

    /// [`Self::begin_authorization`] with `auth_lock` held. An authorization another caller
    /// began after `started` is reused rather than replaced.
    async fn begin_locked(&self, id: &str, challenge: Option<&str>, started: f64) -> McpError {
        let Some((url, callback, record)) = self
            .with_server(id, |s| (s.row.url.clone(), s.row.callback_url.clone(), s.auth.clone()))
        else {
            return McpError::UnknownServer(id.into());
        };
        if let Some(p) =
            record.as_ref().filter(|r| r.tokens.is_none()).and_then(|r| r.pending.as_ref())
        {
            if p.created_at >= started {
                return McpError::AuthorizationRequired(p.auth_url.clone());
            }
        }
        let url = match net::check_url(&url, &self.config.net_policy()) {
            Ok(u) => u,
            Err(e) => return e.into(),
        };
        let challenge = oauth::parse_challenge(challenge.unwrap_or_default());
        let mut record = record.unwrap_or_default();
        let began = with_timeout(
            self.clock.as_ref(),
            self.config.connect_timeout_ms,
            self.oauth().begin(&url, &challenge, &mut record, callback.as_deref()),
        )
        .await;
        match began {
            Some(Ok(auth_url)) => match self.set_auth(id, record) {
                Ok(()) => McpError::AuthorizationRequired(auth_url),
                Err(e) => e,
            },
            Some(Err(e @ OAuthError::NoCallback)) => e.into(),
            // A server that asked for a token it does not issue itself (or a static one).
            Some(Err(OAuthError::Discovery(_))) if challenge.resource_metadata.is_none() => {
                McpError::Transport(
                    "HTTP 401: Unauthorized (the server offers no OAuth metadata)".into(),
                )
            }
            Some(Err(e)) => McpError::Transport(format!(
                "HTTP 401: Unauthorized, and OAuth could not start: {e}"
            )),
            None => McpError::Timeout(self.config.connect_timeout_ms),
        }
    }

    /// A live session was refused and could not be re-authorized: waits for the user if a new
    /// authorization began, else fails like any broken connection.
    fn apply_auth_lost(&self, id: &str, session: &Rc<Session>, e: &McpError) {
        if !matches!(e, McpError::AuthorizationRequired(_)) {
            self.mark_failed(id, session, e);
            return;
        }
        self.apply_authenticating(id, None);
    }

    /// Puts the server in `authenticating` (its pending authorization holds the URL), with an
    /// error saying why when a previous attempt went wrong.
    fn apply_authenticating(&self, id: &str, error: Option<String>) {
        self.with_server(id, |s| {
            s.session = None;
            s.task = None;
            s.attempt += 1;
            s.state = ConnectionState::Authenticating;
            s.error = error;
            s.failed_at = None;
        });
        self.changed();
    }

    /// Sends one request to the server, connecting first if needed. An expired session is
    /// re-initialised once, and a 401 is answered by refreshing the tokens or, failing that,
    /// by a new authorization (the error is then `AuthorizationRequired`).
    pub(crate) async fn request(
        &self,
        id: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, McpError> {
        let mut retried = false;
        let mut reauthorized = false;
        loop {
            let session = self.ready_session(id).await?;
            self.refresh_if_due(id).await;
            let timeout = self.config.request_timeout_ms;
            let Some(outcome) = with_timeout_unless_busy(
                self.clock.as_ref(),
                timeout,
                &self.eliciting,
                session.request(method, Some(params.clone())),
            )
            .await
            else {
                return Err(McpError::Timeout(timeout));
            };
            self.after_exchange(id, &session).await;
            match outcome {
                Ok(result) => return Ok(result),
                Err(McpError::SessionExpired) if !retried => {
                    retried = true;
                    self.drop_session(id, &session);
                }
                Err(McpError::Unauthorized { challenge }) if !reauthorized => {
                    reauthorized = true;
                    let seen = self.bearer(id);
                    if self.has_refresh_token(id)
                        && self.refresh_tokens(id, seen.as_deref()).await.is_ok()
                    {
                        continue;
                    }
                    let e = self.begin_authorization(id, challenge.as_deref()).await;
                    self.apply_auth_lost(id, &session, &e);
                    return Err(e);
                }
                Err(e @ McpError::Rpc { .. }) => return Err(e),
                Err(e) => {
                    if e.is_connection_failure() || e == McpError::SessionExpired {
                        self.mark_failed(id, &session, &e);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Refuses a request for a feature the connected server did not declare. A server not yet
    /// connected is let through (the request connects it and the server answers for itself).
    fn require_capability(&self, id: &str, capability: &str) -> Result<(), McpError> {
        let declared = self
            .with_server(id, |s| s.session.as_ref().map(|x| x.has_capability(capability)))
            .ok_or_else(|| McpError::UnknownServer(id.into()))?;
        match declared {
            Some(false) => {
                Err(McpError::Invalid(format!("MCP server \"{id}\" does not offer {capability}")))
            }
            _ => Ok(()),
        }
    }

    async fn read_resource(&self, id: &str, uri: &str) -> Result<Value, McpError> {
        self.require_capability(id, "resources")?;
        self.request(id, "resources/read", json!({ "uri": uri })).await
    }

    /// Calls a tool; every failure becomes a `ToolError` the model can read.
    pub(crate) async fn call_tool(
        &self,
        id: &str,
        tool: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        let Some(name) = self.with_server(id, |s| s.row.name.clone()) else {
            return Err(ToolError::Failed(format!("MCP server \"{id}\" has been removed.")));
        };
        let params = json!({"name": tool, "arguments": args});
        match self.request(id, "tools/call", params).await {
            Ok(result) if result.get("isError").and_then(Value::as_bool) == Some(true) => {
                let text = tools::content_text(&result);
                Err(ToolError::Failed(if text.is_empty() {
                    "Tool call failed".into()
                } else {
                    text
                }))
            }
            Ok(result) => Ok(result),
            Err(McpError::Rpc { message, .. }) => Err(ToolError::Failed(format!(
                "MCP tool \"{tool}\" on server \"{name}\" failed: {message}"
            ))),
            Err(e) => Err(ToolError::Failed(format!("MCP server \"{name}\" is unavailable: {e}"))),
        }
    }
}

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

/// Releases a server's listener claim however `listen` ends, unless a newer session's
/// listener has taken it over.
struct Listening<'a> {
    inner: &'a Inner,
    id: &'a str,
    session: &'a Rc<Session>,
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        if let Ok(mut servers) = self.inner.servers.try_borrow_mut() {
            if let Some(s) = servers.iter_mut().find(|s| s.row.id == self.id) {
                if s.listener
                    .as_ref()
                    .and_then(Weak::upgrade)
                    .is_some_and(|l| Rc::ptr_eq(&l, self.session))
                {
                    s.listener = None;
                }
            }
        }
    }
}

/// The MCP client of one agent.
pub struct McpClient {
    inner: Rc<Inner>,
}

impl McpClient {
    /// Opens the client over the agent's storage and loads the registered servers in state
    /// `connecting`; `restore()` (or anything that needs them) then connects them.
    pub fn new(
        sql: Rc<dyn Sql>,
        http: Rc<dyn HttpClient>,
        clock: Rc<dyn Clock>,
        config: McpConfig,
    ) -> Result<McpClient, McpError> {
        store::init(sql.as_ref())?;
        let mut pins = store::load_pins(sql.as_ref())?;
        let mut auth = store::load_auth(sql.as_ref())?;
        elicitation::init(sql.as_ref())?;
        let elicitations = elicitation::load(sql.as_ref())?;
        let now = clock.now_ms();
        let servers = store::load_servers(sql.as_ref())?
            .into_iter()
            .map(|row| {
                let p = pins.remove(&row.id).unwrap_or_default();
                let a = auth.remove(&row.id);
                Server::new(row, p, a, now)
            })
            .collect();
        // Every request and redirect hop is checked, not only the URL a server was added with.
        let http: Rc<dyn HttpClient> = Rc::new(net::GuardedHttp::new(http, config.net_policy()));
        let inner = Rc::new_cyclic(|me| Inner {
            me: me.clone(),
            sql,
            http,
            clock,
            config,
            servers: RefCell::new(servers),
            on_change: RefCell::new(None),
            generation: Cell::new(0),
            tool_cache: RefCell::new(None),
            auth_lock: futures::lock::Mutex::new(()),
            elicitations: RefCell::new(
                elicitations.into_iter().map(|pending| Waiting { pending, reply: None }).collect(),
            ),
            on_elicitation: RefCell::new(None),
            eliciting: Cell::new(0),
            destructive_gate: RefCell::new(None),
        });
        Ok(McpClient { inner })
    }

    /// Called after every observable change (state, error, catalog, pending tool changes,
    /// servers added or removed), to push `frame()` to all tabs. Runs synchronously; it may
    /// read the client but should not await.
    pub fn set_on_change(&self, f: Rc<dyn Fn()>) {
        *self.inner.on_change.borrow_mut() = Some(f);
    }

    /// Increases with every change `set_on_change` reports, for callers that poll.
    pub fn generation(&self) -> u64 {
        self.inner.generation.get()
    }

    /// Registers a server (persisted), connects and discovers it. A server that cannot be
    /// reached stays registered in state `failed`, and is retried on next use or restart.
    /// Adding the same name and URL again returns the existing server.
    pub async fn add_mcp_server(
        &self,
        name: &str,
        url: &str,
        options: AddServerOptions,
    ) -> Result<AddedServer, McpError> {
        let inner = &self.inner;
        let name = name.trim();
        if name.is_empty() {
            return Err(McpError::Invalid("the MCP server needs a name".into()));
        }
        let url = net::check_url(url, &inner.config.net_policy())?.to_string();
        let requested = options.id.as_deref().map(normalize_server_id);
        let transport = options.transport.unwrap_or_default();
        let row = {
            let servers = inner.servers.borrow();
            let same = servers
                .iter()
                .find(|s| s.row.name == name && s.row.url == url)
                .map(|s| s.row.id.clone());
            let id = match requested {
                Some(rid) => {
                    if let Some(s) = servers.iter().find(|s| s.row.id == rid) {
                        if s.row.name != name || s.row.url != url {
                            return Err(McpError::Invalid(format!(
                                "MCP server id \"{rid}\" is already in use by server \"{}\" ({})",
                                s.row.name, s.row.url
                            )));
                        }
                    } else if let Some(other) = same {
                        return Err(McpError::Invalid(format!(
                            "MCP server \"{name}\" ({url}) is already registered with id \"{other}\"; remove it first"
                        )));
                    }
                    rid
                }
                None => match same {
                    Some(id) => id,
                    None => (0..16)
                        .map(|_| random_id(inner.clock.as_ref(), 8))
                        .find(|id| !servers.iter().any(|s| &s.row.id == id))
                        .ok_or_else(|| {
                            McpError::Invalid("could not draw an unused server id".into())
                        })?,
                },
            };
            ServerRow {
                id,
                name: name.to_owned(),
                url,
                transport,
                headers: options.headers,
                session: None,
                callback_url: options.callback_url,
            }
        };
        let id = row.id.clone();
        let preset = options.oauth_client.map(|(client_id, client_secret)| oauth::Registration {
            client_id,
            client_secret,
            redirect_uri: row.callback_url.clone().unwrap_or_default(),
            preset: true,
        });
        let existing = inner.with_server(&id, |s| s.row.clone());
        match existing {
            Some(old) if old.same_config(&row) => {}
            Some(_) => {
                // Same server, new headers or transport (say, a rotated token): reconnect.
                store::save_server(inner.sql.as_ref(), &row)?;
                let old_session = inner.with_server(&id, |s| {
                    s.row = row;
                    s.task = None;
                    s.attempt += 1;
                    s.state = ConnectionState::Connecting;
                    s.failed_at = None;
                    s.session.take()
                });
                if let Some(Some(session)) = old_session {
                    session.close().await;
                }
            }
            None => {
                store::save_server(inner.sql.as_ref(), &row)?;
                let now = inner.clock.now_ms();
                inner.servers.borrow_mut().push(Server::new(row, BTreeMap::new(), None, now));
                inner.changed();
            }
        }
        if let Some(client) = preset {
            let record = inner.with_server(&id, |s| s.auth.clone()).flatten().unwrap_or_default();
            if record.client.as_ref().map(|c| (&c.client_id, &c.client_secret))
                != Some((&client.client_id, &client.client_secret))
            {
                inner.set_auth(&id, AuthRecord { client: Some(client), ..record })?;
            }
        }
        // A server waiting for authorization keeps its URL rather than getting a new one.
        let settled = inner
            .with_server(&id, |s| s.session.is_some() || s.auth_url().is_some())
            .unwrap_or(false);
        if !settled {
            if let Some(task) = inner.start_connect(&id, 1) {
                task.await;
            }
        }
        let (state, error, auth_url) = inner
            .with_server(&id, |s| (s.state, s.error.clone(), s.auth_url()))
            .ok_or_else(|| McpError::UnknownServer(id.clone()))?;
        Ok(AddedServer { id, state, error, auth_url })
    }

    /// Disconnects (ending a Streamable HTTP session with DELETE, best effort) and forgets
    /// the server and its pins.
    pub async fn remove_mcp_server(&self, id: &str) -> Result<(), McpError> {
        let inner = &self.inner;
        if inner.with_server(id, |_| ()).is_none() {
            return Err(McpError::UnknownServer(id.into()));
        }
        store::delete_server(inner.sql.as_ref(), id)?;
        let removed = {
            let mut servers = inner.servers.borrow_mut();
            let i = servers.iter().position(|s| s.row.id == id);
            i.map(|i| servers.remove(i))
        };
        inner.invalidate_tools();
        inner.changed();
        if let Some(session) = removed.and_then(|s| s.session) {
            let limit = inner.config.request_timeout_ms.min(5_000);
            with_timeout(inner.clock.as_ref(), limit, session.close()).await;
        }
        Ok(())
    }

    /// Accepts the held-back tool changes of a server: the new definitions become the pins
    /// and the tools return to `tools()`. Returns how many changes were accepted.
    pub fn accept_mcp_tool_changes(&self, id: &str) -> Result<usize, McpError> {
        let inner = &self.inner;
        let pins = inner
            .with_server(id, |s| {
                let accepted: Vec<(String, Pin)> = s
                    .pending
                    .drain(..)
                    .map(|p| {
                        (p.tool, Pin { description: p.description, input_schema: p.input_schema })
                    })
                    .collect();
                for (name, pin) in &accepted {
                    s.pins.insert(name.clone(), pin.clone());
                }
                accepted
            })
            .ok_or_else(|| McpError::UnknownServer(id.into()))?;
        if pins.is_empty() {
            return Ok(0);
        }
        let refs: Vec<(&str, &Pin)> = pins.iter().map(|(n, p)| (n.as_str(), p)).collect();
        store::save_pins(inner.sql.as_ref(), id, &refs)?;
        inner.invalidate_tools();
        inner.changed();
        Ok(pins.len())
    }

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

    /// Whether `path` is the OAuth callback path of a registered server.
    pub fn is_callback_path(&self, path: &str) -> bool {
        self.inner.servers.borrow().iter().any(|s| {
            s.row
                .callback_url
                .as_deref()
                .and_then(|u| net::Url::parse(u).ok())
                .is_some_and(|u| u.path() == path)
        })
    }

    /// Completes an authorization from the callback's query (`code`, `state`): the state must
    /// match an authorization in progress, and is used up before anything else happens; a
    /// wrong or replayed one changes nothing. The code is exchanged for tokens and the server
    /// connects. Returns the server's id.
    pub async fn complete_authorization(&self, query: &str) -> Result<String, McpError> {
        let inner = &self.inner;
        let params = CallbackParams::parse(query);
        let state = params.state.ok_or(OAuthError::UnknownState)?;
        let lock = inner.auth_lock.lock().await;
        let found = inner.servers.borrow().iter().find_map(|s| {
            let record = s.auth.as_ref()?;
            let pending = record.pending.as_ref()?;
            oauth::same_secret(&pending.state, &state).then(|| (s.row.id.clone(), record.clone()))
        });
        let (id, mut record) = found.ok_or(OAuthError::UnknownState)?;
        let pending = record.pending.take().ok_or(OAuthError::UnknownState)?;
        inner.set_auth(&id, record.clone())?;
        let now = inner.clock.now_ms();
        let outcome = match (params.error, params.code) {
            (Some(error), _) => Err(OAuthError::Denied(error)),
            _ if now - pending.created_at >= oauth::PENDING_TTL_MS => {
                Err(OAuthError::Denied("the authorization expired".into()))
            }
            (None, None) => Err(OAuthError::Denied("the callback carries no code".into())),
            (None, Some(code)) => inner.oauth().exchange(&record, &pending, &code).await,
        };
        let tokens = match outcome {
            Ok(tokens) => tokens,
            Err(e) => {
                // The user can try again at a new URL.
                let again = inner.begin_locked(&id, None, now).await;
                match again {
                    McpError::AuthorizationRequired(_) => {
                        inner.apply_authenticating(&id, Some(e.to_string()))
                    }
                    other => inner.apply_failed_now(&id, &other),
                }
                return Err(e.into());
            }
        };
        inner.set_auth(&id, AuthRecord { tokens: Some(tokens), ..record })?;
        drop(lock);
        inner.with_server(&id, |s| {
            s.task = None;
            s.attempt += 1;
            s.failed_at = None;
        });
        if let Some(task) = inner.start_connect(&id, 1) {
            task.await;
        }
        Ok(id)
    }

    /// Connects every registered server that has no connection, with retries, and resolves
    /// when all have settled. The glue runs this when the object starts.
    pub async fn restore(&self) {
        let inner = &self.inner;
        let ids: Vec<String> = inner
            .servers
            .borrow()
            .iter()
            .filter(|s| s.session.is_none() && s.state != ConnectionState::Authenticating)
            .map(|s| s.row.id.clone())
            .collect();
        let attempts = inner.config.restore_attempts;
        let tasks: Vec<Task> =
            ids.iter().filter_map(|id| inner.start_connect(id, attempts)).collect();
        join_all(tasks).await;
    }

    /// Resolves once no server is connecting or discovering, or after `timeout_ms`. Servers
    /// loaded but not yet connected are connected here, so a turn never sees them half-made.
    pub async fn wait_for_connections(&self, timeout_ms: u64) {
        let inner = &self.inner;
        if timeout_ms == 0 {
            return;
        }
        let ids: Vec<String> = inner
            .servers
            .borrow()
            .iter()
            .filter(|s| {
                matches!(s.state, ConnectionState::Connecting | ConnectionState::Discovering)
            })
            .map(|s| s.row.id.clone())
            .collect();
        let attempts = inner.config.restore_attempts;
        let tasks: Vec<Task> =
            ids.iter().filter_map(|id| inner.start_connect(id, attempts)).collect();
        if tasks.is_empty() {
            return;
        }
        with_timeout(inner.clock.as_ref(), timeout_ms, join_all(tasks)).await;
    }

    /// Listens for server-initiated messages (a Streamable HTTP GET stream, or the legacy SSE
    /// stream) and refreshes the catalog on `list_changed`, until the stream ends. One call
    /// listens per session; a concurrent one returns `AlreadyListening` at once.
    pub async fn listen(&self, id: &str) -> Result<ListenEnd, McpError> {
        let inner = &self.inner;
        let session = inner.ready_session(id).await?;
        let claimed = inner
            .with_server(id, |s| {
                let taken = s
                    .listener
                    .as_ref()
                    .and_then(Weak::upgrade)
                    .is_some_and(|l| Rc::ptr_eq(&l, &session));
                if !taken {
                    s.listener = Some(Rc::downgrade(&session));
                }
                !taken
            })
            .ok_or_else(|| McpError::UnknownServer(id.into()))?;
        if !claimed {
            return Ok(ListenEnd::AlreadyListening);
        }
        let _claim = Listening { inner, id, session: &session };
        inner.refresh_if_due(id).await;
        let mut listener = match session.listen().await {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(ListenEnd::Unsupported),
            Err(McpError::SessionExpired) => {
                inner.drop_session(id, &session);
                return Ok(ListenEnd::Ended);
            }
            Err(e) => return Err(e),
        };
        loop {
            let still_current = inner
                .with_server(id, |s| s.session.as_ref().is_some_and(|c| Rc::ptr_eq(c, &session)));
            if still_current != Some(true) {
                return Ok(ListenEnd::Ended);
            }
            match session.listen_next(&mut listener).await {
                Ok(true) => inner.after_exchange(id, &session).await,
                Ok(false) => return Ok(ListenEnd::Ended),
                Err(e) => {
                    if e.is_connection_failure() {
                        inner.mark_failed(id, &session, &e);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Calls a tool by its server-side name, as the model's tool would.
    pub async fn call_tool(&self, id: &str, tool: &str, args: Value) -> Result<Value, ToolError> {
        self.inner.call_tool(id, tool, args).await
    }

    /// `resources/read`: the contents of the resource `uri` on server `id`, as the server
    /// returns them (`{contents: [{uri, mimeType?, text | blob}]}`).
    pub async fn read_resource(&self, id: &str, uri: &str) -> Result<Value, McpError> {
        self.inner.read_resource(id, uri).await
    }

    /// `mcp_list_resources` and `mcp_read_resource`, for agents that let the model read
    /// servers' resources.
    pub fn resource_tools(&self) -> Vec<ToolRef> {
        let access: Weak<dyn ResourceAccess> = self.inner.me.clone();
        resource_tools::tools(access)
    }

    /// `prompts/get`: the prompt `name` filled with `args` (string values, as MCP requires),
    /// as the server returns it (`{description?, messages}`).
    pub async fn get_prompt(
        &self,
        id: &str,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<Value, McpError> {
        self.inner.require_capability(id, "prompts")?;
        if let Some((k, v)) = args.iter().find(|(_, v)| !v.is_string()) {
            return Err(McpError::Invalid(format!(
                "prompt argument {k} must be a string, not {v}"
            )));
        }
        self.inner.request(id, "prompts/get", json!({ "name": name, "arguments": args })).await
    }

    /// The tools of every server, named `tool_<serverId>_<name>`, minus held-back ones.
    /// Cached: rebuilt only after a catalog or pin change.
    pub fn tools(&self) -> Vec<ToolRef> {
        let inner = &self.inner;
        if let Some(cached) = inner.tool_cache.borrow().as_ref() {
            return cached.clone();
        }
        let mut out: Vec<ToolRef> = Vec::new();
        for s in inner.servers.borrow().iter() {
            let Some(catalog) = &s.catalog else { continue };
            let held: HashSet<&str> = s.pending.iter().map(|p| p.tool.as_str()).collect();
            for tool in &catalog.tools {
                if tool.get("name").and_then(Value::as_str).is_some_and(|n| held.contains(n)) {
                    continue;
                }
                let caller: Weak<dyn ToolCaller> = inner.me.clone();
                let gate = inner.destructive_gate.borrow();
                let gate: &dyn Fn(&str) -> bool = match gate.as_ref() {
                    Some(g) => g.as_ref(),
                    None => &|_| true,
                };
                if let Some(t) = McpTool::new(caller, &s.row.id, tool, gate) {
                    out.push(Rc::new(t));
                }
            }
        }
        *inner.tool_cache.borrow_mut() = Some(out.clone());
        out
    }

    /// Decides, by model-facing name, whether a tool that declares itself destructive
    /// (`annotations.destructiveHint: true`, not `readOnlyHint: true`) needs approval; without
    /// it every such tool does. The agent passes its approval policy's exemptions.
    pub fn set_destructive_gate(&self, gate: NameGate) {
        *self.inner.destructive_gate.borrow_mut() = Some(gate);
        self.inner.invalidate_tools();
    }

    /// Every registered server in the order added, for Rust callers that want types rather
    /// than the frame's JSON.
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.inner
            .servers
            .borrow()
            .iter()
            .map(|s| ServerStatus {
                id: s.row.id.clone(),
                name: s.row.name.clone(),
                url: s.row.url.clone(),
                transport: s.row.transport,
                state: s.state,
                error: s.error.clone(),
                auth_url: s.auth_url(),
                connected_via: s.session.as_ref().map(|x| x.transport_kind()),
                protocol_version: s.session.as_ref().map(|x| x.protocol_version.clone()),
                tool_count: s.catalog.as_ref().map_or(0, |c| c.tools.len()),
                pending_tool_changes: s.pending.clone(),
            })
            .collect()
    }

    /// `MCPServersState`, as the reference's `getMcpServers()` returns it, plus a
    /// `pendingToolChanges` list on servers that have held-back tools.
    pub fn get_mcp_servers(&self) -> Value {
        let servers = self.inner.servers.borrow();
        let mut by_id = Map::new();
        let (mut tools, mut prompts, mut resources) = (Vec::new(), Vec::new(), Vec::new());
        for s in servers.iter() {
            let mut entry = json!({
                "auth_url": s.auth_url(),
                "capabilities": s.catalog.as_ref().map(|c| c.capabilities.clone()),
                "error": s.error.as_deref().map(sanitize_error),
                "instructions": s.catalog.as_ref().and_then(|c| c.instructions.clone()),
                "name": s.row.name,
                "server_url": s.row.url,
                "state": s.state.as_str(),
            });
            if !s.pending.is_empty() {
                entry["pendingToolChanges"] =
                    Value::Array(s.pending.iter().map(PendingToolChange::to_json).collect());
            }
            by_id.insert(s.row.id.clone(), entry);
            if let Some(c) = &s.catalog {
                let held: HashSet<&str> = s.pending.iter().map(|p| p.tool.as_str()).collect();
                let visible: Vec<Value> = c
                    .tools
                    .iter()
                    .filter(|t| {
                        !t.get("name").and_then(Value::as_str).is_some_and(|n| held.contains(n))
                    })
                    .cloned()
                    .collect();
                tools.extend(with_server_id(&visible, &s.row.id));
                prompts.extend(with_server_id(&c.prompts, &s.row.id));
                resources.extend(with_server_id(&c.resources, &s.row.id));
            }
        }
        // Key order as agents 0.21 emits it.
        json!({"prompts": prompts, "resources": resources, "servers": by_id, "tools": tools})
    }

    /// The `cf_agent_mcp_servers` frame to send to every tab on connect and on each change.
    pub fn frame(&self) -> String {
        json!({"mcp": self.get_mcp_servers(), "type": "cf_agent_mcp_servers"}).to_string()
    }
}

impl Drop for McpClient {
    /// Connection tasks hold the client while they run; dropping them breaks that cycle.
    fn drop(&mut self) {
        if let Ok(mut servers) = self.inner.servers.try_borrow_mut() {
            for s in servers.iter_mut() {
                s.task = None;
            }
        }
    }
}
