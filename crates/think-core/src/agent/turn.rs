//! Running a turn inside the agent: admitting chat requests, merging the turn's tools,
//! streaming chunks to the tabs (and into the resumable buffer), and persisting the answer.

use futures::future::LocalBoxFuture;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use serde_json::{json, Map, Value};

use super::ledger::LedgeredTool;
use super::spec::MessageConcurrency;
use super::streams::{FlushCursor, StreamBuffer, StreamStatus};
use super::{Agent, CallError, TurnContext, CONFIG_BODY, CONFIG_RECOVERY};
use crate::model::ToolArguments;
use crate::platform::{random_id, random_uuid};
use crate::protocol::accumulator::{ChunkAction, StreamAccumulator};
use crate::protocol::chunk;
use crate::protocol::frames::{
    self, ChatOutcome, ChatRequest, ChatResponse, ClientToolSchema, MessageUpdated, StreamResuming,
    Trigger,
};
use crate::protocol::json::WithRawMember;
use crate::protocol::message::{
    part_type, state_of, tool_call_id_of, tool_name_of, Role, UIMessage,
};
use crate::protocol::tool_state::{apply_to_messages, leaf_assistant, ToolPartUpdate};
use crate::store::StoreError;
use crate::tools::{DynamicTool, Layer, ToolContext, ToolError, ToolRef, ToolSet};
use crate::turn::abort::AbortSignal;
use crate::turn::convert::to_model_messages;
use crate::turn::engine::{self, ChunkSink, TurnOutcome, TurnPlan};
use serde_json::value::RawValue;

/// The stream being produced right now.
pub(super) struct ActiveStream {
    pub request_id: String,
    pub continuation: bool,
    /// The connection whose tool result started this continuation, if any.
    pub owner: Option<String>,
    /// The connection whose chat request started this stream, while the socket that sent
    /// the request is still its newest: that socket has every frame of the stream and reads
    /// them as its request's response, so it is never offered to resume the stream (an ACK
    /// would replay what it has). Cleared when the tab reconnects under the same id.
    pub requester: Option<String>,
    /// Connections offered `stream_resuming` for this stream that have not ACKed: they get
    /// no live frames of it until they do. The offer lives and dies with the stream.
    pub awaiting_ack: BTreeSet<String>,
    pub abort: AbortSignal,
    pub acc: Rc<RefCell<StreamAccumulator>>,
    /// Chunk bodies not yet in the stream buffer. Written ones live in SQLite only; a
    /// replay flushes these and reads the buffer.
    pub chunks: Vec<String>,
    /// Where the buffer stands.
    pub cursor: FlushCursor,
    /// The `seq` of the next chunk: its index in the stream, as its replay carries it.
    pub next_seq: u64,
    /// The user messages the request carried, named on its terminal frames.
    pub message_ids: Vec<String>,
}

impl ActiveStream {
    /// Offers `conn` to resume this stream (it is muted for it until it ACKs); returns the
    /// stream's request id for the `stream_resuming` frame.
    pub fn offer_resume(&mut self, conn: &str) -> String {
        self.awaiting_ack.insert(conn.to_owned());
        self.request_id.clone()
    }

    /// Whether live frames of this stream go to `conn`: its requester always gets them.
    fn follows(&self, conn: &str) -> bool {
        !self.awaiting_ack.contains(conn) || self.requester.as_deref() == Some(conn)
    }
}

/// A request for a turn.
#[derive(Default)]
pub(super) struct TurnRequest {
    pub request_id: String,
    pub body: Map<String, Value>,
    pub continuation: bool,
    pub owner: Option<String>,
    /// The connection that sent the message, which alone is told when the turn is skipped.
    pub origin: Option<String>,
    /// The number of the socket the message came through (`Runtime::sockets`).
    pub origin_socket: Option<u64>,
    /// The submit's place in line, for the `latest`, `merge` and `debounce` policies.
    pub submit_seq: Option<u64>,
    /// Set for programmatic `chat()` turns.
    pub rpc: Option<RpcTurn>,
    /// Under `queue`: the turn's messages wait in the queue until the turn starts.
    pub queued: bool,
    /// The user messages the request carried, named on its terminal frames.
    pub message_ids: Vec<String>,
    /// The assistant message a recovery continues (its parts are kept and extended).
    pub extend: Option<String>,
    /// Recovery continuations this turn has made so far.
    pub recovery_attempts: u32,
}

/// Why a stream stopped to be continued: the message to continue and the wait the failed
/// answer asked for.
pub(super) struct Interruption {
    message_id: String,
    retry_after_ms: Option<u64>,
}

/// A recovery continuation waiting out its backoff, as noted in SQLite so that a restart
/// runs it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PendingRecovery {
    /// The assistant message to continue.
    pub message_id: String,
    /// Recovery continuations made, this one included.
    pub attempts: u32,
    /// The user messages the interrupted request carried.
    pub message_ids: Vec<String>,
}

