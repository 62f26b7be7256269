//! `list`: one page of a directory.

use super::media::format_size;
use super::ops::ListOps;
use super::{definition, parse_input, Int};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use crate::workspace::EntryType;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::rc::Rc;

const DESCRIPTION: &str =
    "List files and directories in a given path. Returns names, types, and sizes for each entry.";

/// Entries per page when the model gives no limit.
pub const DEFAULT_LIMIT: usize = 200;

#[derive(Deserialize)]
struct Input {
    #[serde(default = "root")]
    path: String,
    limit: Option<Int>,
    offset: Option<Int>,
}

fn root() -> String {
    "/".to_owned()
}

struct ListTool {
    def: ToolDefinition,
    ops: Rc<dyn ListOps>,
}

/// Think's `createListTool`.
pub fn list_tool(ops: Rc<dyn ListOps>) -> ToolRef {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"default": "/", "description": "Absolute path to the directory to list", "type": "string"},
            "limit": {"description": "Maximum number of entries to return (default: 200)", "type": "integer", "minimum": 1, "maximum": 1000},
            "offset": {"description": "Number of entries to skip (for pagination)", "type": "integer", "minimum": 0, "maximum": 9007199254740991u64}
        },
        "additionalProperties": false
    });
    Rc::new(ListTool { def: definition("list", DESCRIPTION, schema), ops })
}

#[async_trait(?Send)]
impl Tool for ListTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let Input { path, limit, offset } = parse_input("list", input)?;
        let limit = limit.map_or(DEFAULT_LIMIT, |l| l.0 as usize);
        let offset = offset.map_or(0, |o| o.0 as usize);
        let entries = self.ops.read_dir_brief(&path, limit, offset).await?;
        let formatted: Vec<Value> = entries
            .iter()
            .map(|(name, kind, size)| {
                Value::String(match kind {
                    EntryType::Directory => format!("{name}/"),
                    EntryType::File => format!("{name} ({})", format_size(*size)),
                    EntryType::Symlink => name.clone(),
                })
            })
            .collect();
        let mut m = Map::new();
        m.insert("path".into(), json!(path));
        m.insert("count".into(), json!(entries.len()));
        m.insert("entries".into(), Value::Array(formatted));
        Ok(Value::Object(m))
    }
}
