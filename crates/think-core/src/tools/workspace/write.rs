//! `write`: create or overwrite a file.

use super::ops::WriteOps;
use super::{file_tool, line_count, stale_output, FileToolKind};
use crate::tools::{ToolError, ToolRef};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::rc::Rc;

const DESCRIPTION: &str = "Write content to a file. Creates the file if it does not exist, overwrites if it does. Parent directories are created automatically.";

#[derive(Deserialize)]
struct Input {
    path: String,
    content: String,
    #[serde(rename = "expectedVersion")]
    expected_version: Option<String>,
}

/// Think's `createWriteTool`.
pub fn write_tool(ops: Rc<dyn WriteOps>) -> ToolRef {
    file_tool::<Write>(ops)
}

struct Write;

#[async_trait(?Send)]
impl FileToolKind for Write {
    type Ops = dyn WriteOps;
    type Input = Input;
    const NAME: &'static str = "write";
    const DESCRIPTION: &'static str = DESCRIPTION;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path to the file"},
                "content": {"type": "string", "description": "Content to write to the file"},
                "expectedVersion": crate::tools::workspace::expected_version_property()
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    async fn run(ops: &dyn WriteOps, input: Input) -> Result<Value, ToolError> {
        let Input { path, content, expected_version } = input;
        let expected = expected_version.as_deref();
        let (bytes, lines) = (content.len(), line_count(&content));
        if ops.creates_parents() {
            // Checked, written and noted in as few steps as the store can.
            if let Err(stale) = ops.write_fresh(&path, content, expected).await {
                return stale_output(stale);
            }
        } else {
            if let Err(stale) = ops.check_fresh(&path, expected).await {
                return stale_output(stale);
            }
            if let Some(i) = path.rfind('/') {
                let parent = &path[..i];
                if i + 1 < path.len() && !parent.is_empty() && parent != "/" {
                    ops.mkdir(parent, true).await?;
                }
            }
            ops.write_file(&path, &content).await?;
            ops.wrote(&path, &content).await?;
        }
        Ok(json!({"path": path, "bytesWritten": bytes, "lines": lines}))
    }
}
