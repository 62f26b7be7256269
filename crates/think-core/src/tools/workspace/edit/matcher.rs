//! The `edit` tool's matcher: a cascade of ever looser comparisons, each of which must find
//! exactly one location before it is used, and a diagnosis of the closest region when none
//! does, so the model can correct its `old_string` in one step.
//!
//! Every level is bounded by its input, for a file of n bytes in L lines and an `old_string`
//! of m bytes in k lines:
//!
//! 1. exact: a substring search, O(n + m) (`memchr::memmem`); counting overlapping
//!    occurrences (Think's count) is O(n + m) too ([`count_overlapping`]);
//! 2. Think's whitespace normalization (runs of spaces/tabs are one space, CRLF is LF):
//!    one normalizing pass over each side and a substring search, O(n + m);
//! 3. as 2, plus trailing whitespace ignored per line and Unicode folded (NFKC-equivalent
//!    compatibility decomposition, smart quotes to ASCII, dashes to `-`, NBSP and typographic
//!    spaces to a space): O(n + m); levels 2 and 3 build a normalized copy of the file (9
//!    bytes per byte), so they run on files up to 4 MiB only;
//! 4. whole lines compared without their indentation, accepted when the indentation differs
//!    by the same amount on every line: line keys are hashed and windows found by a rolling
//!    hash, O(n + m + L), then each hash hit is verified in O(k), at most 4 M line
//!    comparisons in all; levels 4 and 5 run on files up to 8 MiB;
//! 5. as 4 with blank lines left out on both sides, so a blank line the model dropped or
//!    added inside the region does not matter; the file's blank lines outside the replaced
//!    span stay, and `new_string` loses the blank lines `old_string` had around its first
//!    and last non-blank line: same cost as 4.
//!
//! The closest-match hint (`closest_region`) ignores blank lines, looks at the first 400
//! characters of each line, ranks windows in O(L·k) line comparisons within a budget of
//! 16 M units on at most 2 M characters of the file (skipped with a note past either), and
//! measures its best five candidates, one line shorter, as long and one line longer than
//! `old_string`, exactly on at most 4,000 characters a side.
//!
//! Fuzzy matches map back to byte offsets in the original, and `new_string` is re-indented
//! to the file's indentation when the model's differed. Replacement is literal, and the
//! file's line endings (LF or CRLF) are kept.

use similar::{ChangeTag, TextDiff};
use std::borrow::Cow;

/// Which comparison found the match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchLevel {
    Exact,
    Whitespace,
    Unicode,
    Indentation,
    /// Level 5: as [`MatchLevel::Indentation`], with blank lines left out on both sides.
    BlankLines,
}

impl MatchLevel {
    /// The name reported in the tool output's `matchLevel`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchLevel::Exact => "exact",
            MatchLevel::Whitespace => "whitespace",
            MatchLevel::Unicode => "unicode",
            MatchLevel::Indentation => "indentation",
            MatchLevel::BlankLines => "blank-lines",
        }
    }
}

/// What an edit attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub enum EditResult {
    /// The new file content.
    Replaced { content: String, level: MatchLevel },
    /// The first level that matched at all matched `count` places.
    Ambiguous { level: MatchLevel, count: usize },
    /// Nothing matched; `hint` describes the closest region, if any is close.
    NotFound { hint: Option<String> },
}

/// Files up to which the whitespace and Unicode levels run: their normalized copy takes 9
/// bytes per byte (36 MB here), and an isolate has 128 MB. Larger files still get the exact
/// and line levels.
const MAX_VIEW_BYTES: usize = 4 * 1024 * 1024;

/// Files up to which the line levels run: they keep a folded key per line (about as large
/// as the file again, plus 64 bytes a line).
const MAX_LINE_LEVEL_BYTES: usize = 8 * 1024 * 1024;

/// [`apply_edit_kept`] without the kept lengths (the matcher's tests).
#[cfg(test)]
pub fn apply_edit(content: &str, old: &str, new: &str) -> EditResult {
    apply_edit_kept(content, old, new).0
}

/// Replaces the single location of `old` in `content` with `new`; with it, how many bytes
/// at the start and at the end of `content` an exact replacement left as they were (0 and
/// 0 for any other result), so that the history's reverse delta need not compare them
/// again (see `Workspace::rewrite_kept_for_model`).
pub fn apply_edit_kept(content: &str, old: &str, new: &str) -> (EditResult, (usize, usize)) {
    let new = adapt_line_endings(content, new);
    // Level 1: exact, counting overlapping occurrences as Think does. One searcher for the
    // first occurrence and the look for a second (building one per search showed in a
    // profile of the edit row).
    let finder = memchr::memmem::Finder::new(old.as_bytes());
    let first = if old.is_empty() { None } else { finder.find(content.as_bytes()) };
    let exact = match first {
        Some(at) => {
            let rest = &content[at + char_len_at(content, at)..];
            1 + match finder.find(rest.as_bytes()) {
                None => 0,
                Some(_) => count_overlapping(rest, old),
            }
        }
        None => 0,
    };
    if let (1, Some(at)) = (exact, first) {
        let kept = (at, content.len() - at - old.len());
        let result = EditResult::Replaced {
            content: splice(content, at, at + old.len(), &new),
            level: MatchLevel::Exact,
        };
        return (result, kept);
    }
    (apply_loose(content, old, &new, exact), (0, 0))
}

