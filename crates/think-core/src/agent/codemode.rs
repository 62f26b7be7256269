//! The agent's side of Code Mode: the `execute` tool of each turn, the callables that approve
//! or reject paused executions (replacing the paused output in the transcript and continuing
//! the turn, as a normal approval does), and the journal's sweeps at start and on the alarm.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::capability::{Capability, Sweep};
use super::{Agent, AgentSpec, CallError, Deps, Feature, CONFIG_PENDING_CONTINUATION};
use crate::browser::tools::WithBrowser;
use crate::codemode::tool::{turn_connectors, ExecuteTool};
use crate::codemode::CodeMode;
use crate::protocol::message::{tool_call_id_of, tool_name_of};
use crate::protocol::tool_state::ToolPartUpdate;
use crate::tools::{ToolRef, ToolSet};

/// The runtime, when the spec enables `execute` and the platform has a sandbox.
pub(super) fn runtime(spec: &AgentSpec, deps: &Deps) -> Option<Rc<CodeMode>> {
    let (options, sandbox) = (spec.execute.clone()?, deps.sandbox.clone()?);
    CodeMode::new(deps.sql.clone(), deps.clock.clone(), sandbox, options)
        .map_err(|e| crate::platform::log(&format!("think-rs: Code Mode is unavailable: {e}")))
        .ok()
}

fn arg_str(args: &[Value], i: usize) -> Option<&str> {
    args.get(i).and_then(Value::as_str)
}

