//! `read`: line-numbered text, or metadata for images, PDFs and other binary files.

use super::media::{
    decimal_digits, is_generic, is_text, looks_like_text, normalize_media_type, sniff,
};
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
        if let (Some(version), Value::Object(map)) = (version, &mut out) {
            // Moved in, not copied (`json!` would clone it), without a lookup first.
            map.insert("version".into(), Value::String(version));
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
    fn new(n: usize) -> LineLabel {
        let mut buf = [0u8; 24];
        let tab = buf.len() - 1;
        buf[tab] = b'\t';
        let i = decimal_digits(n as u64, &mut buf[..tab]);
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
    let whole = if start == 0 && shown == total { number_all(content, total) } else { None };
    let mut out = whole.unwrap_or_else(|| number_lines(content, total, start, shown));
    if wanted > MAX_LINES {
        out.extend_from_slice(
            format!("\n... ({} more lines truncated)", wanted - MAX_LINES).as_bytes(),
        );
    }
    // SAFETY: `out` is a concatenation of whole UTF-8 sequences (see both builders).
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

/// Lines `start..start + shown` of `content` (`total` lines), numbered, each cut to
/// [`MAX_LINE_LENGTH`]. Built as bytes from whole UTF-8 pieces (labels are ASCII, lines are
/// `&str` cut at char boundaries), so it is UTF-8 without a check; a check per label cost a
/// tenth of the numbering.
fn number_lines(content: &str, total: usize, start: usize, shown: usize) -> Vec<u8> {
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
    out
}

/// Bytes a 16-byte step of [`number_all`] may write past the text's end (one step's store,
/// or one label's).
const STEP: usize = 16;

/// Every line of `content` numbered, when it has at most [`MAX_LINES`] lines and none
/// longer than [`MAX_LINE_LENGTH`] bytes (so none is cut); `None` otherwise. What
/// [`number_lines`] gives for such a text, in one pass of 16-byte steps into a buffer of the
/// exact size: a step copies 16 bytes and finds the newlines among them; after a newline
/// the label of the next line is written and the next step starts right after it. Per line
/// this is a few stores, where splitting the lines first and copying each costs two copies
/// of unknown length and the search's setup.
///
/// `total` is `line_count(content)`, which the caller has counted already (counting again
/// cost 2 % of a read): the buffer is sized from it, and every store is checked against the
/// buffer, so a wrong `total` gives `None`, never a write out of bounds.
fn number_all(content: &str, total: usize) -> Option<Vec<u8>> {
    let text = content.as_bytes();
    let n = text.len();
    if total > MAX_LINES {
        return None;
    }
    // Each line's label is its number's digits and a tab (the newline is the text's).
    let mut labels = total;
    let mut p = 1usize;
    while p <= total {
        labels += total - p + 1;
        p *= 10;
    }
    let len = n + labels;
    let cap = len + STEP;
    let mut out: Vec<u8> = Vec::with_capacity(cap);
    let dst = out.as_mut_ptr();
    let src = text.as_ptr();
    let mut label = ShortLabel::ONE;
    // SAFETY (every write below): text byte `i` goes to `i + extra`, where `extra` counts the
    // label bytes written before it, and each store is checked to end within `cap`, the
    // buffer's capacity. (With the right `total` the checks always hold: the bytes written
    // in order number exactly `len`, a step's 16-byte store reads text bytes only and ends
    // at most at `len`, and a label's 8-byte store ends before `len + 8`.)
    unsafe { label.write(dst) };
    let (mut i, mut extra, mut line_start) = (0usize, label.len, 0usize);
    loop {
        // The next newline at or after `i`, with the text up to it copied.
        let found = if i + STEP <= n {
            if i + extra + STEP > cap {
                return None;
            }
            // SAFETY: `i + 16 <= n`; the store, see above.
            let mask = unsafe {
                std::ptr::copy_nonoverlapping(src.add(i), dst.add(i + extra), STEP);
                newline_mask(src.add(i))
            };
            if mask == 0 {
                i += STEP;
                continue;
            }
            i + mask.trailing_zeros() as usize
        } else {
            let rest = memchr::memchr(b'\n', &text[i..]);
            let upto = rest.map_or(n, |j| i + j + 1);
            if upto + extra > cap {
                return None;
            }
            // SAFETY: text bytes `i..upto` to their places, see above.
            unsafe { std::ptr::copy_nonoverlapping(src.add(i), dst.add(i + extra), upto - i) };
            match rest {
                Some(j) => i + j,
                None => break,
            }
        };
        if found - line_start > MAX_LINE_LENGTH {
            return None;
        }
        i = found + 1;
        line_start = i;
        label.increment();
        if i + extra + 8 > cap {
            return None;
        }
        // SAFETY: see above.
        unsafe { label.write(dst.add(i + extra)) };
        extra += label.len;
    }
    if n - line_start > MAX_LINE_LENGTH {
        return None;
    }
    if n + extra != len {
        return None;
    }
    // SAFETY: the first `len` bytes are written (above), within the capacity; they are the
    // text's bytes in order with ASCII labels after newlines, so UTF-8.
    unsafe { out.set_len(len) };
    Some(out)
}

/// Bit `j` set when byte `j` of the 16 at `p` is a newline.
///
/// # Safety
/// `p` must point at 16 readable bytes.
#[inline(always)]
unsafe fn newline_mask(p: *const u8) -> u32 {
    #[cfg(target_arch = "wasm32")]
    {
        use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_load};
        // SAFETY: the caller's; `v128_load` needs no alignment.
        let v = unsafe { v128_load(p as *const v128) };
        u32::from(u8x16_bitmask(u8x16_eq(v, u8x16_splat(b'\n'))))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        // SAFETY: the caller's.
        let bytes = unsafe { std::slice::from_raw_parts(p, STEP) };
        bytes.iter().enumerate().fold(0, |m, (j, &b)| m | (u32::from(b == b'\n') << j))
    }
}

/// A line number of at most [`MAX_LINES`] as its digits and a tab, left-aligned, so that
/// one 8-byte store writes it.
#[derive(Clone, Copy)]
struct ShortLabel {
    buf: [u8; 8],
    len: usize,
}

impl ShortLabel {
    const ONE: ShortLabel = ShortLabel { buf: *b"1\t\0\0\0\0\0\0", len: 2 };

    /// Writes all 8 bytes at `dst` (the first `len` are the label).
    ///
    /// # Safety
    /// `dst` must be valid for 8 bytes of writes.
    #[inline(always)]
    unsafe fn write(&self, dst: *mut u8) {
        // SAFETY: the caller's.
        unsafe { std::ptr::copy_nonoverlapping(self.buf.as_ptr(), dst, 8) };
    }

    #[inline(always)]
    fn increment(&mut self) {
        let mut i = self.len - 2;
        loop {
            if self.buf[i] != b'9' {
                self.buf[i] += 1;
                return;
            }
            self.buf[i] = b'0';
            if i == 0 {
                // All nines: one more digit (at most 4 digits and the tab: 8 bytes hold it).
                self.buf.copy_within(0..self.len, 1);
                self.buf[0] = b'1';
                self.len += 1;
                return;
            }
            i -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{number_all, number_lines, LineLabel, ShortLabel, MAX_LINES, MAX_LINE_LENGTH};

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

    #[test]
    fn short_labels_count_up_across_digit_boundaries() {
        let mut label = ShortLabel::ONE;
        for n in 1..=MAX_LINES {
            assert_eq!(&label.buf[..label.len], format!("{n}\t").as_bytes());
            label.increment();
        }
    }

    /// The one-pass numbering gives what the line-by-line one gives, or declines (a line
    /// too long, too many lines); texts around the 16-byte steps, empty lines, multibyte
    /// characters, carriage returns.
    #[test]
    fn whole_file_numbering_matches_the_line_by_line_one() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let pieces =
            ["\n", "\n", "a", "bc", "0123456789abcdef", "é", "日本", "\r\n", "😀", " ", "\t"];
        let mut texts: Vec<String> =
            vec![String::new(), "\n".into(), "x".repeat(40), "\n".repeat(40)];
        for _ in 0..3000 {
            let len = (next() % 120) as usize;
            texts.push((0..len).map(|_| pieces[(next() % pieces.len() as u64) as usize]).collect());
        }
        texts.push("y".repeat(MAX_LINE_LENGTH));
        texts.push(format!("a\n{}\nb", "y".repeat(MAX_LINE_LENGTH + 1)));
        texts.push("line\n".repeat(MAX_LINES - 1));
        texts.push("line\n".repeat(MAX_LINES));
        texts.push("é".repeat(MAX_LINE_LENGTH / 2 + 1));
        let mut declined = 0;
        for text in &texts {
            let total = super::super::line_count(text);
            let fast = number_all(text, total);
            let slow = number_lines(text, total, 0, total.min(MAX_LINES));
            match fast {
                Some(fast) => assert_eq!(
                    String::from_utf8(fast).unwrap(),
                    String::from_utf8(slow).unwrap(),
                    "{text:?}"
                ),
                None => {
                    declined += 1;
                    let longest = text.split('\n').map(str::len).max().unwrap_or(0);
                    assert!(total > MAX_LINES || longest > MAX_LINE_LENGTH, "{text:?}");
                }
            }
        }
        assert_eq!(declined, 3, "the two texts with a line too long, the one with a line too many");
        // A wrong line count declines instead of writing past the buffer.
        assert_eq!(number_all("a\nb\nc\n", 1), None);
        assert_eq!(number_all("a\nb\nc\n", 10), None);
    }
}
