//! Agents as tools: a child agent runs as one streamed, durable tool call of its parent.
//!
//! The child is an agent of its own (transcript, workspace, tools, system prompt) in another
//! instance of the same Durable Object class, named from the parent's name and the tool call
//! id, and reached through a [`ChildLink`] (Durable Object RPC in the Worker). The parent
//! registers each run under `agent-tool:<toolCallId>` ([`registry`]), starts the child, and
//! tails the child's event log ([`child`]) from a cursor, forwarding every event to its tabs as
//! `agent-tool-event` frames ([`events`]). Because the log lives in the child and the run id is
//! stable, a parent that restarts tails the same child again instead of starting another.
//! Cancelling the parent's call cancels the child (and so its children); approvals a child
//! waits for are answered from the parent's tabs and routed down, to any depth.

pub mod child;
pub mod events;
pub mod registry;
pub mod setting;
mod tool;

#[cfg(test)]
mod tests;

use futures::future::LocalBoxFuture;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use async_trait::async_trait;
use futures::channel::oneshot;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::platform::{Clock, Sockets, Tasks};
use crate::store::{Sql, StoreError};

use child::ChildLog;
use events::{Batch, EventKind, LogEntry, Outcome, RunFrames};
use registry::{Reattach, Registry, Run};

pub use tool::AgentToolCall;

/// At most this many children of one parent run at once by default; more wait.
pub const DEFAULT_MAX_CONCURRENT: usize = 4;
/// How long one tail call may wait in the child for a new event.
pub const POLL_WAIT_MS: u64 = 5_000;
/// How long the parent waits before asking again a child it could not reach.
pub const RETRY_MS: u64 = 1_000;

/// Builds the child's spec (`S` is the agent's spec type, `think_core::agent::AgentSpec`).
/// A closure rather than `fn(&Env)`: it captures what it needs (settings, the Worker's
/// `Env`), and the same tool is host-testable.
pub type ChildSpec<S> = Rc<dyn Fn() -> S>;

/// A child agent offered to the model as a tool. This layer runs the child through a
/// [`ChildLink`] and never reads its spec; the agent builds the child from `child`.
pub struct AgentTool<S> {
    /// The tool's name.
    pub name: String,
    /// What the child does, for the model to decide when to hand it a task.
    pub description: String,
    /// JSON Schema of the input; the child gets the input as its user message (the `task`
    /// text when the input is `{task}`, else the input JSON).
    pub input_schema: Value,
    /// With a schema, the child's final answer must be JSON valid against it.
    pub output_schema: Option<Value>,
    /// The child's spec.
    pub child: ChildSpec<S>,
}

impl<S> Clone for AgentTool<S> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
            child: self.child.clone(),
        }
    }
}

impl<S> AgentTool<S> {
    /// An agent tool named `name` whose child is built by `child`.
    pub fn new(
        name: &str,
        description: &str,
        input_schema: Value,
        child: impl Fn() -> S + 'static,
    ) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema,
            output_schema: None,
            child: Rc::new(child),
        }
    }

    /// Requires the child's final answer to be JSON valid against `schema`.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// The shipped agent's generic `subagent {task}` tool.
    pub fn subagent(child: impl Fn() -> S + 'static) -> Self {
        Self::new(
            "subagent",
            "Hand a self-contained task to a sub-agent that works on it with its own fresh \
             conversation, the same model and workspace tools, and returns only its final answer. \
             Use it when the task's intermediate steps (searching, reading many files, trying \
             things) should not fill this conversation; describe the task completely, since the \
             sub-agent sees nothing else of this conversation.",
            json!({
                "type": "object",
                "properties": {"task": {"type": "string", "description": "The complete task, with everything the sub-agent needs to know."}},
                "required": ["task"],
                "additionalProperties": false
            }),
            child,
        )
    }
}

/// The limits a parent applies to its children.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentToolLimits {
    /// How many children run at once; more wait for a slot.
    pub max_concurrent: usize,
    /// How long a child may make no progress before it is reported `interrupted`.
    pub stall_ms: f64,
}

impl Default for AgentToolLimits {
    fn default() -> Self {
        Self { max_concurrent: DEFAULT_MAX_CONCURRENT, stall_ms: events::STALL_MS }
    }
}

