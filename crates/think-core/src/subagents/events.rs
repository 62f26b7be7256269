//! The events of one child run, as the child logs them and the parent's tabs receive them:
//! their kinds, the entries of the child's log (own events and frames relayed from deeper
//! children), the outcome a terminal event carries, and the rules that turn a silent or
//! finished child into the tool's result.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::protocol::frames::AgentToolEvent;

/// How long a child may make no progress before its run is reported `interrupted`.
pub const STALL_MS: f64 = 120_000.0;

/// What happened in a child run; the `kind` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// The child took the task.
    Started,
    /// One UIMessageChunk of the child's stream.
    Chunk,
    /// The child gave its final answer.
    Finished,
    /// The child's turn failed.
    Error,
    /// The child was cancelled.
    Aborted,
    /// The child made no progress for [`STALL_MS`] (or could not be reached that long).
    Interrupted,
}

impl EventKind {
    /// Whether an event of this kind ends the run.
    pub fn is_terminal(self) -> bool {
        !matches!(self, EventKind::Started | EventKind::Chunk)
    }

    /// The `status` word of a failed run's result.
    fn status(self) -> &'static str {
        match self {
            EventKind::Aborted => "aborted",
            EventKind::Interrupted => "interrupted",
            _ => "error",
        }
    }
}

/// `{kind:"started"}`.
pub fn started() -> Value {
    json!({"kind": EventKind::Started})
}

/// `{kind:"chunk", chunk}`.
pub fn chunk(chunk: &Value) -> Value {
    json!({"kind": EventKind::Chunk, "chunk": chunk})
}

/// `{kind:"finished", result}`: the child's final answer.
pub fn finished(result: &Value) -> Value {
    json!({"kind": EventKind::Finished, "result": result})
}

/// `{kind:"error"|"aborted"|"interrupted", error}`.
pub fn failed(kind: EventKind, error: &str) -> Value {
    json!({"kind": kind, "error": error})
}

/// The event as the tabs receive it: think-rs's own fields plus those `agents`'
/// `useAgentToolEvents` reads: `runId` on every event, `agentType`/`order` on `started`, the
/// chunk as a JSON string `body`, the answer as a string `summary`, and `reason` on `aborted`.
pub fn for_clients(mut event: Value, run_id: &str, agent_type: Option<&str>) -> Value {
    let kind = kind_of(&event);
    let Some(obj) = event.as_object_mut() else { return event };
    obj.insert("runId".into(), Value::String(run_id.to_owned()));
    match kind {
        Some(EventKind::Started) => {
            if let Some(agent_type) = agent_type {
                obj.insert("agentType".into(), Value::String(agent_type.to_owned()));
            }
            obj.insert("order".into(), json!(0));
        }
        Some(EventKind::Chunk) => {
            let body = obj.get("chunk").map(Value::to_string).unwrap_or_default();
            obj.insert("body".into(), Value::String(body));
        }
        Some(EventKind::Finished) => {
            let summary = match obj.get("result") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            obj.insert("summary".into(), Value::String(summary));
        }
        Some(EventKind::Aborted) => {
            if let Some(error) = obj.get("error").cloned() {
                obj.insert("reason".into(), error);
            }
        }
        _ => {}
    }
    event
}

/// The kind of an event value, if it has a known one.
pub fn kind_of(event: &Value) -> Option<EventKind> {
    serde_json::from_value(event.get("kind")?.clone()).ok()
}

/// One entry of a child's log, as the parent reads it: an event of the run itself, or an
/// `agent-tool-event` frame of a deeper child that the child relays up unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    /// The entry's place in the log; the parent tails from the last one it handled.
    pub cursor: i64,
    /// The event's sequence within the run (own events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// An own event `{kind, …}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Value>,
    /// A relayed frame of a deeper child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<Value>,
}

/// What one tail call of the child returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// The entries after the cursor asked for, in order.
    pub entries: Vec<LogEntry>,
    /// The child waits for a human (an approval): silence then is not a stall.
    #[serde(default)]
    pub waiting: bool,
    /// The child knows no such run.
    #[serde(default)]
    pub unknown: bool,
}

