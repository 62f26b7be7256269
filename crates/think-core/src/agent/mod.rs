//! The agent: one instance per Durable Object. It speaks the `agents` WebSocket protocol to
//! every connected tab, keeps the transcript in SQLite, and runs turns through the model and
//! the merged tools. Everything here is host-testable; the Workers glue only adapts storage,
//! sockets, time and fetch to the traits in `store` and `platform`.

mod browser;
pub mod capability;
mod checkpoints;
mod codemode;
mod context;
mod extensions;
mod files;
mod interaction;
pub mod ledger;
mod mcp;
mod recovery;
mod resume;
pub mod settings;
mod skills;
pub mod spec;
/// The transcript store, which lives below the agent (`crate::chat`).
pub use crate::chat as store;
pub mod streams;
mod subagents;
pub mod switches;
mod turn;
mod usage;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod memory_tests;

use futures::future::LocalBoxFuture;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde_json::{json, Map, Value};

use crate::model::Model;
use crate::platform::{Alarm, Clock, HttpClient, Sockets, Tasks};
use crate::protocol::frames::{self, ClientFrame, ClientToolSchema};
use crate::protocol::message::UIMessage;
use crate::store::{BlobStore, Sql, StoreError};
use crate::tools::workspace::bash::BashEngine;
use crate::workspace::{Workspace, WorkspaceOptions};
use serde::Serialize;

pub use capability::{Capability, CapabilityFactory, Sweep};
pub use checkpoints::{ForkError, ForkLink, FORK_CLAIM_STALE_MS, REWIND_REFUSED};
pub use settings::spec_from_settings;
pub use spec::{
    AgentSpec, AgentTool, CallError, ChatRecovery, MessageConcurrency, ModelChoice, TurnConfig,
    TurnContext,
};
use store::ChatStore;
use streams::StreamBuffer;
pub use switches::Feature;
use turn::ActiveStream;
pub use turn::{ClientToolExecutor, RpcTurn, TurnObserver};

/// The platform pieces an agent runs on.
#[derive(Clone)]
pub struct Deps {
    /// The instance's SQLite: transcript, buffers, ledger, workspace.
    pub sql: Rc<dyn Sql>,
    /// The connected tabs.
    pub sockets: Rc<dyn Sockets>,
    /// Time, sleeps and randomness.
    pub clock: Rc<dyn Clock>,
    /// Outbound fetch, for the model and MCP servers.
    pub http: Rc<dyn HttpClient>,
    /// Where workspace files too large for a row go (R2); none keeps them in SQLite.
    pub blobs: Option<Rc<dyn BlobStore>>,
    /// Runs background work (MCP reconnects) past the current event.
    pub tasks: Rc<dyn Tasks>,
    /// The Durable Object alarm, for heartbeats and cleanup.
    pub alarm: Rc<dyn Alarm>,
    /// Runs `bash` tool scripts (just-bash in the Worker); without one there is no bash tool.
    pub bash_engine: Option<Rc<dyn BashEngine>>,
    /// Runs `execute` code (Worker Loader in the Worker); without one there is no `execute`.
    pub sandbox: Option<Rc<dyn crate::codemode::Sandbox>>,
    /// A stable id of this instance (the Durable Object id), used to keep its R2 keys apart.
    pub instance_id: String,
    /// Opens browser WebSockets (a `cdpUrl` or the `BROWSER` binding); without one there is
    /// no browser tool.
    pub browser: Option<Rc<dyn crate::browser::BrowserLauncher>>,
}

/// A plain HTTP answer for the few non-WebSocket routes (`/get-messages`).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpReply {
    /// The HTTP status.
    pub status: u16,
    /// The `content-type` header.
    pub content_type: &'static str,
    /// The response body.
    pub body: String,
}

/// How often a running turn re-arms the alarm, so a crash is noticed this soon after the
/// process comes back.
pub const HEARTBEAT_MS: f64 = 10_000.0;
/// How often finished stream buffers and ledger entries are swept.
pub const CLEANUP_MS: f64 = 10.0 * 60_000.0;

/// Config keys in `think_config`.
const CONFIG_NAME: &str = "identity_name";
const CONFIG_CLIENT_TOOLS: &str = "lastClientTools";
const CONFIG_BODY: &str = "lastBody";
/// Set while an auto-continuation is asked for and has not started yet.
const CONFIG_PENDING_CONTINUATION: &str = "pendingContinuation";
/// Set while a turn's recovery from a transient model error waits to continue it.
const CONFIG_RECOVERY: &str = "pendingRecovery";

