//! `write`: create or overwrite a file.

use super::ops::WriteOps;
use super::{definition, line_count, parse_input};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::rc::Rc;

const DESCRIPTION: &str = "Write content to a file. Creates the file if it does not exist, overwrites if it does. Parent directories are created automatically.";

#[derive(Deserialize)]
struct Input {
    path: String,
    content: String,
}

struct WriteTool {
    def: ToolDefinition,
    ops: Rc<dyn WriteOps>,
}

/// Think's `createWriteTool`.
pub fn write_tool(ops: Rc<dyn WriteOps>) -> ToolRef {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute path to the file"},
            "content": {"type": "string", "description": "Content to write to the file"}
        },
        "required": ["path", "content"],
        "additionalProperties": false
    });
    Rc::new(WriteTool { def: definition("write", DESCRIPTION, schema), ops })
}

#[async_trait(?Send)]
impl Tool for WriteTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let Input { path, content } = parse_input("write", input)?;
        if !self.ops.creates_parents() {
            if let Some(i) = path.rfind('/') {
                let parent = &path[..i];
                if i + 1 < path.len() && !parent.is_empty() && parent != "/" {
                    self.ops.mkdir(parent, true).await?;
                }
            }
        }
        self.ops.write_file(&path, &content).await?;
        let mut m = Map::new();
        m.insert("path".into(), json!(path));
        m.insert("bytesWritten".into(), json!(content.len()));
        m.insert("lines".into(), json!(line_count(&content)));
        Ok(Value::Object(m))
    }
}