/// The levels after the exact one, for an `old_string` found `exact` times exactly.
fn apply_loose(content: &str, old: &str, new: &str, exact: usize) -> EditResult {
    if exact > 1 {
        return EditResult::Ambiguous { level: MatchLevel::Exact, count: exact };
    }
    for (level, unicode) in [(MatchLevel::Whitespace, false), (MatchLevel::Unicode, true)] {
        if content.len() > MAX_VIEW_BYTES {
            break;
        }
        let hay = View::new(content, unicode);
        let needle = View::new(old, unicode);
        if needle.text.is_empty() {
            continue;
        }
        let found = find_unique(&hay.text, &needle.text);
        match found {
            Found::None => continue,
            Found::Many(count) => return EditResult::Ambiguous { level, count },
            Found::One(a) => {
                let b = a + needle.text.len();
                let (start, mut end) = (hay.spans[a].0 as usize, hay.spans[b - 1].1 as usize);
                if unicode {
                    end = absorb_trailing_ws(content, end);
                }
                return EditResult::Replaced {
                    content: replace_region(content, start, end, old, new),
                    level,
                };
            }
        }
    }
    match match_lines(content, old, false) {
        Found::One((start, end)) => {
            return EditResult::Replaced {
                content: replace_region(content, start, end, old, new),
                level: MatchLevel::Indentation,
            }
        }
        Found::Many(count) => {
            return EditResult::Ambiguous { level: MatchLevel::Indentation, count }
        }
        Found::None => {}
    }
    match match_lines(content, old, true) {
        Found::One((start, end)) => {
            let (lead, trail) = outer_blank_lines(old);
            let new = trim_blank_lines(new, lead, trail);
            EditResult::Replaced {
                content: replace_region(content, start, end, old, &new),
                level: MatchLevel::BlankLines,
            }
        }
        Found::Many(count) => EditResult::Ambiguous { level: MatchLevel::BlankLines, count },
        Found::None => EditResult::NotFound { hint: closest_region(content, old, new) },
    }
}

/// Occurrences of `needle`, overlapping ones included (Think's count). A match always starts
/// on a character boundary, so stepping one byte past it is stepping one character.
///
/// O(n + m): two substring searches settle the usual zero or one, and only a second
/// occurrence leads to a full count, by Knuth–Morris–Pratt (restarting a search one byte
/// past each hit would be O(n·m) on text like `"a" × n`).
pub fn count_overlapping(hay: &str, needle: &str) -> usize {
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    if needle.is_empty() {
        return 0;
    }
    let Some(first) = memchr::memmem::find(hay, needle) else { return 0 };
    if memchr::memmem::find(&hay[first + 1..], needle).is_none() {
        return 1;
    }
    let fail = crate::tools::workspace::scan::kmp_failure(needle);
    let (mut count, mut k) = (0, 0);
    for &b in &hay[first..] {
        while k > 0 && b != needle[k] {
            k = fail[k - 1];
        }
        if b == needle[k] {
            k += 1;
        }
        if k == needle.len() {
            count += 1;
            k = fail[k - 1];
        }
    }
    count
}

/// Length in bytes of the character starting at byte `at` (1 at the end).
fn char_len_at(s: &str, at: usize) -> usize {
    s[at..].chars().next().map_or(1, char::len_utf8)
}

fn splice(content: &str, start: usize, end: usize, new: &str) -> String {
    let mut out = String::with_capacity(content.len() + new.len());
    out.push_str(&content[..start]);
    out.push_str(new);
    out.push_str(&content[end..]);
    out
}

/// Rewrites `new`'s line breaks to the file's convention when the file uses just one.
fn adapt_line_endings<'a>(content: &str, new: &'a str) -> Cow<'a, str> {
    if !new.contains('\n') {
        return Cow::Borrowed(new);
    }
    let crlf = content.matches("\r\n").count();
    let lf = content.matches('\n').count() - crlf;
    if crlf > 0 && lf == 0 {
        if new.contains('\n') && new.matches("\r\n").count() != new.matches('\n').count() {
            return Cow::Owned(new.replace("\r\n", "\n").replace('\n', "\r\n"));
        }
    } else if crlf == 0 && lf > 0 && new.contains("\r\n") {
        return Cow::Owned(new.replace("\r\n", "\n"));
    }
    Cow::Borrowed(new)
}

/// Extends a match that ends at the last visible character of a line over the line's
/// trailing whitespace, which the Unicode level ignores.
fn absorb_trailing_ws(content: &str, end: usize) -> usize {
    let rest = &content[end..];
    let ws = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    let after = &rest[ws..];
    if ws > 0 && (after.is_empty() || after.starts_with('\n') || after.starts_with("\r\n")) {
        end + ws
    } else {
        end
    }
}

enum Found<T> {
    None,
    One(T),
    Many(usize),
}

/// The first non-overlapping occurrence, or how many there are when more than one.
fn find_unique(hay: &str, needle: &str) -> Found<usize> {
    let Some(first) = hay.find(needle) else { return Found::None };
    let mut count = 1;
    let mut pos = first + needle.len();
    while let Some(i) = hay[pos..].find(needle) {
        count += 1;
        pos += i + needle.len();
    }
    if count == 1 {
        Found::One(first)
    } else {
        Found::Many(count)
    }
}

/// A normalized copy of a string, with the original byte span behind each normalized byte
/// (`u32` offsets: 9 bytes of memory per byte of text, built in one pass).
struct View {
    text: String,
    spans: Vec<(u32, u32)>,
}

