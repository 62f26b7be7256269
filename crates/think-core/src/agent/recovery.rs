//! Recovery of turns a crash interrupted. A stream still marked `streaming` when no turn is
//! running means the process died mid-turn: its buffered chunks rebuild the partial answer,
//! tool calls without a result are settled from the execution ledger (or marked interrupted,
//! never re-run), the answer is persisted, and unless it waits for a human the model is
//! asked to continue. A continuation that a tool result or approval asked for just before a
//! crash (persisted as pending) is run too, and then the turns of messages a crash left in
//! the `queue`, in order.

use std::rc::Rc;

use serde_json::{json, Value};

use super::ledger::{interrupted_message, Entry, Ledger};
use super::streams::{StreamRecord, StreamStatus};
use super::turn::{PendingRecovery, TurnRequest};
use super::{Agent, CONFIG_RECOVERY};
use crate::platform::random_id;
use crate::protocol::accumulator::{ChunkAction, StreamAccumulator};
use crate::protocol::frames;
use crate::protocol::message::{
    is_tool_part, part_type, state_of, tool_call_id_of, tool_name_of, UIMessage,
};
use crate::protocol::repair::INTERRUPTED_TOOL_ERROR;
use crate::protocol::tool_state::ToolPartUpdate;

/// Recovery attempts per interrupted stream before its turn is closed without continuing.
pub const MAX_RECOVERY_ATTEMPTS: u32 = 3;

impl Agent {
    /// Recovers every interrupted stream, then a recovery or continuation a crash lost; a
    /// no-op while a turn is running or being recovered in this instance.
    pub(super) async fn recover(self: &Rc<Self>) {
        if self.rt.borrow().active.is_some() || self.rt.borrow().recovering {
            return;
        }
        let interrupted = match self.streams().and_then(|b| b.interrupted()) {
            Ok(list) => list,
            Err(e) => return self.warn("reading interrupted streams failed", e),
        };
        for record in interrupted {
            let attempts = self.attempts_of(&record.id);
            let mut message = self.rebuild(&record);
            if let Some(m) = message.as_mut() {
                self.reattach_agent_tools(m).await;
            }
            if let Some(message) = &message {
                self.save_message(message.clone());
            }
            let client_tools = super::tool_names(&self.client_tools());
            let waiting = message.as_ref().is_some_and(|m| {
                crate::protocol::tool_state::message_has_pending_interaction(m, &client_tools)
            });
            let continues = !waiting && attempts <= MAX_RECOVERY_ATTEMPTS;
            // How the cut request ended: continued by the recovery, paused for a human as a
            // finished turn would be, or given up.
            let status = match (continues, waiting) {
                (true, _) => StreamStatus::Recovering,
                (false, true) => StreamStatus::Completed,
                (false, false) => StreamStatus::Aborted,
            };
            if let Err(e) = self.streams().and_then(|b| b.finish(&record.id, status, self.now())) {
                self.warn("closing an interrupted stream failed", e);
            }
            self.forget_attempts(&record.id);
            if continues {
                self.rt.borrow_mut().recovering = true;
                self.broadcast(&frames::ChatRecovering::started(Some(&record.id)), None);
            }
            self.broadcast(
                &frames::ChatResponse::done(&record.id, status.outcome())
                    .in_continuation(record.continuation)
                    .for_messages(&record.message_ids),
                None,
            );
            self.broadcast_transcript(None);
            if continues {
                let turn =
                    TurnRequest { message_ids: record.message_ids.clone(), ..self.recovery_turn() };
                self.continue_after_crash(Some(&record.id), attempts, turn).await;
            }
        }
        self.resume_pending_recovery().await;
        self.resume_pending_continuation().await;
        self.run_left_queue().await;
    }

    /// After a restart: runs the continuation a recovery from a transient model error was
    /// waiting to run when the process died (the wait is over: the restart took its time).
    async fn resume_pending_recovery(self: &Rc<Self>) {
        let pending = self
            .store()
            .ok()
            .and_then(|s| s.config(CONFIG_RECOVERY).ok().flatten())
            .and_then(|v| serde_json::from_str::<PendingRecovery>(&v).ok());
        let Some(pending) = pending else { return };
        if !self.store().and_then(|s| s.has_message(&pending.message_id)).unwrap_or(false) {
            return self.note_pending_recovery(None);
        }
        self.rt.borrow_mut().recovering = true;
        self.broadcast(&frames::ChatRecovering::started(None), None);
        let turn = TurnRequest {
            message_ids: pending.message_ids,
            extend: Some(pending.message_id),
            recovery_attempts: pending.attempts,
            ..self.recovery_turn()
        };
        self.run_turn(turn).await;
        self.rt.borrow_mut().recovering = false;
        self.broadcast(&frames::ChatRecovering::settled(None), None);
    }

    /// A continuation turn under a new request id, with the last request's body.
    fn recovery_turn(&self) -> TurnRequest {
        TurnRequest {
            request_id: random_id(self.deps.clock.as_ref(), 8),
            body: self.last_body(),
            continuation: true,
            ..Default::default()
        }
    }

    /// Runs, one after another, the turns whose messages a crash left waiting in the queue
    /// (rows of no live turn), each over the transcript up to its own messages.
    async fn run_left_queue(self: &Rc<Self>) {
        let left: Vec<String> = match self.store().and_then(|s| s.queued()) {
            Ok(rows) => {
                let mut rt = self.rt.borrow_mut();
                let mut ids = Vec::new();
                for (request_id, _) in rows {
                    if rt.queued_turns.insert(request_id.clone()) {
                        ids.push(request_id);
                    }
                }
                ids
            }
            Err(e) => return self.warn("reading the queued messages failed", e),
        };
        for request_id in left {
            let turn = TurnRequest {
                request_id,
                body: self.last_body(),
                queued: true,
                ..Default::default()
            };
            self.run_turn(turn).await;
        }
    }

