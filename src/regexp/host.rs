//! The host engine: the JS pattern translated by grep's `jsregex`, run on the `regex` crate's
//! automata, or on `fancy_regex`'s backtracker (with [`BACKTRACK_LIMIT`]) when it needs
//! look-around or backreferences.

use super::{Flags, GaveUp, RegExpError};
use crate::tools::workspace::grep::jsregex;

/// Backtracking steps a pattern with look-around or backreferences may take on one search
/// (`fancy_regex`'s default is 1,000,000).
const BACKTRACK_LIMIT: usize = 100_000;

/// On the host a subject is the text itself.
pub struct Subject<'t> {
    text: &'t str,
}

impl<'t> Subject<'t> {
    /// Prepares `text` (see `crate::regexp::Subject`).
    pub fn new(text: &'t str) -> Subject<'t> {
        Subject { text }
    }
}

enum Engine {
    Plain(regex::Regex),
    Fancy(fancy_regex::Regex),
}

/// A compiled pattern (see `crate::regexp::RegExp`, whose methods these are).
pub struct RegExp {
    engine: Engine,
    /// For a look-around pattern, a plain pattern matching at least its lines.
    prefilter: Option<regex::Regex>,
    context_sensitive: bool,
}

fn plain(pattern: &str, flags: Flags) -> Result<regex::Regex, RegExpError> {
    regex::RegexBuilder::new(pattern)
        .case_insensitive(flags.ignore_case)
        .multi_line(flags.multi_line)
        .build()
        .map_err(|e| RegExpError::Syntax(e.to_string()))
}

fn fancy(pattern: &str, flags: Flags) -> Result<fancy_regex::Regex, RegExpError> {
    fancy_regex::RegexBuilder::new(pattern)
        .backtrack_limit(BACKTRACK_LIMIT)
        .case_insensitive(flags.ignore_case)
        .multi_line(flags.multi_line)
        .build()
        .map_err(|e| RegExpError::Syntax(e.to_string()))
}

impl RegExp {
    /// Compiles `source` with `flags`.
    pub fn new(source: &str, flags: Flags) -> Result<RegExp, RegExpError> {
        let invalid = || RegExpError::Syntax(format!("Invalid regular expression: /{source}/"));
        let translated = jsregex::translate(source);
        let built = match &translated {
            Some(t) if t.context_sensitive => fancy(&t.pattern, flags).map(|f| RegExp {
                engine: Engine::Fancy(f),
                prefilter: t.prefilter.as_deref().and_then(|p| plain(p, flags).ok()),
                context_sensitive: true,
            }),
            Some(t) => plain(&t.pattern, flags).map(|p| RegExp {
                engine: Engine::Plain(p),
                prefilter: None,
                context_sensitive: false,
            }),
            None => Err(invalid()),
        };
        // In `u` mode `\p{L}` is a class, which the translation (JS without `u`) does not
        // take; Rust's own syntax does.
        let property = source.contains("\\p{") || source.contains("\\P{");
        match built {
            Err(_) if flags.unicode && property => fancy(source, flags).map(|f| RegExp {
                engine: Engine::Fancy(f),
                prefilter: None,
                context_sensitive: true,
            }),
            built => built,
        }
    }

    /// Whether candidates must be found line by line.
    pub fn per_line(&self) -> bool {
        self.context_sensitive && self.prefilter.is_none()
    }

    /// Whether `text` contains a match.
    pub fn is_match(&self, text: &str) -> Result<bool, GaveUp> {
        match &self.engine {
            Engine::Plain(r) => Ok(r.is_match(text)),
            Engine::Fancy(r) => r.is_match(text).map_err(|_| GaveUp),
        }
    }

    /// Whether `s[start..end]` contains a match.
    pub fn is_match_in(&self, s: &Subject, start: usize, end: usize) -> Result<bool, GaveUp> {
        self.is_match(&s.text[start..end])
    }

    /// The first match from `from`, or with `candidate` the prefilter's if there is one.
    pub fn find_at(
        &self,
        s: &Subject,
        from: usize,
        candidate: bool,
    ) -> Result<Option<(usize, usize)>, GaveUp> {
        let prefilter = self.prefilter.as_ref().filter(|_| candidate);
        let found = match (prefilter, &self.engine) {
            (Some(pf), _) | (None, Engine::Plain(pf)) => pf.find_at(s.text, from),
            (None, Engine::Fancy(r)) => {
                let m = r.find_from_pos(s.text, from).map_err(|_| GaveUp)?;
                return Ok(m.map(|m| (m.start(), m.end())));
            }
        };
        Ok(found.map(|m| (m.start(), m.end())))
    }

    /// The successive matches in `text`.
    pub fn find_all(&self, text: &str) -> Vec<(usize, usize)> {
        match &self.engine {
            Engine::Plain(r) => r.find_iter(text).map(|m| (m.start(), m.end())).collect(),
            Engine::Fancy(r) => {
                r.find_iter(text).map_while(Result::ok).map(|m| (m.start(), m.end())).collect()
            }
        }
    }

    /// `text` with every match replaced literally.
    pub fn replace_all(&self, text: &str, replacement: &str) -> Result<String, GaveUp> {
        Ok(match &self.engine {
            Engine::Plain(r) => r.replace_all(text, regex::NoExpand(replacement)).into_owned(),
            Engine::Fancy(r) => r
                .try_replacen(text, 0, fancy_regex::NoExpand(replacement))
                .map_err(|_| GaveUp)?
                .into_owned(),
        })
    }
}
