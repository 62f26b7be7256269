//! `grep`: search file contents with a JS-style regular expression or a fixed string.

use super::jsregex;
use super::ops::GrepOps;
use super::{definition, error_output, fs_err, parse_input, Int};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use async_trait::async_trait;
use fancy_regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::rc::Rc;

const DESCRIPTION: &str = "Search file contents using a regular expression or fixed string. Returns matching lines with file paths and line numbers. Searches all files matching the include glob, or all files if not specified.";

/// Matches reported per call.
pub const MAX_MATCHES: usize = 200;
/// Files larger than this are skipped (and counted in `filesSkipped`).
pub const MAX_FILE_SIZE: u64 = 1_048_576;
/// Files fetched per batch read, bounded again by [`BATCH_BYTES`].
const BATCH_FILES: usize = 99;
const BATCH_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Input {
    query: String,
    include: Option<String>,
    fixed_string: Option<bool>,
    case_sensitive: Option<bool>,
    context_lines: Option<Int>,
}

struct GrepTool {
    def: ToolDefinition,
    ops: Rc<dyn GrepOps>,
}

/// Think's `createGrepTool`. Regular expressions use JavaScript syntax (see [`jsregex`]);
/// matching is case-insensitive unless `caseSensitive` is true.
pub fn grep_tool(ops: Rc<dyn GrepOps>) -> ToolRef {
    let schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Search pattern (regex or fixed string)"},
            "include": {"description": "Glob pattern to filter files (e.g. \"**/*.ts\"). Defaults to \"**/*\"", "type": "string"},
            "fixedString": {"description": "If true, treat query as a literal string instead of regex", "type": "boolean"},
            "caseSensitive": {"description": "If true, search is case-sensitive (default: false)", "type": "boolean"},
            "contextLines": {"description": "Number of context lines around each match (default: 0)", "type": "integer", "minimum": 0, "maximum": 10}
        },
        "required": ["query"],
        "additionalProperties": false
    });
    Rc::new(GrepTool { def: definition("grep", DESCRIPTION, schema), ops })
}

/// A compiled search.
pub struct Matcher {
    kind: Kind,
}

enum Kind {
    Regex {
        regex: Regex,
        /// Look-around or backreferences: run per line instead of over the whole file.
        per_line: bool,
    },
    /// A fixed ASCII string without regard to ASCII case: exactly what JS's `i` flag does
    /// for an ASCII pattern, and several times faster than a case-folding regex.
    NoCase(NoCase),
    /// A fixed string with a line break: no single line can contain it.
    Never,
}

impl Matcher {
    /// Compiles `query` as Think would (`new RegExp(q, caseSensitive ? "g" : "gi")`);
    /// `None` when it is not a valid pattern.
    pub fn new(query: &str, fixed: bool, case_sensitive: bool) -> Option<Matcher> {
        if fixed && query.contains('\n') {
            return Some(Matcher { kind: Kind::Never });
        }
        if fixed && !case_sensitive && !query.is_empty() && query.is_ascii() {
            return Some(Matcher { kind: Kind::NoCase(NoCase::new(query.as_bytes())) });
        }
        let (pattern, per_line) = if fixed {
            (regex::escape(query), false)
        } else {
            let t = jsregex::translate(query);
            (t.pattern, t.context_sensitive)
        };
        let regex = RegexBuilder::new(&pattern)
            .case_insensitive(!case_sensitive)
            .multi_line(true)
            .build()
            .ok()?;
        Some(Matcher { kind: Kind::Regex { regex, per_line } })
    }

