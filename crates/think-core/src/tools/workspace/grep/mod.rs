//! `grep`: search file contents with a JS-style regular expression or a fixed string.

mod literals;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod corpus_tests;

use super::ops::GrepOps;
use super::scan::Literal;
use super::{error_output, file_tool, FileToolKind, Int};
use crate::regexp::{Flags, GaveUp, RegExp, RegExpError, Subject};
use crate::tools::{ToolError, ToolRef};
use crate::workspace::FileText;
use crate::workspace::{GramBatch, GramQuery, GrepFile};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::rc::Rc;

const DESCRIPTION: &str = "Search file contents using a regular expression or fixed string. Returns matching lines with file paths and line numbers. Searches all files matching the include glob, or all files if not specified.";

/// Matches reported per call.
pub const MAX_MATCHES: usize = 200;
/// Files larger than this are skipped (and counted in `filesSkipped`).
pub const MAX_FILE_SIZE: u64 = 1_048_576;
/// A line longer than this many characters is shown cut around its first match (Think's
/// `read` cuts lines at the same length), as ripgrep's `--max-columns` does.
pub const MAX_LINE_CHARS: usize = 2000;
/// Characters of a cut line that are shown, around the start of its first match.
pub const CUT_LINE_CHARS: usize = 500;
/// Files fetched per batch read, bounded again by [`BATCH_BYTES`].
const BATCH_FILES: usize = 99;
const BATCH_BYTES: u64 = 4 * 1024 * 1024;
/// Text of files the index does not cover that one search indexes on the way (checked
/// before each file): at least [`INDEX_BYTES`], else an eighth of the text the search
/// covers. Indexing costs about seven times the scan per byte, so a search right after many
/// writes (before the alarm indexes them, or during a turn, when the alarm waits) costs
/// about twice the scan instead of eight times, and eight searches index everything.
const INDEX_BYTES: u64 = 1 << 20;
/// See [`INDEX_BYTES`].
const INDEX_SHARE: u64 = 8;
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

/// Think's `createGrepTool`. Regular expressions are JavaScript's (`crate::regexp`); matching is case-insensitive unless `caseSensitive` is true.
pub fn grep_tool(ops: Rc<dyn GrepOps>) -> ToolRef {
    file_tool::<Grep>(ops)
}

/// A compiled search.
pub struct Matcher {
    kind: Kind,
    /// What a matching file must contain, for the workspace's trigram index.
    required: GramQuery,
    /// Lines on which a backtracking pattern gave up (the host engine's limit, `crate::regexp`).
    gave_up: std::cell::Cell<usize>,
}

/// Lines that may exceed the host engine's backtracking limit (`crate::regexp`; a line that
/// needs more counts as no match) in one search before the search stops, so a
/// catastrophic pattern costs at most this many limits in all.
pub const MAX_GIVE_UPS: usize = 16;
/// The note a search stopped by [`MAX_GIVE_UPS`] carries.
pub const GAVE_UP_NOTE: &str = "The search stopped early: the regular expression backtracked too much on several lines. Simplify it (avoid nested quantifiers such as (a+)+).";

/// Think's flags (`gi` unless case-sensitive), with `m` for the search over a whole file.
fn flags(case_sensitive: bool) -> Flags {
    Flags { ignore_case: !case_sensitive, multi_line: true, unicode: false }
}

enum Kind {
    /// A JS regular expression (see `crate::regexp`).
    Regex(RegExp),
    /// A fixed string, compared bytewise: several times faster than a regex.
    Literal(Literal),
    /// A fixed string with a line break: no single line can contain it.
    Never,
}

impl Matcher {
    fn of(kind: Kind, required: GramQuery) -> Matcher {
        Matcher { kind, required, gave_up: std::cell::Cell::new(0) }
    }

    /// What a file must contain to hold a match; `All` when nothing is known, and for a
    /// backtracking pattern, whose give-ups depend on every file it reads.
    pub fn required(&self) -> &GramQuery {
        &self.required
    }

    /// Whether the search stopped because the pattern backtracked too much.
    pub fn gave_up(&self) -> bool {
        self.gave_up.get() >= MAX_GIVE_UPS
    }

    /// Counts a backtracking give-up as no match.
    fn counted<T: Default>(&self, result: Result<T, GaveUp>) -> T {
        result.unwrap_or_else(|GaveUp| {
            self.gave_up.set(self.gave_up.get() + 1);
            T::default()
        })
    }