impl View {
    fn new(s: &str, unicode: bool) -> View {
        let mut view =
            View { text: String::with_capacity(s.len()), spans: Vec::with_capacity(s.len()) };
        // A pending run of spaces and tabs (after folding): its original span. It becomes
        // one space; with `unicode`, a run at the end of a line or of the text is dropped.
        let mut run: Option<(usize, usize)> = None;
        let push = |view: &mut View, run: &mut Option<(usize, usize)>, c: char, start, end| {
            if c == ' ' || c == '\t' {
                *run = Some(match *run {
                    Some((first, _)) => (first, end),
                    None => (start, end),
                });
                return;
            }
            if let Some((first, last)) = run.take() {
                if !(unicode && c == '\n') {
                    view.push(' ', first, last);
                }
            }
            view.push(c, start, end);
        };
        let mut it = s.char_indices().peekable();
        while let Some((i, c)) = it.next() {
            if c == '\r' && it.peek().map(|p| p.1) == Some('\n') {
                it.next();
                push(&mut view, &mut run, '\n', i, i + 2);
            } else if unicode {
                let end = i + c.len_utf8();
                fold_char(c, &mut |d| push(&mut view, &mut run, d, i, end));
            } else {
                push(&mut view, &mut run, c, i, i + c.len_utf8());
            }
        }
        if let Some((first, last)) = run {
            if !unicode {
                view.push(' ', first, last);
            }
        }
        view
    }

    fn push(&mut self, c: char, start: usize, end: usize) {
        self.text.push(c);
        for _ in 0..c.len_utf8() {
            self.spans.push((start as u32, end as u32));
        }
    }
}

/// Folds one character for the Unicode level.
fn fold_char(c: char, out: &mut dyn FnMut(char)) {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '\u{FF07}' => out('\''),
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{FF02}' => out('"'),
        '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}' => out('-'),
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => out(' '),
        '\u{200B}' | '\u{2060}' | '\u{FEFF}' => {}
        c if c.is_ascii() => out(c),
        c => super::nfkd::decompose_compatible(c, out),
    }
}

/// Line comparisons one line-level match may spend verifying candidate windows. Candidates
/// are found by a rolling hash over the line keys' hashes, so the search itself is linear;
/// only a file of many identical windows (which could make verification quadratic) reaches
/// this, and the level then gives up (see [`match_lines`]).
const VERIFY_BUDGET: usize = 4_000_000;

/// Levels 4 and 5: whole lines equal once indentation is ignored (and the Unicode level's
/// folding applied), with the same indentation difference on every non-blank line. With
/// `skip_blank` (level 5) blank lines are left out on both sides, so a blank line the model
/// dropped or added does not matter. Returns the byte range from the first to the last
/// matched line, with the last line's `\n` when `old` ends with one.
///
/// Windows are located by a polynomial rolling hash of the per-line key hashes, O(n + m)
/// for n file lines and m old lines, and each hash hit is verified line by line, O(m) per
/// hit, within [`VERIFY_BUDGET`] line comparisons. When that budget runs out with fewer than
/// two verified hits the level reports no match (it cannot prove uniqueness).
fn match_lines(content: &str, old: &str, skip_blank: bool) -> Found<(usize, usize)> {
    if content.len() > MAX_LINE_LEVEL_BYTES {
        return Found::None;
    }
    let (old_body, old_ends_nl) = match old.strip_suffix('\n') {
        Some(b) => (b.strip_suffix('\r').unwrap_or(b), true),
        None => (old, false),
    };
    let keep = |l: &Line| !skip_blank || !l.key.is_empty();
    let old_all = lines(old_body);
    let old_lines: Vec<&Line> = old_all.iter().filter(|l| keep(l)).collect();
    if old_lines.iter().all(|l| l.key.is_empty()) {
        return Found::None;
    }
    let file_all = lines(content);
    let file_lines: Vec<&Line> = file_all.iter().filter(|l| keep(l)).collect();
    let m = old_lines.len();
    if file_lines.len() < m {
        return Found::None;
    }
    const BASE: u64 = 0x9E37_79B9_7F4A_7C15;
    let top = (1..m).fold(1u64, |p, _| p.wrapping_mul(BASE));
    let poly =
        |ls: &[&Line]| ls.iter().fold(0u64, |h, l| h.wrapping_mul(BASE).wrapping_add(l.hash));
    let target = poly(&old_lines);
    let mut rolling = poly(&file_lines[..m]);
    let mut hits: Vec<usize> = Vec::new();
    let mut work = 0usize;
    for i in 0..=file_lines.len() - m {
        if i > 0 {
            rolling = rolling
                .wrapping_sub(file_lines[i - 1].hash.wrapping_mul(top))
                .wrapping_mul(BASE)
                .wrapping_add(file_lines[i + m - 1].hash);
        }
        if rolling != target {
            continue;
        }
        work += m;
        if work > VERIFY_BUDGET {
            if hits.len() < 2 {
                return Found::None;
            }
            break;
        }
        let window = &file_lines[i..i + m];
        if window.iter().zip(&old_lines).any(|(f, o)| f.hash != o.hash || f.key != o.key) {
            continue;
        }
        let pairs: Vec<(usize, usize)> = window
            .iter()
            .zip(&old_lines)
            .filter(|(_, o)| !o.key.is_empty())
            .map(|(f, o)| (indent_width(f.indent), indent_width(o.indent)))
            .collect();
        if IndentMap::fit(&pairs).is_some() {
            hits.push(i);
        }
    }
    match hits.as_slice() {
        [] => Found::None,
        [i] => {
            let first = file_lines[*i];
            let last = file_lines[*i + m - 1];
            let mut end = last.end;
            if old_ends_nl && end < content.len() {
                end += 1; // the '\n' (a '\r' before it is part of the line)
            }
            Found::One((first.start, end))
        }
        many => Found::Many(many.len()),
    }
}

struct Line<'a> {
    /// Byte range of the line without its '\n'.
    start: usize,
    end: usize,
    indent: &'a str,
    /// The line folded as at the Unicode level, without indentation or trailing space.
    key: String,
    /// A hash of `key`, compared before the key itself.
    hash: u64,
}

fn lines(s: &str) -> Vec<Line<'_>> {
    use std::hash::{Hash, Hasher};
    let mut out = Vec::new();
    let mut start = 0;
    for piece in s.split('\n') {
        let end = start + piece.len();
        let body = piece.strip_suffix('\r').unwrap_or(piece);
        let trimmed = body.trim_start_matches([' ', '\t']);
        let indent = &body[..body.len() - trimmed.len()];
        let key = View::new(trimmed, true).text.trim_start_matches(' ').to_owned();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        out.push(Line { start, end, indent, key, hash: hasher.finish() });
        start = end + 1;
    }
    out
}

