//! The `edit` tool's matcher: a cascade of ever looser comparisons, each of which must find
//! exactly one location before it is used, and a diagnosis of the closest region when none
//! does, so the model can correct its `old_string` in one step.
//!
//! 1. exact;
//! 2. Think's whitespace normalization (runs of spaces/tabs are one space, CRLF is LF);
//! 3. as 2, plus trailing whitespace ignored per line and Unicode folded (NFKC-equivalent
//!    compatibility decomposition, smart quotes to ASCII, dashes to `-`, NBSP and typographic
//!    spaces to a space);
//! 4. whole lines compared without their indentation, accepted when the indentation differs
//!    by the same amount on every line.
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
}

impl MatchLevel {
    /// The name reported in the tool output's `matchLevel`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchLevel::Exact => "exact",
            MatchLevel::Whitespace => "whitespace",
            MatchLevel::Unicode => "unicode",
            MatchLevel::Indentation => "indentation",
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

/// Replaces the single location of `old` in `content` with `new`.
pub fn apply_edit(content: &str, old: &str, new: &str) -> EditResult {
    let new = adapt_line_endings(content, new);
    // Level 1: exact, counting overlapping occurrences as Think does.
    let first = if old.is_empty() { None } else { super::scan::find(content, old) };
    let exact = match first {
        Some(at) => 1 + count_overlapping(&content[at + char_len_at(content, at)..], old),
        None => 0,
    };
    if let (1, Some(at)) = (exact, first) {
        return EditResult::Replaced {
            content: splice(content, at, at + old.len(), &new),
            level: MatchLevel::Exact,
        };
    }
    if exact > 1 {
        return EditResult::Ambiguous { level: MatchLevel::Exact, count: exact };
    }
    for (level, unicode) in [(MatchLevel::Whitespace, false), (MatchLevel::Unicode, true)] {
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
                let (start, mut end) = (hay.spans[a].0, hay.spans[b - 1].1);
                if unicode {
                    end = absorb_trailing_ws(content, end);
                }
                return EditResult::Replaced {
                    content: replace_region(content, start, end, old, &new),
                    level,
                };
            }
        }
    }
    match match_lines(content, old) {
        Found::One((start, end)) => EditResult::Replaced {
            content: replace_region(content, start, end, old, &new),
            level: MatchLevel::Indentation,
        },
        Found::Many(count) => EditResult::Ambiguous { level: MatchLevel::Indentation, count },
        Found::None => EditResult::NotFound { hint: closest_region(content, old, &new) },
    }
}