/// What the parent sends a child to start a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartRequest {
    /// `agent-tool:<toolCallId>`.
    pub run_id: String,
    /// The child instance's name (its own children are named from it).
    pub child_name: String,
    /// The parent instance's name.
    pub parent_name: String,
    /// The agent-tool names from the root agent down to the child: its spec.
    pub tool_path: Vec<String>,
    /// The child's user message.
    pub input: String,
}

/// Why the parent could not talk to a child.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LinkError {
    /// This platform cannot reach other instances.
    Unavailable(String),
    /// The call reached nothing or failed.
    Failed(String),
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkError::Unavailable(m) => write!(f, "child agents are unavailable: {m}"),
            LinkError::Failed(m) => write!(f, "the child agent could not be reached: {m}"),
        }
    }
}

impl std::error::Error for LinkError {}

/// How a parent reaches the instances of its children.
#[async_trait(?Send)]
pub trait ChildLink {
    /// Starts `req` in instance `child` (a repeated start of the same run is a no-op).
    async fn start(&self, child: &str, req: &StartRequest) -> Result<(), LinkError>;
    /// The log entries of `run_id` after `cursor`, waiting up to `wait_ms` for one.
    async fn events(
        &self,
        child: &str,
        run_id: &str,
        cursor: i64,
        wait_ms: u64,
    ) -> Result<Batch, LinkError>;
    /// Cancels the run (and so the child's own children).
    async fn cancel(&self, child: &str, run_id: &str) -> Result<(), LinkError>;
    /// Hands a human's answer to an approval the child (or one of its children) waits for;
    /// false when none of them waits for `tool_call_id`.
    async fn approve(
        &self,
        child: &str,
        tool_call_id: &str,
        approved: bool,
    ) -> Result<bool, LinkError>;
    /// The transcript (UI messages) of the child, or with `path` of the descendant it names
    /// from the child down (each a tool call id of a run its parent has); `Null` when one of
    /// them has no such run.
    async fn messages(&self, child: &str, path: &[String]) -> Result<Value, LinkError>;
    /// Tells the child that the parent recorded the run's outcome, so it drops the run's
    /// log but its terminal event ([`child::ChildLog::release`]).
    async fn release(&self, child: &str, run_id: &str) -> Result<(), LinkError>;
}

/// The `<child>` segments of a drill-in path `…/sub/<child>[/sub/<grandchild>…]/get-messages`,
/// if `path` is one.
pub fn drill_in_segments(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_suffix("/get-messages")?;
    let (_, subs) = rest.split_once("/sub/")?;
    let segments: Vec<String> = subs.split("/sub/").map(str::to_owned).collect();
    segments.iter().all(|s| !s.is_empty() && !s.contains('/')).then_some(segments)
}

/// How the child's last turn ended, for its run's terminal event.
#[derive(Debug, Clone, Default, PartialEq)]
enum TurnEnd {
    #[default]
    Normal,
    Aborted,
    Failed(String),
}

/// A counting semaphore: at most `max` holders; the rest wait in order.
struct Slots {
    max: usize,
    used: Cell<usize>,
    waiting: RefCell<VecDeque<oneshot::Sender<()>>>,
}

/// A held slot; dropping it hands it to the next waiter.
struct Slot(Rc<Slots>);