/// `new` without up to `lead` leading and `trail` trailing blank lines (its final line
/// break kept): at the blank-line level these are the blank lines `old` had around the
/// matched region, which stay the file's own.
fn trim_blank_lines(new: &str, lead: usize, trail: usize) -> String {
    let (body, nl) = match new.strip_suffix('\n') {
        Some(b) => (b, "\n"),
        None => (new, ""),
    };
    let mut parts: Vec<&str> = body.split('\n').collect();
    let front = parts.iter().take(lead).take_while(|l| l.trim().is_empty()).count();
    parts.drain(..front.min(parts.len() - 1));
    let back = parts.iter().rev().take(trail).take_while(|l| l.trim().is_empty()).count();
    let back = back.min(parts.len() - 1);
    parts.truncate(parts.len() - back);
    let mut out = parts.join("\n");
    out.push_str(nl);
    out
}

/// How many blank lines `old` has before its first and after its last non-blank line
/// (its final line break not counted as a line).
fn outer_blank_lines(old: &str) -> (usize, usize) {
    let body = old.strip_suffix('\n').unwrap_or(old);
    let parts: Vec<&str> = body.split('\n').collect();
    let lead = parts.iter().take_while(|l| l.trim().is_empty()).count();
    let trail = parts.iter().rev().take_while(|l| l.trim().is_empty()).count();
    (lead, trail)
}
const TAB_WIDTH: usize = 4;

fn indent_width(indent: &str) -> usize {
    indent.chars().map(|c| if c == '\t' { TAB_WIDTH } else { 1 }).sum()
}

fn leading_ws(s: &str) -> &str {
    &s[..s.len() - s.trim_start_matches([' ', '\t']).len()]
}

/// Replaces `content[start..end]` (matched fuzzily by `old`) with `new`, re-indented when
/// the file's indentation differs from `old`'s by a constant amount or in style.
fn replace_region(content: &str, start: usize, end: usize, old: &str, new: &str) -> String {
    let line_start = content[..start].rfind('\n').map_or(0, |i| i + 1);
    let prefix = &content[line_start..start];
    let (start, first_line_known) = if prefix.chars().all(|c| c == ' ' || c == '\t') {
        (line_start, true)
    } else {
        (start, false)
    };
    let region = &content[start..end];
    // Non-blank lines pair up in order (the blank-line level may have left blank lines out
    // on either side); without the same number on both sides nothing is re-indented.
    fn non_blank(s: &str) -> Vec<(usize, &str)> {
        s.split('\n').enumerate().filter(|(_, l)| !l.trim().is_empty()).collect()
    }
    let (file_lines, old_lines) = (non_blank(region), non_blank(old));
    if file_lines.len() != old_lines.len() {
        return splice(content, start, end, &keep_prefix(prefix, first_line_known, new));
    }
    let mut pairs = Vec::new();
    let mut identical = true;
    let mut tabbed = 0usize;
    let mut spaced = 0usize;
    for ((k, f), (_, o)) in file_lines.iter().zip(&old_lines) {
        if *k == 0 && !first_line_known {
            continue;
        }
        let (fi, oi) = (leading_ws(f), leading_ws(o));
        identical &= fi == oi;
        match fi.chars().next() {
            Some('\t') => tabbed += 1,
            Some(_) => spaced += 1,
            None => {}
        }
        pairs.push((indent_width(fi), indent_width(oi)));
    }
    // Without a consistent relation, or when nothing differs, insert the text as written.
    let map = match IndentMap::fit(&pairs) {
        Some(map) if !identical => map,
        _ => return splice(content, start, end, &keep_prefix(prefix, first_line_known, new)),
    };
    let use_tabs = tabbed > spaced;
    let mut out = String::with_capacity(new.len() + 16);
    for (k, line) in new.split('\n').enumerate() {
        if k > 0 {
            out.push('\n');
        }
        if (k == 0 && !first_line_known) || line.trim().is_empty() {
            out.push_str(line);
            continue;
        }
        let ws = leading_ws(line);
        let width = map.apply(indent_width(ws));
        if use_tabs {
            out.push_str(&"\t".repeat(width / TAB_WIDTH));
            out.push_str(&" ".repeat(width % TAB_WIDTH));
        } else {
            out.push_str(&" ".repeat(width));
        }
        out.push_str(&line[ws.len()..]);
    }
    splice(content, start, end, &out)
}

/// How the file's indentation widths relate to the model's: `file = old * num / den + offset`.
/// A plain shift is tried first; doubling and halving cover 2- versus 4-space indents.
#[derive(Debug, Clone, Copy, PartialEq)]
struct IndentMap {
    num: usize,
    den: usize,
    offset: isize,
}

impl IndentMap {
    /// The relation every `(file_width, old_width)` pair obeys, if there is one.
    fn fit(pairs: &[(usize, usize)]) -> Option<IndentMap> {
        let Some(&(f0, o0)) = pairs.first() else {
            return Some(IndentMap { num: 1, den: 1, offset: 0 });
        };
        let distinct = pairs.iter().any(|&(_, o)| o != o0);
        for (num, den) in [(1usize, 1usize), (2, 1), (1, 2)] {
            if num != den && !distinct {
                continue;
            }
            if pairs.iter().any(|&(_, o)| (o * num) % den != 0) {
                continue;
            }
            let offset = f0 as isize - (o0 * num / den) as isize;
            let map = IndentMap { num, den, offset };
            if pairs.iter().all(|&(f, o)| map.apply_signed(o) == f as isize) {
                return Some(map);
            }
        }
        None
    }