/// In-memory state of the live instance. Everything that must survive eviction is in SQLite.
#[derive(Default)]
struct Runtime {
    /// The stream being produced now.
    active: Option<ActiveStream>,
    /// Connections told `stream_pending`: told `stream_resuming` when a stream they did not
    /// ask for starts, or `stream_resume_none` once none is coming.
    parked: Vec<(String, Option<String>)>,
    /// Turns accepted but not yet streaming (waiting for the turn lock).
    queued: usize,
    /// Request ids of the live turns whose messages wait in the `queue` table; rows of any
    /// other id were left by a crash.
    queued_turns: BTreeSet<String>,
    continuation: interaction::Continuation,
    /// Bumped by every submitted message under `latest`, `merge` and `debounce`.
    submit_seq: u64,
    /// A turn is being recovered (after a crash, or a transient model error).
    recovering: bool,
    /// The request a recovery waits to continue, and its turn's abort: a stop of that
    /// request or a clear ends the wait.
    waiting_recovery: Option<(String, crate::turn::abort::AbortSignal)>,
    /// The number of each connection's newest socket (sockets are numbered as they connect;
    /// a socket from before a wake has none). A tab that reconnects under the same id gets a
    /// new number, which tells its new socket from the one that sent a request.
    sockets: BTreeMap<String, u64>,
    /// Sockets connected so far, to number the next one.
    connects: u64,
}

/// One agent instance.
pub struct Agent {
    spec: AgentSpec,
    deps: Deps,
    agent_kebab: String,
    model: Result<Rc<dyn Model>, crate::model::ModelError>,
    /// Turns run one at a time; waiting on this lock is the queue.
    turn_lock: futures::lock::Mutex<()>,
    rt: RefCell<Runtime>,
    workspace: Rc<Workspace>,
    mcp: Option<crate::mcp::McpClient>,
    /// The skills and what was last read of them.
    skills: crate::skills::Skills,
    /// The Code Mode runtime, when `execute` is enabled and a sandbox exists.
    codemode: Option<Rc<crate::codemode::CodeMode>>,
    /// The context blocks and the compaction summary.
    session: crate::session::Session,
    /// The browser behind the browser tools, when configured.
    browser: Option<Rc<crate::browser::Browser>>,
    /// Loaded extensions, when a sandbox exists to run them.
    extensions: Option<Rc<crate::extensions::Extensions>>,
    /// Workspace changes waiting to be pushed to the tabs.
    workspace_push: files::WorkspacePush,
    /// Agents as tools: this instance's children, and its own run as a child.
    subagents: Rc<crate::subagents::Subagents>,
    /// The checkpoints of the workspace and transcript, and the link a fork goes over.
    checkpoints: Rc<checkpoints::CheckpointsCapability>,
    /// Counts turns and tokens, and enforces the spec's limits.
    meter: Rc<crate::limits::Meter>,
    /// The features, in the order their callables are looked up and their sweeps run.
    capabilities: Vec<Rc<dyn Capability>>,
}