impl Slots {
    async fn acquire(self: &Rc<Self>) -> Slot {
        if self.used.get() < self.max {
            self.used.set(self.used.get() + 1);
            return Slot(self.clone());
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.borrow_mut().push_back(tx);
        // The slot is handed over by the holder that leaves: `used` is unchanged.
        let _ = rx.await;
        Slot(self.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        loop {
            let next = self.0.waiting.borrow_mut().pop_front();
            match next {
                Some(tx) => {
                    if tx.send(()).is_ok() {
                        return;
                    }
                }
                None => {
                    self.0.used.set(self.0.used.get() - 1);
                    return;
                }
            }
        }
    }
}

/// The platform pieces the agent-tool runtime uses.
pub struct SubagentDeps {
    /// The instance's SQLite (registry and child log).
    pub sql: Rc<dyn Sql>,
    /// The parent's tabs.
    pub sockets: Rc<dyn Sockets>,
    /// Time and sleeps.
    pub clock: Rc<dyn Clock>,
    /// Background work (cancels, routed approvals).
    pub tasks: Rc<dyn Tasks>,
}

/// One instance's agent-tool runtime: as a parent (its children's runs, their frames for
/// the tabs, the approvals they wait for) and as a child (its own run and its log).
pub struct Subagents {
    deps: SubagentDeps,
    limits: AgentToolLimits,
    link: RefCell<Option<Rc<dyn ChildLink>>>,
    slots: Rc<Slots>,
    /// The frames of the runs being followed now, by parent tool call id, for replays.
    live: RefCell<BTreeMap<String, RunFrames>>,
    /// Tool calls of descendants waiting for approval → the child through which they came.
    approvals: RefCell<BTreeMap<String, String>>,
    /// As a child: the run in progress.
    current: RefCell<Option<String>>,
    /// A turn has streamed for the current run: only then can an idle child be done.
    worked: Cell<bool>,
    turn_end: RefCell<TurnEnd>,
    /// Tail calls waiting for the next log entry.
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
}

impl Subagents {
    /// The runtime over `deps`; creates its tables and picks up a run a restart interrupted.
    pub fn new(deps: SubagentDeps, limits: AgentToolLimits) -> Rc<Self> {
        let tables = Registry::create_table(deps.sql.as_ref())
            .and_then(|_| ChildLog::create_tables(deps.sql.as_ref()));
        if let Err(e) = tables {
            crate::platform::log(&format!("think-rs: creating the agent-tool tables failed: {e}"));
        }
        let log = ChildLog::new(deps.sql.as_ref());
        let current = log.running().ok().flatten();
        let worked = current.as_deref().is_some_and(|run| {
            log.entries(run, 0).is_ok_and(|e| e.iter().any(|e| e.sequence.is_some_and(|s| s > 0)))
        });
        Rc::new(Self {
            slots: Rc::new(Slots {
                max: limits.max_concurrent.max(1),
                used: Cell::new(0),
                waiting: RefCell::new(VecDeque::new()),
            }),
            deps,
            limits,
            link: RefCell::new(None),
            live: RefCell::new(BTreeMap::new()),
            approvals: RefCell::new(BTreeMap::new()),
            current: RefCell::new(current),
            worked: Cell::new(worked),
            turn_end: RefCell::new(TurnEnd::Normal),
            waiters: RefCell::new(Vec::new()),
        })
    }

    /// Sets how this instance reaches its children (the Worker glue's DO RPC link).
    pub fn set_link(&self, link: Rc<dyn ChildLink>) {
        *self.link.borrow_mut() = Some(link);
    }

    fn link(&self) -> Option<Rc<dyn ChildLink>> {
        self.link.borrow().clone()
    }

    fn registry(&self) -> Registry<'_> {
        Registry::new(self.deps.sql.as_ref())
    }

    fn log(&self) -> ChildLog<'_> {
        ChildLog::new(self.deps.sql.as_ref())
    }

    fn now(&self) -> f64 {
        self.deps.clock.now_ms()
    }

    fn warn(&self, what: &str, e: impl std::fmt::Display) {
        crate::platform::log(&format!("think-rs: {what}: {e}"));
    }

    // ---- parent side -------------------------------------------------------------------

    /// Sends a frame to every tab, and when this instance is itself a child, into its log
    /// so that its own parent relays it further up. A frame that ends a run is kept for the
    /// tabs that connect later ([`Self::replay_to`]).
    fn broadcast(&self, frame: &Value) {
        let text = frame.to_string();
        self.deps.sockets.broadcast(&text, &|_| true);
        if frame.get("event").and_then(events::kind_of).is_some_and(EventKind::is_terminal) {
            if let Err(e) = self.registry().note_end(frame, self.now()) {
                self.warn("keeping a run's terminal event failed", e);
            }
        }
        let current = self.current.borrow().clone();
        if let Some(run) = current {
            if let Err(e) = self.log().append_frame(&run, frame) {
                self.warn("relaying a child's event failed", e);
            }
            self.wake();
        }
    }