    /// Compiles `query` as Think would (`new RegExp(q, caseSensitive ? "g" : "gi")`);
    /// an error when it is not a valid pattern or one that can backtrack exponentially.
    pub fn new(query: &str, fixed: bool, case_sensitive: bool) -> Result<Matcher, RegExpError> {
        if fixed && query.contains('\n') {
            return Ok(Matcher::of(Kind::Never, GramQuery::All));
        }
        // Case-insensitive JS matching of an ASCII pattern is ASCII case folding exactly;
        // other case-insensitive strings go to the (Unicode-folding) regex.
        if fixed && !query.is_empty() && (case_sensitive || query.is_ascii()) {
            let literal = Literal::new(query.as_bytes(), !case_sensitive);
            let required = GramQuery::Literal(query.as_bytes().to_ascii_lowercase());
            return Ok(Matcher::of(Kind::Literal(literal), required));
        }
        let source =
            if fixed { Cow::Owned(crate::regexp::escape(query)) } else { Cow::Borrowed(query) };
        let regex = RegExp::new(&source, flags(case_sensitive))?;
        let required = literals::required(&source, !case_sensitive);
        Ok(Matcher::of(Kind::Regex(regex), required))
    }

    /// The byte range of the first match in one line.
    pub(crate) fn find_in_line(&self, line: &str) -> Option<(usize, usize)> {
        match &self.kind {
            Kind::Never => None,
            Kind::Literal(f) => f.find(line.as_bytes(), 0).map(|at| (at, at + f.len())),
            Kind::Regex(regex) => regex.find_at(&Subject::new(line), 0).ok().flatten(),
        }
    }

