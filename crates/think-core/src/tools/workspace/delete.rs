//! `delete`: remove a file or directory.

use super::ops::DeleteOps;
use super::{file_tool, FileToolKind};
use crate::tools::{ToolError, ToolRef};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::rc::Rc;

const DESCRIPTION: &str =
    "Delete a file or directory. Set recursive to true to remove non-empty directories.";

#[derive(Deserialize)]
struct Input {
    path: String,
    recursive: Option<bool>,
}

/// Think's `createDeleteTool`. A missing path succeeds (Think passes `force`); a non-empty
/// directory without `recursive` and the root are errors.
pub fn delete_tool(ops: Rc<dyn DeleteOps>) -> ToolRef {
    file_tool::<Delete>(ops)
}

struct Delete;

#[async_trait(?Send)]
impl FileToolKind for Delete {
    type Ops = dyn DeleteOps;
    type Input = Input;
    const NAME: &'static str = "delete";
    const DESCRIPTION: &'static str = DESCRIPTION;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path to the file or directory"},
                "recursive": {"description": "If true, remove directories and their contents recursively", "type": "boolean"}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn run(
        ops: &dyn DeleteOps,
        Input { path, recursive }: Input,
    ) -> Result<Value, ToolError> {
        ops.rm(&path, recursive.unwrap_or(false), true).await?;
        Ok(json!({ "deleted": path }))
    }
}