    /// Replays, to a tab that just connected, the events so far of every run being followed,
    /// then the terminal event of the latest runs that ended: a tab that was away when one
    /// ended (a crash, a dropped socket) still shows a run it saw start as running, and its
    /// client drops what it already has by `(parentToolCallId, runId, sequence)` (and ignores
    /// the end of a run it never saw start).
    pub fn replay_to(&self, conn: &str) {
        let mut frames: Vec<Value> =
            self.live.borrow().values().flat_map(|r| r.replay().collect::<Vec<_>>()).collect();
        match self.registry().ends() {
            Ok(ends) => frames.extend(ends.into_iter().map(|mut f| {
                f["replay"] = Value::Bool(true);
                f
            })),
            Err(e) => self.warn("reading the ended runs failed", e),
        }
        for frame in frames {
            self.deps.sockets.send(conn, &frame.to_string());
        }
    }

    /// Whether `tool_call_id` is a registered run (recovery leaves its part to [`Self::reattach`]).
    pub fn is_run(&self, tool_call_id: &str) -> bool {
        matches!(self.registry().get(tool_call_id), Ok(Some(_)))
    }

    /// After a crash: the output of the agent-tool call `tool_call_id`, by tailing its child
    /// again when it may still run (never starting it again); `None` when it is no run.
    /// `output_schema` is the call's tool's, when the tool is still offered.
    pub async fn reattach(
        self: &Rc<Self>,
        output_schema: Option<&Value>,
        tool_call_id: &str,
    ) -> Option<Value> {
        match self.registry().reattach(tool_call_id) {
            Ok(Reattach::NotARun) => None,
            Ok(Reattach::Settled(output)) => Some(output),
            Ok(Reattach::Tail(run)) => Some(self.follow_run(output_schema, &run, None).await),
            Err(e) => {
                self.warn("reading the agent-tool registry failed", e);
                None
            }
        }
    }

    /// After a crash, when the call's agent tool is switched off: the output of the call
    /// `tool_call_id` without following its child. A run that may still go is recorded as
    /// failed with `reason` (the tabs are told) and its child is told to stop; one that ended
    /// keeps its recorded output. `None` when it is no run.
    pub fn abandon(&self, tool_call_id: &str, reason: &str) -> Option<Value> {
        let run = match self.registry().reattach(tool_call_id) {
            Ok(Reattach::NotARun) => return None,
            Ok(Reattach::Settled(output)) => return Some(output),
            Ok(Reattach::Tail(run)) => run,
            Err(e) => {
                self.warn("reading the agent-tool registry failed", e);
                return None;
            }
        };
        let frame = self.local_event(&run.tool_call_id, events::failed(EventKind::Error, reason));
        self.broadcast(&frame);
        self.live.borrow_mut().remove(&run.tool_call_id);
        if let Some(link) = self.link() {
            let (child, id) = (run.child_name.clone(), run.run_id.clone());
            self.deps.tasks.spawn(Box::pin(async move {
                if let Err(e) = link.cancel(&child, &id).await {
                    crate::platform::log(&format!("think-rs: stopping child {child} failed: {e}"));
                }
            }));
        }
        let outcome = Outcome::Failed { kind: EventKind::Error, error: reason.to_owned() };
        Some(self.record(&run, &outcome))
    }

