//! Glob patterns with Think's semantics, compiled to a JS regular expression (`u` mode, run by
//! `crate::regexp`) plus the literal parts SQL
//! can use to narrow the scan: a key range for the directory prefix and an exact suffix.
//!
//! `**/` matches zero or more directories, `**` anything, `*` anything but `/`, `?` one
//! character but `/`, `[...]` a character class, `{a,b}` alternatives (which may themselves
//! hold glob syntax). There is no `!` negation and no special case for dotfiles.

use super::error::{Errno, FsError};
use super::path;
use crate::regexp::{Flags, RegExp};
use std::rc::Rc;

/// A compiled glob.
#[derive(Debug, Clone)]
pub struct Glob {
    /// The pattern after path normalization (`**/*.ts` becomes `/**/*.ts`).
    pub pattern: String,
    regex: Rc<RegExp>,
    /// The source of `regex`.
    source: String,
    /// What SQL can use to narrow candidate rows.
    pub prefilter: Prefilter,
    /// A literal every match ends with (e.g. `.ts`), if the pattern ends in one.
    pub suffix: Option<String>,
}

/// The SQL side of a glob: one exact path, or a key range `lo <= path < hi`.
#[derive(Debug, Clone, PartialEq)]
pub enum Prefilter {
    /// Only this path can match.
    Exact(String),
    /// Every path in `lo <= path < hi` (the paths under a literal directory prefix).
    Range {
        /// The smallest path in range (inclusive).
        lo: String,
        /// The first path past the range (exclusive).
        hi: String,
    },
}

impl Glob {
    /// Normalizes and compiles `pattern`; a class the regex engine rejects is `EINVAL`.
    pub fn new(pattern: &str) -> Result<Glob, FsError> {
        let normalized = path::normalize(pattern, "glob")?;
        let chars: Vec<char> = normalized.chars().collect();
        let mut re = String::from("^");
        translate(&chars, &mut re);
        re.push('$');
        let flags = Flags { unicode: true, ..Flags::default() };
        let regex =
            RegExp::new(&re, flags).map_err(|_| FsError::new(Errno::Inval, "glob", pattern))?;
        let prefilter = match literal_prefix(&normalized) {
            None => Prefilter::Exact(normalized.clone()),
            Some(prefix) => {
                let hi = format!("{}0", &prefix[..prefix.len() - 1]);
                Prefilter::Range { lo: prefix, hi }
            }
        };
        let suffix = literal_suffix(&chars);
        Ok(Glob { pattern: normalized, regex: Rc::new(regex), source: re, prefilter, suffix })
    }

    /// Whether a normalized path matches.
    pub fn is_match(&self, path: &str) -> bool {
        self.regex.is_match(path).unwrap_or(false)
    }

    /// Whether every path matches (`/**` or `/**/*`), so callers can skip the regex.
    pub fn matches_everything(&self) -> bool {
        matches!(self.pattern.as_str(), "/**" | "/**/*")
    }

    /// Whether the SQL prefilter alone decides: the pattern names one path, or is
    /// `<dir>/**`, `<dir>/**/*` or `<dir>/**/*<suffix>` with a literal suffix without `/`.
    /// Every path in the key range (ending with the suffix) then matches, and the regex is
    /// not needed.
    pub fn sql_exact(&self) -> bool {
        let Prefilter::Range { lo, .. } = &self.prefilter else { return true };
        let Some(rest) = self.pattern.strip_prefix(lo.as_str()) else { return false };
        match rest {
            "**" | "**/*" => true,
            _ => match (&self.suffix, rest.strip_prefix("**/*")) {
                (Some(suffix), Some(tail)) => tail == suffix && !suffix.contains('/'),
                _ => false,
            },
        }
    }

    /// The regex the glob compiled to, for diagnostics and tests.
    pub fn regex_str(&self) -> &str {
        &self.source
    }
}

fn is_meta(c: char) -> bool {
    matches!(c, '*' | '?' | '[' | '{')
}

/// The literal directory prefix (ending in `/`) before the first glob metacharacter, or
/// `None` when the pattern has no metacharacter at all and names one path.
fn literal_prefix(pattern: &str) -> Option<String> {
    let first = pattern.find(is_meta)?;
    let before = &pattern[..first];
    Some(match before.rfind('/') {
        Some(i) => before[..=i].to_owned(),
        None => "/".to_owned(),
    })
}

/// The literal tail after the last construct that can match variable text.
fn literal_suffix(chars: &[char]) -> Option<String> {
    // An unclosed `[` or `{` is a literal, which makes the simple scan below unreliable.
    let opens = chars.iter().filter(|c| matches!(c, '[' | '{')).count();
    let closes = chars.iter().filter(|c| matches!(c, ']' | '}')).count();
    if opens != closes {
        return None;
    }
    let last = chars.iter().rposition(|c| matches!(c, '*' | '?' | ']' | '}'))?;
    let tail: String = chars[last + 1..].iter().collect();
    if tail.is_empty() || tail.contains(['[', '{']) {
        None
    } else {
        Some(tail)
    }
}

fn push_literal(c: char, out: &mut String) {
    if "^$\\.*+?()[]{}|".contains(c) {
        out.push('\\');
    }
    out.push(c);
}

