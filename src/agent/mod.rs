//! The agent: one instance per Durable Object. It speaks the `agents` WebSocket protocol to
//! every connected tab, keeps the transcript in SQLite, and runs turns through the model and
//! the merged tools. Everything here is host-testable; the Workers glue only adapts storage,
//! sockets, time and fetch to the traits in `store` and `platform`.

pub mod spec;
pub mod store;

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{json, Map, Value};

use crate::model::openai::OpenAiChatModel;
use crate::model::Model;
use crate::platform::{random_id, random_uuid, Clock, HttpClient, Sockets};
use crate::protocol::accumulator::{ChunkAction, StreamAccumulator};
use crate::protocol::frames::{self, ClientFrame, FrameError, ResumeNoneReason, Trigger};
use crate::protocol::message::{Role, UIMessage};
use crate::protocol::{chunk, sanitize};
use crate::store::{BlobStore, Sql, StoreError};
use crate::tools::{Layer, ToolSet};
use crate::turn::abort::AbortSignal;
use crate::turn::convert::to_model_messages;
use crate::turn::engine::{self, ChunkSink, TurnOutcome, TurnPlan};

pub use spec::{AgentSpec, ModelChoice, TurnConfig, TurnContext};
use store::ChatStore;

/// The platform pieces an agent runs on.
#[derive(Clone)]
pub struct Deps {
    pub sql: Rc<dyn Sql>,
    pub sockets: Rc<dyn Sockets>,
    pub clock: Rc<dyn Clock>,
    pub http: Rc<dyn HttpClient>,
    pub blobs: Option<Rc<dyn BlobStore>>,
}

/// A plain HTTP answer for the few non-WebSocket routes (`/get-messages`).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpReply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

/// The turn that is streaming right now, so cancel frames can find it.
struct ActiveTurn {
    request_id: String,
    abort: AbortSignal,
}

/// A chat request admitted for a turn.
struct TurnRequest {
    request_id: String,
    body: Map<String, Value>,
    continuation: bool,
}

const CONFIG_NAME: &str = "identity_name";

/// One agent instance.
pub struct Agent {
    spec: AgentSpec,
    deps: Deps,
    agent_kebab: String,
    model: Result<Rc<dyn Model>, String>,
    /// Turns run one at a time; waiting on this lock is the queue.
    turn_lock: futures::lock::Mutex<()>,
    active: RefCell<Option<ActiveTurn>>,
}

impl Agent {
    /// Builds the agent for class `class_name` (its kebab-case form is the URL namespace).
    pub fn new(class_name: &str, spec: AgentSpec, deps: Deps) -> Rc<Self> {
        let model: Result<Rc<dyn Model>, String> = match &spec.model {
            ModelChoice::OpenAi(cfg) => Ok(Rc::new(OpenAiChatModel::new(cfg.clone(), deps.http.clone()))),
            ModelChoice::Custom(m) => Ok(m.clone()),
            ModelChoice::Unconfigured(msg) => Err(msg.clone()),
        };
        Rc::new(Self {
            agent_kebab: crate::protocol::routing::camel_case_to_kebab_case(class_name),
            spec,
            deps,
            model,
            turn_lock: futures::lock::Mutex::new(()),
            active: RefCell::new(None),
        })
    }

