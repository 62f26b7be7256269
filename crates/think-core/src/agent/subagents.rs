//! The agent's side of agents as tools ([`crate::subagents`]): the agent tools of a turn,
//! and, when this instance is a child, taking a run, answering its parent's tail calls,
//! cancels and approvals, and ending the run once the child is idle.

use futures::future::LocalBoxFuture;
use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::capability::Capability;
use super::turn::{RpcTurn, TurnObserver};
use super::{Agent, Feature};
use crate::protocol::frames::ToolApprovalFrame;
use crate::protocol::message::{state_of, tool_call_id_of, Role, UIMessage};
use crate::protocol::tool_state::has_pending_interaction;
use crate::subagents::events::Batch;
use crate::subagents::{AgentToolCall, StartRequest};
use crate::tools::{Layer, ToolRef};

/// The connection id a child's parent acts as (it has no socket).
const PARENT_CONN: &str = "agent-tool-parent";

/// A child's turns are followed through its log, not through an observer.
struct Unobserved;

impl TurnObserver for Unobserved {
    fn on_start(&self, _request_id: &str) {}
    fn on_event(&self, _chunk: &str) {}
    fn on_error(&self, _error: &str) {}
    fn on_done(&self) {}
}

/// Agents as tools, as a capability: the agent tools of a turn (the rest of a run, as parent
/// or child, follows the turns and is not a capability's).
pub(super) struct SubagentsCapability;

#[async_trait(?Send)]
impl Capability for SubagentsCapability {
    fn name(&self) -> &'static str {
        "sub-agents"
    }

    fn switch(&self) -> Option<Feature> {
        Some(Feature::Subagents)
    }

    /// They join the agent's own tools, after the app's.
    fn tools(&self, agent: &Agent) -> Option<(Layer, Vec<ToolRef>)> {
        Some((Layer::Agent, agent.agent_tools()))
    }
}

impl Agent {
    /// The agent tools of this turn, bound to this instance as their parent.
    fn agent_tools(&self) -> Vec<ToolRef> {
        if self.spec.agent_tools.is_empty() {
            return Vec::new();
        }
        let name = self.name();
        let path =
            crate::subagents::child::ChildLog::role(self.deps.sql.as_ref()).unwrap_or_default();
        self.spec
            .agent_tools
            .iter()
            .map(|t| {
                Rc::new(AgentToolCall::new(t, self.subagents.clone(), &name, &path)) as ToolRef
            })
            .collect()
    }

    /// The agent's agent-tool runtime (its children's runs, and its own run as a child).
    pub fn subagents(&self) -> &Rc<crate::subagents::Subagents> {
        &self.subagents
    }

    /// As a child: takes the run `req` and starts working on its input. A repeated start of
    /// the same run (a parent that restarted) starts nothing.
    pub fn start_agent_tool_run(
        self: &Rc<Self>,
        req: StartRequest,
    ) -> Result<(), crate::store::StoreError> {
        if !self.subagents.begin(&req)? {
            return Ok(());
        }
        self.set_name(&req.child_name);
        let message = UIMessage::new(
            crate::platform::random_uuid(self.deps.clock.as_ref()),
            Role::User,
            vec![json!({"type": "text", "text": req.input})],
        );
        let agent = self.clone();
        self.deps.tasks.spawn(Box::pin(async move {
            let rpc = RpcTurn {
                observer: Rc::new(Unobserved),
                client_tools: Vec::new(),
                executor: None,
                abort: None,
            };
            agent.chat(message, rpc).await;
        }));
        Ok(())
    }