/// Reads `rejectExecution`'s third argument, `{autoContinue?: boolean}` (absent or null:
/// continue).
fn auto_continue_option(options: Option<&Value>) -> Result<bool, CallError> {
    let bad = || {
        CallError::Failed(
            "rejectExecution: the options must be {autoContinue?: boolean}".to_owned(),
        )
    };
    match options {
        None | Some(Value::Null) => Ok(true),
        Some(Value::Object(o)) => match o.get("autoContinue") {
            None | Some(Value::Null) => Ok(true),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

/// Code Mode as a capability: its callables, the journal's sweeps and the `execute` tool.
pub(super) struct CodeModeCapability;

/// The callables that inspect, approve, reject and replay executions, and keep snippets.
const CALLABLES: &[&str] = &[
    "pendingExecutions",
    "pendingApprovals",
    "executions",
    "snippets",
    "saveSnippet",
    "deleteSnippet",
    "deleteExecution",
    "pruneExecutions",
    "rollbackExecution",
    "approveExecution",
    "rejectExecution",
];

#[async_trait(?Send)]
impl Capability for CodeModeCapability {
    fn name(&self) -> &'static str {
        "Code Mode"
    }

    fn switch(&self) -> Option<Feature> {
        Some(Feature::Execute)
    }

    fn callables(&self) -> &[&'static str] {
        CALLABLES
    }

    /// Without a runtime (no sandbox) its callables do not exist.
    async fn call(
        &self,
        agent: &Rc<Agent>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, CallError> {
        let Some(cm) = agent.codemode.clone() else {
            return Err(CallError::NoSuchMethod(method.to_owned()));
        };
        let id = arg_str(args, 0);
        let result = match method {
            "pendingExecutions" => cm.pending(id),
            "pendingApprovals" => cm.pending_approvals(id),
            "executions" => cm.executions(args.first().and_then(Value::as_u64).map(|n| n as usize)),
            "snippets" => cm.snippets(),
            "saveSnippet" => cm.save_snippet(id.unwrap_or(""), args.get(1).unwrap_or(&Value::Null)),
            "deleteSnippet" => cm.delete_snippet(id.unwrap_or("")),
            "deleteExecution" => cm.delete_execution(id.unwrap_or("")),
            "pruneExecutions" => {
                cm.prune_executions(args.first().and_then(Value::as_u64).map(|n| n as usize))
            }
            "rollbackExecution" => cm.rollback(id.unwrap_or(""), &agent.replay_connectors()).await,
            "approveExecution" => return Ok(agent.approve_execution(&cm, id.unwrap_or("")).await),
            "rejectExecution" => {
                let auto_continue = auto_continue_option(args.get(2))?;
                let out =
                    agent.reject_execution(&cm, id.unwrap_or(""), arg_str(args, 1), auto_continue);
                return Ok(agent.settle_browser_output(out).await);
            }
            _ => return Err(CallError::NoSuchMethod(method.to_owned())),
        };
        result.map_err(|e| CallError::Failed(e.to_string()))
    }

    async fn sweep(&self, agent: &Rc<Agent>, when: Sweep) -> Option<f64> {
        agent.codemode_sweep(when == Sweep::Start)
    }

    fn tools_over(&self, agent: &Agent, merged: &ToolSet) -> Vec<ToolRef> {
        agent.codemode_tool(merged).into_iter().collect()
    }
}

impl Agent {
    /// The `execute` tool over this turn's (already merged and ledgered) tools.
    fn codemode_tool(&self, tools: &ToolSet) -> Option<ToolRef> {
        let runtime = self.codemode.clone()?;
        let mut connectors =
            turn_connectors(tools, &self.spec.approval, &self.workspace, &self.deps.sql);
        let (Some(browser), Some(cdp)) = (self.browser.clone(), self.cdp_connector()) else {
            return Some(ExecuteTool::new(runtime, connectors).into_ref());
        };
        // With a browser, `execute` has the `cdp` global too, as in Think.
        connectors.push(cdp);
        let execute = ExecuteTool::new(runtime, connectors).into_ref();
        Some(WithBrowser::wrap(execute, browser, self.spec.vision))
    }

    /// Settles executions a restart interrupted (`at_start`) or that waited too long, and
    /// returns when the next paused one expires, so the alarm can wake the object for it.
    fn codemode_sweep(&self, at_start: bool) -> Option<f64> {
        let cm = self.codemode.clone()?;
        let result = if at_start { cm.recover().map(|_| Vec::new()) } else { cm.sweep() };
        match result {
            // An expired run's paused output says so now; the model hears it on the next turn.
            Ok(expired) => {
                for (id, output) in expired {
                    self.replace_paused_output(&cm, &id, &output);
                }
            }
            Err(e) => self.warn("sweeping code executions failed", e),
        }
        cm.next_expiry().ok().flatten()
    }

    /// Runs an approved execution again, puts its outcome in place of the paused output, and
    /// continues the turn. Errors are returned as `{status:"error"}`, as Think does.
    async fn approve_execution(self: &Rc<Self>, cm: &Rc<CodeMode>, id: &str) -> Value {
        if !self.spec.is_on(Feature::Browser) && self.is_browser_run(cm, id) {
            let error = Feature::Browser.off_message();
            return json!({"status": "error", "executionId": id, "error": error});
        }
        match cm.approve(id, &self.replay_connectors()).await {
            Ok(output) => {
                let output = self.settle_browser_output(output).await;
                self.settle_paused_output(cm, id, &output);
                output
            }
            Err(e) => json!({"status": "error", "executionId": id, "error": e.to_string()}),
        }
    }

    /// Whether execution `id` is a `browser_execute` run, whose code drives the browser.
    fn is_browser_run(&self, cm: &CodeMode, id: &str) -> bool {
        let Some(call) = cm.execution(id).ok().flatten().and_then(|r| r.tool_call_id) else {
            return false;
        };
        self.history().iter().flat_map(|m| m.parts.iter()).any(|p| {
            tool_call_id_of(p) == Some(call.as_str())
                && tool_name_of(p).is_some_and(|n| n == crate::browser::tools::BROWSER_EXECUTE)
        })
    }

    /// The connectors a replayed run gets: the turn's, with `tools.*` as the run saw it
    /// (without the browser tools, which were added after `execute`), and `cdp` when there is
    /// a browser, so one set answers `execute` and `browser_execute` runs alike.
    fn replay_connectors(&self) -> Vec<Rc<dyn crate::codemode::connectors::Connector>> {
        let mut tools = self.turn_tools(None);
        if self.browser.is_some() {
            let keep: Vec<String> = tools
                .names()
                .filter(|n| !crate::browser::tools::TOOL_NAMES.contains(n))
                .map(str::to_owned)
                .collect();
            tools.retain_names(&keep);
        }
        let mut connectors =
            turn_connectors(&tools, &self.spec.approval, &self.workspace, &self.deps.sql);
        connectors.extend(self.cdp_connector());
        connectors
    }

    /// Rejects a paused execution; its paused output becomes the rejection. The turn then
    /// continues, as after an approval, unless `auto_continue` is false (Think 0.23's
    /// `{autoContinue: false}`: the rejection is recorded and the model hears it next turn).
    fn reject_execution(
        self: &Rc<Self>,
        cm: &Rc<CodeMode>,
        id: &str,
        reason: Option<&str>,
        auto_continue: bool,
    ) -> Value {
        match cm.reject(id, reason) {
            Ok(output) if auto_continue => {
                self.settle_paused_output(cm, id, &output);
                output
            }
            Ok(output) => {
                self.replace_paused_output(cm, id, &output);
                output
            }
            Err(e) => json!({"status": "error", "executionId": id, "error": e.to_string()}),
        }
    }

    /// Replaces the paused `execute` output in the transcript, in the live stream's message or
    /// a stored one (every tab gets `cf_agent_message_updated`), and asks for a continuation,
    /// as an approval answer does.
    fn settle_paused_output(self: &Rc<Self>, cm: &CodeMode, id: &str, output: &Value) {
        if !self.replace_paused_output(cm, id, output) {
            return;
        }
        {
            let mut rt = self.rt.borrow_mut();
            rt.continuation.pending = true;
            rt.continuation.generation += 1;
        }
        if let Err(e) = self.store().and_then(|s| s.set_config(CONFIG_PENDING_CONTINUATION, "1")) {
            self.warn("recording the pending continuation failed", e);
        }
        let agent = self.clone();
        self.deps.tasks.spawn(Box::pin(async move { agent.try_continue().await }));
    }

    /// Puts `output` in place of execution `id`'s paused output; false if there was none.
    fn replace_paused_output(&self, cm: &CodeMode, id: &str, output: &Value) -> bool {
        let Some(tool_call_id) = cm.execution(id).ok().flatten().and_then(|r| r.tool_call_id)
        else {
            return false;
        };
        let update = ToolPartUpdate::paused_execution(tool_call_id, id, output.clone());
        self.apply_interaction(&update)
    }
}