    /// Zero-based numbers of the lines (split on `\n`) that contain a match, at most `max`.
    pub fn matching_lines(&self, content: &str, max: usize) -> Vec<usize> {
        let mut out = Vec::new();
        if max == 0 {
            return out;
        }
        let regex = match &self.kind {
            Kind::Never => return out,
            Kind::Regex { regex, per_line: true } => {
                for (i, line) in content.split('\n').enumerate() {
                    if regex.is_match(line).unwrap_or(false) {
                        out.push(i);
                        if out.len() >= max {
                            break;
                        }
                    }
                }
                return out;
            }
            Kind::Regex { regex, .. } => Some(regex),
            Kind::NoCase(_) => None,
        };
        // Find candidates over the whole text, then (for a regex, whose match may span
        // lines) confirm each on its own line; no line with a match of its own is skipped.
        let bytes = content.as_bytes();
        let mut pos = 0;
        let mut line_no = 0;
        let mut counted_to = 0;
        while pos <= content.len() {
            let start = match (&self.kind, regex) {
                (Kind::NoCase(f), _) => f.find(bytes, pos),
                (_, Some(re)) => re.find_from_pos(content, pos).ok().flatten().map(|m| m.start()),
                _ => None,
            };
            let Some(start) = start else { break };
            let line_start = bytes[pos..start].iter().rposition(|&b| b == b'\n').map_or(pos, |i| pos + i + 1);
            let line_end = bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| start + i);
            line_no += bytecount::count(&bytes[counted_to..line_start], b'\n');
            counted_to = line_start;
            let confirmed = match regex {
                Some(re) => re.is_match(&content[line_start..line_end]).unwrap_or(false),
                None => true,
            };
            if confirmed {
                out.push(line_no);
                if out.len() >= max {
                    break;
                }
            }
            pos = line_end + 1;
        }
        out
    }
}

/// Finds an ASCII needle regardless of ASCII case: scans eight start positions at a time
/// for the needle's two least common bytes (either case) at their offsets, then compares
/// the whole needle where both are present.
pub struct NoCase {
    needle: Vec<u8>,
    /// Offsets in `needle` of the two bytes scanned for (equal for a one-byte needle).
    rare: [usize; 2],
}

/// How common a byte is in text and code (higher is more common); the scan looks for the
/// needle's least common bytes so that few positions need a full comparison.
fn commonness(b: u8) -> u32 {
    const LETTERS: &[u8] = b"etaoinsrhldcumfpgwybvkxjqz";
    let lower = b.to_ascii_lowercase();
    if let Some(i) = LETTERS.iter().position(|&c| c == lower) {
        return 200 - 4 * i as u32;
    }
    match b {
        b' ' | b'\t' => 255,
        b'.' | b',' | b';' | b':' | b'(' | b')' | b'_' | b'-' | b'=' | b'/' | b'"' | b'\'' => 150,
        b'0'..=b'9' => 110,
        _ => 60,
    }
}

/// The word of `hay` starting at `at`, with one bit set per byte equal to `b` in either
/// ASCII case (the high bit of that byte).
#[inline(always)]
fn either_case(hay: &[u8], at: usize, b: u8) -> u64 {
    use super::lines::{splat, zero_bytes};
    let w = &hay[at..at + 8];
    let word = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
    zero_bytes(word ^ splat(b.to_ascii_lowercase())) | zero_bytes(word ^ splat(b.to_ascii_uppercase()))
}

impl NoCase {
    fn new(needle: &[u8]) -> NoCase {
        let mut order: Vec<usize> = (0..needle.len()).collect();
        order.sort_by_key(|&i| (commonness(needle[i]), i));
        let first = order.first().copied().unwrap_or(0);
        // The second byte should differ from the first, or it filters nothing.
        let second = order
            .iter()
            .copied()
            .find(|&i| !needle[i].eq_ignore_ascii_case(&needle[first]))
            .unwrap_or(first);
        NoCase { needle: needle.to_ascii_lowercase(), rare: [first, second] }
    }

    /// Start of the first occurrence at or after `from`.
    fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        let n = self.needle.len();
        let last = hay.len().checked_sub(n)?;
        let matches_at = |start: usize| hay[start..start + n].eq_ignore_ascii_case(&self.needle);
        let [i, j] = self.rare;
        let (a, b) = (self.needle[i], self.needle[j]);
        let mut start = from;
        // Eight candidate starts per step; `start + 7 <= last` keeps both loads in bounds.
        while start + 8 <= last + 1 {
            let mut mask = either_case(hay, start + i, a) & either_case(hay, start + j, b);
            while mask != 0 {
                let at = start + (mask.trailing_zeros() / 8) as usize;
                mask &= mask - 1;
                if matches_at(at) {
                    return Some(at);
                }
            }
            start += 8;
        }
        (start..=last).find(|&at| matches_at(at))
    }
}