/// Receives a programmatic turn's stream (the DO RPC `chat()` callback).
pub trait TurnObserver {
    /// The turn got its slot and starts streaming under `request_id`.
    fn on_start(&self, request_id: &str);
    /// One UIMessageChunk, as JSON text.
    fn on_event(&self, chunk: &str);
    /// The turn failed with `error`; `on_done` follows.
    fn on_error(&self, error: &str);
    /// The turn ended (always called last).
    fn on_done(&self);
}

/// Runs the client tools of a programmatic turn in the caller (`onClientToolCall`).
#[async_trait::async_trait(?Send)]
pub trait ClientToolExecutor {
    /// Runs client tool `tool_name` on `input` and returns its output or error text.
    async fn call(
        &self,
        tool_name: &str,
        input: Value,
        tool_call_id: &str,
    ) -> Result<Value, CallError>;
}

/// What a programmatic turn brings: an observer, and client tools that live for this turn
/// only (never persisted) with the executor that runs them.
#[derive(Clone)]
pub struct RpcTurn {
    /// Receives the turn's stream.
    pub observer: Rc<dyn TurnObserver>,
    /// The caller's tools, offered to the model for this turn only.
    pub client_tools: Vec<ClientToolSchema>,
    /// Runs the caller's tools; without one their calls pause the turn as in a tab.
    pub executor: Option<Rc<dyn ClientToolExecutor>>,
    /// Lets the caller cancel the turn.
    pub abort: Option<AbortSignal>,
}

impl Agent {
    pub(super) async fn on_chat_request(self: Rc<Self>, conn: &str, req: ChatRequest) {
        // A tab that sends a chat request of its own follows live frames again, whatever
        // resume offer it left unanswered.
        if let Some(active) = self.rt.borrow_mut().active.as_mut() {
            active.awaiting_ack.remove(conn);
        }
        let policy = self.spec.message_concurrency;
        let submit = req.trigger == Trigger::SubmitMessage;
        let message_ids = frames::origin_message_ids(&req.messages);
        if submit && policy == MessageConcurrency::Drop && self.busy() {
            self.send_transcript(conn);
            self.send(
                conn,
                &ChatResponse::done(&req.id, ChatOutcome::Skipped).for_messages(&message_ids),
            );
            return;
        }
        let queue = submit && policy == MessageConcurrency::Queue;
        let queued = match self.reconcile(&req, queue).await {
            Ok(queued) => queued,
            Err(e) => {
                let error = format!("Could not save the message: {e}");
                self.send(
                    conn,
                    &ChatResponse::request_error(&req.id, &error).for_messages(&message_ids),
                );
                return;
            }
        };
        self.update_client_tools(&req.client_tools);
        if let Err(e) = self
            .store()
            .and_then(|s| s.set_config(CONFIG_BODY, &Value::Object(req.body.clone()).to_string()))
        {
            self.warn("saving the request body failed", e);
        }
        self.broadcast_transcript(Some(conn));
        let submit_seq = (submit && policy != MessageConcurrency::Queue).then(|| {
            let mut rt = self.rt.borrow_mut();
            rt.submit_seq += 1;
            rt.submit_seq
        });
        let turn = TurnRequest {
            request_id: req.id,
            body: req.body,
            origin: Some(conn.to_owned()),
            origin_socket: self.rt.borrow().sockets.get(conn).copied(),
            submit_seq,
            queued,
            message_ids,
            ..Default::default()
        };
        self.run_turn(turn).await;
    }

    /// A turn is streaming or waiting for its slot.
    fn busy(&self) -> bool {
        let rt = self.rt.borrow();
        rt.active.is_some() || rt.queued > 0
    }

