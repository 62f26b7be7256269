//! `read`: line-numbered text, or metadata for images, PDFs and other binary files.

use super::media::{is_generic, is_text, looks_like_text, normalize_media_type, sniff};
use super::ops::ReadOps;
use super::{error_output, file_tool, FileToolKind, Int};
use crate::tools::{ModelOutput, ToolError, ToolRef};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
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

/// Think's `createReadTool`.
pub fn read_tool(ops: Rc<dyn ReadOps>) -> ToolRef {
    file_tool::<Read>(ops)
}

struct Read;

#[async_trait(?Send)]
impl FileToolKind for Read {
    type Ops = dyn ReadOps;
    type Input = Input;
    const NAME: &'static str = "read";
    const DESCRIPTION: &'static str = DESCRIPTION;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path to the file"},
                "offset": {"description": "1-indexed line number to start reading from", "type": "integer", "minimum": 1, "maximum": 9007199254740991u64},
                "limit": {"description": "Number of lines to read", "type": "integer", "minimum": 1, "maximum": 9007199254740991u64}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn run(ops: &dyn ReadOps, input: Input) -> Result<Value, ToolError> {
        let Input { path, offset, limit } = input;
        let Some((stat, prefetched, noted)) = ops.stat_with_seen_text(&path).await? else {
            return Ok(error_output(format!("File not found: {path}")));
        };
        if stat.kind == crate::workspace::EntryType::Directory {
            return Ok(error_output(format!("{path} is a directory, not a file")));
        }
        let declared = normalize_media_type(&stat.mime_type);
        let media_type = match declared {
            Some(m) if !is_generic(&m) => m,
            declared => match ops.read_file_bytes(&path).await? {
                None => declared.unwrap_or_else(|| "application/octet-stream".into()),
                Some(bytes) => match sniff(&bytes) {
                    Some(s) => s.to_owned(),
                    None if looks_like_text(&bytes) => "text/plain".into(),
                    None => "application/octet-stream".into(),
                },
            },
        };
        let meta = |kind: &str| {
            json!({
                "kind": kind,
                "path": path,
                "name": stat.name,
                "mediaType": media_type,
                "sizeBytes": stat.size,
            })
        };
        if media_type.starts_with("image/") {
            return Ok(meta("image"));
        }
        if media_type == "application/pdf" {
            return Ok(meta("file"));
        }
        if !is_text(&media_type) {
            let mut out = meta("binary");
            out["unsupported"] = json!(true);
            return Ok(out);
        }
        let content = match prefetched {
            Some(text) => Some(text),
            None => ops.read_file(&path).await?,
        };
        let Some(content) = content else {
            return Ok(error_output(format!("Could not read file: {path}")));
        };
        let mut out = numbered(&path, &content, offset.map(|i| i.0), limit.map(|i| i.0));
        let version = match noted {
            Some(token) => Some(token),
            None => ops.seen(&path, &content).await?,
        };
        if let Some(version) = version {
            out["version"] = json!(version);
        }
        Ok(out)
    }

