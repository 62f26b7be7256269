//! ECMAScript regular expressions (`new RegExp(source, flags)`), as Think's tools compile them:
//! grep's query, Code Mode's text search, schema `pattern`s, and the globs compiled to regexes.
//!
//! In the wasm build they run on the platform's own engine, V8's irregexp, installed through
//! [`engine::install`] by the Workers glue, so the
//! semantics are JavaScript's exactly and the module carries no regex engine: `regex`,
//! `regex-automata`, `aho-corasick` and `fancy-regex` were about 180 KB of the gzipped module
//! and their Unicode tables most of the rest of the family's share (BENCHMARKS.md, "Sizes":
//! 1,403,076 B gzip before, see the figures table for after). On the host (`host.rs`, the
//! unit tests) the pattern is translated by `jsregex` and run on `regex`, or on
//! `fancy_regex` with a backtracking limit when it needs look-around or backreferences.
//! Irregexp has no backtracking limit, so every pattern first passes [`guard`], which refuses
//! the exponential shapes (`(a+)+`, `(a|ab)*`, a repeated backreference) on both engines
//! alike; the host engine's limit stays as a second bound.

pub mod engine;
pub mod guard;
#[cfg(not(target_arch = "wasm32"))]
mod host;

pub use guard::Catastrophic;

/// The flags a pattern is compiled with (JS's `i`, `m` and `u`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Flags {
    /// `i`: case-insensitive.
    pub ignore_case: bool,
    /// `m` for searches over a whole text ([`RegExp::find_at`]): `^` and `$` match at line
    /// breaks. [`RegExp::is_match`] on a single line does not need it.
    pub multi_line: bool,
    /// `u`: the pattern is read as code points, with `\p{…}` classes (schema patterns, globs).
    pub unicode: bool,
}

/// A pattern the engine refused, with its message (JS's `SyntaxError` text in the wasm build).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RegExpError {
    /// The pattern is not valid.
    Syntax(String),
    /// The pattern is valid but can backtrack exponentially, so it is not run.
    Catastrophic(Catastrophic),
}

impl From<Catastrophic> for RegExpError {
    fn from(e: Catastrophic) -> RegExpError {
        RegExpError::Catastrophic(e)
    }
}

impl std::fmt::Display for RegExpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegExpError::Syntax(m) => f.write_str(m),
            RegExpError::Catastrophic(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RegExpError {}

/// A search that stopped at the host engine's backtracking limit (never in the wasm build).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaveUp;

/// A text prepared for repeated searches: in the wasm build it is converted to a JS string
/// once, and byte offsets are mapped to and from UTF-16 offsets as the search moves on.
pub struct Subject<'t> {
    text: &'t str,
    prepared: Box<dyn std::any::Any>,
}

impl<'t> Subject<'t> {
    /// Prepares `text`.
    pub fn new(text: &'t str) -> Subject<'t> {
        Subject { text, prepared: engine::engine().prepare(text) }
    }

    /// The text.
    pub fn text(&self) -> &'t str {
        self.text
    }

    /// What the engine prepared for this text (see [`engine::Engine::prepare`]).
    pub fn prepared(&self) -> &dyn std::any::Any {
        self.prepared.as_ref()
    }
}

/// A compiled pattern.
pub struct RegExp {
    inner: Box<dyn engine::Compiled>,
}

impl RegExp {
    /// Compiles `source` as `new RegExp(source, flags)` would, then refuses it if [`guard`]
    /// finds a shape that can backtrack exponentially (a syntax error is reported first).
    pub fn new(source: &str, flags: Flags) -> Result<RegExp, RegExpError> {
        let inner = engine::engine().compile(source, flags)?;
        guard::check(source, flags)?;
        Ok(RegExp { inner })
    }

    /// Whether a match can depend on text outside the line it is on (look-around), so that
    /// [`find_at`](Self::find_at) cannot find candidate lines and each line must be tried
    /// with [`is_match_in`](Self::is_match_in).
    pub fn per_line(&self) -> bool {
        self.inner.per_line()
    }

    /// Whether `text` contains a match.
    pub fn is_match(&self, text: &str) -> Result<bool, GaveUp> {
        self.inner.is_match(text)
    }

    /// Whether `subject[start..end]` (byte offsets on character boundaries) contains a match.
    pub fn is_match_in(&self, subject: &Subject, start: usize, end: usize) -> Result<bool, GaveUp> {
        self.inner.is_match_in(subject, start, end)
    }

    /// The byte range of the first match starting at or after byte `from`.
    pub fn find_at(
        &self,
        subject: &Subject,
        from: usize,
    ) -> Result<Option<(usize, usize)>, GaveUp> {
        self.inner.find_at(subject, from, false)
    }

    /// Where, at or after byte `from`, the first line that may match starts to match: the
    /// first match, or for a look-around pattern on the host a match of a plain pattern that
    /// matches at least its lines; each candidate line is confirmed with
    /// [`is_match_in`](Self::is_match_in).
    pub fn candidate_at(&self, subject: &Subject, from: usize) -> Result<Option<usize>, GaveUp> {
        Ok(self.inner.find_at(subject, from, true)?.map(|m| m.0))
    }

    /// The byte ranges of the successive matches in `text` (as `matchAll`), up to a
    /// backtracking give-up.
    pub fn find_all(&self, text: &str) -> Vec<(usize, usize)> {
        self.inner.find_all(text)
    }

    /// `text` with every match replaced by `replacement` taken literally
    /// (`text.replace(re, () => replacement)`).
    pub fn replace_all(&self, text: &str, replacement: &str) -> Result<String, GaveUp> {
        self.inner.replace_all(text, replacement)
    }
}

impl std::fmt::Debug for RegExp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RegExp")
    }
}

/// `source` with every character that is syntax in a JS pattern escaped, as
/// @cloudflare/shell's `escapeRegExp` does (`.*+?^${}()|[]\`).
pub fn escape(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    for c in source.chars() {
        if ".*+?^${}()|[]\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GREP: Flags = Flags { ignore_case: true, multi_line: true, unicode: false };

    #[test]
    fn searches_map_byte_offsets_and_lines() {
        let re = RegExp::new("b+", GREP).unwrap();
        let text = "éa\nxbb\nB";
        let s = Subject::new(text);
        assert_eq!(re.find_at(&s, 0), Ok(Some((5, 7))));
        assert_eq!(re.find_at(&s, 7), Ok(Some((8, 9))));
        assert_eq!(re.find_at(&s, 9), Ok(None));
        assert_eq!(re.is_match_in(&s, 0, 3), Ok(false));
        assert_eq!(re.is_match_in(&s, 4, 7), Ok(true));
        assert!(!re.per_line());
        assert_eq!(re.candidate_at(&s, 3), Ok(Some(5)));
    }

    #[test]
    fn invalid_patterns_are_errors_and_replacement_is_literal() {
        assert!(RegExp::new("(unclosed", GREP).is_err());
        assert!(RegExp::new("o{2,1}", Flags::default()).is_err());
        let re = RegExp::new("o", Flags::default()).unwrap();
        assert_eq!(re.replace_all("foo", "$&1").unwrap(), "f$&1$&1");
        assert_eq!(re.find_all("foo"), vec![(1, 2), (2, 3)]);
        assert_eq!(escape("a.b*(c)"), "a\\.b\\*\\(c\\)");
    }
}
