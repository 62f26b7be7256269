//! `grep`: search file contents with a JS-style regular expression or a fixed string.

use super::jsregex;
use super::ops::GrepOps;
use super::{definition, error_output, fs_err, parse_input, Int};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolRef};
use crate::workspace::{EntryType, FileInfo};
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
    regex: Regex,
    /// Look-around or backreferences: run per line instead of over the whole file.
    per_line: bool,
}

impl Matcher {
    /// Compiles `query` as Think would (`new RegExp(q, caseSensitive ? "g" : "gi")`);
    /// `None` when it is not a valid pattern.
    pub fn new(query: &str, fixed: bool, case_sensitive: bool) -> Option<Matcher> {
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
        Some(Matcher { regex, per_line })
    }

    fn line_matches(&self, line: &str) -> bool {
        self.regex.is_match(line).unwrap_or(false)
    }

    /// Zero-based numbers of the lines (split on `\n`) that contain a match, at most `max`.
    pub fn matching_lines(&self, content: &str, max: usize) -> Vec<usize> {
        let mut out = Vec::new();
        if max == 0 {
            return out;
        }
        if self.per_line {
            for (i, line) in content.split('\n').enumerate() {
                if self.line_matches(line) {
                    out.push(i);
                    if out.len() >= max {
                        break;
                    }
                }
            }
            return out;
        }
        // Find candidates over the whole text, then confirm each on its own line: a match
        // may span lines, but no line with a match of its own can be skipped.
        let mut pos = 0;
        let mut line_no = 0;
        let mut counted_to = 0;
        while pos <= content.len() {
            let Ok(Some(m)) = self.regex.find_from_pos(content, pos) else { break };
            let line_start = content[..m.start()].rfind('\n').map_or(0, |i| i + 1);
            let line_end = content[m.start()..].find('\n').map_or(content.len(), |i| m.start() + i);
            line_no += content[counted_to..line_start].matches('\n').count();
            counted_to = line_start;
            if self.line_matches(&content[line_start..line_end]) {
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
        let files: Vec<FileInfo> = self
            .ops
            .glob(pattern)
            .await
            .map_err(fs_err)?
            .into_iter()
            .filter(|f| f.kind == EntryType::File)
            .collect();
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
                if files[j].size <= MAX_FILE_SIZE {
                    if !batch.is_empty() && bytes + files[j].size > BATCH_BYTES {
                        break;
                    }
                    bytes += files[j].size;
                    batch.push(j);
                }
                j += 1;
            }
            let paths: Vec<String> = batch.iter().map(|&k| files[k].path.clone()).collect();
            let contents = if paths.is_empty() {
                Vec::new()
            } else {
                self.ops.read_files(&paths).await.map_err(fs_err)?
            };
            let mut next = contents.into_iter();
            while i < j {
                let file = &files[i];
                i += 1;
                if total >= MAX_MATCHES {
                    break 'files;
                }
                if file.size > MAX_FILE_SIZE {
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
                        matches.push(Value::String(format!("{}:{}: {}", file.path, n + 1, text)));
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
                        o.insert("file".into(), json!(file.path));
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
