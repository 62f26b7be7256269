//! `find`: paths matching a glob.

use super::ops::FindOps;
use super::{definition, parse_input};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use crate::workspace::EntryType;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::rc::Rc;

const DESCRIPTION: &str = "Find files matching a glob pattern. Supports standard glob syntax: * matches any file, ** matches directories recursively, ? matches a single character. Returns matching file paths with types and sizes.";

/// Paths shown per call.
pub const MAX_RESULTS: usize = 200;

#[derive(Deserialize)]
struct Input {
    pattern: String,
}

struct FindTool {
    def: ToolDefinition,
    ops: Rc<dyn FindOps>,
}

/// Think's `createFindTool`.
pub fn find_tool(ops: Rc<dyn FindOps>) -> ToolRef {
    let schema = json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern to match (e.g. \"**/*.ts\", \"src/**/*.test.ts\", \"*.md\")"}
        },
        "required": ["pattern"],
        "additionalProperties": false
    });
    Rc::new(FindTool { def: definition("find", DESCRIPTION, schema), ops })
}

#[async_trait(?Send)]
impl Tool for FindTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let Input { pattern } = parse_input("find", input)?;
        let matches = self.ops.glob_paths(&pattern).await?;
        let files: Vec<Value> = matches
            .iter()
            .take(MAX_RESULTS)
            .map(|(path, kind)| {
                let suffix = if *kind == EntryType::Directory { "/" } else { "" };
                Value::String(format!("{path}{suffix}"))
            })
            .collect();
        let mut m = Map::new();
        m.insert("pattern".into(), json!(pattern));
        m.insert("count".into(), json!(matches.len()));
        m.insert("files".into(), Value::Array(files));
        if matches.len() > MAX_RESULTS {
            m.insert("truncated".into(), json!(true));
            m.insert("showing".into(), json!(MAX_RESULTS));
        }
        Ok(Value::Object(m))
    }
}