impl Agent {
    /// Builds the agent for class `class_name` (its kebab-case form is the URL namespace).
    pub fn new(class_name: &str, spec: AgentSpec, deps: Deps) -> Rc<Self> {
        let meter = Rc::new(crate::limits::Meter::new(
            deps.sql.clone(),
            deps.clock.clone(),
            spec.limits.clone(),
        ));
        let model = spec
            .model
            .build(deps.http.clone(), deps.clock.clone())
            .map(|m| Rc::new(crate::limits::Metered::new(m, meter.clone())) as Rc<dyn Model>);
        let workspace = Rc::new(
            Workspace::with_options(
                deps.sql.clone(),
                deps.clock.clone(),
                WorkspaceOptions {
                    blobs: deps.blobs.clone(),
                    blob_prefix: format!(
                        "{}/{}",
                        crate::protocol::routing::camel_case_to_kebab_case(class_name),
                        deps.instance_id
                    ),
                    grep_index: spec.grep_index,
                    guard_stale_writes: spec.guard_stale_writes,
                    ..WorkspaceOptions::default()
                },
            )
            .unwrap_or_else(|_| Workspace::new(deps.sql.clone(), deps.clock.clone())),
        );
        // The agent's tables, once per instance; every later use is a plain statement.
        let sql = deps.sql.as_ref();
        let tables = ChatStore::create_tables(sql)
            .and_then(|_| StreamBuffer::create_tables(sql))
            .and_then(|_| ledger::Ledger::create_table(sql));
        if let Err(e) = tables {
            crate::platform::log(&format!("think-rs: creating the agent's tables failed: {e}"));
        }
        let mcp = crate::mcp::McpClient::new(
            deps.sql.clone(),
            deps.http.clone(),
            deps.clock.clone(),
            crate::mcp::McpConfig {
                allow_private_addresses: spec.net.allow_private,
                ..Default::default()
            },
        )
        .map_err(|e| crate::platform::log(&format!("think-rs: MCP is unavailable: {e}")))
        .ok();
        let session = crate::session::Session::open(
            deps.sql.clone(),
            spec.context.clone(),
            spec.token_counter.clone(),
        )
        .unwrap_or_else(|e| {
            crate::platform::log(&format!("think-rs: the session context is unavailable: {e}"));
            crate::session::Session::unopened(
                deps.sql.clone(),
                spec.context.clone(),
                spec.token_counter.clone(),
            )
        });
        let codemode = codemode::runtime(&spec, &deps);
        let subagents = crate::subagents::Subagents::new(
            crate::subagents::SubagentDeps {
                sql: deps.sql.clone(),
                sockets: deps.sockets.clone(),
                clock: deps.clock.clone(),
                tasks: deps.tasks.clone(),
            },
            spec.agent_tool_limits,
        );
        let browser = browser::runtime(&spec, &deps);
        let extensions = extensions::runtime(&spec, &deps, &workspace, &session);
        let checkpoints = Rc::new(checkpoints::CheckpointsCapability::new(
            workspace.clone(),
            spec.checkpoint_retention,
        ));
        let mut capabilities: Vec<Rc<dyn Capability>> = vec![
            Rc::new(skills::SkillsCapability),
            Rc::new(usage::UsageCapability::new(meter.clone())),
            Rc::new(codemode::CodeModeCapability),
            Rc::new(extensions::ExtensionsCapability),
            Rc::new(files::FilesCapability),
            checkpoints.clone(),
            Rc::new(context::ContextCapability),
            Rc::new(mcp::McpCapability),
            Rc::new(subagents::SubagentsCapability),
            Rc::new(browser::BrowserCapability),
        ];
        capabilities.extend(spec.capabilities.iter().map(|build| build(&deps)));
        let agent = Rc::new(Self {
            browser,
            extensions,
            subagents,
            skills: crate::skills::Skills::new(spec.skills.clone()),
            codemode,
            session,
            mcp,
            workspace,
            agent_kebab: crate::protocol::routing::camel_case_to_kebab_case(class_name),
            spec,
            deps,
            model,
            turn_lock: futures::lock::Mutex::new(()),
            rt: RefCell::new(Runtime::default()),
            workspace_push: files::WorkspacePush::default(),
            checkpoints,
            meter,
            capabilities,
        });
        agent.create_capability_tables();
        let weak = Rc::downgrade(&agent);
        agent.workspace.set_on_change(Rc::new(move |path| {
            if let Some(agent) = weak.upgrade() {
                agent.workspace_changed(path);
            }
        }));
        if let Some(mcp) = &agent.mcp {
            let weak = Rc::downgrade(&agent);
            mcp.set_on_change(Rc::new(move || {
                if let Some(agent) = weak.upgrade() {
                    agent.broadcast_text(&agent.mcp_frame());
                }
            }));
        }
        agent.wire_mcp();
        agent
    }

