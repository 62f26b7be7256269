//! `list`: one page of a directory.

use super::media::push_size;
use super::ops::ListOps;
use super::{file_tool, FileToolKind, Int};
use crate::tools::{ToolError, ToolRef};
use crate::workspace::EntryType;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
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

/// Think's `createListTool`.
pub fn list_tool(ops: Rc<dyn ListOps>) -> ToolRef {
    file_tool::<List>(ops)
}

struct List;

#[async_trait(?Send)]
impl FileToolKind for List {
    type Ops = dyn ListOps;
    type Input = Input;
    const NAME: &'static str = "list";
    const DESCRIPTION: &'static str = DESCRIPTION;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"default": "/", "description": "Absolute path to the directory to list", "type": "string"},
                "limit": {"description": "Maximum number of entries to return (default: 200)", "type": "integer", "minimum": 1, "maximum": 1000},
                "offset": {"description": "Number of entries to skip (for pagination)", "type": "integer", "minimum": 0, "maximum": 9007199254740991u64}
            },
            "additionalProperties": false
        })
    }

    async fn run(
        ops: &dyn ListOps,
        Input { path, limit, offset }: Input,
    ) -> Result<Value, ToolError> {
        let limit = limit.map_or(DEFAULT_LIMIT, |l| l.0 as usize);
        let offset = offset.map_or(0, |o| o.0 as usize);
        let entries = ops.read_dir_brief(&path, limit, offset).await?;
        let count = entries.len();
        // Each name is extended in place and moved into the output (`json!` of a `Vec`
        // would copy every string).
        let formatted: Vec<Value> = entries
            .into_iter()
            .map(|(mut name, kind, size)| {
                match kind {
                    EntryType::Directory => name.push('/'),
                    EntryType::File => {
                        name.push_str(" (");
                        push_size(&mut name, size);
                        name.push(')');
                    }
                    EntryType::Symlink => {}
                }
                Value::String(name)
            })
            .collect();
        Ok(json!({"path": path, "count": count, "entries": Value::Array(formatted)}))
    }
}