    /// Runs a registered run to its end with a slot held, and records the outcome.
    async fn follow_run(
        self: &Rc<Self>,
        output_schema: Option<&Value>,
        run: &Run,
        slot: Option<Slot>,
    ) -> Value {
        let Some(link) = self.link() else {
            let outcome = Outcome::Failed {
                kind: EventKind::Error,
                error: "Child agents are not available on this platform.".into(),
            };
            return self.record(run, &outcome);
        };
        let _slot = match slot {
            Some(slot) => slot,
            None => self.slots.acquire().await,
        };
        let guard =
            CancelOnDrop { subagents: self.clone(), run: run.clone(), armed: Cell::new(true) };
        self.live.borrow_mut().entry(run.tool_call_id.clone()).or_default();
        let (outcome, ended) = self.tail(&link, run).await;
        guard.armed.set(false);
        // A run the child did not end (it stalled, or has no record of the run) ends here,
        // so the tabs following it see it end too.
        if let (false, Outcome::Failed { kind, error }) = (ended, &outcome) {
            let frame = self.local_event(&run.tool_call_id, events::failed(*kind, error));
            self.broadcast(&frame);
        }
        let outcome = match (outcome, output_schema) {
            (Outcome::Answer(answer), Some(schema)) => tool::validate_answer(answer, schema),
            (outcome, _) => outcome,
        };
        if !ended && matches!(outcome, Outcome::Failed { kind: EventKind::Interrupted, .. }) {
            let (link, child, id) = (link.clone(), run.child_name.clone(), run.run_id.clone());
            self.deps.tasks.spawn(Box::pin(async move {
                let _ = link.cancel(&child, &id).await;
            }));
        }
        self.live.borrow_mut().remove(&run.tool_call_id);
        let output = self.record(run, &outcome);
        if !matches!(outcome, Outcome::Failed { kind: EventKind::Interrupted, .. }) {
            let (child, id) = (run.child_name.clone(), run.run_id.clone());
            self.deps.tasks.spawn(Box::pin(async move {
                if let Err(e) = link.release(&child, &id).await {
                    crate::platform::log(&format!(
                        "think-rs: releasing the log of child {child} failed: {e}"
                    ));
                }
            }));
        }
        output
    }

    fn local_event(&self, tool_call_id: &str, event: Value) -> Value {
        self.live
            .borrow_mut()
            .entry(tool_call_id.to_owned())
            .or_default()
            .local(tool_call_id, events::for_clients(event, &registry::run_id(tool_call_id), None))
    }

    fn record(&self, run: &Run, outcome: &Outcome) -> Value {
        if let Err(e) = self.registry().finish(&run.tool_call_id, outcome, self.now()) {
            self.warn("recording an agent-tool run failed", e);
        }
        outcome.to_tool_output()
    }

    /// Follows the child's log from its start to its terminal event, forwarding every entry;
    /// the outcome, and whether it came with the child's terminal event (else the parent
    /// gave up on the child).
    async fn tail(&self, link: &Rc<dyn ChildLink>, run: &Run) -> (Outcome, bool) {
        let mut cursor = 0;
        let mut last_progress = self.now();
        let mut started_late = false;
        let wait = POLL_WAIT_MS.min((self.limits.stall_ms / 2.0).max(1.0) as u64);
        loop {
            match link.events(&run.child_name, &run.run_id, cursor, wait).await {
                Ok(batch) if batch.unknown => match (&run.request, started_late) {
                    // Registered but never started (it waited for a slot when the parent
                    // crashed): starting it now is its first start.
                    (Some(req), false) => {
                        started_late = true;
                        if let Err(e) = link.start(&run.child_name, req).await {
                            self.warn("starting a child after a restart failed", &e);
                        }
                    }
                    _ => {
                        let outcome = Outcome::Failed {
                            kind: EventKind::Error,
                            error: "The child agent has no record of this run.".into(),
                        };
                        return (outcome, false);
                    }
                },
                Ok(batch) => {
                    if !batch.entries.is_empty() || batch.waiting {
                        last_progress = self.now();
                    }
                    for entry in batch.entries {
                        cursor = entry.cursor;
                        if let Some(outcome) = self.forward(run, entry) {
                            return (outcome, true);
                        }
                    }
                }
                Err(e) => {
                    self.warn("tailing a child agent failed", &e);
                    self.deps.clock.sleep(RETRY_MS).await;
                }
            }
            if events::stalled(self.now(), last_progress, self.limits.stall_ms) {
                let error = format!(
                    "The child agent made no progress for {} s.",
                    (self.limits.stall_ms / 1000.0).round()
                );
                return (Outcome::Failed { kind: EventKind::Interrupted, error }, false);
            }
        }
    }

