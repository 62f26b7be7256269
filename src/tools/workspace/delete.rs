//! `delete`: remove a file or directory.

use super::ops::DeleteOps;
use super::{definition, parse_input};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::rc::Rc;

const DESCRIPTION: &str =
    "Delete a file or directory. Set recursive to true to remove non-empty directories.";

#[derive(Deserialize)]
struct Input {
    path: String,
    recursive: Option<bool>,
}

struct DeleteTool {
    def: ToolDefinition,
    ops: Rc<dyn DeleteOps>,
}

/// Think's `createDeleteTool`. A missing path succeeds (Think passes `force`); a non-empty
/// directory without `recursive` and the root are errors.
pub fn delete_tool(ops: Rc<dyn DeleteOps>) -> ToolRef {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute path to the file or directory"},
            "recursive": {"description": "If true, remove directories and their contents recursively", "type": "boolean"}
        },
        "required": ["path"],
        "additionalProperties": false
    });
    Rc::new(DeleteTool { def: definition("delete", DESCRIPTION, schema), ops })
}

#[async_trait(?Send)]
impl Tool for DeleteTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let Input { path, recursive } = parse_input("delete", input)?;
        self.ops.rm(&path, recursive.unwrap_or(false), true).await?;
        let mut m = Map::new();
        m.insert("deleted".into(), json!(path));
        Ok(Value::Object(m))
    }
}
