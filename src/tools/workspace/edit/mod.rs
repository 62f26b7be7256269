//! `edit`: replace one located string in a file, or create a file from an empty `old_string`.

mod matcher;

use super::ops::EditOps;
use super::{definition, error_output, line_count, parse_input};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use async_trait::async_trait;
use matcher::{apply_edit, EditResult, MatchLevel};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::rc::Rc;

const DESCRIPTION: &str = "Make a targeted edit to a file by replacing an exact string match. Provide the old_string to find and new_string to replace it with. The old_string must match exactly (including whitespace and indentation). Use an empty old_string with new_string to create a new file.";

const NOT_FOUND: &str = "old_string not found in file. Make sure it matches exactly, including whitespace and indentation. Read the file first to verify.";

#[derive(Deserialize)]
struct Input {
    path: String,
    old_string: String,
    new_string: String,
}

struct EditTool {
    def: ToolDefinition,
    ops: Rc<dyn EditOps>,
}

/// Think's `createEditTool`, with the matching cascade of `matcher`. Outputs
/// are Think's; a fuzzy match also reports `matchLevel` (`whitespace`, `unicode`,
/// `indentation` or `blank-lines`).
pub fn edit_tool(ops: Rc<dyn EditOps>) -> ToolRef {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute path to the file"},
            "old_string": {"type": "string", "description": "Exact text to find and replace. Empty string to create a new file."},
            "new_string": {"type": "string", "description": "Replacement text"}
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": false
    });
    Rc::new(EditTool { def: definition("edit", DESCRIPTION, schema), ops })
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

#[async_trait(?Send)]
impl Tool for EditTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let Input { path, old_string, new_string } = parse_input("edit", input)?;
        let mut m = Map::new();
        if old_string.is_empty() {
            if self.ops.read_file(&path).await?.is_some() {
                return Ok(error_output(
                    "File already exists. Provide old_string to edit, or use the write tool to overwrite.",
                ));
            }
            self.ops.write_file(&path, &new_string).await?;
            m.insert("path".into(), json!(path));
            m.insert("created".into(), json!(true));
            m.insert("lines".into(), json!(line_count(&new_string)));
            return Ok(Value::Object(m));
        }
        let Some(content) = self.ops.read_file(&path).await? else {
            return Ok(error_output(format!("File not found: {path}")));
        };
        match apply_edit(&content, &old_string, &new_string) {
            EditResult::Replaced { content: updated, level } => {
                self.ops.rewrite_file(&path, &updated).await?;
                m.insert("path".into(), json!(path));
                m.insert("replaced".into(), json!(true));
                if level != MatchLevel::Exact {
                    m.insert("fuzzyMatch".into(), json!(true));
                }
                m.insert("lines".into(), json!(line_count(&updated)));
                if level != MatchLevel::Exact {
                    m.insert("matchLevel".into(), json!(level.as_str()));
                }
                Ok(Value::Object(m))
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