    fn model_output(output: &Value) -> ModelOutput {
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

/// Appends `line` cut to [`MAX_LINE_LENGTH`] UTF-16 units, as JS `slice` would. A line of
/// at most that many bytes has at most that many units, so only long lines are counted.
/// What it appends is `line`'s UTF-8 up to a char boundary, then ASCII.
#[inline(always)]
fn push_clipped(out: &mut Vec<u8>, line: &str) {
    if line.len() <= MAX_LINE_LENGTH {
        out.extend_from_slice(line.as_bytes());
        return;
    }
    let mut units = 0;
    for (i, c) in line.char_indices() {
        units += c.len_utf16();
        if units > MAX_LINE_LENGTH {
            out.extend_from_slice(&line.as_bytes()[..i]);
            out.extend_from_slice(b"... (truncated)");
            return;
        }
    }
    out.extend_from_slice(line.as_bytes());
}

/// A line number kept as its decimal digits, `"\n"` before them and `"\t"` after, and
/// counted up digit by digit: a division per digit per line costs more than the rest of
/// the numbering.
struct LineLabel {
    /// `buf[start..]` is `"\n<digits>\t"`.
    buf: [u8; 24],
    start: usize,
}

impl LineLabel {
    fn new(mut n: usize) -> LineLabel {
        let mut buf = [0u8; 24];
        let mut i = buf.len() - 1;
        buf[i] = b'\t';
        loop {
            i -= 1;
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        buf[i - 1] = b'\n';
        LineLabel { buf, start: i - 1 }
    }

    /// The label with its leading newline (`with_newline`) or without.
    #[inline(always)]
    fn bytes(&self, with_newline: bool) -> &[u8] {
        &self.buf[self.start + usize::from(!with_newline)..]
    }

    #[inline(always)]
    fn increment(&mut self) {
        let mut i = self.buf.len() - 2;
        loop {
            if self.buf[i] != b'9' {
                self.buf[i] += 1;
                return;
            }
            self.buf[i] = b'0';
            if i == self.start + 1 {
                // All nines: one more digit (the buffer holds far more than usize needs).
                self.buf[i - 1] = b'1';
                self.buf[i - 2] = b'\n';
                self.start -= 1;
                return;
            }
            i -= 1;
        }
    }
}

/// Think's `readTextWithLineNumbers`, in one pass over the lines.
fn numbered(path: &str, content: &str, offset: Option<u64>, limit: Option<u64>) -> Value {
    let total = super::line_count(content);
    let start =
        offset.filter(|&o| o > 0).map_or(0, |o| usize::try_from(o - 1).unwrap_or(usize::MAX));
    let end = match limit.filter(|&l| l > 0) {
        Some(l) => start.saturating_add(usize::try_from(l).unwrap_or(usize::MAX)),
        None => total,
    };
    let end = end.min(total);
    let wanted = end.saturating_sub(start);
    let shown = wanted.min(MAX_LINES);
    // Built as bytes from whole UTF-8 pieces (labels are ASCII, lines are `&str` cut at
    // char boundaries), so it is UTF-8 without a check; a check per label cost a tenth of
    // the numbering.
    let mut out =
        Vec::with_capacity(if shown == total { content.len() + 7 * total } else { 64 * shown });
    if shown > 0 {
        let mut line = 0usize;
        let mut label = LineLabel::new(start + 1);
        super::scan::for_each_line(content.as_bytes(), |a, b| {
            if line >= start {
                out.extend_from_slice(label.bytes(line > start));
                label.increment();
                // Line bounds are at newlines, so always on char boundaries.
                push_clipped(&mut out, content.get(a..b).unwrap_or(""));
            }
            line += 1;
            line < start + shown
        });
    }
    if wanted > MAX_LINES {
        out.extend_from_slice(
            format!("\n... ({} more lines truncated)", wanted - MAX_LINES).as_bytes(),
        );
    }
    // SAFETY: `out` is a concatenation of whole UTF-8 sequences (see above).
    let out = unsafe { String::from_utf8_unchecked(out) };
    // Keys in Think's order, the map sized for all of them (a map that grows reallocates
    // its entries and its index), the text moved in (`json!` would copy it).
    let mut result = serde_json::Map::with_capacity(6);
    result.insert("path".into(), Value::String(path.to_owned()));
    result.insert("content".into(), Value::String(out));
    result.insert("totalLines".into(), json!(total));
    if offset.is_some_and(|o| o > 0) || limit.is_some_and(|l| l > 0) {
        result.insert("fromLine".into(), json!(start.saturating_add(1)));
        result.insert("toLine".into(), json!(end));
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::LineLabel;

    #[test]
    fn line_labels_count_up_across_digit_boundaries() {
        for first in [1usize, 8, 95, 998, 99_990] {
            let mut label = LineLabel::new(first);
            for n in first..first + 30 {
                assert_eq!(label.bytes(true), format!("\n{n}\t").as_bytes());
                assert_eq!(label.bytes(false), format!("{n}\t").as_bytes());
                label.increment();
            }
        }
    }
}
