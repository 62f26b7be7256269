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

/// Finds a fixed string, exactly or regardless of ASCII case: scans many start positions
/// at a time for the needle's two least common bytes at their offsets (sixteen with wasm
/// SIMD, eight in a 64-bit word elsewhere), and compares the whole needle only where both
/// are present.
pub struct Literal {
    /// Lower-cased when `fold`.
    needle: Vec<u8>,
    fold: bool,
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

/// One byte to look for: `fold` is OR-ed into the haystack first (0x20 for a letter when
/// case is ignored, so both cases meet the lower-case `byte`).
#[derive(Clone, Copy)]
struct ByteProbe {
    fold: u8,
    byte: u8,
}

impl ByteProbe {
    fn new(b: u8, ignore_case: bool) -> ByteProbe {
        match ignore_case && b.is_ascii_alphabetic() {
            true => ByteProbe { fold: 0x20, byte: b.to_ascii_lowercase() },
            false => ByteProbe { fold: 0, byte: b },
        }
    }

    /// The high bit of each byte of `word` that is the probed byte.
    #[inline(always)]
    fn hits(self, word: u64) -> u64 {
        use super::lines::{splat, zero_bytes};
        zero_bytes((word | splat(self.fold)) ^ splat(self.byte))
    }
}

/// The little-endian word at `at`, or 0 past the end (callers stay in bounds).
#[inline(always)]
fn word_at(hay: &[u8], at: usize) -> u64 {
    hay.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()).map_or(0, u64::from_le_bytes)
}

impl Literal {
    fn new(needle: &[u8], fold: bool) -> Literal {
        let mut order: Vec<usize> = (0..needle.len()).collect();
        order.sort_by_key(|&i| (commonness(needle[i]), i));
        let first = order.first().copied().unwrap_or(0);
        let same = |a: u8, b: u8| if fold { a.eq_ignore_ascii_case(&b) } else { a == b };
        // The second byte should differ from the first, or it filters nothing.
        let second = order.iter().copied().find(|&i| !same(needle[i], needle[first])).unwrap_or(first);
        let needle = if fold { needle.to_ascii_lowercase() } else { needle.to_vec() };
        Literal { needle, fold, rare: [first, second] }
    }

    fn probes(&self) -> (ByteProbe, ByteProbe) {
        let [i, j] = self.rare;
        (ByteProbe::new(self.needle[i], self.fold), ByteProbe::new(self.needle[j], self.fold))
    }

    #[inline(always)]
    fn matches_at(&self, hay: &[u8], start: usize) -> bool {
        let window = &hay[start..start + self.needle.len()];
        if self.fold {
            window.eq_ignore_ascii_case(&self.needle)
        } else {
            window == self.needle.as_slice()
        }
    }

    /// Start of the first occurrence at or after `from`.
    fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        let last = hay.len().checked_sub(self.needle.len())?;
        // wasm has no runtime feature detection: SIMD is part of every Workers runtime, and
        // the module needs it anyway (bytecount uses simd128 the same way).
        #[cfg(target_arch = "wasm32")]
        let (found, from) = self.find_simd(hay, from, last);
        #[cfg(target_arch = "wasm32")]
        if found.is_some() {
            return found;
        }
        self.find_words(hay, from, last)
    }

    /// Eight start positions per step in a 64-bit word, then one at a time.
    fn find_words(&self, hay: &[u8], from: usize, last: usize) -> Option<usize> {
        let [i, j] = self.rare;
        let (first, second) = self.probes();
        let mut start = from;
        // `start + 7 <= last` keeps both loads in bounds.
        while start + 8 <= last + 1 {
            let mut mask = first.hits(word_at(hay, start + i)) & second.hits(word_at(hay, start + j));
            while mask != 0 {
                let at = start + (mask.trailing_zeros() / 8) as usize;
                mask &= mask - 1;
                if self.matches_at(hay, at) {
                    return Some(at);
                }
            }
            start += 8;
        }
        (start..=last).find(|&at| self.matches_at(hay, at))
    }

    /// Sixteen start positions per step; returns a match, or where the rest of the search
    /// (fewer than sixteen positions) starts.
    #[cfg(target_arch = "wasm32")]
    #[target_feature(enable = "simd128")]
    fn find_simd(&self, hay: &[u8], from: usize, last: usize) -> (Option<usize>, usize) {
        use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_and, v128_load, v128_or};
        let [i, j] = self.rare;
        let (first, second) = self.probes();
        let (f1, b1) = (u8x16_splat(first.fold), u8x16_splat(first.byte));
        let (f2, b2) = (u8x16_splat(second.fold), u8x16_splat(second.byte));
        let mut start = from;
        while start + 16 <= last + 1 {
            // SAFETY: `start + 15 <= last` and `i, j < needle.len()`, so both 16-byte loads
            // end at most at `last + needle.len() - 1 < hay.len()`.
            let (w1, w2) = unsafe {
                (
                    v128_load(hay.as_ptr().add(start + i) as *const v128),
                    v128_load(hay.as_ptr().add(start + j) as *const v128),
                )
            };
            let both = v128_and(u8x16_eq(v128_or(w1, f1), b1), u8x16_eq(v128_or(w2, f2), b2));
            let mut bits = u8x16_bitmask(both) as u32;
            while bits != 0 {
                let at = start + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.matches_at(hay, at) {
                    return (Some(at), start);
                }
            }
            start += 16;
        }
        (None, start)
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
                        if !need.is_empty() && (need.len() >= BATCH_FILES || bytes + f.size > BATCH_BYTES) {
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
            largest = page.iter().map(|f| f.size).filter(|&s| s <= MAX_FILE_SIZE).fold(largest, u64::max);
            limit = (PAGE_BYTES / (2 * largest).max(1)).clamp(MIN_PAGE as u64, MAX_PAGE as u64) as usize;
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