    fn apply_signed(&self, w: usize) -> isize {
        (w * self.num / self.den) as isize + self.offset
    }

    fn apply(&self, w: usize) -> usize {
        self.apply_signed(w).max(0) as usize
    }
}

/// `new` as inserted when the region was widened to the line start but nothing is re-indented.
fn keep_prefix(prefix: &str, widened: bool, new: &str) -> String {
    if widened {
        format!("{prefix}{new}")
    } else {
        new.to_owned()
    }
}

/// Characters of each line the closest-match search looks at: a longer line (minified code,
/// data) is judged by its start, so one long line cannot make the search slow.
const HINT_LINE_CHARS: usize = 400;
/// Work units (trigram comparisons) the closest-match ranking may spend; past it the hint
/// is skipped with a note.
const HINT_BUDGET: usize = 16_000_000;
/// Characters on each side up to which candidates are measured by a character diff; larger
/// regions are measured by trigram overlap instead.
const HINT_CHAR_DIFF: usize = 4_000;
/// Characters of the file (lines capped at [`HINT_LINE_CHARS`]) up to which the hint is
/// searched: its trigrams take 4 bytes each.
const HINT_MAX_FILE_CHARS: usize = 2_000_000;
/// Lines on each side up to which the hint shows a line diff.
const HINT_DIFF_LINES: usize = 1_000;
/// Characters of a line the hint's diff shows.
const HINT_SHOWN_CHARS: usize = 200;

/// The note given instead of a closest match when the search would exceed its budget.
pub const HINT_SKIPPED: &str = "(No closest match search: the file and old_string are too large to compare. Read the region you mean to edit and copy it exactly.)";

/// The first [`HINT_LINE_CHARS`] characters of a line.
fn capped(line: &str) -> &str {
    line.char_indices().nth(HINT_LINE_CHARS).map_or(line, |(i, _)| &line[..i])
}

/// Describes the file region most similar to `old` and how it differs, when one is close.
///
/// Blank lines are ignored on both sides. Windows of the file's non-blank lines are ranked
/// by trigram overlap with `old`'s, line by line: O(n·m) line comparisons for n file and m
/// old lines, each line capped at [`HINT_LINE_CHARS`], and skipped with [`HINT_SKIPPED`]
/// when the estimate exceeds [`HINT_BUDGET`]. The best five starts are then measured
/// exactly with windows one line shorter, as long and one line longer than `old`: by a
/// character diff (O((a+b)·d), a and b at most [`HINT_CHAR_DIFF`]) or, for larger regions,
/// by trigram overlap. The shown line diff is limited to [`HINT_DIFF_LINES`] lines a side.
fn closest_region(content: &str, old: &str, new: &str) -> Option<String> {
    let mut notes = Vec::new();
    if !new.is_empty() {
        if let Some(at) = super::super::scan::find(content, new) {
            if count_overlapping(content, new) == 1 {
                let line = bytecount::count(&content.as_bytes()[..at], b'\n') + 1;
                notes.push(format!(
                    "new_string already appears in the file at line {line}; the edit may already have been applied."
                ));
            }
        }
    }
    if let Some(note) = closest_lines(content, old) {
        notes.push(note);
    }
    if notes.is_empty() {
        None
    } else {
        Some(notes.join("\n"))
    }
}

