//! The MCP client manager: the registered servers, their connections and catalogs, tool
//! pinning, persistence, and the `cf_agent_mcp_servers` state the agent pushes to every tab.
//!
//! Nothing here spawns tasks. A connection attempt is a shared future stored with its server:
//! `add_mcp_server`, `restore`, `wait_for_connections` and tool calls all await the same
//! future, so whoever is waiting drives it, which suits a single-threaded Worker.

mod auth;
mod connect;
mod dispatch;
mod elicit;

use super::elicitation::{self, Waiting};
use super::oauth::{self, AuthRecord};
use super::session::Session;
use super::store::{self, Pin, ServerRow};
use super::tools::{McpTool, ToolCaller};
use super::transport::TransportKind;
use super::McpError;
use crate::net::{self, NetPolicy};
use crate::platform::{random_id, Clock, HttpClient};
use crate::store::Sql;
use crate::tools::ToolRef;
use futures::future::{join_all, select, Either, LocalBoxFuture, Shared};
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
    for c in crate::platform::case::to_lowercase(input).chars() {
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
