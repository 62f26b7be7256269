//! The model-facing `execute` tool: `{code}` in, a `completed` / `paused` / `error` object out
//! (returned, never thrown).

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::connectors::{Connector, StateConnector, ToolsConnector};
use super::CodeMode;
use crate::store::Sql;
use crate::tools::approval::ApprovalPolicy;
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef, ToolSet};
use crate::workspace::Workspace;

/// The tool's name.
pub const EXECUTE_TOOL: &str = "execute";

/// The connectors of a turn: `tools.*` over the turn's server tools (not `execute` itself)
/// and `state.*` over the workspace, whose writes keep undo records in `sql` (the journal's).
pub fn turn_connectors(
    tools: &ToolSet,
    policy: &ApprovalPolicy,
    workspace: &Rc<Workspace>,
    sql: &Rc<dyn Sql>,
) -> Vec<Rc<dyn Connector>> {
    vec![
        Rc::new(ToolsConnector::new(tools, policy.clone(), &[EXECUTE_TOOL])),
        Rc::new(StateConnector::new(workspace.clone()).with_undo(sql.clone())),
    ]
}

fn description(connectors: &[Rc<dyn Connector>]) -> String {
    let mut lines = vec![
        "Run JavaScript in a sandbox to do several steps in one call. Send the body of an async function (or an `async () => { ... }` arrow); `return` the value you want back.".to_owned(),
        String::new(),
        "Workflow: `await codemode.search(\"words\")` finds methods, `await codemode.describe(\"state.readFile\")` shows their TypeScript types, then call them: `await state.readFile({ path: \"/a.txt\" })`. Every method takes one object argument and returns a promise.".to_owned(),
        String::new(),
        "Rules: only the globals below exist; there is no network (`fetch` fails). Use `codemode.step(name, fn)` around work that must not repeat. A result with status \"paused\" waits for a human to approve a call: tell the user and wait; never send the same code again.".to_owned(),
        String::new(),
        "Globals:".to_owned(),
    ];
    for c in connectors {
        lines.push(format!("- `{}.*`: {} ({} methods)", c.name(), c.hint(), c.methods().len()));
    }
    lines.push(
        "- `codemode.*`: search(query), describe(target), step(name, fn), run(snippetName, input?)"
            .into(),
    );
    lines.join("\n")
}

/// The `execute` tool of one turn.
pub struct ExecuteTool {
    runtime: Rc<CodeMode>,
    connectors: Vec<Rc<dyn Connector>>,
    definition: ToolDefinition,
}

impl ExecuteTool {
    /// The tool over `runtime`, reaching `connectors`.
    pub fn new(runtime: Rc<CodeMode>, connectors: Vec<Rc<dyn Connector>>) -> Self {
        let definition = ToolDefinition {
            name: EXECUTE_TOOL.into(),
            description: description(&connectors),
            input_schema: json!({
                "type": "object",
                "properties": {"code": {"type": "string", "description": "JavaScript: the body of an async function, or an async arrow function"}},
                "required": ["code"],
                "additionalProperties": false,
            }),
            output_schema: None,
        };
        Self { runtime, connectors, definition }
    }

    /// As a shared tool.
    pub fn into_ref(self) -> ToolRef {
        Rc::new(self)
    }
}

#[async_trait(?Send)]
impl Tool for ExecuteTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let code = input.get("code").and_then(Value::as_str).unwrap_or_default();
        Ok(self.runtime.execute(code, Some(&ctx.tool_call_id), &self.connectors).await)
    }

    fn runs_code(&self) -> bool {
        true
    }
}