    /// Work to do once per start of the instance: recover a turn a crash interrupted, and
    /// the capabilities' start sweeps and start-up work (reconnecting MCP servers, loading
    /// extensions). The glue runs it in the background.
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn start(self: Rc<Self>) -> LocalBoxFuture<'static, ()> {
        Box::pin(self.start_inner())
    }

    /// The body of [`Self::start`].
    async fn start_inner(self: Rc<Self>) {
        // A paused execution must expire even if nothing else wakes the object; no later
        // than the cleanup interval, so an alarm already due is not pushed back far.
        if let Some(at) = self.sweep_capabilities(Sweep::Start).await {
            self.deps.alarm.set(at.min(self.now() + CLEANUP_MS));
        }
        futures::join!(self.recover(), self.start_capabilities());
        self.settle_agent_tool_run();
    }

    /// The alarm: keeps a running turn's heartbeat, recovers interrupted turns, sweeps old
    /// stream buffers and ledger entries, and runs the capabilities' sweeps (expired
    /// executions, idle browser sessions, indexing written files for `grep`).
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn on_alarm(self: Rc<Self>) -> LocalBoxFuture<'static, ()> {
        Box::pin(self.on_alarm_inner())
    }

    /// The body of [`Self::on_alarm`].
    async fn on_alarm_inner(self: Rc<Self>) {
        if self.rt.borrow().active.is_some() || self.rt.borrow().waiting_recovery.is_some() {
            self.deps.alarm.set(self.now() + HEARTBEAT_MS);
            return;
        }
        self.recover().await;
        let expiry = self.sweep_capabilities(Sweep::Alarm).await;
        let now = self.now();
        let sweep = self.streams().and_then(|b| {
            b.cleanup(now)?;
            ledger::Ledger::new(self.deps.sql.as_ref()).cleanup(now)?;
            b.any()
        });
        match sweep {
            Ok(true) => self.deps.alarm.set(expiry.unwrap_or(f64::MAX).min(now + CLEANUP_MS)),
            Ok(false) => {
                if let Some(at) = expiry {
                    self.deps.alarm.set(at);
                }
            }
            Err(e) => {
                self.warn("sweeping stream buffers failed", e);
                if let Some(at) = expiry {
                    self.deps.alarm.set_no_later(at);
                }
            }
        }
    }

    fn mcp_frame(&self) -> String {
        match &self.mcp {
            Some(m) => m.frame(),
            None => frames::to_text(&frames::McpServers::new(
                &json!({"prompts": [], "resources": [], "servers": {}, "tools": []}),
            )),
        }
    }

    /// The agent's context blocks, for the app to read and write them (`set`, `append`,
    /// `get`, `remove`, `add_entry`, `search`).
    pub fn session(&self) -> &crate::session::Session {
        &self.session
    }

    /// The agent's workspace (its virtual filesystem), for Rust code and custom tools.
    pub fn workspace(&self) -> &Rc<Workspace> {
        &self.workspace
    }

    fn store(&self) -> Result<ChatStore<'_>, StoreError> {
        Ok(ChatStore::new(self.deps.sql.as_ref()))
    }

    fn streams(&self) -> Result<StreamBuffer<'_>, StoreError> {
        Ok(StreamBuffer::new(self.deps.sql.as_ref()))
    }

    fn now(&self) -> f64 {
        self.deps.clock.now_ms()
    }

    /// Logs a storage failure; the caller carries on with what it has.
    fn warn(&self, what: &str, e: impl std::fmt::Display) {
        crate::platform::log(&format!("think-rs: {what}: {e}"));
    }

    /// Remembers the instance name from the URL, for the identity frame after a restart.
    pub fn set_name(&self, name: &str) {
        if let Ok(store) = self.store() {
            if store.config(CONFIG_NAME).ok().flatten().as_deref() != Some(name) {
                let _ = store.set_config(CONFIG_NAME, name);
            }
        }
    }

    fn name(&self) -> String {
        self.store()
            .ok()
            .and_then(|s| s.config(CONFIG_NAME).ok().flatten())
            .unwrap_or_else(|| "default".into())
    }

    /// The transcript as the tabs see it: the persisted messages, then (under `queue`) the
    /// user messages still waiting for their turn.
    pub fn messages(&self) -> Vec<UIMessage> {
        let mut messages = self.history();
        match self.store().and_then(|s| s.queued()) {
            Ok(queued) => messages.extend(queued.into_iter().map(|(_, m)| m)),
            Err(e) => self.warn("reading the queued messages failed", e),
        }
        messages
    }

    /// The persisted transcript, which is what the model sees: no queued message is in it.
    fn history(&self) -> Vec<UIMessage> {
        self.store().and_then(|s| s.messages()).unwrap_or_else(|e| {
            self.warn("reading the transcript failed", e);
            Vec::new()
        })
    }

    /// Persists a message, sanitized and compacted so its row stays under the 2 MB limit.
    /// Takes it by value: a large tool input in it is compacted in place, not copied.
    fn save_message(&self, message: UIMessage) {
        use crate::protocol::sanitize::{enforce_row_size_limit, sanitize_message};
        let message = enforce_row_size_limit(sanitize_message(message));
        if let Err(e) = self.store().and_then(|s| s.upsert(&message, self.now())) {
            self.warn("saving a message failed", e);
        }
    }

    /// The client tool schemas last sent by a client (kept across restarts).
    fn client_tools(&self) -> Vec<ClientToolSchema> {
        self.store()
            .ok()
            .and_then(|s| s.config(CONFIG_CLIENT_TOOLS).ok().flatten())
            .and_then(|v| serde_json::from_str(&v).ok())
            .unwrap_or_default()
    }

    /// Applies a `clientTools` field: absent keeps, empty clears, non-empty replaces.
    fn update_client_tools(&self, tools: &Option<Vec<ClientToolSchema>>) {
        let Some(tools) = tools else { return };
        let result = self.store().and_then(|s| {
            if tools.is_empty() {
                s.delete_config(CONFIG_CLIENT_TOOLS)
            } else {
                s.set_config(CONFIG_CLIENT_TOOLS, &serde_json::to_string(tools).unwrap_or_default())
            }
        });
        if let Err(e) = result {
            self.warn("saving client tools failed", e);
        }
    }

    fn last_body(&self) -> Map<String, Value> {
        self.store()
            .ok()
            .and_then(|s| s.config(CONFIG_BODY).ok().flatten())
            .and_then(|v| serde_json::from_str(&v).ok())
            .unwrap_or_default()
    }

    /// Clears the transcript like a `cf_agent_chat_clear` and tells every tab (DO RPC
    /// `clearMessages()`).
    pub fn clear_messages(&self) {
        self.clear(None);
    }

    fn send(&self, conn: &str, frame: &impl Serialize) {
        self.deps.sockets.send(conn, &frames::to_text(frame));
    }

    fn broadcast_text(&self, text: &str) {
        self.deps.sockets.broadcast(text, &|_| true);
    }

    /// Sends `frame` to every connection except `except`.
    fn broadcast(&self, frame: &impl Serialize, except: Option<&str>) {
        let text = frames::to_text(frame);
        self.deps.sockets.broadcast(&text, &|id| Some(id) != except);
    }

    /// Sends the transcript to one connection.
    fn send_transcript(&self, conn: &str) {
        self.send(conn, &frames::ChatMessages::new(&self.messages()));
    }

    /// Sends the transcript to every connection except `except`.
    fn broadcast_transcript(&self, except: Option<&str>) {
        self.broadcast(&frames::ChatMessages::new(&self.messages()), except);
    }

    /// Frames for a newly connected socket. While a stream is live the socket is offered to
    /// resume it instead of getting the transcript (and gets no live chunks of that stream
    /// until it ACKs; the offer ends with the stream).
    pub fn on_connect(&self, conn: &str) {
        let streaming = {
            let mut rt = self.rt.borrow_mut();
            rt.connects += 1;
            let number = rt.connects;
            rt.sockets.insert(conn.to_owned(), number);
            rt.active.as_mut().map(|a| {
                // The tab that asked for this stream came back on a new socket, which missed
                // frames: it resumes like any tab.
                if a.requester.as_deref() == Some(conn) {
                    a.requester = None;
                }
                a.offer_resume(conn)
            })
        };
        match streaming {
            Some(id) => self.send(conn, &frames::StreamResuming::new(&id, None)),
            None => self.send(conn, &frames::ChatMessages::on_connect(&self.messages())),
        }
        if self.rt.borrow().recovering {
            self.send(conn, &frames::ChatRecovering::started(None));
        }
        self.send(conn, &frames::Identity::new(&self.name(), &self.agent_kebab));
        self.deps.sockets.send(conn, &self.mcp_frame());
        self.subagents.replay_to(conn);
        self.send_mcp_elicitations(conn);
    }

    /// Forgets a closed connection's handshake state.
    pub fn on_close(&self, conn: &str) {
        let mut rt = self.rt.borrow_mut();
        rt.sockets.remove(conn);
        if let Some(active) = rt.active.as_mut() {
            active.awaiting_ack.remove(conn);
        }
        rt.parked.retain(|(c, _)| c != conn);
    }

    /// Answers the agent's plain HTTP routes; `None` means not found.
    pub fn on_http(&self, method: &str, path: &str) -> Option<HttpReply> {
        if method.eq_ignore_ascii_case("GET") && path.ends_with("/get-messages") {
            let body: Vec<Value> = self.messages().iter().map(UIMessage::to_value).collect();
            return Some(HttpReply {
                status: 200,
                content_type: "application/json",
                body: Value::Array(body).to_string(),
            });
        }
        None
    }

    /// Handles one text frame from connection `conn`.
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn on_message<'a>(self: Rc<Self>, conn: &'a str, text: &'a str) -> LocalBoxFuture<'a, ()> {
        Box::pin(self.on_message_inner(conn, text))
    }

    /// The body of [`Self::on_message`].
    async fn on_message_inner(self: Rc<Self>, conn: &str, text: &str) {
        match frames::parse_client_frame(text) {
            Ok(ClientFrame::ChatRequest(req)) => self.on_chat_request(conn, req).await,
            Ok(ClientFrame::Cancel { id }) => self.cancel(&id),
            Ok(ClientFrame::Clear) => self.clear(Some(conn)),
            Ok(ClientFrame::ToolResult(result)) => self.on_tool_result(conn, result).await,
            Ok(ClientFrame::ToolApproval(approval)) => self.on_tool_approval(conn, approval).await,
            Ok(ClientFrame::StreamResumeRequest { probe_id }) => {
                self.on_resume_request(conn, probe_id)
            }
            Ok(ClientFrame::StreamResumeAck { id }) => self.on_resume_ack(conn, &id),
            Ok(ClientFrame::Rpc(rpc)) => self.on_rpc(conn, &rpc.id, &rpc.method, rpc.args).await,
            Ok(ClientFrame::Other(frame)) => self.on_mcp_frame(conn, &frame).await,
            Ok(ClientFrame::ChatMessages { .. } | ClientFrame::State { .. }) => {}
            Err(err) => self.send(conn, &err.reply_frame()),
        }
    }

    /// Calls a callable by name: the app's own first, then the capabilities' (`skills`,
    /// `usage`, `getContext`, Code Mode's, the workspace's, MCP's, ...). Those of a
    /// switched-off feature refuse, saying so.
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn call<'a>(
        self: &'a Rc<Self>,
        method: &'a str,
        args: Vec<Value>,
    ) -> LocalBoxFuture<'a, Result<Value, CallError>> {
        Box::pin(self.call_inner(method, args))
    }

    /// The body of [`Self::call`].
    async fn call_inner(
        self: &Rc<Self>,
        method: &str,
        args: Vec<Value>,
    ) -> Result<Value, CallError> {
        if let Some(f) = self.spec.callables.get(method).cloned() {
            return f(args).await;
        }
        self.call_capability(method, &args).await
    }

    async fn on_rpc(self: &Rc<Self>, conn: &str, id: &str, method: &str, args: Vec<Value>) {
        match self.call(method, args).await {
            Ok(result) => self.send(conn, &frames::RpcResult::new(id, &result)),
            Err(e) => self.send(conn, &frames::RpcError::new(id, &e.to_string())),
        }
    }

    /// Stops request `request_id`: its live stream, or the recovery waiting to continue it.
    fn cancel(&self, request_id: &str) {
        let rt = self.rt.borrow();
        if let Some(active) = rt.active.as_ref() {
            if active.request_id == request_id {
                active.abort.abort();
            }
        }
        if let Some((id, abort)) = &rt.waiting_recovery {
            if id == request_id {
                abort.abort();
            }
        }
    }

    /// Drops the transcript, stream buffers and per-chat settings, stops a running turn,
    /// and tells the other tabs.
    pub fn clear(&self, origin: Option<&str>) {
        {
            let mut rt = self.rt.borrow_mut();
            if let Some(active) = rt.active.as_ref() {
                active.abort.abort();
            }
            if let Some((_, abort)) = &rt.waiting_recovery {
                abort.abort();
            }
            rt.continuation = interaction::Continuation::default();
        }
        let result = self.store().and_then(|s| {
            s.clear()?;
            s.delete_config(CONFIG_CLIENT_TOOLS)?;
            s.delete_config(CONFIG_PENDING_CONTINUATION)?;
            s.delete_config(CONFIG_RECOVERY)?;
            s.delete_config(CONFIG_BODY)
        });
        let result = result
            .and_then(|_| self.streams()?.clear())
            .and_then(|_| ledger::Ledger::new(self.deps.sql.as_ref()).clear())
            .and_then(|_| self.session.forget_conversation());
        if let Err(e) = result {
            self.warn("clearing failed", e);
        }
        self.subagents.clear();
        self.broadcast(&frames::ChatClear::new(), origin);
    }
}

/// The names of the given client tools, for pending-interaction checks.
fn tool_names(tools: &[ClientToolSchema]) -> BTreeSet<String> {
    tools.iter().map(|t| t.name.clone()).collect()
}
