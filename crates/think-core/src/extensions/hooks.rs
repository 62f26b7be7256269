//! The extensions' hooks in a turn, each run in its own isolate within the hook time limit
//! (5 s by default). `beforeTurn` runs in load order, each extension seeing what the earlier
//! ones changed, and may narrow the tools (`activeTools`) or replace the system prompt
//! (`system`); the others only observe. A hook that fails or runs too long is logged and
//! skipped: the turn goes on without it.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::manifest::HookName;
use super::Extensions;
use crate::tools::{ModelOutput, Tool, ToolContext, ToolDefinition, ToolError, ToolRef, ToolSet};

/// What `beforeTurn` hooks changed for one turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnOverride {
    /// The system prompt to use instead.
    pub system: Option<String>,
    /// Keep only these tools.
    pub active_tools: Option<Vec<String>>,
}

/// What `beforeTurn` is shown.
pub struct TurnSnapshot<'a> {
    /// The system prompt so far.
    pub system: &'a str,
    /// The turn's tool names.
    pub tool_names: Vec<String>,
    /// How many messages the model is sent.
    pub message_count: usize,
    /// Whether this is a continuation.
    pub continuation: bool,
    /// The chat request's custom body fields.
    pub body: &'a Map<String, Value>,
}

fn log_failure(name: &str, hook: HookName, e: impl std::fmt::Display) {
    crate::platform::log(&format!("think-rs: extension {name:?} {}: {e}", hook.as_str()));
}

impl Extensions {
    /// Runs every `beforeTurn` hook in load order.
    pub async fn before_turn(&self, snapshot: TurnSnapshot<'_>) -> TurnOverride {
        let mut out = TurnOverride::default();
        let subscribers = self.subscribers(HookName::BeforeTurn);
        if subscribers.is_empty() {
            return out;
        }
        let mut system = snapshot.system.to_owned();
        let mut names = snapshot.tool_names;
        for loaded in subscribers {
            let context = json!({
                "system": system, "toolNames": names, "messageCount": snapshot.message_count,
                "continuation": snapshot.continuation, "body": snapshot.body,
            });
            let result = match self.run_hook(&loaded, HookName::BeforeTurn, context).await {
                Ok(v) => v,
                Err(e) => {
                    log_failure(&loaded.manifest.name, HookName::BeforeTurn, e);
                    continue;
                }
            };
            if let Some(s) = result.get("system").and_then(Value::as_str) {
                system = s.to_owned();
                out.system = Some(system.clone());
            }
            if let Some(list) = result.get("activeTools").and_then(Value::as_array) {
                let keep: Vec<String> =
                    list.iter().filter_map(Value::as_str).map(str::to_owned).collect();
                names.retain(|n| keep.contains(n));
                out.active_tools = Some(names.clone());
            }
        }
        out
    }

    /// Runs every hook of kind `hook` on `context`, one after the other; results are ignored.
    pub async fn observe(&self, hook: HookName, context: Value) {
        for loaded in self.subscribers(hook) {
            if let Err(e) = self.run_hook(&loaded, hook, context.clone()).await {
                log_failure(&loaded.manifest.name, hook, e);
            }
        }
    }

    /// Wraps every tool of `tools` so the `beforeToolCall` and `afterToolCall` hooks see its
    /// calls; nothing is wrapped when no extension runs them.
    pub fn wrap_tool_hooks(self: &Rc<Self>, tools: &mut ToolSet) {
        let subscribed = !self.subscribers(HookName::BeforeToolCall).is_empty()
            || !self.subscribers(HookName::AfterToolCall).is_empty();
        if subscribed {
            tools.map_tools(|inner| Rc::new(HookedTool { inner, ext: self.clone() }) as ToolRef);
        }
    }
}

/// A tool whose calls the tool-call hooks observe.
struct HookedTool {
    inner: ToolRef,
    ext: Rc<Extensions>,
}

#[async_trait(?Send)]
impl Tool for HookedTool {
    fn definition(&self) -> &ToolDefinition {
        self.inner.definition()
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let call =
            json!({"toolName": ctx.tool_name, "toolCallId": ctx.tool_call_id, "input": input});
        self.ext.observe(HookName::BeforeToolCall, call.clone()).await;
        let result = self.inner.execute(input, ctx).await;
        let mut after = call;
        match &result {
            Ok(output) => {
                after["success"] = true.into();
                after["output"] = output.clone();
            }
            Err(e) => {
                after["success"] = false.into();
                after["error"] = e.to_string().into();
            }
        }
        self.ext.observe(HookName::AfterToolCall, after).await;
        result
    }

    fn executes_on_server(&self) -> bool {
        self.inner.executes_on_server()
    }

    fn needs_approval(&self, input: &Value) -> bool {
        self.inner.needs_approval(input)
    }

    fn model_output(&self, output: &Value) -> ModelOutput {
        self.inner.model_output(output)
    }

    fn take_images(&self, tool_call_id: &str) -> Vec<crate::model::ImagePart> {
        self.inner.take_images(tool_call_id)
    }

    /// The tool hooks run extension code around every call.
    fn runs_code(&self) -> bool {
        true
    }
}