    /// Sends one log entry of the child to the tabs; the outcome when it ends the run.
    fn forward(&self, run: &Run, entry: LogEntry) -> Option<Outcome> {
        if let Some(frame) = entry.frame {
            if let Some(call) = frame.get("event").and_then(events::approval_request_call) {
                self.approvals.borrow_mut().insert(call.to_owned(), run.child_name.clone());
            }
            if let Some(r) = self.live.borrow_mut().get_mut(&run.tool_call_id) {
                r.relayed(frame.clone());
            }
            self.broadcast(&frame);
            return None;
        }
        let event = entry.event?;
        if let Some(call) = events::approval_request_call(&event) {
            self.approvals.borrow_mut().insert(call.to_owned(), run.child_name.clone());
        }
        let outcome = Outcome::from_event(&event);
        let event = events::for_clients(event, &run.run_id, Some(&run.tool_name));
        let frame = self.live.borrow_mut().entry(run.tool_call_id.clone()).or_default().own(
            &run.tool_call_id,
            entry.sequence.unwrap_or(0),
            event,
        );
        self.broadcast(&frame);
        outcome
    }

    /// Routes a human's answer for `tool_call_id` to the child it came through; false when
    /// no child of this instance waits for it.
    pub fn route_approval(&self, tool_call_id: &str, approved: bool) -> bool {
        let Some(child) = self.approvals.borrow_mut().remove(tool_call_id) else { return false };
        let Some(link) = self.link() else { return false };
        let id = tool_call_id.to_owned();
        self.deps.tasks.spawn(Box::pin(async move {
            if let Err(e) = link.approve(&child, &id, approved).await {
                crate::platform::log(&format!(
                    "think-rs: routing an approval to {child} failed: {e}"
                ));
            }
        }));
        true
    }

    /// The child shown at `/sub/<segment>/get-messages`: only a run this parent has.
    pub fn child_for(&self, segment: &str) -> Result<Option<String>, StoreError> {
        Ok(self.registry().by_segment(segment)?.map(|r| r.child_name))
    }