    /// As a child: the parent's tail call.
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn agent_tool_events<'a>(
        &'a self,
        run_id: &'a str,
        cursor: i64,
        wait_ms: u64,
    ) -> LocalBoxFuture<'a, Batch> {
        Box::pin(self.agent_tool_events_inner(run_id, cursor, wait_ms))
    }

    /// The body of [`Self::agent_tool_events`].
    async fn agent_tool_events_inner(&self, run_id: &str, cursor: i64, wait_ms: u64) -> Batch {
        self.subagents.tail_batch(run_id, cursor, wait_ms, || self.waits_for_human()).await
    }

    /// As a child: the parent recorded the run's outcome (see [`crate::subagents::Subagents::release`]).
    pub fn release_agent_tool_run(&self, run_id: &str) {
        self.subagents.release(run_id);
    }

    /// Whether the child is idle with a call waiting for a human.
    fn waits_for_human(&self) -> bool {
        self.rt.borrow().active.is_none()
            && has_pending_interaction(&self.history(), &super::tool_names(&self.client_tools()))
    }

    /// As a child: the parent cancelled the run. A running turn is aborted (its own agent
    /// tools cancel their children as they are dropped); an idle child ends the run now.
    pub fn cancel_agent_tool_run(&self, run_id: &str) {
        if self.subagents.current().as_deref() != Some(run_id) {
            return;
        }
        let running = {
            let mut rt = self.rt.borrow_mut();
            rt.continuation = super::interaction::Continuation::default();
            match rt.active.as_ref() {
                Some(active) => {
                    active.abort.abort();
                    true
                }
                None => false,
            }
        };
        if !running {
            self.subagents.settle(None, true);
        }
    }

    /// An approval answer from the parent: applied here when this child waits for that call,
    /// else routed on to the descendant that does. False when none does.
    pub fn agent_tool_approval(self: &Rc<Self>, tool_call_id: &str, approved: bool) -> bool {
        let waits_here = self.history().iter().any(|m| {
            m.parts.iter().any(|p| {
                tool_call_id_of(p) == Some(tool_call_id)
                    && state_of(p) == Some("approval-requested")
            })
        });
        if !waits_here {
            return self.subagents.route_approval(tool_call_id, approved);
        }
        let agent = self.clone();
        let frame = ToolApprovalFrame {
            tool_call_id: tool_call_id.to_owned(),
            approved,
            auto_continue: true,
        };
        self.deps.tasks.spawn(Box::pin(async move {
            agent.on_tool_approval(PARENT_CONN, frame).await;
        }));
        true
    }

    /// As a child, once no turn runs, none is queued or about to continue: ends the run with
    /// the final answer, unless a call waits for a human.
    pub(super) fn settle_agent_tool_run(&self) {
        if self.subagents.current().is_none() {
            return;
        }
        {
            let rt = self.rt.borrow();
            if rt.active.is_some() || rt.queued > 0 || rt.continuation.pending {
                return;
            }
        }
        let history = self.history();
        if has_pending_interaction(&history, &super::tool_names(&self.client_tools())) {
            return;
        }
        self.subagents.settle(final_answer(&history), false);
    }

    /// After a crash: settles the agent-tool calls of a rebuilt message by tailing their
    /// children again (never starting them again), and records their outputs in the ledger.
    pub(super) async fn reattach_agent_tools(self: &Rc<Self>, message: &mut UIMessage) {
        let calls: Vec<(usize, String, Option<String>)> = message
            .parts
            .iter()
            .enumerate()
            .filter(|(_, p)| state_of(p) == Some("input-available"))
            .filter_map(|(i, p)| {
                let id = tool_call_id_of(p)?;
                self.subagents.is_run(id).then(|| {
                    (i, id.to_owned(), crate::protocol::message::tool_name_of(p).map(str::to_owned))
                })
            })
            .collect();
        // The children are followed together, as they ran before the crash; the child of an
        // agent tool that is switched off meanwhile is not followed, but stopped.
        let outputs = futures::future::join_all(calls.iter().map(|(_, id, name)| async move {
            let tool =
                name.as_deref().and_then(|n| self.spec.agent_tools.iter().find(|t| t.name == n));
            match tool {
                Some(tool) => self.subagents.reattach(tool.output_schema.as_ref(), id).await,
                None => self.subagents.abandon(id, &self.agent_tool_gone(name.as_deref())),
            }
        }))
        .await;
        for ((index, id, name), output) in calls.into_iter().zip(outputs) {
            let Some(output) = output else { continue };
            let ledger = super::ledger::Ledger::new(self.deps.sql.as_ref());
            let entry = super::ledger::Entry::Succeeded(output.clone());
            if let Err(e) = ledger.record(&id, name.as_deref().unwrap_or(""), &entry, self.now()) {
                self.warn("recording a re-attached agent-tool call failed", e);
            }
            if let Some(obj) = message.parts.get_mut(index).and_then(Value::as_object_mut) {
                obj.insert("state".into(), json!("output-available"));
                obj.insert("output".into(), output);
            }
        }
    }
}

impl Agent {
    /// Why a recorded agent-tool call's tool is not there any more.
    fn agent_tool_gone(&self, name: Option<&str>) -> String {
        if !self.spec.is_on(Feature::Subagents) {
            return Feature::Subagents.off_message();
        }
        format!("The agent tool {} is no longer configured.", name.unwrap_or("of this call"))
    }
}

/// The text of the last assistant message, the child's final answer.
fn final_answer(history: &[UIMessage]) -> Option<String> {
    let last = history.iter().rev().find(|m| m.role == Role::Assistant)?;
    let text: Vec<&str> = last
        .parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    let text = text.join("");
    (!text.trim().is_empty()).then_some(text)
}