/// Occurrences of `needle`, overlapping ones included (Think's count). A match always starts
/// on a character boundary, so stepping one byte past it is stepping one character.
pub fn count_overlapping(hay: &str, needle: &str) -> usize {
    if needle.is_empty() {
        return 0;
    }
    let finder = super::scan::Literal::new(needle.as_bytes(), false);
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = finder.find(hay.as_bytes(), from) {
        count += 1;
        from = at + 1;
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

/// A normalized copy of a string, with the original byte span behind each normalized byte.
struct View {
    text: String,
    spans: Vec<(usize, usize)>,
}

impl View {
    fn new(s: &str, unicode: bool) -> View {
        // Stage 1: per-character folding (CRLF is one unit).
        let mut folded: Vec<(char, usize, usize)> = Vec::with_capacity(s.len());
        let mut it = s.char_indices().peekable();
        while let Some((i, c)) = it.next() {
            if c == '\r' && it.peek().map(|p| p.1) == Some('\n') {
                it.next();
                folded.push(('\n', i, i + 2));
            } else if unicode {
                let end = i + c.len_utf8();
                fold_char(c, &mut |d| folded.push((d, i, end)));
            } else {
                folded.push((c, i, i + c.len_utf8()));
            }
        }
        // Stage 2: runs of spaces and tabs become one space; with `unicode`, a run at the
        // end of a line or of the text is dropped.
        let mut view =
            View { text: String::with_capacity(s.len()), spans: Vec::with_capacity(s.len()) };
        let mut k = 0;
        while k < folded.len() {
            let (c, start, mut end) = folded[k];
            if c == ' ' || c == '\t' {
                let mut j = k + 1;
                while j < folded.len() && matches!(folded[j].0, ' ' | '\t') {
                    end = folded[j].2;
                    j += 1;
                }
                let trailing = j == folded.len() || folded[j].0 == '\n';
                if !(unicode && trailing) {
                    view.push(' ', start, end);
                }
                k = j;
            } else {
                view.push(c, start, end);
                k += 1;
            }
        }
        view
    }

    fn push(&mut self, c: char, start: usize, end: usize) {
        self.text.push(c);
        for _ in 0..c.len_utf8() {
            self.spans.push((start, end));
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
        c => unicode_normalization::char::decompose_compatible(c, out),
    }
}

/// Level 4: whole lines equal once indentation is ignored (and the Unicode level's folding
/// applied), with the same indentation difference on every non-blank line. Returns the
/// byte range of the matched lines.
fn match_lines(content: &str, old: &str) -> Found<(usize, usize)> {
    let (old_body, old_ends_nl) = match old.strip_suffix('\n') {
        Some(b) => (b.strip_suffix('\r').unwrap_or(b), true),
        None => (old, false),
    };
    let old_lines: Vec<Line> = lines(old_body);
    if old_lines.iter().all(|l| l.key.is_empty()) {
        return Found::None;
    }
    let file_lines = lines(content);
    if file_lines.len() < old_lines.len() {
        return Found::None;
    }
    let mut hits: Vec<usize> = Vec::new();
    'window: for i in 0..=file_lines.len() - old_lines.len() {
        let mut pairs = Vec::new();
        for (k, o) in old_lines.iter().enumerate() {
            let f = &file_lines[i + k];
            if f.key != o.key {
                continue 'window;
            }
            if !o.key.is_empty() {
                pairs.push((indent_width(f.indent), indent_width(o.indent)));
            }
        }
        if IndentMap::fit(&pairs).is_some() {
            hits.push(i);
        }
    }
    match hits.as_slice() {
        [] => Found::None,
        [i] => {
            let first = &file_lines[*i];
            let last = &file_lines[*i + old_lines.len() - 1];
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
}

fn lines(s: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for piece in s.split('\n') {
        let end = start + piece.len();
        let body = piece.strip_suffix('\r').unwrap_or(piece);
        let trimmed = body.trim_start_matches([' ', '\t']);
        let indent = &body[..body.len() - trimmed.len()];
        let key = View::new(trimmed, true).text.trim_start_matches(' ').to_owned();
        out.push(Line { start, end, indent, key });
        start = end + 1;
    }
    out
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
    let file_lines: Vec<&str> = region.split('\n').collect();
    let old_lines: Vec<&str> = old.split('\n').collect();
    if file_lines.len() != old_lines.len() {
        return splice(content, start, end, &keep_prefix(prefix, first_line_known, new));
    }
    let mut pairs = Vec::new();
    let mut identical = true;
    let mut tabbed = 0usize;
    let mut spaced = 0usize;
    for (k, (f, o)) in file_lines.iter().zip(&old_lines).enumerate() {
        if (k == 0 && !first_line_known) || f.trim().is_empty() || o.trim().is_empty() {
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

/// Describes the file region most similar to `old` and how it differs, when one is close.
fn closest_region(content: &str, old: &str, new: &str) -> Option<String> {
    let mut notes = Vec::new();
    if !new.is_empty() && count_overlapping(content, new) == 1 {
        let line = content[..content.find(new)?].matches('\n').count() + 1;
        notes.push(format!(
            "new_string already appears in the file at line {line}; the edit may already have been applied."
        ));
    }
    let old_body = old.strip_suffix('\n').unwrap_or(old);
    let old_lines: Vec<&str> =
        old_body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let file_lines: Vec<&str> =
        content.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let w = old_lines.len().min(file_lines.len()).max(1);
    // Rank windows cheaply by trigram overlap, then measure the best few exactly.
    if file_lines.len().saturating_mul(w) <= 4_000_000 && !old_body.trim().is_empty() {
        let old_grams: Vec<Vec<u32>> = old_lines.iter().map(|l| trigrams(l)).collect();
        let file_grams: Vec<Vec<u32>> = file_lines.iter().map(|l| trigrams(l)).collect();
        let mut scored: Vec<(f32, usize)> = (0..=file_lines.len() - w)
            .map(|i| {
                let s: f32 = (0..w.min(old_grams.len()))
                    .map(|k| dice(&old_grams[k], &file_grams[i + k]))
                    .sum();
                (s / w as f32, i)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let old_text = old_lines.join("\n");
        let best = scored
            .iter()
            .take(5)
            .map(|&(_, i)| {
                let window = file_lines[i..i + w].join("\n");
                (TextDiff::from_chars(old_text.as_str(), window.as_str()).ratio(), i)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        if let Some((ratio, i)) = best {
            let pct = (ratio * 100.0).round() as u32;
            if pct >= 40 {
                let window = file_lines[i..i + w].join("\n");
                let mut diff_lines = Vec::new();
                for change in
                    TextDiff::from_lines(old_text.as_str(), window.as_str()).iter_all_changes()
                {
                    let sign = match change.tag() {
                        ChangeTag::Delete => '-',
                        ChangeTag::Insert => '+',
                        ChangeTag::Equal => ' ',
                    };
                    let text = change.value().trim_end_matches(['\n', '\r']);
                    diff_lines.push(format!("{sign}{}", visible_ws(text)));
                }
                let shown = diff_lines.len().min(40);
                let mut block = diff_lines[..shown].join("\n");
                if diff_lines.len() > shown {
                    block.push_str(&format!("\n… ({} more diff lines)", diff_lines.len() - shown));
                }
                let range = if w == 1 {
                    format!("line {}", i + 1)
                } else {
                    format!("lines {}-{}", i + 1, i + w)
                };
                notes.push(format!(
                    "Closest match: {range} ({pct}% similar). Differences (- old_string, + file):\n{block}"
                ));
            }
        }
    }
    if notes.is_empty() {
        None
    } else {
        Some(notes.join("\n"))
    }
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

fn trigrams(line: &str) -> Vec<u32> {
    let chars: Vec<char> = line.trim().chars().collect();
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
    out.sort_unstable();
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
}