fn translate(p: &[char], out: &mut String) {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '*' => {
                if p.get(i + 1) == Some(&'*') {
                    i += 2;
                    if p.get(i) == Some(&'/') {
                        out.push_str("(?:[^\\n]+/)?");
                        i += 1;
                    } else {
                        out.push_str("[^\\n]*");
                    }
                } else {
                    out.push_str("[^/]*");
                    i += 1;
                }
            }
            '?' => {
                out.push_str("[^/]");
                i += 1;
            }
            '[' => match p[i + 1..].iter().position(|&c| c == ']') {
                Some(rel) if rel > 0 => {
                    let close = i + 1 + rel;
                    out.push('[');
                    for (k, &c) in p[i + 1..close].iter().enumerate() {
                        match c {
                            '^' if k == 0 => out.push('^'),
                            '-' => out.push('-'),
                            // `&` and `~` are plain in a JS class (`u` mode rejects
                            // their escapes); the host translation escapes them for Rust.
                            '\\' | '[' | '^' => {
                                out.push('\\');
                                out.push(c);
                            }
                            c => out.push(c),
                        }
                    }
                    out.push(']');
                    i = close + 1;
                }
                _ => {
                    out.push_str("\\[");
                    i += 1;
                }
            },
            '{' => match matching_brace(p, i) {
                Some(close) => {
                    out.push_str("(?:");
                    for (n, alt) in split_alternatives(&p[i + 1..close]).into_iter().enumerate() {
                        if n > 0 {
                            out.push('|');
                        }
                        translate(alt, out);
                    }
                    out.push(')');
                    i = close + 1;
                }
                None => {
                    out.push_str("\\{");
                    i += 1;
                }
            },
            c => {
                push_literal(c, out);
                i += 1;
            }
        }
    }
}

fn matching_brace(p: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in p.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

fn split_alternatives(p: &[char]) -> Vec<&[char]> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (k, &c) in p.iter().enumerate() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&p[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    out.push(&p[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str) -> bool {
        Glob::new(pattern).unwrap().is_match(path)
    }

    #[test]
    fn double_star_slash_matches_zero_or_more_dirs() {
        assert!(m("**/*.ts", "/a.ts"));
        assert!(m("**/*.ts", "/src/deep/a.ts"));
        assert!(!m("**/*.ts", "/a.tsx"));
        assert!(m("/src/**/*.test.ts", "/src/x.test.ts"));
        assert!(m("/src/**/*.test.ts", "/src/a/b/x.test.ts"));
        assert!(!m("/src/**/*.test.ts", "/lib/x.test.ts"));
        assert!(m("/src/**", "/src/a/b"));
        assert!(!m("/src/**", "/src"));
    }

    #[test]
    fn single_star_and_question_stay_in_segment() {
        assert!(m("*.md", "/README.md"));
        assert!(!m("*.md", "/docs/README.md"));
        assert!(m("/a?c", "/abc"));
        assert!(!m("/a?c", "/a/c"));
        assert!(m("*", "/.hidden"), "no dotfile special case");
    }

    #[test]
    fn classes_and_braces() {
        assert!(m("/f[0-9].txt", "/f7.txt"));
        assert!(!m("/f[0-9].txt", "/fx.txt"));
        assert!(m("/f[^0-9].txt", "/fx.txt"));
        assert!(m("/*.{ts,js}", "/a.js"));
        assert!(!m("/*.{ts,js}", "/a.rs"));
        assert!(m("/{src,lib}/**/*.{ts,tsx}", "/lib/a/b.tsx"));
        assert!(m("/{*.md,docs/*}", "/docs/x"), "glob syntax inside braces");
        assert!(m("/a[b", "/a[b"), "unclosed class is literal");
        assert!(m("/a{b", "/a{b"), "unclosed brace is literal");
        assert!(m("/a.b+(c)", "/a.b+(c)"), "regex metacharacters are literal");
        assert!(!m("/a.b", "/axb"));
    }

    #[test]
    fn pattern_is_path_normalized() {
        let g = Glob::new("src/../lib/./*.rs").unwrap();
        assert_eq!(g.pattern, "/lib/*.rs");
        assert!(g.is_match("/lib/x.rs"));
    }

    #[test]
    fn prefix_extraction() {
        let range = |p: &str| Glob::new(p).unwrap().prefilter;
        assert_eq!(range("**/*.ts"), Prefilter::Range { lo: "/".into(), hi: "0".into() });
        assert_eq!(
            range("/src/lib/*.ts"),
            Prefilter::Range { lo: "/src/lib/".into(), hi: "/src/lib0".into() }
        );
        assert_eq!(
            range("/src/ab*/x"),
            Prefilter::Range { lo: "/src/".into(), hi: "/src0".into() }
        );
        assert_eq!(range("/src/a.ts"), Prefilter::Exact("/src/a.ts".into()));
        assert_eq!(range("/{a,b}/x"), Prefilter::Range { lo: "/".into(), hi: "0".into() });
    }

    #[test]
    fn suffix_extraction() {
        let suffix = |p: &str| Glob::new(p).unwrap().suffix;
        assert_eq!(suffix("**/*.md"), Some(".md".into()));
        assert_eq!(suffix("/src/**/*.test.ts"), Some(".test.ts".into()));
        assert_eq!(suffix("/*.{ts,js}"), None);
        assert_eq!(suffix("/**"), None);
        assert_eq!(suffix("/f[0-9]"), None);
        assert_eq!(suffix("/a{b/*.x"), None, "unbalanced braces disable the suffix");
    }
}
