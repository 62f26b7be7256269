//! `grep`: search file contents with a JS-style regular expression or a fixed string.

use super::jsregex;
use super::ops::GrepOps;
use super::scan::Literal;
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
/// Files in the first page of a search; later pages hold between [`MIN_PAGE`] and
/// [`MAX_PAGE`], depending on the sizes seen.
const FIRST_PAGE: usize = 64;
const MIN_PAGE: usize = 16;
const MAX_PAGE: usize = 1024;
/// Most text one page carries (each file's share is `PAGE_BYTES / limit`).
const PAGE_BYTES: u64 = 4 * 1024 * 1024;

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
    /// A fixed string, compared bytewise: several times faster than a regex.
    Literal(Literal),
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
        // Case-insensitive JS matching of an ASCII pattern is ASCII case folding exactly;
        // other case-insensitive strings go to the (Unicode-folding) regex.
        if fixed && !query.is_empty() && (case_sensitive || query.is_ascii()) {
            let literal = Literal::new(query.as_bytes(), !case_sensitive);
            return Some(Matcher { kind: Kind::Literal(literal) });
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
            Kind::Literal(_) => None,
        };
        // Find candidates over the whole text, then (for a regex, whose match may span
        // lines) confirm each on its own line; no line with a match of its own is skipped.
        let bytes = content.as_bytes();
        let mut pos = 0;
        let mut line_no = 0;
        let mut counted_to = 0;
        while pos <= content.len() {
            let start = match (&self.kind, regex) {
                (Kind::Literal(f), _) => f.find(bytes, pos),
                (_, Some(re)) => re.find_from_pos(content, pos).ok().flatten().map(|m| m.start()),
                _ => None,
            };
            let Some(start) = start else { break };
            let line_start =
                bytes[pos..start].iter().rposition(|&b| b == b'\n').map_or(pos, |i| pos + i + 1);
            let line_end =
                bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| start + i);
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

#[async_trait(?Send)]
impl Tool for GrepTool {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let input: Input = parse_input("grep", input)?;
        let pattern = input.include.as_deref().unwrap_or("**/*");
        let Some(matcher) = Matcher::new(
            &input.query,
            input.fixed_string.unwrap_or(false),
            input.case_sensitive.unwrap_or(false),
        ) else {
            // As in Think, a bad glob is reported before a bad regex.
            self.ops.glob_files(pattern).await.map_err(fs_err)?;
            return Ok(error_output(format!("Invalid regex: {}", input.query)));
        };
        let ctx = input.context_lines.map_or(0, |c| c.0 as usize);
        let mut matches: Vec<Value> = Vec::new();
        let (mut total, mut searched, mut with_matches, mut skipped) =
            (0usize, 0usize, 0usize, 0usize);
        // Pages of files with their texts; a page never holds more than PAGE_BYTES of text,
        // and holds more files while the files are small.
        let mut after: Option<String> = None;
        let mut limit = FIRST_PAGE;
        let mut largest = 0u64;
        'pages: loop {
            let text_max = (PAGE_BYTES / limit as u64).min(MAX_FILE_SIZE);
            let (mut page, next) = self
                .ops
                .glob_texts(pattern, after.as_deref(), limit, text_max)
                .await
                .map_err(fs_err)?;
            let mut k = 0;
            while k < page.len() {
                // Texts the page did not carry are read in batches.
                let mut need: Vec<usize> = Vec::new();
                let mut bytes = 0;
                let mut j = k;
                while j < page.len() {
                    let f = &page[j];
                    if f.text.is_none() && f.size <= MAX_FILE_SIZE {
                        if !need.is_empty()
                            && (need.len() >= BATCH_FILES || bytes + f.size > BATCH_BYTES)
                        {
                            break;
                        }
                        bytes += f.size;
                        need.push(j);
                    }
                    j += 1;
                }
                if !need.is_empty() {
                    let paths: Vec<String> = need.iter().map(|&n| page[n].path.clone()).collect();
                    let texts = self.ops.read_files(&paths).await.map_err(fs_err)?;
                    for (&n, text) in need.iter().zip(texts) {
                        page[n].text = text;
                    }
                }
                for f in &mut page[k..j] {
                    if total >= MAX_MATCHES {
                        break 'pages;
                    }
                    if f.size > MAX_FILE_SIZE {
                        skipped += 1;
                        continue;
                    }
                    let Some(content) = f.text.take() else { continue };
                    searched += 1;
                    let hits = matcher.matching_lines(&content, MAX_MATCHES - total);
                    if hits.is_empty() {
                        continue;
                    }
                    with_matches += 1;
                    total += hits.len();
                    push_matches(&mut matches, &f.path, &content, &hits, ctx);
                }
                k = j;
            }
            if total >= MAX_MATCHES {
                break;
            }
            match next {
                Some(p) => after = Some(p),
                None => break,
            }
            // Size the next page so files like the largest seen so far still carry their
            // text (each gets PAGE_BYTES / limit).
            largest =
                page.iter().map(|f| f.size).filter(|&s| s <= MAX_FILE_SIZE).fold(largest, u64::max);
            limit = (PAGE_BYTES / (2 * largest).max(1)).clamp(MIN_PAGE as u64, MAX_PAGE as u64)
                as usize;
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

/// Appends the matches of one file: `path:line: text`, or `{file, line, context}` objects
/// with `contextLines` around each hit.
fn push_matches(matches: &mut Vec<Value>, path: &str, content: &str, hits: &[usize], ctx: usize) {
    let lines: Vec<&str> = content.split('\n').collect();
    for &n in hits {
        let text = lines.get(n).copied().unwrap_or("");
        if ctx == 0 {
            matches.push(Value::String(format!("{}:{}: {}", path, n + 1, text)));
            continue;
        }
        let start = n.saturating_sub(ctx);
        let end = (n + ctx + 1).min(lines.len());
        let context: Vec<String> = (start..end)
            .map(|k| format!("{} {}\t{}", if k == n { ">" } else { " " }, k + 1, lines[k]))
            .collect();
        let mut o = Map::new();
        o.insert("file".into(), json!(path));
        o.insert("line".into(), json!(n + 1));
        o.insert("context".into(), json!(context.join("\n")));
        matches.push(Value::Object(o));
    }
}