    fn store(&self) -> Result<ChatStore<'_>, StoreError> {
        ChatStore::open(self.deps.sql.as_ref())
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
        self.store().ok().and_then(|s| s.config(CONFIG_NAME).ok().flatten()).unwrap_or_else(|| "default".into())
    }

    fn messages(&self) -> Vec<UIMessage> {
        match self.store().and_then(|s| s.messages()) {
            Ok(m) => m,
            Err(e) => {
                crate::platform::log(&format!("think-rs: reading the transcript failed: {e}"));
                Vec::new()
            }
        }
    }

    fn send(&self, conn: &str, frame: &Value) {
        self.deps.sockets.send(conn, &frame.to_string());
    }

    /// Sends `frame` to every connection except `except`.
    fn broadcast(&self, frame: &Value, except: Option<&str>) {
        let text = frame.to_string();
        for id in self.deps.sockets.ids() {
            if Some(id.as_str()) != except {
                self.deps.sockets.send(&id, &text);
            }
        }
    }

    fn transcript_frame(&self) -> Value {
        frames::chat_messages_frame(&self.messages())
    }

    /// Frames for a newly connected socket: the transcript, identity and MCP state.
    pub fn on_connect(&self, conn: &str) {
        self.send(conn, &self.transcript_frame());
        self.send(conn, &frames::identity_frame(&self.name(), &self.agent_kebab));
        self.send(conn, &frames::mcp_servers_frame(&json!({"servers": {}, "tools": [], "prompts": [], "resources": []})));
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
    pub async fn on_message(self: Rc<Self>, conn: &str, text: &str) {
        match frames::parse_client_frame(text) {
            Ok(ClientFrame::ChatRequest(req)) => self.on_chat_request(conn, req).await,
            Ok(ClientFrame::Cancel { id }) => {
                if let Some(active) = self.active.borrow().as_ref() {
                    if active.request_id == id {
                        active.abort.abort();
                    }
                }
            }
            Ok(ClientFrame::Clear) => self.clear(Some(conn)),
            Ok(ClientFrame::StreamResumeRequest { probe_id }) => {
                self.send(conn, &frames::stream_resume_none_frame(ResumeNoneReason::Idle, probe_id.as_deref()));
            }
            Ok(ClientFrame::StreamResumeAck { id }) => self.send(conn, &frames::replay_done_frame(&id, false)),
            Ok(ClientFrame::Rpc(rpc)) => self.on_rpc(conn, &rpc.id, &rpc.method, rpc.args).await,
            Ok(_) => {}
            Err(err) => self.on_bad_frame(conn, err),
        }
    }

    fn on_bad_frame(&self, conn: &str, err: FrameError) {
        self.send(conn, &err.reply_frame());
    }

    async fn on_rpc(&self, conn: &str, id: &str, method: &str, args: Vec<Value>) {
        let reply = match self.spec.callables.get(method).cloned() {
            Some(f) => match f(args).await {
                Ok(result) => frames::rpc_result_frame(id, &result, true),
                Err(e) => frames::rpc_error_frame(id, &e),
            },
            None => frames::rpc_error_frame(id, &format!("Method {method} does not exist")),
        };
        self.send(conn, &reply);
    }

    /// Drops the transcript and per-chat settings, stops a running turn, and tells the other tabs.
    pub fn clear(&self, origin: Option<&str>) {
        if let Some(active) = self.active.borrow().as_ref() {
            active.abort.abort();
        }
        if let Ok(store) = self.store() {
            let _ = store.clear();
        }
        self.broadcast(&frames::chat_clear_frame(), origin);
    }

    async fn on_chat_request(self: Rc<Self>, conn: &str, req: frames::ChatRequest) {
        let request_id = req.id.clone();
        let persisted = self.reconcile(&req);
        if let Err(e) = persisted {
            self.send(conn, &frames::chat_request_error_frame(&request_id, &format!("Could not save the message: {e}")));
            return;
        }
        self.broadcast(&self.transcript_frame(), Some(conn));
        let turn = TurnRequest { request_id, body: req.body, continuation: false };
        self.run_turn(turn).await;
    }

    /// Stores the new user messages of an incoming transcript. A regenerate drops what follows
    /// the last message the client kept.
    fn reconcile(&self, req: &frames::ChatRequest) -> Result<(), StoreError> {
        let store = self.store()?;
        if req.trigger == Trigger::RegenerateMessage {
            if let Some(last) = req.messages.last() {
                store.truncate_after(&last.id)?;
            }
        }
        let now = self.deps.clock.now_ms();
        for m in &req.messages {
            if m.role == Role::User && !store.has_message(&m.id)? {
                store.upsert(m, now)?;
            }
        }
        Ok(())
    }

    /// The merged tools of a turn, in Think's layer order.
    fn turn_tools(&self) -> ToolSet {
        let mut tools = ToolSet::new();
        tools.add_layer(Layer::Agent, self.spec.tools.iter().cloned());
        tools
    }

    async fn run_turn(self: &Rc<Self>, turn: TurnRequest) {
        let _slot = self.turn_lock.lock().await;
        let request_id = turn.request_id.clone();
        let model = match &self.model {
            Ok(m) => m.clone(),
            Err(msg) => {
                self.broadcast(&frames::chat_error_frame(&request_id, msg, turn.continuation), None);
                self.broadcast(&frames::chat_done_frame(&request_id, turn.continuation), None);
                return;
            }
        };
        let messages = self.messages();
        let tools = self.turn_tools();
        let mut ctx = TurnContext {
            system: self.spec.system_prompt.clone(),
            messages: to_model_messages(&messages, &tools),
            tools,
            continuation: turn.continuation,
            body: turn.body,
        };
        let mut max_steps = self.spec.max_steps;
        let mut tool_choice = None;
        if let Some(hook) = &self.spec.before_turn {
            let cfg = hook(&ctx);
            ctx.tools.add_layer(Layer::Turn, cfg.tools);
            if let Some(active) = cfg.active_tools {
                ctx.tools.retain_names(&active);
            }
            if let Some(system) = cfg.system {
                ctx.system = system;
            }
            max_steps = cfg.max_steps.unwrap_or(max_steps);
            tool_choice = cfg.tool_choice;
        }

        let abort = AbortSignal::new();
        self.active.replace(Some(ActiveTurn { request_id: request_id.clone(), abort: abort.clone() }));
        let message_id = random_uuid(self.deps.clock.as_ref());
        let stream = TurnStream {
            agent: self.clone(),
            request_id: request_id.clone(),
            continuation: turn.continuation,
            acc: RefCell::new(StreamAccumulator::new(&message_id, turn.continuation)),
        };
        stream.emit(chunk::start(Some(&message_id), None));
        let clock = self.deps.clock.clone();
        let plan = TurnPlan {
            system: ctx.system,
            messages: ctx.messages,
            tools: ctx.tools,
            max_steps,
            tool_choice,
            new_id: Box::new(move || format!("approval_{}", random_id(clock.as_ref(), 16))),
        };
        let approval = |name: &str, input: &Value| self.spec.approval.needs_approval(name, input);
        let outcome = engine::run(model.as_ref(), plan, &approval, &stream, &abort).await;
        match &outcome {
            TurnOutcome::Finished(reason) => {
                stream.emit(chunk::finish(Some(reason_str(*reason))));
            }
            TurnOutcome::AwaitingHuman => stream.emit(chunk::finish(Some("tool-calls"))),
            TurnOutcome::Aborted => stream.emit(chunk::abort(None)),
            TurnOutcome::Failed(msg) => {
                self.broadcast(&frames::chat_error_frame(&request_id, msg, turn.continuation), None);
            }
        }
        self.active.replace(None);
        self.broadcast(&frames::chat_done_frame(&request_id, turn.continuation), None);
        let message = stream.acc.into_inner().message();
        if message.parts.iter().any(|p| crate::protocol::message::part_type(p) != Some("step-start")) {
            let mut message = message;
            sanitize::sanitize_message(&mut message);
            if let Err(e) = self.store().and_then(|s| s.upsert(&message, self.deps.clock.now_ms())) {
                crate::platform::log(&format!("think-rs: saving the answer failed: {e}"));
            }
        }
        self.broadcast(&self.transcript_frame(), None);
    }
}

fn reason_str(reason: crate::model::FinishReason) -> &'static str {
    use crate::model::FinishReason::*;
    match reason {
        Stop => "stop",
        Length => "length",
        ContentFilter => "content-filter",
        ToolCalls => "tool-calls",
        Error => "error",
        Other => "other",
    }
}

/// Streams one turn's chunks to every tab while accumulating the assistant message.
struct TurnStream {
    agent: Rc<Agent>,
    request_id: String,
    continuation: bool,
    acc: RefCell<StreamAccumulator>,
}

impl ChunkSink for TurnStream {
    fn emit(&self, chunk: Value) {
        let action = self.acc.borrow_mut().apply(&chunk);
        if let ChunkAction::CrossMessageToolUpdate { .. } = action {
            // Applied to the earlier message by the continuation logic (human-in-the-loop).
        }
        let frame = frames::chat_chunk_value_frame(&self.request_id, &chunk, self.continuation);
        self.agent.broadcast(&frame, None);
    }
}
