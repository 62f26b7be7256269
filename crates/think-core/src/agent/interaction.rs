//! A human's side of a turn: client-tool results, approval answers, and the auto-continuation
//! barrier that resumes the model once every pending call of a batch has its answer.

use std::rc::Rc;

use super::turn::TurnRequest;
use super::{Agent, CONFIG_PENDING_CONTINUATION};
use crate::platform::random_id;
use crate::protocol::frames::{self, ToolApprovalFrame, ToolResultFrame};
use crate::protocol::tool_state::{has_incomplete_tool_batch, ToolPartUpdate};

/// How long results are coalesced before a continuation fires.
pub const COALESCE_MS: u64 = 50;

/// The auto-continuation barrier's state.
#[derive(Default)]
pub(super) struct Continuation {
    /// A result asked to continue and no continuation has run for it yet.
    pub pending: bool,
    /// Bumped by every result; only the newest waiter may fire.
    pub generation: u64,
    /// The connection that asked; it owns the continuation's stream.
    pub owner: Option<String>,
    /// A waiter is inside its coalescing window.
    pub scheduled: bool,
}

impl Agent {
    pub(super) async fn on_tool_result(self: Rc<Self>, conn: &str, result: ToolResultFrame) {
        self.update_client_tools(&result.client_tools);
        let update = ToolPartUpdate::tool_result(result.tool_call_id.clone(), result.outcome());
        let applied = self.apply_interaction(&update);
        self.after_interaction(conn, applied, result.auto_continue).await;
    }

    pub(super) async fn on_tool_approval(self: Rc<Self>, conn: &str, approval: ToolApprovalFrame) {
        let update = ToolPartUpdate::approval(approval.tool_call_id.clone(), approval.approved);
        let applied = self.apply_interaction(&update);
        // Not a call of this agent: the answer may be for a child's (or deeper) call.
        if !applied && self.subagents.route_approval(&approval.tool_call_id, approval.approved) {
            return;
        }
        self.after_interaction(conn, applied, approval.auto_continue).await;
    }

    /// Applies a result or approval to the live stream's message if it is there (a result
    /// that arrives mid-stream), else to the stored transcript. False when it changed nothing.
    pub(super) fn apply_interaction(&self, update: &ToolPartUpdate) -> bool {
        let live = self.rt.borrow().active.as_ref().map(|a| a.acc.clone());
        if let Some(acc) = live {
            if acc.borrow_mut().apply_tool_update(update) {
                let message = acc.borrow().message();
                self.save_message(message.clone());
                self.broadcast(&frames::MessageUpdated::new(&message), None);
                return true;
            }
        }
        self.apply_to_stored(update)
    }

    /// Starts or re-arms the continuation barrier. A no-op apply starts nothing; a result
    /// without `autoContinue` only re-arms a continuation another result asked for.
    async fn after_interaction(self: &Rc<Self>, conn: &str, applied: bool, auto_continue: bool) {
        if !applied {
            return;
        }
        let generation = {
            let mut rt = self.rt.borrow_mut();
            let c = &mut rt.continuation;
            if auto_continue {
                c.pending = true;
                c.owner = Some(conn.to_owned());
            } else if !c.pending {
                return;
            }
            c.generation += 1;
            c.scheduled = true;
            c.generation
        };
        if auto_continue {
            // Survives a crash inside the coalescing window; recovery runs it on the next start.
            self.set_pending_continuation(true);
        }
        self.deps.clock.sleep(COALESCE_MS).await;
        {
            let mut rt = self.rt.borrow_mut();
            if rt.continuation.generation != generation {
                return;
            }
            rt.continuation.scheduled = false;
        }
        self.try_continue().await;
    }

    /// Fires the pending continuation if nothing blocks it: no live stream (then the end of
    /// that stream retries) and no call of the last batch still waiting for its answer (then
    /// the next answer retries).
    pub(super) async fn try_continue(self: &Rc<Self>) {
        let owner = {
            let rt = self.rt.borrow();
            if !rt.continuation.pending || rt.continuation.scheduled || rt.active.is_some() {
                return;
            }
            rt.continuation.owner.clone()
        };
        if has_incomplete_tool_batch(&self.history()) {
            return;
        }
        self.rt.borrow_mut().continuation = Continuation::default();
        self.set_pending_continuation(false);
        let request_id = random_id(self.deps.clock.as_ref(), 8);
        let turn = TurnRequest {
            request_id,
            body: self.last_body(),
            continuation: true,
            owner,
            ..Default::default()
        };
        self.run_turn(turn).await;
    }

    fn set_pending_continuation(&self, pending: bool) {
        let result = self.store().and_then(|s| {
            if pending {
                s.set_config(CONFIG_PENDING_CONTINUATION, "1")
            } else {
                s.delete_config(CONFIG_PENDING_CONTINUATION)
            }
        });
        if let Err(e) = result {
            self.warn("recording the pending continuation failed", e);
        }
    }

    /// After a restart: runs the continuation a tool result or approval asked for before the
    /// crash, once its batch is complete (otherwise the next answer fires it as usual).
    pub(super) async fn resume_pending_continuation(self: &Rc<Self>) {
        let persisted = self
            .store()
            .ok()
            .and_then(|s| s.config(CONFIG_PENDING_CONTINUATION).ok().flatten())
            .is_some();
        if !persisted {
            return;
        }
        {
            let mut rt = self.rt.borrow_mut();
            if rt.continuation.pending || rt.continuation.scheduled || rt.active.is_some() {
                return;
            }
            rt.continuation.pending = true;
        }
        self.try_continue().await;
    }

    /// After a stream ends: run a continuation that was waiting for it, or tell connections
    /// still parked for one that nothing is coming.
    pub(super) async fn after_stream(self: &Rc<Self>) {
        let (pending, queued) = {
            let rt = self.rt.borrow();
            (rt.continuation.pending, rt.queued)
        };
        if pending {
            Box::pin(self.try_continue()).await;
            return;
        }
        if queued == 0 {
            self.settle_agent_tool_run();
            let parked = std::mem::take(&mut self.rt.borrow_mut().parked);
            for (conn, probe) in parked {
                self.send(
                    &conn,
                    &frames::StreamResumeNone::new(
                        frames::ResumeNoneReason::Idle,
                        probe.as_deref(),
                    ),
                );
            }
        }
    }
}
