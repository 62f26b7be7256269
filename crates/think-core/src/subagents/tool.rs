//! The tool that runs one agent-tool call: registers the run, waits for a slot, starts the
//! child, and follows it to its answer.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::Value;

use super::events::{EventKind, Outcome};
use super::registry::{child_name, run_id, Registry};
use super::{AgentTool, StartRequest, Subagents};
use crate::tools::schema::InputValidator;
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError};

/// An [`AgentTool`] bound to the parent instance that offers it this turn.
pub struct AgentToolCall {
    name: String,
    output_schema: Option<Value>,
    definition: ToolDefinition,
    subagents: Rc<Subagents>,
    parent_name: String,
    /// The agent-tool names from the root agent down to the child this tool starts.
    tool_path: Vec<String>,
}

impl AgentToolCall {
    /// `tool` as offered by instance `parent_name`, whose own agent-tool path is `path`.
    pub fn new<S>(
        tool: &AgentTool<S>,
        subagents: Rc<Subagents>,
        parent_name: &str,
        path: &[String],
    ) -> Self {
        let mut definition =
            ToolDefinition::new(&tool.name, &tool.description, tool.input_schema.clone());
        definition.output_schema = tool.output_schema.clone();
        let mut tool_path = path.to_vec();
        tool_path.push(tool.name.clone());
        Self {
            name: tool.name.clone(),
            output_schema: tool.output_schema.clone(),
            definition,
            subagents,
            parent_name: parent_name.to_owned(),
            tool_path,
        }
    }
}

/// The child's user message for `input`: the `task` text of `{task}`, else the input JSON.
pub fn user_message(input: &Value) -> String {
    match input.as_object() {
        Some(obj) if obj.len() == 1 => match obj.get("task").and_then(Value::as_str) {
            Some(task) => task.to_owned(),
            None => input.to_string(),
        },
        _ => input.to_string(),
    }
}

/// Checks a child's final answer against the tool's output schema: the answer must be JSON
/// (a fenced block is unwrapped) that the schema accepts.
pub fn validate_answer(answer: Value, schema: &Value) -> Outcome {
    let text = answer.as_str().map(str::trim).unwrap_or_default();
    let body = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    let fail = |error: String| Outcome::Failed { kind: EventKind::Error, error };
    let value: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => return fail(format!("The child's answer is not JSON ({e}): {text:.200}")),
    };
    match InputValidator::cached(schema).and_then(|v| v.validate(&value)) {
        Ok(()) => Outcome::Answer(value),
        Err(e) => fail(format!("The child's answer does not match the output schema: {e}")),
    }
}

#[async_trait(?Send)]
impl Tool for AgentToolCall {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let s = &self.subagents;
        let child = child_name(&self.parent_name, &ctx.tool_call_id);
        let req = StartRequest {
            run_id: run_id(&ctx.tool_call_id),
            child_name: child.clone(),
            parent_name: self.parent_name.clone(),
            tool_path: self.tool_path.clone(),
            input: user_message(&input),
        };
        let run = Registry::new(s.deps.sql.as_ref())
            .register(&ctx.tool_call_id, &self.name, &child, &req, s.now())
            .map_err(|e| ToolError::Failed(format!("Could not register the child run: {e}")))?;
        if !run.is_running() {
            return Ok(run.result.unwrap_or(Value::Null));
        }
        let start = async {
            match s.link() {
                Some(link) => link.start(&child, &req).await.map_err(|e| e.to_string()),
                None => Err("Child agents are not available on this platform.".into()),
            }
        };
        // The slot is held from the start to the end, so at most the cap's number of
        // children work at once; the others wait here, not started.
        let slot = s.slots.acquire().await;
        if let Err(error) = start.await {
            let outcome = Outcome::Failed { kind: EventKind::Error, error };
            return Ok(s.record(&run, &outcome));
        }
        Ok(s.follow_run(self.output_schema.as_ref(), &run, Some(slot)).await)
    }
}