    /// Runs a programmatic turn for `message` (DO RPC `chat()`): the message is persisted and
    /// shown to every tab like a typed one, and the stream goes to `rpc.observer` as well.
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn chat(self: &Rc<Self>, message: UIMessage, rpc: RpcTurn) -> LocalBoxFuture<'_, ()> {
        Box::pin(self.chat_inner(message, rpc))
    }

    /// The body of [`Self::chat`].
    async fn chat_inner(self: &Rc<Self>, message: UIMessage, rpc: RpcTurn) {
        let request_id = random_id(self.deps.clock.as_ref(), 8);
        let queued = self.spec.message_concurrency == MessageConcurrency::Queue;
        if !queued {
            self.checkpoint_turn(Some(&message.id), None).await;
        }
        let saved = self.store().and_then(|s| {
            if queued {
                s.enqueue(&request_id, &message)
            } else {
                s.upsert(&message, self.now())
            }
        });
        if let Err(e) = saved {
            rpc.observer.on_error(&format!("Could not save the message: {e}"));
            rpc.observer.on_done();
            return;
        }
        if queued {
            self.rt.borrow_mut().queued_turns.insert(request_id.clone());
        }
        self.broadcast_transcript(None);
        let turn = TurnRequest {
            request_id,
            body: self.last_body(),
            rpc: Some(rpc),
            queued,
            message_ids: vec![message.id.clone()],
            ..Default::default()
        };
        self.run_turn(turn).await;
    }

    /// Whether a newer submit replaced this one (under `latest`, `merge` and `debounce`).
    fn superseded(&self, seq: Option<u64>) -> bool {
        seq.is_some_and(|s| s != self.rt.borrow().submit_seq)
    }

    /// Stores the new user messages of an incoming transcript, or with `queue` puts them in
    /// the queue of this request's turn (true when it did). A regenerate drops what follows
    /// the last message the client kept.
    async fn reconcile(&self, req: &ChatRequest, queue: bool) -> Result<bool, StoreError> {
        let store = self.store()?;
        if req.trigger == Trigger::RegenerateMessage {
            if let Some(last) = req.messages.last() {
                self.checkpoint_turn(None, Some("regenerate")).await;
                store.truncate_after(&last.id)?;
            }
        }
        // The turn's checkpoint comes before its first new user message is stored (a queued
        // turn takes it when its messages leave the queue).
        if !queue {
            let mut new_users = req.messages.iter().filter(|m| m.role == Role::User);
            if let Some(first) = new_users.find(|m| !store.has_message(&m.id).unwrap_or(true)) {
                self.checkpoint_turn(Some(&first.id), None).await;
            }
        }
        let now = self.now();
        let mut queued = false;
        for m in &req.messages {
            if m.role == Role::User && !store.has_message(&m.id)? {
                if queue {
                    store.enqueue(&req.id, m)?;
                    queued = true;
                } else {
                    store.upsert(m, now)?;
                }
            }
        }
        if queued {
            self.rt.borrow_mut().queued_turns.insert(req.id.clone());
        }
        Ok(queued)
    }

    /// Moves a queued turn's messages into the transcript now that its turn has come; false
    /// when a clear dropped them meanwhile (the turn then has nothing to answer).
    async fn admit_queued(&self, request_id: &str) -> bool {
        self.rt.borrow_mut().queued_turns.remove(request_id);
        // The turn's checkpoint comes before its queued messages enter the transcript.
        match self.store().and_then(|s| s.queued()) {
            Ok(rows) => {
                if let Some((_, first)) = rows.iter().find(|(r, _)| r == request_id) {
                    self.checkpoint_turn(Some(&first.id), None).await;
                }
            }
            Err(e) => self.warn("reading the queued messages failed", e),
        }
        match self.store().and_then(|s| s.take_queued(request_id, self.now())) {
            Ok(taken) => !taken.is_empty(),
            Err(e) => {
                self.warn("moving queued messages into the transcript failed", e);
                false
            }
        }
    }

    /// The merged tools of a turn, in Think's layer order: the capabilities' and the app's
    /// own, layer by layer, then the tools built over them (`execute`, the browser's), then
    /// the extensions' hooks around all. Server tools go through the execution ledger; a
    /// programmatic turn's client tools replace the persisted ones.
    pub(super) fn turn_tools(&self, rpc: Option<&RpcTurn>) -> ToolSet {
        let mut layers = vec![(Layer::Agent, self.spec.tools.clone())];
        layers.extend(self.live_capabilities().filter_map(|c| c.tools(self)));
        layers.push((Layer::Client, self.client_tool_refs(rpc)));
        // Stable: within a layer the app's own tools come first, then the capabilities'.
        layers.sort_by_key(|(layer, _)| *layer);
        let mut tools = ToolSet::new();
        for (layer, layer_tools) in layers {
            tools.add_layer(layer, layer_tools);
        }
        let sql = self.deps.sql.clone();
        let clock = self.deps.clock.clone();
        let now: Rc<dyn Fn() -> f64> = Rc::new(move || clock.now_ms());
        tools.map_tools(|t| LedgeredTool::wrap(t, sql.clone(), now.clone()));
        for cap in self.live_capabilities() {
            let over = cap.tools_over(self, &tools);
            tools.add_layer(
                Layer::Agent,
                over.into_iter().map(|t| LedgeredTool::wrap(t, sql.clone(), now.clone())),
            );
        }
        for cap in self.live_capabilities() {
            cap.wrap_tools(self, &mut tools);
        }
        tools
    }

    /// The client tools of the turn: a programmatic turn's own, run by its executor, else the
    /// ones a tab sent last, which pause the turn for the tab to answer.
    fn client_tool_refs(&self, rpc: Option<&RpcTurn>) -> Vec<ToolRef> {
        let (schemas, executor) = match rpc {
            Some(r) => (r.client_tools.clone(), r.executor.clone()),
            None => (self.client_tools(), None),
        };
        schemas
            .into_iter()
            .map(|t| {
                let schema = t.parameters.unwrap_or_else(|| json!({"type": "object"}));
                let description = t.description.unwrap_or_default();
                match &executor {
                    Some(exec) => {
                        let exec = exec.clone();
                        let name = t.name.clone();
                        Rc::new(DynamicTool::new(
                            &t.name,
                            &description,
                            schema,
                            move |input, ctx| {
                                let (exec, name) = (exec.clone(), name.clone());
                                async move {
                                    exec.call(&name, input, &ctx.tool_call_id)
                                        .await
                                        .map_err(|e| ToolError::Failed(e.to_string()))
                                }
                            },
                        )) as ToolRef
                    }
                    None => Rc::new(DynamicTool::without_execute(&t.name, &description, schema))
                        as ToolRef,
                }
            })
            .collect()
    }

    /// The session's part in each model call of a turn: the blocks in its system prompt,
    /// the compaction of a history past the budget, the retry after a context-length error.
    fn session_step(
        &self,
        model: &Rc<dyn crate::model::Model>,
    ) -> Rc<dyn crate::turn::engine::StepContext> {
        Rc::new(crate::session::compact::SessionStep {
            session: self.session.clone(),
            model: model.clone(),
            context_window: self.spec.context_window,
        })
    }

    /// Runs one turn: waits for its slot, streams it, persists the answer. A transient model
    /// error after the answer began makes the turn wait and continue the same message (see
    /// [`super::spec::ChatRecovery`]), under a new request id, still holding the slot.
    pub(super) async fn run_turn(self: &Rc<Self>, turn: TurnRequest) {
        self.rt.borrow_mut().queued += 1;
        if let MessageConcurrency::Debounce(ms) = self.spec.message_concurrency {
            if turn.submit_seq.is_some() {
                self.deps.clock.sleep(ms).await;
            }
        }
        let slot =
            if self.superseded(turn.submit_seq) { None } else { Some(self.turn_lock.lock().await) };
        self.rt.borrow_mut().queued -= 1;
        let request_id = turn.request_id.clone();
        let skip = slot.is_none()
            || self.superseded(turn.submit_seq)
            || (turn.queued && !self.admit_queued(&request_id).await);
        if skip {
            if let Some(origin) = &turn.origin {
                self.send(
                    origin,
                    &ChatResponse::done(&request_id, ChatOutcome::Skipped)
                        .for_messages(&turn.message_ids),
                );
            }
            if let Some(r) = &turn.rpc {
                r.observer.on_done();
            }
            return;
        }
        let rpc = turn.rpc.clone();
        if let Some(r) = &rpc {
            r.observer.on_start(&request_id);
        }
        let model = match &self.model {
            Ok(m) => m.clone(),
            Err(e) => {
                let msg = e.to_string();
                let ids = &turn.message_ids;
                self.broadcast(
                    &ChatResponse::error(&request_id, &msg)
                        .in_continuation(turn.continuation)
                        .for_messages(ids),
                    None,
                );
                self.broadcast(
                    &ChatResponse::done(&request_id, ChatOutcome::Error)
                        .in_continuation(turn.continuation)
                        .for_messages(ids),
                    None,
                );
                if let Some(r) = &rpc {
                    r.observer.on_error(&msg);
                    r.observer.on_done();
                }
                return;
            }
        };
        if let Err(hit) = self.meter.admit_turn() {
            let msg = hit.to_string();
            let done = ChatResponse::done(&request_id, ChatOutcome::Error);
            for frame in [ChatResponse::error(&request_id, &msg), done] {
                let frame =
                    frame.in_continuation(turn.continuation).for_messages(&turn.message_ids);
                self.broadcast(&frame, None);
            }
            if let Some(r) = &rpc {
                r.observer.on_error(&msg);
                r.observer.on_done();
            }
            return;
        }
        let abort = rpc.as_ref().and_then(|r| r.abort.clone()).unwrap_or_default();
        let mut turn = turn;
        let mut attempts = turn.recovery_attempts;
        let mut announced = false;
        let mut cancelled = false;
        loop {
            let recovery = self.spec.chat_recovery.filter(|r| attempts < r.max_attempts);
            let Some(stop) = self
                .stream_once(&model, &turn, rpc.as_ref(), &abort, recovery.is_some(), attempts)
                .await
            else {
                break;
            };
            attempts += 1;
            if !announced {
                announced = !std::mem::replace(&mut self.rt.borrow_mut().recovering, true);
            }
            let delay = recovery.map_or(0, |r| r.delay_ms(attempts, stop.retry_after_ms));
            let next = TurnRequest {
                request_id: random_id(self.deps.clock.as_ref(), 8),
                body: turn.body.clone(),
                continuation: true,
                owner: turn.owner.clone(),
                message_ids: turn.message_ids.clone(),
                extend: Some(stop.message_id),
                recovery_attempts: attempts,
                ..Default::default()
            };
            if !self.wait_to_recover(&turn, &next, delay, &abort).await {
                cancelled = true;
                break;
            }
            turn = next;
        }
        if announced {
            self.rt.borrow_mut().recovering = false;
            self.broadcast(&frames::ChatRecovering::settled(Some(&request_id)), None);
        }
        drop(slot);
        if cancelled {
            // An interrupted stream does not start what the end of a stream starts.
            self.after_stream().await;
        }
        if let Some(r) = &rpc {
            r.observer.on_done();
        }
    }

    /// Waits out the backoff before `next` continues `turn`, cancellable by a stop of the
    /// interrupted request or a clear; false when it was cancelled (the request then ends
    /// `aborted`). The wait is noted in SQLite, so a restart during it still continues.
    async fn wait_to_recover(
        self: &Rc<Self>,
        turn: &TurnRequest,
        next: &TurnRequest,
        delay_ms: u64,
        abort: &AbortSignal,
    ) -> bool {
        let pending = PendingRecovery {
            message_id: next.extend.clone().unwrap_or_default(),
            attempts: next.recovery_attempts,
            message_ids: next.message_ids.clone(),
        };
        self.note_pending_recovery(Some(&pending));
        self.rt.borrow_mut().waiting_recovery = Some((turn.request_id.clone(), abort.clone()));
        // The heartbeat goes on through the wait, so a crash in it is noticed as in a stream.
        self.deps.alarm.set(self.now() + super::HEARTBEAT_MS);
        let waited = abort.run(self.deps.clock.sleep(delay_ms)).await.is_some();
        self.rt.borrow_mut().waiting_recovery = None;
        if waited {
            return true;
        }
        self.note_pending_recovery(None);
        self.broadcast(
            &ChatResponse::done(&turn.request_id, ChatOutcome::Aborted)
                .in_continuation(turn.continuation)
                .for_messages(&turn.message_ids),
            None,
        );
        false
    }

    /// Records (or with `None` forgets) the continuation a recovery waits to run.
    pub(super) fn note_pending_recovery(&self, pending: Option<&PendingRecovery>) {
        let result = self.store().and_then(|s| match pending {
            Some(p) => s.set_config(CONFIG_RECOVERY, &serde_json::to_string(p)?),
            None => s.delete_config(CONFIG_RECOVERY),
        });
        if let Err(e) = result {
            self.warn("recording the pending recovery failed", e);
        }
    }

    /// Streams the turn once: merges its tools, calls the model, persists the answer and
    /// ends the stream. With `may_recover`, a transient model error after output began ends
    /// the stream `recovering` instead of failing it, and says what to continue.
    async fn stream_once(
        self: &Rc<Self>,
        model: &Rc<dyn crate::model::Model>,
        turn: &TurnRequest,
        rpc: Option<&RpcTurn>,
        abort: &AbortSignal,
        may_recover: bool,
        attempts: u32,
    ) -> Option<Interruption> {
        let request_id = &turn.request_id;
        if let (true, Some(mcp)) = (self.spec.include_mcp_tools, &self.mcp) {
            if let Some(ms) = self.spec.wait_for_mcp_connections {
                mcp.wait_for_connections(ms).await;
            }
            // A server that could not be reached at start is retried in the background, so it
            // comes back without a restart (its tools join a later turn).
            if mcp.servers().iter().any(|s| s.state == crate::mcp::ConnectionState::Failed) {
                let agent = self.clone();
                self.deps.tasks.spawn(Box::pin(async move { agent.restore_mcp().await }));
            }
        }
        self.skills.refresh(&self.workspace, self.deps.blobs.as_deref(), self.now()).await;
        if let Some(ext) = &self.extensions {
            ext.ensure_started().await;
        }
        if !turn.continuation {
            self.settle_passed_approvals();
        }
        let tools = self.turn_tools(rpc);
        // A recovery continues the message it interrupted, with the parts it has.
        let extended =
            turn.extend.as_deref().and_then(|id| match self.store().and_then(|s| s.message(id)) {
                Ok(m) => m,
                Err(e) => {
                    self.warn("reading the message to continue failed", e);
                    None
                }
            });
        let message_id = match &extended {
            Some(m) => m.id.clone(),
            None => random_uuid(self.deps.clock.as_ref()),
        };
        let stream = Rc::new(TurnStream {
            agent: self.clone(),
            request_id: request_id.clone(),
            continuation: turn.continuation,
            observer: rpc.map(|r| r.observer.clone()),
            steps: std::cell::Cell::new(0),
        });
        self.begin_stream(request_id, &message_id, turn, abort.clone(), extended);
        // Only a fresh stream names its message: a client resuming a continuation keeps
        // appending to the message it has, as with Think.
        stream.emit(chunk::start((!turn.continuation).then_some(message_id.as_str()), None));
        self.run_approved_tools(&tools, &*stream, abort).await;

        let messages = self.history();
        self.skills.note_activations(&messages);
        let mut ctx = TurnContext {
            system: self.skills.system_prompt(&self.spec.system_prompt),
            messages: to_model_messages(&messages, &tools),
            tools,
            continuation: turn.continuation,
            body: turn.body.clone(),
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
        self.extensions_before_turn(&mut ctx).await;
        let clock = self.deps.clock.clone();
        let now = self.deps.clock.clone();
        let pause = self.deps.clock.clone();
        let tasks = self.deps.tasks.clone();
        let plan = TurnPlan {
            context: Some(self.session_step(model)),
            system: ctx.system,
            messages: ctx.messages,
            tools: ctx.tools,
            max_steps,
            tool_choice,
            new_id: Box::new(move || format!("approval_{}", random_id(clock.as_ref(), 16))),
            now: Some(Box::new(move || now.now_ms())),
            yield_now: Some(Rc::new(move || {
                let clock = pause.clone();
                Box::pin(async move { clock.sleep(0).await })
            })),
            spawn_call: Some(Rc::new(move |call| tasks.spawn(call))),
        };
        let approval = |name: &str, input: &Value| {
            self.spec.approval.needs_approval(name, input) || self.skills.needs_approval(name)
        };
        let outcome = engine::run(model.as_ref(), plan, &approval, stream.clone(), abort).await;
        let failure = match outcome {
            TurnOutcome::Finished(reason) => {
                stream.emit(chunk::finish(Some(finish_reason(reason))));
                None
            }
            TurnOutcome::AwaitingHuman => {
                stream.emit(chunk::finish(Some("tool-calls")));
                None
            }
            TurnOutcome::Aborted => {
                stream.emit(chunk::abort(None));
                self.end_stream(StreamStatus::Aborted).await;
                return None;
            }
            TurnOutcome::Interrupted { error, retry_after_ms } => {
                if may_recover && self.stream_has_output() {
                    crate::platform::log(&format!(
                        "think-rs: turn {request_id} interrupted ({error}); recovering"
                    ));
                    self.broadcast(&frames::ChatRecovering::started(Some(request_id)), None);
                    let message_id = self.end_interrupted_stream();
                    return Some(Interruption { message_id, retry_after_ms });
                }
                Some(match attempts {
                    0 => error,
                    n => format!("{error} (gave up after {n} recovery attempts)"),
                })
            }
            TurnOutcome::Failed(msg) => Some(msg),
        };
        let status = match failure {
            None => StreamStatus::Completed,
            Some(msg) => {
                self.broadcast_live(
                    &ChatResponse::error(request_id, &msg)
                        .in_continuation(turn.continuation)
                        .for_messages(&turn.message_ids),
                );
                if let Some(r) = rpc {
                    r.observer.on_error(&msg);
                }
                self.subagents.note_failure(&msg);
                StreamStatus::Error
            }
        };
        self.end_stream(status).await;
        None
    }

    /// Think 0.23's approval repair as a new user turn starts: an approved call an earlier
    /// message holds that never ran (no continuation ran it, and none is due) becomes an
    /// error, a denied one `output-denied`, so the call does not run turns later and the model
    /// is told. Every tab gets the repaired transcript.
    fn settle_passed_approvals(&self) {
        if self.rt.borrow().continuation.pending {
            return;
        }
        let mut messages = self.history();
        let changed = crate::protocol::repair::settle_passed_approvals(&mut messages);
        if changed.is_empty() {
            return;
        }
        for i in changed {
            self.save_message(messages[i].clone());
        }
        self.broadcast_transcript(None);
    }

    /// Whether the live stream's message holds any output (more than step markers).
    fn stream_has_output(&self) -> bool {
        let rt = self.rt.borrow();
        let Some(active) = rt.active.as_ref() else { return false };
        let acc = active.acc.borrow();
        acc.parts().iter().any(|p| part_type(p) != Some("step-start"))
    }

    /// Registers the new stream, tells parked connections to resume it, and opens its buffer.
    /// `extended` is the message a recovery continues, whose parts the answer starts from.
    fn begin_stream(
        &self,
        request_id: &str,
        message_id: &str,
        turn: &TurnRequest,
        abort: AbortSignal,
        extended: Option<UIMessage>,
    ) {
        if let Err(e) = self.streams().and_then(|b| {
            let extends = extended.is_some();
            b.start(
                request_id,
                message_id,
                turn.continuation,
                extends,
                &turn.message_ids,
                self.now(),
            )
        }) {
            self.warn("opening the stream buffer failed", e);
        }
        if turn.extend.is_some() {
            // The recovery's continuation runs now; a restart no longer owes it.
            self.note_pending_recovery(None);
        }
        // Wakes the object after a crash so the interrupted turn is recovered.
        self.deps.alarm.set(self.now() + super::HEARTBEAT_MS);
        let mut acc = StreamAccumulator::new(message_id, turn.continuation);
        if let Some(m) = extended {
            let metadata = match m.metadata {
                Some(Value::Object(map)) => Some(map),
                _ => None,
            };
            acc = acc.with_existing(m.parts, metadata);
        }
        let parked = {
            let mut rt = self.rt.borrow_mut();
            let requester =
                turn.origin.clone().filter(|o| rt.sockets.get(o).copied() == turn.origin_socket);
            // The requester's own probe stays parked: the stream that starts is the response
            // it reads already.
            let (kept, parked): (Vec<_>, Vec<_>) = std::mem::take(&mut rt.parked)
                .into_iter()
                .partition(|(conn, _)| requester.as_ref() == Some(conn));
            rt.parked = kept;
            rt.active = Some(ActiveStream {
                request_id: request_id.to_owned(),
                continuation: turn.continuation,
                owner: turn.owner.clone(),
                requester,
                awaiting_ack: parked.iter().map(|(conn, _)| conn.clone()).collect(),
                abort,
                acc: Rc::new(RefCell::new(acc)),
                chunks: Vec::new(),
                cursor: FlushCursor::default(),
                next_seq: 0,
                message_ids: turn.message_ids.clone(),
            });
            parked
        };
        for (conn, _) in parked {
            self.send(&conn, &StreamResuming::new(request_id, None));
        }
    }

    /// Closes the stream: flushes its buffer, sends `done` (with the outcome `status` says),
    /// persists the answer, broadcasts the transcript, and fires a continuation that was
    /// deferred while it ran.
    async fn end_stream(self: &Rc<Self>, status: StreamStatus) {
        self.close_stream(status, false);
        self.after_stream().await;
    }

    /// Ends a stream a transient model error cut: its tool calls still streaming settle as
    /// interrupted, the partial answer is persisted, and `done` says `recovering`. Returns
    /// the message's id, which the recovery continues.
    fn end_interrupted_stream(&self) -> String {
        self.close_stream(StreamStatus::Recovering, true)
    }

    fn close_stream(&self, status: StreamStatus, settle: bool) -> String {
        let Some(mut active) = self.rt.borrow_mut().active.take() else { return String::new() };
        if let Ok(buffer) = self.streams() {
            if let Err(e) = buffer
                .flush(&active.request_id, &mut active.chunks, &mut active.cursor)
                .and_then(|_| buffer.finish(&active.request_id, status, self.now()))
            {
                self.warn("closing the stream buffer failed", e);
            }
        }
        let done = frames::to_text(
            &ChatResponse::done(&active.request_id, status.outcome())
                .in_continuation(active.continuation)
                .for_messages(&active.message_ids),
        );
        self.deps.sockets.broadcast(&done, &|id| active.follows(id));
        // The stream is over: its message is moved out, not copied (it can hold a large input).
        let mut message = active.acc.borrow_mut().take_message();
        if settle {
            super::recovery::settle_streaming_calls(&mut message);
        }
        let id = message.id.clone();
        if message.parts.iter().any(|p| part_type(p) != Some("step-start")) {
            self.save_message(message);
        }
        // The offer ended with the stream: every tab, ACKed or not, follows the transcript
        // again. One that ACKs late is replayed the stored stream, then the transcript.
        self.broadcast_transcript(None);
        id
    }

    /// Sends a frame to every connection that follows the live stream.
    pub(super) fn broadcast_live(&self, frame: &impl serde::Serialize) {
        self.broadcast_live_text(&frames::to_text(frame));
    }

    /// [`Agent::broadcast_live`] for a frame already serialized.
    pub(super) fn broadcast_live_text(&self, text: &str) {
        let rt = self.rt.borrow();
        self.deps.sockets.broadcast(text, &|id| rt.active.as_ref().is_none_or(|a| a.follows(id)));
    }

    /// Runs the calls a human approved in the last assistant message before the model is
    /// called again; their results patch that earlier message.
    async fn run_approved_tools(&self, tools: &ToolSet, sink: &dyn ChunkSink, abort: &AbortSignal) {
        let messages = self.history();
        let Some(leaf) = leaf_assistant(&messages) else { return };
        let approved: Vec<(String, String, Value)> = leaf
            .parts
            .iter()
            .filter(|p| state_of(p) == Some("approval-responded"))
            .filter(|p| p.pointer("/approval/approved").and_then(Value::as_bool) == Some(true))
            .filter_map(|p| {
                Some((
                    tool_call_id_of(p)?.to_owned(),
                    tool_name_of(p)?.to_owned(),
                    p.get("input").cloned().unwrap_or(json!({})),
                ))
            })
            .collect();
        for (id, name, input) in approved {
            let Some(tool) = tools.get(&name).cloned() else {
                sink.emit(chunk::tool_output_error(
                    &id,
                    &format!("Tool {name} is no longer available."),
                ));
                continue;
            };
            let ctx = ToolContext { tool_call_id: id.clone(), tool_name: name.clone() };
            match abort.run(tool.execute(input, &ctx)).await {
                Some(Ok(output)) => sink.emit(chunk::tool_output_available(&id, output)),
                Some(Err(e)) => sink.emit(chunk::tool_output_error(&id, &e.to_string())),
                None => sink.emit(chunk::tool_output_error(&id, "The tool call was aborted.")),
            }
        }
    }

    /// Applies a tool update to an earlier persisted message (first write wins) and tells the tabs.
    pub(super) fn apply_to_stored(&self, update: &ToolPartUpdate) -> bool {
        let mut messages = self.history();
        match apply_to_messages(&mut messages, update) {
            Some(i) => {
                self.save_message(messages[i].clone());
                self.broadcast(&MessageUpdated::new(&messages[i]), None);
                true
            }
            None => false,
        }
    }
}