    /// Runs `turn`, the continuation of a turn a crash cut short; `attempts` counts this
    /// recovery. The count moves to the continuation's stream, so a crash during it counts as
    /// one more and a turn that crashes the process every time is given up after
    /// [`MAX_RECOVERY_ATTEMPTS`] (each continuation has a new stream id).
    async fn continue_after_crash(
        self: &Rc<Self>,
        stream_id: Option<&str>,
        attempts: u32,
        turn: TurnRequest,
    ) {
        self.rt.borrow_mut().recovering = true;
        let request_id = turn.request_id.clone();
        if attempts > 0 {
            self.set_attempts(&request_id, attempts);
        }
        self.run_turn(turn).await;
        self.forget_attempts(&request_id);
        self.rt.borrow_mut().recovering = false;
        self.broadcast(&frames::ChatRecovering::settled(stream_id), None);
    }

    /// How many times the turn behind this stream has been recovered, counting this time
    /// (when it cannot be read, more than allowed: the turn is not continued).
    fn attempts_of(&self, stream_id: &str) -> u32 {
        match self.store().and_then(|s| s.config(&attempts_key(stream_id))) {
            Ok(v) => v.and_then(|v| v.parse::<u32>().ok()).unwrap_or(0) + 1,
            Err(_) => MAX_RECOVERY_ATTEMPTS + 1,
        }
    }

    /// Carries a turn's recovery count over to the stream that continues it.
    fn set_attempts(&self, stream_id: &str, n: u32) {
        if let Err(e) =
            self.store().and_then(|s| s.set_config(&attempts_key(stream_id), &n.to_string()))
        {
            self.warn("saving the recovery count failed", e);
        }
    }

    fn forget_attempts(&self, stream_id: &str) {
        if let Err(e) = self.store().and_then(|s| s.delete_config(&attempts_key(stream_id))) {
            self.warn("dropping the recovery count failed", e);
        }
    }

    /// The partial answer of an interrupted stream, with every server tool call settled. A
    /// recovery's stream adds to the message it continued, as stored.
    fn rebuild(&self, record: &StreamRecord) -> Option<UIMessage> {
        let chunks = self.streams().and_then(|b| b.chunks(&record.id)).unwrap_or_default();
        let mut acc = StreamAccumulator::new(&record.message_id, record.continuation);
        if record.extends {
            if let Ok(Some(m)) = self.store().and_then(|s| s.message(&record.message_id)) {
                let metadata = match m.metadata {
                    Some(Value::Object(map)) => Some(map),
                    _ => None,
                };
                acc = acc.with_existing(m.parts, metadata);
            }
        }
        for body in &chunks {
            let Ok(chunk) = crate::protocol::json::from_str_deep::<Value>(body) else { continue };
            if let ChunkAction::CrossMessageToolUpdate { tool_call_id, update } = acc.apply(&chunk)
            {
                self.apply_to_stored(&ToolPartUpdate::cross_message(tool_call_id, update));
            }
        }
        let mut message = acc.message();
        let client_tools = super::tool_names(&self.client_tools());
        let ledger = Ledger::new(self.deps.sql.as_ref());
        for part in message.parts.iter_mut() {
            if !is_tool_part(part) {
                continue;
            }
            let state = state_of(part).unwrap_or("");
            let is_client = tool_name_of(part).is_some_and(|n| client_tools.contains(n));
            let unsettled =
                matches!(state, "input-streaming") || (state == "input-available" && !is_client);
            // An agent-tool call is settled by tailing its child again, not from the ledger.
            if !unsettled || tool_call_id_of(part).is_some_and(|id| self.subagents.is_run(id)) {
                continue;
            }
            let entry = tool_call_id_of(part).and_then(|id| ledger.get(id).ok().flatten());
            settle(part, entry);
        }
        message.parts.iter().any(|p| part_type(p) != Some("step-start")).then_some(message)
    }
}

/// Settles the tool calls of `message` whose input was still streaming when a transient model
/// error cut the stream, as interrupted (they never ran).
pub(super) fn settle_streaming_calls(message: &mut UIMessage) {
    for part in message.parts.iter_mut() {
        if is_tool_part(part) && state_of(part) == Some("input-streaming") {
            settle(part, None);
        }
    }
}

fn attempts_key(stream_id: &str) -> String {
    format!("recovery_attempts:{stream_id}")
}

/// Settles an interrupted tool part from its ledger entry.
fn settle(part: &mut Value, entry: Option<Entry>) {
    let Some(obj) = part.as_object_mut() else { return };
    match entry {
        Some(Entry::Succeeded(output)) => {
            obj.insert("state".into(), json!("output-available"));
            obj.insert("output".into(), output);
        }
        Some(Entry::Failed(error)) => {
            obj.insert("state".into(), json!("output-error"));
            obj.insert("errorText".into(), json!(error));
        }
        Some(Entry::Started { code }) => {
            obj.insert("state".into(), json!("output-error"));
            obj.insert("errorText".into(), json!(interrupted_message(code)));
        }
        None => {
            obj.insert("state".into(), json!("output-error"));
            obj.insert("errorText".into(), json!(INTERRUPTED_TOOL_ERROR));
        }
    }
    if !obj.get("input").is_some_and(Value::is_object) {
        obj.insert("input".into(), json!({}));
    }
}