#[async_trait(?Send)]
impl Tool for GrepTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let input: Input = parse_input("grep", input)?;
        let pattern = input.include.as_deref().unwrap_or("**/*");
        let files: Vec<(String, u64)> = self.ops.glob_files(pattern).await.map_err(fs_err)?;
        let Some(matcher) = Matcher::new(
            &input.query,
            input.fixed_string.unwrap_or(false),
            input.case_sensitive.unwrap_or(false),
        ) else {
            return Ok(error_output(format!("Invalid regex: {}", input.query)));
        };
        let ctx = input.context_lines.map_or(0, |c| c.0 as usize);
        let mut matches: Vec<Value> = Vec::new();
        let (mut total, mut searched, mut with_matches, mut skipped) =
            (0usize, 0usize, 0usize, 0usize);
        let mut i = 0;
        'files: while i < files.len() {
            if total >= MAX_MATCHES {
                break;
            }
            // Fetch the next batch of searchable files in one read.
            let mut batch: Vec<usize> = Vec::new();
            let mut bytes = 0;
            let mut j = i;
            while j < files.len() && batch.len() < BATCH_FILES {
                let size = files[j].1;
                if size <= MAX_FILE_SIZE {
                    if !batch.is_empty() && bytes + size > BATCH_BYTES {
                        break;
                    }
                    bytes += size;
                    batch.push(j);
                }
                j += 1;
            }
            let paths: Vec<String> = batch.iter().map(|&k| files[k].0.clone()).collect();
            let contents = if paths.is_empty() {
                Vec::new()
            } else {
                self.ops.read_files(&paths).await.map_err(fs_err)?
            };
            let mut next = contents.into_iter();
            while i < j {
                let (file, size) = (&files[i].0, files[i].1);
                i += 1;
                if total >= MAX_MATCHES {
                    break 'files;
                }
                if size > MAX_FILE_SIZE {
                    skipped += 1;
                    continue;
                }
                let Some(content) = next.next().flatten() else { continue };
                searched += 1;
                let hits = matcher.matching_lines(&content, MAX_MATCHES - total);
                if hits.is_empty() {
                    continue;
                }
                with_matches += 1;
                total += hits.len();
                let lines: Vec<&str> = content.split('\n').collect();
                for n in hits {
                    let text = lines.get(n).copied().unwrap_or("");
                    if ctx == 0 {
                        matches.push(Value::String(format!("{}:{}: {}", file, n + 1, text)));
                    } else {
                        let start = n.saturating_sub(ctx);
                        let end = (n + ctx + 1).min(lines.len());
                        let context: Vec<String> = (start..end)
                            .map(|k| {
                                format!(
                                    "{} {}\t{}",
                                    if k == n { ">" } else { " " },
                                    k + 1,
                                    lines[k]
                                )
                            })
                            .collect();
                        let mut o = Map::new();
                        o.insert("file".into(), json!(file));
                        o.insert("line".into(), json!(n + 1));
                        o.insert("context".into(), json!(context.join("\n")));
                        matches.push(Value::Object(o));
                    }
                }
            }
        }
        let mut m = Map::new();
        m.insert("query".into(), json!(input.query));
        m.insert("filesSearched".into(), json!(searched));
        m.insert("filesWithMatches".into(), json!(with_matches));
        m.insert("totalMatches".into(), json!(total));
        m.insert("matches".into(), Value::Array(matches));
        if total >= MAX_MATCHES {
            m.insert("truncated".into(), json!(true));
        }
        if skipped > 0 {
            m.insert("filesSkipped".into(), json!(skipped));
            m.insert("note".into(), json!(format!("{skipped} file(s) skipped (larger than 1 MB)")));
        }
        Ok(Value::Object(m))
    }
}