fn closest_lines(content: &str, old: &str) -> Option<String> {
    fn strip_cr(l: &str) -> &str {
        l.strip_suffix('\r').unwrap_or(l)
    }
    let old_body = old.strip_suffix('\n').unwrap_or(old);
    let old_lines: Vec<&str> = old_body.split('\n').map(strip_cr).collect();
    let file_lines: Vec<&str> = content.split('\n').map(strip_cr).collect();
    let non_blank = |ls: &[&str]| -> Vec<usize> {
        (0..ls.len()).filter(|&i| !ls[i].trim().is_empty()).collect()
    };
    let (old_nb, file_nb) = (non_blank(&old_lines), non_blank(&file_lines));
    if old_nb.is_empty() || file_nb.is_empty() {
        return None;
    }
    let m = old_nb.len().min(file_nb.len());
    let positions = file_nb.len() - m + 1;
    let old_grams: Vec<Vec<u32>> = old_nb[..m].iter().map(|&i| trigrams(old_lines[i])).collect();
    let old_cost: usize = old_grams.iter().map(|g| g.len() + 1).sum();
    // Every file line is compared with up to m old lines.
    let file_chars: usize = file_nb.iter().map(|&i| capped(file_lines[i]).len() + 1).sum();
    let work = positions.saturating_mul(old_cost).saturating_add(m.saturating_mul(file_chars));
    if work > HINT_BUDGET || file_chars > HINT_MAX_FILE_CHARS {
        return Some(HINT_SKIPPED.to_owned());
    }
    let file_grams: Vec<Vec<u32>> = file_nb.iter().map(|&i| trigrams(file_lines[i])).collect();
    let mut scored: Vec<(f32, usize)> = (0..positions)
        .map(|p| {
            let s: f32 = (0..m).map(|k| dice(&old_grams[k], &file_grams[p + k])).sum();
            (s / m as f32, p)
        })
        .collect();
    crate::platform::sort::sort_by(&mut scored, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let joined = |ls: &[&str], idx: &[usize]| -> String {
        idx.iter().map(|&i| capped(ls[i])).collect::<Vec<_>>().join("\n")
    };
    let old_text = joined(&old_lines, &old_nb);
    let old_all_grams = || {
        let mut g: Vec<u32> = old_grams.iter().flatten().copied().collect();
        crate::platform::sort::sort(&mut g);
        g.dedup();
        g
    };
    let old_set = old_all_grams();
    // (ratio, start, length) of each candidate window, in non-blank file lines. Of the
    // lengths one shorter, as long and one longer than `old`, each start takes the one whose
    // last line is most like `old`'s last line, so the region is not cut short.
    let old_last = &old_grams[m - 1];
    let mut best: Option<(f32, usize, usize)> = None;
    for &(_, p) in scored.iter().take(5) {
        let len = [m, m + 1, m.saturating_sub(1)]
            .into_iter()
            .filter(|&len| len > 0 && p + len <= file_nb.len())
            .map(|len| (dice(old_last, &file_grams[p + len - 1]), len))
            .fold(None, |acc: Option<(f32, usize)>, x| match acc {
                Some(a) if a.0 >= x.0 => Some(a),
                _ => Some(x),
            });
        let Some((_, len)) = len else { continue };
        let window = joined(&file_lines, &file_nb[p..p + len]);
        let ratio = if old_text.len() <= HINT_CHAR_DIFF && window.len() <= HINT_CHAR_DIFF {
            TextDiff::from_chars(old_text.as_str(), window.as_str()).ratio()
        } else {
            let mut g: Vec<u32> = file_grams[p..p + len].iter().flatten().copied().collect();
            crate::platform::sort::sort(&mut g);
            g.dedup();
            dice(&old_set, &g)
        };
        let better = match best {
            None => true,
            Some((r, bp, _)) => ratio > r || (ratio == r && p < bp),
        };
        if better {
            best = Some((ratio, p, len));
        }
    }
    let (ratio, p, len) = best?;
    let pct = (ratio * 100.0).round() as u32;
    if pct < 40 {
        return None;
    }
    let (first, last) = (file_nb[p], file_nb[p + len - 1]);
    let range = if first == last {
        format!("line {}", first + 1)
    } else {
        format!("lines {}-{}", first + 1, last + 1)
    };
    let window = &file_lines[first..=last];
    let block = if old_lines.len() <= HINT_DIFF_LINES && window.len() <= HINT_DIFF_LINES {
        line_diff(&old_lines.join("\n"), &window.join("\n"))
    } else {
        "(the region is too long to show a diff)".to_owned()
    };
    Some(format!(
        "Closest match: {range} ({pct}% similar). Differences (- old_string, + file):\n{block}"
    ))
}

/// The hint's line diff, at most 40 lines, each cut at [`HINT_SHOWN_CHARS`] characters.
fn line_diff(old_text: &str, window: &str) -> String {
    let mut diff_lines = Vec::new();
    for change in TextDiff::from_lines(old_text, window).iter_all_changes() {
        let sign = match change.tag() {
            ChangeTag::Delete => '-',
            ChangeTag::Insert => '+',
            ChangeTag::Equal => ' ',
        };
        let text = change.value().trim_end_matches(['\n', '\r']);
        let shown = match text.char_indices().nth(HINT_SHOWN_CHARS) {
            Some((i, _)) => format!(
                "{}… ({} more characters)",
                visible_ws(&text[..i]),
                text[i..].chars().count()
            ),
            None => visible_ws(text).into_owned(),
        };
        diff_lines.push(format!("{sign}{shown}"));
    }
    let shown = diff_lines.len().min(40);
    let mut block = diff_lines[..shown].join("\n");
    if diff_lines.len() > shown {
        block.push_str(&format!("\n… ({} more diff lines)", diff_lines.len() - shown));
    }
    block
}
/// Makes trailing whitespace and odd spaces visible in the hint's diff lines.
fn visible_ws(s: &str) -> Cow<'_, str> {
    let trimmed = s.trim_end_matches([' ', '\t']);
    let odd = |c: char| c == '\u{00A0}' || ('\u{2000}'..='\u{200B}').contains(&c);
    if trimmed.len() == s.len() && !s.chars().any(odd) {
        return Cow::Borrowed(s);
    }
    let mut out: String = trimmed.chars().map(|c| if odd(c) { '⍽' } else { c }).collect();
    for c in s[trimmed.len()..].chars() {
        out.push(if c == '\t' { '→' } else { '·' });
    }
    Cow::Owned(out)
}

/// The distinct character trigrams of a line's first [`HINT_LINE_CHARS`] characters.
fn trigrams(line: &str) -> Vec<u32> {
    let chars: Vec<char> = capped(line).trim().chars().collect();
    let mut out: Vec<u32> = if chars.len() < 3 {
        if chars.is_empty() {
            Vec::new()
        } else {
            vec![chars.iter().fold(7u32, |h, &c| h.wrapping_mul(31).wrapping_add(c as u32))]
        }
    } else {
        chars
            .windows(3)
            .map(|w| {
                (w[0] as u32)
                    .wrapping_mul(961)
                    .wrapping_add((w[1] as u32).wrapping_mul(31))
                    .wrapping_add(w[2] as u32)
            })
            .collect()
    };
    crate::platform::sort::sort(&mut out);
    out.dedup();
    out
}