    /// The transcript of the descendant `path` names (tool call ids from this instance's
    /// children down), for the drill-in route; `Null` unless each of them has that run.
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn child_messages<'a>(
        &'a self,
        path: &'a [String],
    ) -> LocalBoxFuture<'a, Result<Value, LinkError>> {
        Box::pin(self.child_messages_inner(path))
    }

    /// The body of [`Self::child_messages`].
    async fn child_messages_inner(&self, path: &[String]) -> Result<Value, LinkError> {
        let Some((first, rest)) = path.split_first() else { return Ok(Value::Null) };
        let child = match self.child_for(first) {
            Ok(Some(child)) => child,
            Ok(None) => return Ok(Value::Null),
            Err(e) => return Err(LinkError::Failed(e.to_string())),
        };
        match self.link() {
            Some(link) => link.messages(&child, rest).await,
            None => Err(LinkError::Unavailable("no link".into())),
        }
    }

    /// Forgets every run (a chat clear).
    pub fn clear(&self) {
        if let Err(e) = self.registry().clear() {
            self.warn("clearing the agent-tool registry failed", e);
        }
        self.approvals.borrow_mut().clear();
    }

    // ---- child side --------------------------------------------------------------------

    /// Takes a run; false when this instance already has it (then nothing is started again).
    pub fn begin(&self, req: &StartRequest) -> Result<bool, StoreError> {
        let log = self.log();
        if !log.start(&req.run_id, &req.parent_name, &req.tool_path, self.now())? {
            return Ok(false);
        }
        log.append_event(&req.run_id, &events::started())?;
        *self.current.borrow_mut() = Some(req.run_id.clone());
        self.worked.set(false);
        *self.turn_end.borrow_mut() = TurnEnd::Normal;
        self.wake();
        Ok(true)
    }

    /// The run this instance works for now, if any.
    pub fn current(&self) -> Option<String> {
        self.current.borrow().clone()
    }

    /// Logs one chunk of the child's stream.
    pub fn note_chunk(&self, chunk: &Value) {
        let Some(run) = self.current() else { return };
        self.worked.set(true);
        match chunk.get("type").and_then(Value::as_str) {
            Some("start") => *self.turn_end.borrow_mut() = TurnEnd::Normal,
            Some("abort") => *self.turn_end.borrow_mut() = TurnEnd::Aborted,
            _ => {}
        }
        if let Err(e) = self.log().append_event(&run, &events::chunk(chunk)) {
            self.warn("logging a child's chunk failed", e);
        }
        self.wake();
    }

    /// Notes that the child's turn failed with `error`.
    pub fn note_failure(&self, error: &str) {
        if self.current().is_some() {
            *self.turn_end.borrow_mut() = TurnEnd::Failed(error.to_owned());
        }
    }

    /// Ends the run once the child is idle: with `answer` (its final text), or as its last
    /// turn ended (aborted, failed). `cancelled` ends it as aborted whatever happened.
    pub fn settle(&self, answer: Option<String>, cancelled: bool) {
        if !cancelled && !self.worked.get() {
            return;
        }
        let Some(run) = self.current.borrow_mut().take() else { return };
        let end = if cancelled { TurnEnd::Aborted } else { self.turn_end.borrow().clone() };
        let event = match (end, answer) {
            (TurnEnd::Aborted, _) => {
                events::failed(EventKind::Aborted, "The child agent was cancelled.")
            }
            (TurnEnd::Failed(e), _) => events::failed(EventKind::Error, &e),
            (TurnEnd::Normal, Some(text)) => events::finished(&Value::String(text)),
            (TurnEnd::Normal, None) => {
                events::failed(EventKind::Error, "The child agent ended without an answer.")
            }
        };
        let log = self.log();
        if let Err(e) = log.append_event(&run, &event).and_then(|_| log.finish(&run)) {
            self.warn("ending a child run failed", e);
        }
        self.wake();
    }

    /// The parent recorded `run_id`'s outcome: its log is dropped but the terminal event.
    pub fn release(&self, run_id: &str) {
        if let Err(e) = self.log().release(run_id) {
            self.warn("releasing a child's log failed", e);
        }
    }

    /// One tail call: the entries of `run_id` after `cursor`, waiting up to `wait_ms` for
    /// one while the run lives. `waiting` says whether the child waits for a human.
    pub async fn tail_batch(
        &self,
        run_id: &str,
        cursor: i64,
        wait_ms: u64,
        waiting: impl Fn() -> bool,
    ) -> Batch {
        let log = self.log();
        if !log.has(run_id).unwrap_or(false) {
            return Batch { unknown: true, ..Batch::default() };
        }
        let read = |log: &ChildLog<'_>| {
            log.entries(run_id, cursor).unwrap_or_else(|e| {
                self.warn("reading a child's log failed", e);
                Vec::new()
            })
        };
        let mut entries = read(&log);
        // Always wait when there is nothing new, so a parent never spins on empty answers.
        if entries.is_empty() {
            let (tx, rx) = oneshot::channel();
            self.waiters.borrow_mut().push(tx);
            let timeout = self.deps.clock.sleep(wait_ms);
            futures::pin_mut!(timeout);
            let _ = futures::future::select(rx, timeout).await;
            entries = read(&log);
        }
        Batch { entries, waiting: waiting(), unknown: false }
    }

    fn wake(&self) {
        for tx in self.waiters.borrow_mut().drain(..) {
            let _ = tx.send(());
        }
    }
}

/// Cancels a child whose parent call ends before the child (the parent's turn was aborted and
/// the tool call dropped), so the cancel cascades down.
struct CancelOnDrop {
    subagents: Rc<Subagents>,
    run: Run,
    armed: Cell<bool>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed.get() {
            return;
        }
        let s = &self.subagents;
        let outcome = Outcome::Failed {
            kind: EventKind::Aborted,
            error: "The parent cancelled the call.".into(),
        };
        let frame = s.local_event(
            &self.run.tool_call_id,
            events::failed(EventKind::Aborted, "The parent cancelled the call."),
        );
        s.broadcast(&frame);
        s.live.borrow_mut().remove(&self.run.tool_call_id);
        s.record(&self.run, &outcome);
        if let Some(link) = s.link() {
            let (child, id) = (self.run.child_name.clone(), self.run.run_id.clone());
            s.deps.tasks.spawn(Box::pin(async move {
                if let Err(e) = link.cancel(&child, &id).await {
                    crate::platform::log(&format!(
                        "think-rs: cancelling child {child} failed: {e}"
                    ));
                }
            }));
        }
    }
}