fn finish_reason(reason: crate::model::FinishReason) -> &'static str {
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

/// Streams one turn's chunks to every following tab (and a programmatic caller) while
/// accumulating the answer and buffering the chunks for resumes.
struct TurnStream {
    agent: Rc<Agent>,
    request_id: String,
    continuation: bool,
    observer: Option<Rc<dyn TurnObserver>>,
    /// Steps finished so far, for the extensions' `onStepFinish`.
    steps: std::cell::Cell<usize>,
}

impl ChunkSink for TurnStream {
    fn emit(&self, chunk: Value) {
        self.emit_ref(&chunk);
    }

    /// Each chunk is held as few times as possible, since one can carry a whole file (a
    /// `write`'s input): the frame's text is written straight from the value and dropped
    /// once sent, then the chunk's own text (for the buffer and a programmatic caller),
    /// each in a buffer of its exact size, and only then does the answer being built take
    /// its copy, so no two of these exist at once.
    fn emit_ref(&self, chunk: &Value) {
        let Some((acc, seq)) = self.next_chunk() else { return };
        if chunk.get("type").and_then(Value::as_str) == Some("finish-step") {
            self.steps.set(self.steps.get() + 1);
            self.agent.extensions_step_finished(self.steps.get());
        }
        let frame = frames::chat_chunk_frame_text(&self.request_id, chunk, seq, self.continuation);
        self.agent.broadcast_live_text(&frame);
        drop(frame);
        self.agent.subagents.note_chunk(chunk);
        self.buffer(crate::protocol::json::to_string_exact(chunk), is_milestone(chunk));
        let action = acc.borrow_mut().apply(chunk);
        if let ChunkAction::CrossMessageToolUpdate { tool_call_id, update } = action {
            self.agent.apply_to_stored(&ToolPartUpdate::cross_message(tool_call_id, update));
        }
    }

