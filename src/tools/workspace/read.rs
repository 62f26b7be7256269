//! `read`: line-numbered text, or metadata for images, PDFs and other binary files.

use super::media::{is_generic, is_text, looks_like_text, normalize_media_type, sniff};
use super::ops::ReadOps;
use super::{definition, error_output, fs_err, parse_input, Int};
use crate::tools::{ModelOutput, Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::rc::Rc;

/// Most lines returned by one call.
pub const MAX_LINES: usize = 2000;
/// Longest line returned before it is cut, in UTF-16 units as in JS.
pub const MAX_LINE_LENGTH: usize = 2000;

const DESCRIPTION: &str = "Read a workspace file. Text files return line-numbered content. Images and PDFs are passed to capable models as file content. Use offset and limit for large text files. Returns null if the file does not exist.";

#[derive(Deserialize)]
struct Input {
    path: String,
    offset: Option<Int>,
    limit: Option<Int>,
}

struct ReadTool {
    def: ToolDefinition,
    ops: Rc<dyn ReadOps>,
}

/// Think's `createReadTool`.
pub fn read_tool(ops: Rc<dyn ReadOps>) -> ToolRef {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute path to the file"},
            "offset": {"description": "1-indexed line number to start reading from", "type": "integer", "minimum": 1, "maximum": 9007199254740991u64},
            "limit": {"description": "Number of lines to read", "type": "integer", "minimum": 1, "maximum": 9007199254740991u64}
        },
        "required": ["path"],
        "additionalProperties": false
    });
    Rc::new(ReadTool { def: definition("read", DESCRIPTION, schema), ops })
}

#[async_trait(?Send)]
impl Tool for ReadTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let Input { path, offset, limit } = parse_input("read", input)?;
        let Some(stat) = self.ops.stat(&path).await.map_err(fs_err)? else {
            return Ok(error_output(format!("File not found: {path}")));
        };
        if stat.kind == crate::workspace::EntryType::Directory {
            return Ok(error_output(format!("{path} is a directory, not a file")));
        }
        let declared = normalize_media_type(&stat.mime_type);
        let media_type = match declared {
            Some(m) if !is_generic(&m) => m,
            declared => match self.ops.read_file_bytes(&path).await.map_err(fs_err)? {
                None => declared.unwrap_or_else(|| "application/octet-stream".into()),
                Some(bytes) => match sniff(&bytes) {
                    Some(s) => s.to_owned(),
                    None if looks_like_text(&bytes) => "text/plain".into(),
                    None => "application/octet-stream".into(),
                },
            },
        };
        let meta = |kind: &str| {
            let mut m = Map::new();
            m.insert("kind".into(), json!(kind));
            m.insert("path".into(), json!(path));
            m.insert("name".into(), json!(stat.name));
            m.insert("mediaType".into(), json!(media_type));
            m.insert("sizeBytes".into(), json!(stat.size));
            m
        };
        if media_type.starts_with("image/") {
            return Ok(Value::Object(meta("image")));
        }
        if media_type == "application/pdf" {
            return Ok(Value::Object(meta("file")));
        }
        if !is_text(&media_type) {
            let mut m = meta("binary");
            m.insert("unsupported".into(), json!(true));
            return Ok(Value::Object(m));
        }
        let Some(content) = self.ops.read_file(&path).await.map_err(fs_err)? else {
            return Ok(error_output(format!("Could not read file: {path}")));
        };
        Ok(numbered(&path, &content, offset.map(|i| i.0), limit.map(|i| i.0)))
    }

    fn model_output(&self, output: &Value) -> ModelOutput {
        let Some(obj) = output.as_object() else {
            return ModelOutput::Text(match output {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        };
        if let Some(Value::String(e)) = obj.get("error") {
            return ModelOutput::ErrorText(e.clone());
        }
        if let Some(Value::String(c)) = obj.get("content") {
            return ModelOutput::Text(c.clone());
        }
        ModelOutput::Json(output.clone())
    }
}

/// Cuts `line` to [`MAX_LINE_LENGTH`] UTF-16 units, as JS `slice` would.
fn clip(line: &str) -> String {
    let mut units = 0;
    for (i, c) in line.char_indices() {
        units += c.len_utf16();
        if units > MAX_LINE_LENGTH {
            return format!("{}... (truncated)", &line[..i]);
        }
    }
    line.to_owned()
}

/// Think's `readTextWithLineNumbers`.
fn numbered(path: &str, content: &str, offset: Option<u64>, limit: Option<u64>) -> Value {
    let lines: Vec<&str> = content.split('\n').collect();
    let total = lines.len();
    let start = offset.filter(|&o| o > 0).map_or(0, |o| (o - 1) as usize);
    let end = match limit.filter(|&l| l > 0) {
        Some(l) => start.saturating_add(l as usize),
        None => total,
    };
    let slice = if start < total { &lines[start..end.min(total)] } else { &[][..] };
    let mut out = String::new();
    for (i, line) in slice.iter().take(MAX_LINES).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{}\t{}", start + i + 1, clip(line)));
    }
    if slice.len() > MAX_LINES {
        out.push_str(&format!("\n... ({} more lines truncated)", slice.len() - MAX_LINES));
    }
    let mut m = Map::new();
    m.insert("path".into(), json!(path));
    m.insert("content".into(), json!(out));
    m.insert("totalLines".into(), json!(total));
    if offset.is_some_and(|o| o > 0) || limit.is_some_and(|l| l > 0) {
        m.insert("fromLine".into(), json!(start + 1));
        m.insert("toLine".into(), json!(end.min(total)));
    }
    Value::Object(m)
}