fn dice(a: &[u32], b: &[u32]) -> f32 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * common as f32 / (a.len() + b.len()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replaced(r: EditResult) -> (String, MatchLevel) {
        match r {
            EditResult::Replaced { content, level } => (content, level),
            other => panic!("expected a replacement, got {other:?}"),
        }
    }

    #[test]
    fn exact_is_literal() {
        let (c, l) = replaced(apply_edit("let a = 1;\n", "1", "$& $$ $'"));
        assert_eq!(c, "let a = $& $$ $';\n");
        assert_eq!(l, MatchLevel::Exact);
    }

    #[test]
    fn overlapping_occurrences_are_ambiguous() {
        assert_eq!(count_overlapping("aaa", "aa"), 2);
        assert_eq!(
            apply_edit("aaa", "aa", "b"),
            EditResult::Ambiguous { level: MatchLevel::Exact, count: 2 }
        );
    }

    #[test]
    fn whitespace_level_maps_back_to_original() {
        let (c, l) = replaced(apply_edit("fn  f(a,\tb) {}\n", "fn f(a, b)", "fn g()"));
        assert_eq!(c, "fn g() {}\n");
        assert_eq!(l, MatchLevel::Whitespace);
    }

    #[test]
    fn crlf_files_stay_crlf() {
        let file = "a\r\nb\r\nc\r\n";
        let (c, l) = replaced(apply_edit(file, "a\nb\n", "x\ny\n"));
        assert_eq!(c, "x\r\ny\r\nc\r\n");
        assert_eq!(l, MatchLevel::Whitespace);
        let (c, _) = replaced(apply_edit(file, "b", "b1\nb2"));
        assert_eq!(c, "a\r\nb1\r\nb2\r\nc\r\n");
    }

    #[test]
    fn unicode_level_folds_quotes_dashes_and_spaces() {
        let file = "say(“hello”) – done\u{00A0}now   \nnext\n";
        let (c, l) =
            replaced(apply_edit(file, "say(\"hello\") - done now\nnext", "say('hi')\nnext"));
        assert_eq!(c, "say('hi')\nnext\n");
        assert_eq!(l, MatchLevel::Unicode);
    }

    #[test]
    fn unicode_level_decomposes_compatibility_forms() {
        // NFKD: the ligature U+FB01 is "fi", full-width letters are ASCII, U+00E9 is e + U+0301.
        let file = "let \u{FB01}le = \u{FF21}\u{FF22}; // caf\u{E9}\n";
        let (c, l) = replaced(apply_edit(file, "let file = AB; // cafe\u{301}", "let x = 1;"));
        assert_eq!((c.as_str(), l), ("let x = 1;\n", MatchLevel::Unicode));
    }

    #[test]
    fn indentation_level_reindents() {
        let file = "if a:\n    x = 1\n    y = 2\nz = 3\n";
        let (c, l) = replaced(apply_edit(file, "x = 1\ny = 2\n", "x = 10\nif b:\n    y = 20\n"));
        assert_eq!(l, MatchLevel::Indentation);
        assert_eq!(c, "if a:\n    x = 10\n    if b:\n        y = 20\nz = 3\n");
        // A block whose relative indentation was lost does not match.
        let file = "class A:\n    def f(self):\n        return 1\n";
        assert!(matches!(
            apply_edit(file, "def f(self):\nreturn 1\n", "x"),
            EditResult::NotFound { .. }
        ));
    }

    #[test]
    fn whitespace_match_reindents_new_string() {
        let file = "    def f():\n        return 1\n";
        let (c, l) = replaced(apply_edit(file, "def f():\n    return 1", "def f():\n    return 2"));
        assert_eq!(l, MatchLevel::Whitespace);
        assert_eq!(c, "    def f():\n        return 2\n");
    }

    #[test]
    fn tabs_in_file_spaces_from_model() {
        let file = "func main() {\n\tif x {\n\t\ty()\n\t}\n}\n";
        let (c, _) = replaced(apply_edit(
            file,
            "    if x {\n        y()\n    }",
            "    if x {\n        z()\n    }",
        ));
        assert_eq!(c, "func main() {\n\tif x {\n\t\tz()\n\t}\n}\n");
    }

    #[test]
    fn two_space_model_four_space_file() {
        let file = "if (x) {\n    foo();\n    bar();\n}\n";
        let (c, _) = replaced(apply_edit(
            file,
            "if (x) {\n  foo();\n  bar();\n}",
            "if (x) {\n  foo();\n  baz();\n}",
        ));
        assert_eq!(c, "if (x) {\n    foo();\n    baz();\n}\n");
    }

    #[test]
    fn unicode_level_absorbs_trailing_whitespace() {
        let (c, l) = replaced(apply_edit("a  \nb  \nc\n", "a\nb", "x\ny"));
        assert_eq!((c.as_str(), l), ("x\ny\nc\n", MatchLevel::Unicode));
    }

    #[test]
    fn not_found_names_closest_region() {
        let file = "fn one() {}\nfn two() {\n    let total = compute(a, b);\n    total\n}\n";
        let r = apply_edit(file, "fn two() {\n    let total = compute(a, c);\n", "x");
        let EditResult::NotFound { hint: Some(h) } = r else { panic!("{r:?}") };
        assert!(h.contains("Closest match: lines 2-3"), "{h}");
        assert!(h.contains("-    let total = compute(a, c);"), "{h}");
        assert!(h.contains("+    let total = compute(a, b);"), "{h}");
    }

    #[test]
    fn already_applied_is_reported() {
        let r = apply_edit("value = 2\n", "value = 1", "value = 2");
        let EditResult::NotFound { hint: Some(h) } = r else { panic!("{r:?}") };
        assert!(h.contains("already appears in the file at line 1"), "{h}");
    }

    #[test]
    fn unrelated_text_gives_no_region() {
        let r = apply_edit("alpha\nbeta\n", "completely different words here", "x");
        assert_eq!(r, EditResult::NotFound { hint: None });
    }

    fn within<T>(secs: f64, what: &str, f: impl FnOnce() -> T) -> T {
        super::super::super::bounds::within(secs, what, f).0
    }

    #[test]
    fn long_line_without_match_answers_quickly() {
        // Issue 10: this froze workerd for good (a character diff of 10 kB against 1 MB).
        let file = format!("{}b", "a".repeat(1_000_000));
        let r = within(2.0, "the issue's input", || apply_edit(&file, &"q".repeat(10_000), "z"));
        assert_eq!(r, EditResult::NotFound { hint: None });
    }

    #[test]
    fn adversarial_inputs_stay_linear() {
        let a = "a".repeat(1_000_000);
        let r = within(2.0, "overlapping count", || apply_edit(&a, &"a".repeat(10_000), "z"));
        assert_eq!(r, EditResult::Ambiguous { level: MatchLevel::Exact, count: 990_001 });
        // Candidates at every other byte, each failing only at the needle's end.
        let xy = "xy".repeat(500_000);
        let needle = format!("{}yx", "xy".repeat(5_000));
        let r = within(2.0, "periodic text", || apply_edit(&xy, &needle, "z"));
        assert!(matches!(r, EditResult::NotFound { .. }), "{r:?}");
        // Many identical lines: every window is a hash hit for the line levels.
        let lines = "x\n".repeat(200_000);
        let old = format!("{}y\n", "  x\n".repeat(2_000));
        let r = within(2.0, "identical lines", || apply_edit(&lines, &old, "z"));
        assert!(matches!(r, EditResult::NotFound { .. }), "{r:?}");
        let r = within(2.0, "identical lines, ambiguous", || {
            apply_edit(&lines, &"  x\n".repeat(2_000), "z")
        });
        assert!(matches!(r, EditResult::Ambiguous { level: MatchLevel::Indentation, .. }));
    }

    #[test]
    fn large_files_skip_the_normalized_copy_levels() {
        // Above MAX_VIEW_BYTES the whitespace and Unicode levels (a normalized copy of the
        // file) are skipped, so memory stays proportional; the exact and line levels run.
        let filler = "x = 1;\n".repeat(MAX_VIEW_BYTES / 7 + 1);
        let file = format!("{filler}let  total = a + b;\n");
        let r = within(6.0, "large file", || apply_edit(&file, "let total = a", "t"));
        assert!(matches!(r, EditResult::NotFound { .. }), "a part of a line needs level 2");
        let (c, l) = replaced(apply_edit(&file, "let total = a + b;", "t = 0;"));
        assert_eq!((c.len(), l), (filler.len() + 7, MatchLevel::Indentation));
        let small = "let  total = a + b;\n";
        assert_eq!(replaced(apply_edit(small, "let total = a", "t")).1, MatchLevel::Whitespace);
    }

    #[test]
    fn very_large_files_get_the_exact_level_and_no_hint_search() {
        let filler = "x = 1;\n".repeat(MAX_LINE_LEVEL_BYTES / 7 + 1);
        let file = format!("{filler}let  total = a + b;\n");
        let r = within(3.0, "very large file", || apply_edit(&file, "let total = a + b;", "t"));
        assert_eq!(r, EditResult::NotFound { hint: Some(HINT_SKIPPED.to_owned()) });
        let (_, l) = replaced(apply_edit(&file, "let  total = a + b;", "t"));
        assert_eq!(l, MatchLevel::Exact);
    }

    #[test]
    fn hint_past_its_budget_says_so() {
        let file: String = (0..40_000).map(|i| format!("line number {i} of the file\n")).collect();
        let old: String = (0..2_000).map(|i| format!("other text {i} here\n")).collect();
        let r = within(2.0, "large hint", || apply_edit(&file, &old, "z"));
        assert_eq!(r, EditResult::NotFound { hint: Some(HINT_SKIPPED.to_owned()) });
    }

    #[test]
    fn blank_line_level_ignores_dropped_and_added_blank_lines() {
        let file = "fn a() {\n    one();\n\n    two();\n}\n\nfn b() {}\n";
        // The model dropped the blank line inside the region.
        let (c, l) = replaced(apply_edit(
            file,
            "    one();\n    two();\n}\n",
            "    one();\n    three();\n}\n",
        ));
        assert_eq!(l, MatchLevel::BlankLines);
        assert_eq!(c, "fn a() {\n    one();\n    three();\n}\n\nfn b() {}\n");
        // The model added one, and quoted a blank line after the region that the file has
        // too: the file's blank line between the functions stays.
        let (c, l) = replaced(apply_edit(
            file,
            "    one();\n\n\n    two();\n}\n\n",
            "    one();\n    two(1);\n}\n\n",
        ));
        assert_eq!(l, MatchLevel::BlankLines);
        assert_eq!(c, "fn a() {\n    one();\n    two(1);\n}\n\nfn b() {}\n");
        // Unique only.
        let twice = "a\n\nb\nc\na\nb\n";
        assert_eq!(
            apply_edit(twice, "a\n\n\nb\n", "x\n"),
            EditResult::Ambiguous { level: MatchLevel::BlankLines, count: 2 }
        );
    }

    #[test]
    fn blank_line_level_reindents() {
        let file = "if a:\n    x = 1\n\n    y = 2\n";
        let (c, l) = replaced(apply_edit(file, "x = 1\ny = 2\n", "x = 1\nif b:\n    y = 3\n"));
        assert_eq!(l, MatchLevel::BlankLines);
        assert_eq!(c, "if a:\n    x = 1\n    if b:\n        y = 3\n");
    }

    #[test]
    fn hint_window_keeps_the_last_line() {
        // The region has one line more than old_string once a line differs: a window of
        // old_string's own length would cut off `}`.
        let file = "fn f() {\n    let a = 1;\n    let b = 2;\n    let c = 3;\n}\nfn g() {}\n";
        let old = "fn f() {\n    let a = 1;\n    let c = 3;\n}";
        let EditResult::NotFound { hint: Some(h) } = apply_edit(file, old, "x") else { panic!() };
        assert!(h.contains("Closest match: lines 1-5"), "{h}");
        // Blank lines do not count against the similarity.
        let file = "alpha();\n\n\nbeta(1);\n\ngamma();\n";
        let r = apply_edit(file, "alpha();\nbeta(2);\ngamma();", "x");
        let EditResult::NotFound { hint: Some(h) } = r else { panic!("{r:?}") };
        assert!(h.contains("Closest match: lines 1-6 (9"), "{h}");
    }
}