/// How a child run ended, as the parent's tool returns it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The child's final answer (text, or validated JSON with an output schema).
    Answer(Value),
    /// The run failed: `status` is `error`, `aborted` or `interrupted`.
    Failed {
        /// Which way it failed.
        kind: EventKind,
        /// Why, in words for the model.
        error: String,
    },
}

impl Outcome {
    /// The outcome a terminal event carries; `None` for a non-terminal one.
    pub fn from_event(event: &Value) -> Option<Self> {
        let kind = kind_of(event)?;
        if !kind.is_terminal() {
            return None;
        }
        if kind == EventKind::Finished {
            return Some(Outcome::Answer(event.get("result").cloned().unwrap_or(Value::Null)));
        }
        let error = event.get("error").and_then(Value::as_str).unwrap_or("The child agent failed.");
        Some(Outcome::Failed { kind, error: error.to_owned() })
    }

    /// The tool's output: the answer itself, or `{ok:false, status, error, retryable}`.
    /// An interrupted or failed child may succeed when asked again; an aborted one was
    /// stopped on purpose.
    pub fn to_tool_output(&self) -> Value {
        match self {
            Outcome::Answer(v) => v.clone(),
            Outcome::Failed { kind, error } => json!({
                "ok": false,
                "status": kind.status(),
                "error": error,
                "retryable": *kind != EventKind::Aborted,
            }),
        }
    }

    /// The registry's status word for this outcome.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Answer(_) => "finished",
            Outcome::Failed { kind, .. } => kind.status(),
        }
    }
}

/// Whether a run whose last progress was at `last_progress_ms` is stalled at `now_ms`.
pub fn stalled(now_ms: f64, last_progress_ms: f64, stall_ms: f64) -> bool {
    now_ms - last_progress_ms >= stall_ms
}

/// The parent's view of one run's events for its tabs: each frame in the order it was
/// sent, kept while the run lives so a tab that joins mid-run is replayed them, and the
/// next sequence the parent itself may use (for the events it adds: `aborted`,
/// `interrupted`).
#[derive(Debug, Default)]
pub struct RunFrames {
    frames: Vec<Value>,
    next_sequence: u64,
}

impl RunFrames {
    /// The frame for an own event of the run, remembered for replays.
    pub fn own(&mut self, parent_tool_call_id: &str, sequence: u64, event: Value) -> Value {
        self.next_sequence = self.next_sequence.max(sequence + 1);
        let frame = serde_json::to_value(AgentToolEvent::new(parent_tool_call_id, sequence, event))
            .unwrap_or(Value::Null);
        self.frames.push(frame.clone());
        frame
    }

    /// An event the parent adds itself, after every event the child sent.
    pub fn local(&mut self, parent_tool_call_id: &str, event: Value) -> Value {
        let sequence = self.next_sequence;
        self.own(parent_tool_call_id, sequence, event)
    }

    /// A relayed frame of a deeper child, remembered for replays.
    pub fn relayed(&mut self, frame: Value) {
        self.frames.push(frame);
    }

    /// Every frame so far, marked `replay:true`, for a tab that joins now.
    pub fn replay(&self) -> impl Iterator<Item = Value> + '_ {
        self.frames.iter().map(|f| {
            let mut f = f.clone();
            if let Some(obj) = f.as_object_mut() {
                obj.insert("replay".into(), Value::Bool(true));
            }
            f
        })
    }
}

/// The toolCallId a `tool-approval-request` chunk asks about, if `frame_or_event` carries
/// one: an own event `{kind:"chunk", chunk}` or a relayed frame `{event:{…}}`.
pub fn approval_request_call(event: &Value) -> Option<&str> {
    let chunk = event.get("chunk")?;
    (chunk.get("type")?.as_str()? == "tool-approval-request")
        .then(|| chunk.get("toolCallId")?.as_str())
        .flatten()
}