    /// The frame and the buffered text are written with the model's argument text in place
    /// of the input, and the answer being built keeps that shared text: the input is not
    /// held parsed here at all. A sub-agent run, which logs every chunk as a tree, takes the
    /// parsed chunk instead.
    fn emit_input_available(&self, chunk: &Value, arguments: &ToolArguments) {
        let (Some(object), Ok(raw), None) = (
            chunk.as_object(),
            serde_json::from_str::<&RawValue>(arguments.text()),
            self.agent.subagents.current(),
        ) else {
            let mut chunk = chunk.clone();
            chunk["input"] = arguments.to_value();
            return self.emit_ref(&chunk);
        };
        let Some((acc, seq)) = self.next_chunk() else { return };
        let written = WithRawMember { object, key: "input", raw };
        let frame =
            frames::chat_chunk_frame_text(&self.request_id, &written, seq, self.continuation);
        self.agent.broadcast_live_text(&frame);
        drop(frame);
        self.buffer(crate::protocol::json::to_string_exact(&written), true);
        acc.borrow_mut().apply_input_available(chunk, arguments.clone());
    }
}

impl TurnStream {
    /// The live stream's answer and the `seq` of the chunk about to be sent (every chunk is
    /// sent once and buffered once, so its `seq` is its index in the stored stream).
    fn next_chunk(&self) -> Option<(Rc<RefCell<StreamAccumulator>>, u64)> {
        let mut rt = self.agent.rt.borrow_mut();
        let active = rt.active.as_mut()?;
        let seq = active.next_seq;
        active.next_seq += 1;
        Some((active.acc.clone(), seq))
    }

    /// Hands a chunk's text to a programmatic caller and to the stream buffer, which
    /// writes a large one (or a milestone) to SQLite at once.
    fn buffer(&self, body: String, milestone: bool) {
        if let Some(observer) = &self.observer {
            observer.on_event(&body);
        }
        let mut rt = self.agent.rt.borrow_mut();
        let Some(active) = rt.active.as_mut() else { return };
        let len = body.len();
        active.chunks.push(body);
        if active.cursor.note(active.chunks.len(), len) || milestone {
            let flushed = StreamBuffer::new(self.agent.deps.sql.as_ref()).flush(
                &self.request_id,
                &mut active.chunks,
                &mut active.cursor,
            );
            if let Err(e) = flushed {
                self.agent.warn("buffering stream chunks failed", e);
            }
        }
    }
}

/// Chunks after which the buffer is flushed at once, so a crash loses no tool activity.
fn is_milestone(chunk: &Value) -> bool {
    matches!(
        chunk.get("type").and_then(Value::as_str),
        Some(
            "start"
                | "tool-input-available"
                | "tool-output-available"
                | "tool-output-error"
                | "tool-approval-request"
                | "tool-input-error"
                | "finish-step"
                | "finish"
        )
    )
}
