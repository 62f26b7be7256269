//! `edit`: replace one located string in a file, or create a file from an empty `old_string`.

mod matcher;
mod nfkd;

use super::ops::EditOps;
use super::{error_output, file_tool, line_count, stale_output, FileToolKind};
use crate::tools::{ToolError, ToolRef};
use async_trait::async_trait;
use matcher::{apply_edit_kept, EditResult, MatchLevel};
use serde::Deserialize;
use serde_json::{json, Value};
use std::rc::Rc;

const DESCRIPTION: &str = "Make a targeted edit to a file by replacing an exact string match. Provide the old_string to find and new_string to replace it with. The old_string must match exactly (including whitespace and indentation). Use an empty old_string with new_string to create a new file.";

const NOT_FOUND: &str = "old_string not found in file. Make sure it matches exactly, including whitespace and indentation. Read the file first to verify.";

#[derive(Deserialize)]
struct Input {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(rename = "expectedVersion")]
    expected_version: Option<String>,
}

/// Think's `createEditTool`, with the matching cascade of `matcher`. Outputs
/// are Think's; a fuzzy match also reports `matchLevel` (`whitespace`, `unicode`,
/// `indentation` or `blank-lines`).
pub fn edit_tool(ops: Rc<dyn EditOps>) -> ToolRef {
    file_tool::<Edit>(ops)
}

/// The message for an ambiguous match at `level`.
pub fn ambiguity_message(level: MatchLevel, count: usize) -> String {
    const MORE: &str = "Include more surrounding context to make the match unique.";
    match level {
        MatchLevel::Exact => format!("old_string appears {count} times in the file. {MORE}"),
        MatchLevel::Whitespace => format!("old_string matches multiple locations after whitespace normalization. {MORE}"),
        MatchLevel::Unicode => format!(
            "old_string matches multiple locations ({count}) after Unicode and trailing-whitespace normalization. {MORE}"
        ),
        MatchLevel::Indentation => {
            format!("old_string matches multiple locations ({count}) when indentation is ignored. {MORE}")
        }
        MatchLevel::BlankLines => format!(
            "old_string matches multiple locations ({count}) when blank lines and indentation are ignored. {MORE}"
        ),
    }
}

/// The output of an edit that replaced a match at `level`, leaving `lines` lines.
fn replaced(path: String, level: MatchLevel, lines: usize) -> Value {
    let mut out = json!({"path": path, "replaced": true});
    if level != MatchLevel::Exact {
        out["fuzzyMatch"] = json!(true);
    }
    out["lines"] = json!(lines);
    if level != MatchLevel::Exact {
        out["matchLevel"] = json!(level.as_str());
    }
    out
}

struct Edit;

#[async_trait(?Send)]
impl FileToolKind for Edit {
    type Ops = dyn EditOps;
    type Input = Input;
    const NAME: &'static str = "edit";
    const DESCRIPTION: &'static str = DESCRIPTION;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path to the file"},
                "old_string": {"type": "string", "description": "Exact text to find and replace. Empty string to create a new file."},
                "new_string": {"type": "string", "description": "Replacement text"},
                "expectedVersion": crate::tools::workspace::expected_version_property()
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    async fn run(ops: &dyn EditOps, input: Input) -> Result<Value, ToolError> {
        let Input { path, old_string, new_string, expected_version } = input;
        // The text the model's last write or edit of this file left, when the store kept
        // it: edited in one step while the file still holds it. Anything else (no kept
        // text, no unique match in it, a file changed since) takes the steps below, which
        // read the file and say what is wrong with it.
        if !old_string.is_empty() {
            if let Some(recalled) = ops.recall(&path) {
                let (result, kept) = apply_edit_kept(&recalled.text, &old_string, &new_string);
                if let EditResult::Replaced { content: updated, level } = result {
                    let lines = line_count(&updated);
                    let expected = expected_version.as_deref();
                    if ops.rewrite_recalled(&path, &recalled, updated, kept, expected).await? {
                        return Ok(replaced(path, level, lines));
                    }
                }
            }
        }
        // The check and the read in one step where the store can.
        let current = match ops.read_fresh(&path, expected_version.as_deref()).await {
            Ok(current) => current,
            Err(stale) => return stale_output(stale),
        };
        if old_string.is_empty() {
            if current.is_some() {
                return Ok(error_output(
                    "File already exists. Provide old_string to edit, or use the write tool to overwrite.",
                ));
            }
            ops.write_file(&path, &new_string).await?;
            ops.wrote(&path, &new_string).await?;
            return Ok(json!({"path": path, "created": true, "lines": line_count(&new_string)}));
        }
        let Some(content) = current else {
            return Ok(error_output(format!("File not found: {path}")));
        };
        let (result, kept) = apply_edit_kept(&content, &old_string, &new_string);
        match result {
            EditResult::Replaced { content: updated, level } => {
                ops.rewrite_noted(&path, &content, &updated, kept).await?;
                Ok(replaced(path, level, line_count(&updated)))
            }
            EditResult::Ambiguous { level, count } => {
                Ok(error_output(ambiguity_message(level, count)))
            }
            EditResult::NotFound { hint: None } => Ok(error_output(NOT_FOUND)),
            EditResult::NotFound { hint: Some(h) } => {
                Ok(error_output(format!("{NOT_FOUND}\n\n{h}")))
            }
        }
    }
}