    /// Zero-based numbers of the lines (split on `\n`) that contain a match, at most `max`.
    pub fn matching_lines(&self, content: &str, max: usize) -> Vec<usize> {
        let mut out = Vec::new();
        if max == 0 {
            return out;
        }
        let subject;
        let regex = match &self.kind {
            Kind::Never => return out,
            Kind::Regex(regex) => {
                subject = Subject::new(content);
                Some((regex, &subject))
            }
            Kind::Literal(_) => None,
        };
        if let Some((regex, subject)) = regex.filter(|(r, _)| r.per_line()) {
            let mut start = 0;
            for (i, line) in content.split('\n').enumerate() {
                if self.gave_up() {
                    break;
                }
                let end = start + line.len();
                if self.counted(regex.is_match_in(subject, start, end)) {
                    out.push(i);
                    if out.len() >= max {
                        break;
                    }
                }
                start = end + 1;
            }
            return out;
        }
        // Find candidates over the whole text, then (for a regex, whose match may span
        // lines) confirm each on its own line; no line with a match of its own is skipped.
        let bytes = content.as_bytes();
        let mut pos = 0;
        let mut line_no = 0;
        let mut counted_to = 0;
        while pos <= content.len() && !self.gave_up() {
            let start = match (&self.kind, regex) {
                (Kind::Literal(f), _) => f.find(bytes, pos),
                (_, Some((re, s))) => self.counted(re.candidate_at(s, pos)),
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
                Some((re, s)) => self.counted(re.is_match_in(s, line_start, line_end)),
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

struct Grep;

#[async_trait(?Send)]
impl FileToolKind for Grep {
    type Ops = dyn GrepOps;
    type Input = Input;
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = DESCRIPTION;

    fn schema() -> Value {
        json!({
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
        })
    }

    async fn run(ops: &dyn GrepOps, input: Input) -> Result<Value, ToolError> {
        let pattern = input.include.as_deref().unwrap_or("**/*");
        let matcher = match Matcher::new(
            &input.query,
            input.fixed_string.unwrap_or(false),
            input.case_sensitive.unwrap_or(false),
        ) {
            Ok(matcher) => matcher,
            Err(e) => {
                // As in Think, a bad glob is reported before a bad regex.
                ops.glob_files(pattern).await?;
                return Ok(error_output(match e {
                    RegExpError::Catastrophic(c) => format!("grep: {c}"),
                    _ => format!("Invalid regex: {}", input.query),
                }));
            }
        };
        let mut tally =
            Tally { ctx: input.context_lines.map_or(0, |c| c.0 as usize), ..Tally::default() };
        match ops.grep_files(pattern, matcher.required()).await? {
            Some(files) => search_candidates(ops, &matcher, &files, &mut tally).await?,
            None => search_pages(ops, &matcher, pattern, &mut tally).await?,
        }
        let Tally { matches, total, searched, with_matches, skipped, .. } = tally;
        let mut out = json!({
            "query": input.query,
            "filesSearched": searched,
            "filesWithMatches": with_matches,
            "totalMatches": total,
            "matches": matches,
        });
        if total >= MAX_MATCHES || matcher.gave_up() {
            out["truncated"] = json!(true);
        }
        let mut notes = Vec::new();
        if skipped > 0 {
            out["filesSkipped"] = json!(skipped);
            notes.push(format!("{skipped} file(s) skipped (larger than 1 MB)"));
        }
        if matcher.gave_up() {
            notes.push(GAVE_UP_NOTE.to_owned());
        }
        if !notes.is_empty() {
            out["note"] = json!(notes.join(" "));
        }
        Ok(out)
    }
}

/// The counts and matches of a search so far.
#[derive(Default)]
struct Tally {
    ctx: usize,
    matches: Vec<Value>,
    total: usize,
    searched: usize,
    with_matches: usize,
    skipped: usize,
}

impl Tally {
    /// Whether the search is over: enough matches, or a pattern that backtracks too much.
    fn done(&self, matcher: &Matcher) -> bool {
        self.total >= MAX_MATCHES || matcher.gave_up()
    }

    /// Searches one file's text.
    fn search(&mut self, matcher: &Matcher, path: &str, content: &str) {
        self.searched += 1;
        let hits = matcher.matching_lines(content, MAX_MATCHES - self.total);
        if hits.is_empty() {
            return;
        }
        self.with_matches += 1;
        self.total += hits.len();
        push_matches(&mut self.matches, matcher, path, content, &hits, self.ctx);
    }
}

/// The search without an index: pages of files with their texts; a page never holds more
/// than PAGE_BYTES of text, and holds more files while the files are small.
async fn search_pages(
    ops: &dyn GrepOps,
    matcher: &Matcher,
    pattern: &str,
    tally: &mut Tally,
) -> Result<(), ToolError> {
    let mut after: Option<String> = None;
    let mut limit = FIRST_PAGE;
    let mut largest = 0u64;
    loop {
        let text_max = (PAGE_BYTES / limit as u64).min(MAX_FILE_SIZE);
        let (mut page, next) = ops.glob_texts(pattern, after.as_deref(), limit, text_max).await?;
        let mut k = 0;
        while k < page.len() {
            // Texts the page did not carry are read in batches.
            let j = read_batch(ops, &mut page, k, |_, f| f.text.is_none()).await?;
            for f in &mut page[k..j] {
                if tally.done(matcher) {
                    return Ok(());
                }
                if f.size > MAX_FILE_SIZE {
                    tally.skipped += 1;
                    continue;
                }
                let Some(content) = f.text.take() else { continue };
                tally.search(matcher, &f.path, &content);
            }
            k = j;
        }
        if tally.total >= MAX_MATCHES {
            return Ok(());
        }
        match next {
            Some(p) => after = Some(p),
            None => return Ok(()),
        }
        // Size the next page so files like the largest seen so far still carry their
        // text (each gets PAGE_BYTES / limit).
        largest =
            page.iter().map(|f| f.size).filter(|&s| s <= MAX_FILE_SIZE).fold(largest, u64::max);
        limit =
            (PAGE_BYTES / (2 * largest).max(1)).clamp(MIN_PAGE as u64, MAX_PAGE as u64) as usize;
    }
}

/// The search over the files the trigram index lists: only candidates are read (in
/// batches, in path order), and every other file counts as searched without a match, so
/// the counts and matches are those of [`search_pages`]. The texts of files the index did
/// not cover are indexed on the way (see `workspace/grams.rs`).
async fn search_candidates(
    ops: &dyn GrepOps,
    matcher: &Matcher,
    files: &[GrepFile],
    tally: &mut Tally,
) -> Result<(), ToolError> {
    let mut batch = GramBatch::default();
    let covered: u64 = files.iter().map(|f| f.size).sum();
    let budget = (covered / INDEX_SHARE).max(INDEX_BYTES);
    let searched = search_stretches(ops, matcher, files, tally, &mut batch, budget).await;
    // What was read is indexed even when the search stopped early or failed later.
    ops.index_grams(&mut batch).await?;
    searched
}

/// [`search_candidates`]' loop, in stretches of [`MAX_PAGE`] files.
async fn search_stretches(
    ops: &dyn GrepOps,
    matcher: &Matcher,
    files: &[GrepFile],
    tally: &mut Tally,
    batch: &mut GramBatch,
    budget: u64,
) -> Result<(), ToolError> {
    let mut indexed = 0;
    for stretch in files.chunks(MAX_PAGE) {
        let mut page: Vec<FileText> = stretch
            .iter()
            .map(|f| FileText { path: f.path.clone(), size: f.size, text: None })
            .collect();
        let mut k = 0;
        while k < page.len() {
            let j = read_batch(ops, &mut page, k, |n, _| stretch[n].candidate).await?;
            for (f, file) in page[k..j].iter_mut().zip(&stretch[k..j]) {
                if tally.done(matcher) {
                    return Ok(());
                }
                if f.size > MAX_FILE_SIZE {
                    tally.skipped += 1;
                    continue;
                }
                if !file.candidate {
                    tally.searched += 1;
                    continue;
                }
                let Some(content) = f.text.take() else { continue };
                if let Some(ticket) = file.unindexed.as_ref().filter(|_| indexed < budget) {
                    indexed += content.len() as u64;
                    batch.add(ticket, &content);
                }
                tally.search(matcher, &f.path, &content);
            }
            k = j;
            if batch.is_full() {
                ops.index_grams(batch).await?;
            }
        }
    }
    Ok(())
}

/// Reads, in one `read_files` call, the texts of the files of `page` from `k` on that
/// `wanted` picks (given their index in `page`) (at most [`BATCH_FILES`] of them and [`BATCH_BYTES`], files over
/// [`MAX_FILE_SIZE`] left out), and returns where the batch ends.
async fn read_batch(
    ops: &dyn GrepOps,
    page: &mut [FileText],
    k: usize,
    wanted: impl Fn(usize, &FileText) -> bool,
) -> Result<usize, ToolError> {
    let mut need: Vec<usize> = Vec::new();
    let mut bytes = 0;
    let mut j = k;
    while j < page.len() {
        let f = &page[j];
        if f.size <= MAX_FILE_SIZE && wanted(j, f) {
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
        let texts = ops.read_files(&paths).await?;
        for (&n, text) in need.iter().zip(texts) {
            page[n].text = text;
        }
    }
    Ok(j)
}

/// Appends the matches of one file: `path:line: text`, or `{file, line, context}` objects
/// with `contextLines` around each hit. Lines over [`MAX_LINE_CHARS`] are cut (see
/// [`cut_line`]).
fn push_matches(
    matches: &mut Vec<Value>,
    matcher: &Matcher,
    path: &str,
    content: &str,
    hits: &[usize],
    ctx: usize,
) {
    let lines: Vec<&str> = content.split('\n').collect();
    let shown = |k: usize, hit: bool| {
        let line = lines[k];
        if line.len() <= MAX_LINE_CHARS {
            return Cow::Borrowed(line);
        }
        cut_line(line, if hit { matcher.find_in_line(line) } else { None })
    };
    for &n in hits {
        if n >= lines.len() {
            continue;
        }
        if ctx == 0 {
            matches.push(Value::String(format!("{}:{}: {}", path, n + 1, shown(n, true))));
            continue;
        }
        let start = n.saturating_sub(ctx);
        let end = (n + ctx + 1).min(lines.len());
        let context: Vec<String> = (start..end)
            .map(|k| format!("{} {}\t{}", if k == n { ">" } else { " " }, k + 1, shown(k, k == n)))
            .collect();
        matches.push(json!({"file": path, "line": n + 1, "context": context.join("\n")}));
    }
}

/// A line of more than [`MAX_LINE_CHARS`] characters cut to [`CUT_LINE_CHARS`] around the
/// start of `hit` (its start when there is none), each cut side marked with the number of
/// characters left out: `[… 1200 characters cut] …text… [… 998300 characters cut]`.
fn cut_line(line: &str, hit: Option<(usize, usize)>) -> Cow<'_, str> {
    let total = line.chars().count();
    if total <= MAX_LINE_CHARS {
        return Cow::Borrowed(line);
    }
    let hit_char = hit.map_or(0, |(at, _)| line[..at].chars().count());
    let first = hit_char.saturating_sub(CUT_LINE_CHARS / 4).min(total - CUT_LINE_CHARS);
    let byte_at = |c: usize| line.char_indices().nth(c).map_or(line.len(), |(i, _)| i);
    let (from, to) = (byte_at(first), byte_at(first + CUT_LINE_CHARS));
    let mut out = String::with_capacity(CUT_LINE_CHARS * 4 + 64);
    if first > 0 {
        out.push_str(&format!("[… {first} characters cut] "));
    }
    out.push_str(&line[from..to]);
    let after = total - first - CUT_LINE_CHARS;
    if after > 0 {
        out.push_str(&format!(" [… {after} characters cut]"));
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
