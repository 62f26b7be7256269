//! The host engine: the JS pattern translated by [`jsregex`], run on the `regex` crate's
//! automata, or on `fancy_regex`'s backtracker (with [`BACKTRACK_LIMIT`]) when it needs
//! look-around or backreferences.

pub(crate) mod jsregex;

use super::engine::{Compiled, Engine};
use super::{Flags, GaveUp, RegExpError, Subject};

/// Backtracking steps a pattern with look-around or backreferences may take on one search
/// (`fancy_regex`'s default is 1,000,000).
const BACKTRACK_LIMIT: usize = 100_000;

enum Kind {
    Plain(regex::Regex),
    Fancy(fancy_regex::Regex),
}

/// The host engine; stateless.
pub(super) struct HostEngine;

impl Engine for HostEngine {
    fn compile(&self, source: &str, flags: Flags) -> Result<Box<dyn Compiled>, RegExpError> {
        Ok(Box::new(RegExp::new(source, flags)?))
    }

    fn prepare(&self, _text: &str) -> Box<dyn std::any::Any> {
        Box::new(())
    }
}

/// A compiled pattern.
struct RegExp {
    engine: Kind,
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
    fn new(source: &str, flags: Flags) -> Result<RegExp, RegExpError> {
        let invalid = || RegExpError::Syntax(format!("Invalid regular expression: /{source}/"));
        let translated = jsregex::translate(source);
        let built = match &translated {
            Some(t) if t.context_sensitive => fancy(&t.pattern, flags).map(|f| RegExp {
                engine: Kind::Fancy(f),
                prefilter: t.prefilter.as_deref().and_then(|p| plain(p, flags).ok()),
                context_sensitive: true,
            }),
            Some(t) => plain(&t.pattern, flags).map(|p| RegExp {
                engine: Kind::Plain(p),
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
                engine: Kind::Fancy(f),
                prefilter: None,
                context_sensitive: true,
            }),
            built => built,
        }
    }
}

impl Compiled for RegExp {
    /// Whether candidates must be found line by line.
    fn per_line(&self) -> bool {
        self.context_sensitive && self.prefilter.is_none()
    }

    /// Whether `text` contains a match.
    fn is_match(&self, text: &str) -> Result<bool, GaveUp> {
        match &self.engine {
            Kind::Plain(r) => Ok(r.is_match(text)),
            Kind::Fancy(r) => r.is_match(text).map_err(|_| GaveUp),
        }
    }

    /// Whether `s[start..end]` contains a match.
    fn is_match_in(&self, s: &Subject, start: usize, end: usize) -> Result<bool, GaveUp> {
        self.is_match(&s.text()[start..end])
    }

    /// The first match from `from`, or with `candidate` the prefilter's if there is one.
    fn find_at(
        &self,
        s: &Subject,
        from: usize,
        candidate: bool,
    ) -> Result<Option<(usize, usize)>, GaveUp> {
        let prefilter = self.prefilter.as_ref().filter(|_| candidate);
        let found = match (prefilter, &self.engine) {
            (Some(pf), _) | (None, Kind::Plain(pf)) => pf.find_at(s.text(), from),
            (None, Kind::Fancy(r)) => {
                let m = r.find_from_pos(s.text(), from).map_err(|_| GaveUp)?;
                return Ok(m.map(|m| (m.start(), m.end())));
            }
        };
        Ok(found.map(|m| (m.start(), m.end())))
    }

    /// The successive matches in `text`.
    fn find_all(&self, text: &str) -> Vec<(usize, usize)> {
        match &self.engine {
            Kind::Plain(r) => r.find_iter(text).map(|m| (m.start(), m.end())).collect(),
            Kind::Fancy(r) => {
                r.find_iter(text).map_while(Result::ok).map(|m| (m.start(), m.end())).collect()
            }
        }
    }

    /// `text` with every match replaced literally.
    fn replace_all(&self, text: &str, replacement: &str) -> Result<String, GaveUp> {
        Ok(match &self.engine {
            Kind::Plain(r) => r.replace_all(text, regex::NoExpand(replacement)).into_owned(),
            Kind::Fancy(r) => r
                .try_replacen(text, 0, fancy_regex::NoExpand(replacement))
                .map_err(|_| GaveUp)?
                .into_owned(),
        })
    }
}
