//! `find`: paths matching a glob.

use super::ops::FindOps;
use super::{file_tool, FileToolKind};
use crate::tools::{ToolError, ToolRef};
use crate::workspace::EntryType;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::rc::Rc;

const DESCRIPTION: &str = "Find files matching a glob pattern. Supports standard glob syntax: * matches any file, ** matches directories recursively, ? matches a single character. Returns matching file paths with types and sizes.";

/// Paths shown per call.
pub const MAX_RESULTS: usize = 200;

#[derive(Deserialize)]
struct Input {
    pattern: String,
}

/// Think's `createFindTool`.
pub fn find_tool(ops: Rc<dyn FindOps>) -> ToolRef {
    file_tool::<Find>(ops)
}

struct Find;

#[async_trait(?Send)]
impl FileToolKind for Find {
    type Ops = dyn FindOps;
    type Input = Input;
    const NAME: &'static str = "find";
    const DESCRIPTION: &'static str = DESCRIPTION;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern to match (e.g. \"**/*.ts\", \"src/**/*.test.ts\", \"*.md\")"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    async fn run(ops: &dyn FindOps, Input { pattern }: Input) -> Result<Value, ToolError> {
        let matches = ops.glob_paths(&pattern).await?;
        let count = matches.len();
        // Each path is extended in place and moved into the output.
        let files: Vec<Value> = matches
            .into_iter()
            .take(MAX_RESULTS)
            .map(|(mut path, kind)| {
                if kind == EntryType::Directory {
                    path.push('/');
                }
                Value::String(path)
            })
            .collect();
        let mut out = json!({"pattern": pattern, "count": count, "files": Value::Array(files)});
        if count > MAX_RESULTS {
            out["truncated"] = json!(true);
            out["showing"] = json!(MAX_RESULTS);
        }
        Ok(out)
    }
}
