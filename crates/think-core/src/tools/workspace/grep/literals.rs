//! The literals a pattern requires, as a [`GramQuery`] for the workspace's trigram index
//! (what ripgrep and Zoekt call inner-literal extraction).
//!
//! The JS pattern is read directly: a concatenation requires its runs of literal
//! characters and what each other part requires, an alternation one of its branches, a
//! group or a repetition of at least one what its body requires, and anything else
//! (classes, `.`, escapes such as `\d`, assertions) nothing. Look-around, backreferences
//! and escapes whose reading depends on flags or context (`\x`, `\u`, `\c`, `\p`, an
//! escaped letter) make the whole pattern require nothing, which is always correct. Under
//! case-insensitivity an ASCII letter counts as itself (the index folds ASCII case, and JS
//! without `u` folds no other character to an ASCII one), except `k` and `s`, which the host
//! engine also folds to U+212A and U+017F, and any other character ends the run, so no file
//! that matches is ever excluded. Hand-written (about 150 lines) rather than parsed by
//! `regex-syntax`, which with its case-folding table and grep's translation cost about
//! 50 KB of the gzipped wasm (BENCHMARKS.md, "Sizes") for this one use.

use crate::workspace::GramQuery;

/// What a match of the JS `pattern` must contain; `All` when the pattern requires nothing
/// usable (or is not understood).
pub fn required(pattern: &str, case_insensitive: bool) -> GramQuery {
    let chars: Vec<char> = pattern.chars().collect();
    let mut reader = Reader { p: &chars, at: 0, fold: case_insensitive };
    match reader.alternation() {
        Some(q) if reader.at == chars.len() => simplify(q),
        _ => GramQuery::All,
    }
}

/// A recursive-descent reader; `None` means "give up: the pattern requires nothing known".
struct Reader<'p> {
    p: &'p [char],
    at: usize,
    fold: bool,
}

/// One item of a concatenation.
enum Atom {
    /// A character the index can look for, as the bytes it is indexed as.
    Char(Vec<u8>),
    /// A group, which requires what its body does.
    Group(GramQuery),
    /// Anything else: a class, `.`, an escape class or an assertion.
    Other,
}

impl Reader<'_> {
    fn peek(&self) -> Option<char> {
        self.p.get(self.at).copied()
    }

    /// Branches up to a `)` or the end.
    fn alternation(&mut self) -> Option<GramQuery> {
        let mut branches = vec![self.concat()?];
        while self.peek() == Some('|') {
            self.at += 1;
            branches.push(self.concat()?);
        }
        Some(if branches.len() == 1 { branches.remove(0) } else { GramQuery::Or(branches) })
    }

    fn concat(&mut self) -> Option<GramQuery> {
        let mut parts = Vec::new();
        let mut run: Vec<u8> = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            let min = self.quantifier()?;
            let part = match (atom, min) {
                (Atom::Char(bytes), None) => {
                    run.extend(bytes);
                    continue;
                }
                (_, Some(0)) | (Atom::Other, _) => GramQuery::All,
                (Atom::Char(bytes), Some(_)) => GramQuery::Literal(bytes),
                (Atom::Group(q), _) => q,
            };
            if !run.is_empty() {
                parts.push(GramQuery::Literal(std::mem::take(&mut run)));
            }
            parts.push(part);
        }
        if !run.is_empty() {
            parts.push(GramQuery::Literal(run));
        }
        Some(GramQuery::And(parts))
    }

    /// The character `c` as the index sees it, or `Other` when case folding may match
    /// characters the index does not fold.
    fn char(&self, c: char) -> Atom {
        let lower = c.to_ascii_lowercase();
        match c {
            _ if !self.fold => Atom::Char(c.to_string().to_ascii_lowercase().into_bytes()),
            'k' | 'K' | 's' | 'S' => Atom::Other,
            _ if c.is_ascii() => Atom::Char(vec![lower as u8]),
            _ => Atom::Other,
        }
    }

    fn atom(&mut self) -> Option<Atom> {
        let c = self.peek()?;
        self.at += 1;
        Some(match c {
            '(' => {
                if self.peek() == Some('?') {
                    let named = self.p.get(self.at + 1) == Some(&'<')
                        && !matches!(self.p.get(self.at + 2), Some('=' | '!'));
                    match self.p.get(self.at + 1) {
                        Some(':') => self.at += 2,
                        _ if named => {
                            let close = self.p[self.at..].iter().position(|&c| c == '>')?;
                            self.at += close + 1;
                        }
                        // Look-around (or syntax this reader does not know).
                        _ => return None,
                    }
                }
                let body = self.alternation()?;
                if self.peek() != Some(')') {
                    return None;
                }
                self.at += 1;
                Atom::Group(body)
            }
            '[' => {
                // JS: the first `]` closes the class (`[]` is empty), `\` escapes.
                while self.peek()? != ']' {
                    self.at += if self.peek() == Some('\\') { 2 } else { 1 };
                }
                self.at += 1;
                Atom::Other
            }
            '\\' => {
                let e = self.peek()?;
                self.at += 1;
                match e {
                    'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'b' | 'B' | 'n' | 'r' | 't' | 'f' | 'v' => {
                        Atom::Other
                    }
                    '0' if !self.peek().is_some_and(|d| d.is_ascii_digit()) => Atom::Other,
                    e if e.is_ascii_punctuation() => self.char(e),
                    // Backreferences, `\x`/`\u`/`\c`/`\p`, and escaped letters.
                    _ => return None,
                }
            }
            '.' | '^' | '$' => Atom::Other,
            '*' | '+' | '?' => return None,
            c => self.char(c),
        })
    }

    /// A quantifier after an atom: `Some(Some(min))`, `Some(None)` when there is none.
    fn quantifier(&mut self) -> Option<Option<usize>> {
        let min = match self.peek() {
            Some('*' | '?') => {
                self.at += 1;
                0
            }
            Some('+') => {
                self.at += 1;
                1
            }
            Some('{') => match self.bounds() {
                Some((min, len)) => {
                    self.at += len;
                    min
                }
                None => return Some(None),
            },
            _ => return Some(None),
        };
        if self.peek() == Some('?') {
            self.at += 1;
        }
        if matches!(self.peek(), Some('*' | '+' | '?')) {
            return None;
        }
        Some(Some(min))
    }

    /// At a `{`: the minimum and length of a `{n}`, `{n,}` or `{n,m}` quantifier, or `None`
    /// when the brace is a literal.
    fn bounds(&self) -> Option<(usize, usize)> {
        let rest = &self.p[self.at..];
        let close = rest.iter().position(|&c| c == '}')?;
        let inner: String = rest[1..close].iter().collect();
        let (lo, hi) = inner.split_once(',').unwrap_or((&inner, "0"));
        let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
        if lo.is_empty() || !digits(lo) || !digits(hi) {
            return None;
        }
        Some((lo.parse().unwrap_or(usize::MAX), close + 1))
    }
}

/// Drops constraints the index cannot use: short literals, `All` in an `And`, an `Or`
/// with an unconstrained branch.
fn simplify(q: GramQuery) -> GramQuery {
    match q {
        GramQuery::Literal(b) if b.len() < 3 => GramQuery::All,
        GramQuery::And(parts) => {
            let mut kept: Vec<GramQuery> =
                parts.into_iter().map(simplify).filter(|p| *p != GramQuery::All).collect();
            match kept.len() {
                0 => GramQuery::All,
                1 => kept.remove(0),
                _ => GramQuery::And(kept),
            }
        }
        GramQuery::Or(parts) => {
            let kept: Vec<GramQuery> = parts.into_iter().map(simplify).collect();
            if kept.is_empty() || kept.contains(&GramQuery::All) {
                GramQuery::All
            } else {
                GramQuery::Or(kept)
            }
        }
        q => q,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> GramQuery {
        GramQuery::Literal(s.as_bytes().to_vec())
    }

    #[test]
    fn literal_runs_survive_case_folding_and_wide_classes_end_them() {
        assert_eq!(required("needle", true), lit("needle"));
        assert_eq!(required("Needle", false), lit("needle"));
        // `s` and `k` fold to non-ASCII characters too, so they end a case-insensitive run.
        assert_eq!(required("thisisitem", true), GramQuery::And(vec![lit("thi"), lit("item")]));
        assert_eq!(required("thisisit", false), lit("thisisit"));
        assert_eq!(
            required(r"fn_\d{3}\(x, y\)", false),
            GramQuery::And(vec![lit("fn_"), lit("(x, y)")])
        );
    }

    #[test]
    fn alternations_need_every_branch_constrained() {
        assert_eq!(required("foo|barbaz", false), GramQuery::Or(vec![lit("foo"), lit("barbaz")]));
        assert_eq!(required("foo|x", false), GramQuery::All);
        assert_eq!(required("(abc)?def", false), lit("def"));
        assert_eq!(required("(abc)+", false), lit("abc"));
        assert_eq!(required("a.c", false), GramQuery::All);
        assert_eq!(required("(unclosed", false), GramQuery::All);
    }

    #[test]
    fn js_syntax_is_read_as_js_and_anything_unclear_requires_nothing() {
        assert_eq!(required("(?<=a)bcd", false), GramQuery::All, "look-around");
        assert_eq!(required("(abc)\\1", false), GramQuery::All, "backreference");
        assert_eq!(required("\\x41bcd", false), GramQuery::All);
        assert_eq!(required("[]]abc", false), lit("]abc"), "JS's `[]` is an empty class");
        assert_eq!(required("[a\\]b]xyz", false), lit("xyz"));
        assert_eq!(
            required("a{2}bcd|x{1,}yz{", false),
            GramQuery::Or(vec![lit("bcd"), lit("yz{")])
        );
        assert_eq!(required("(?<name>abc)d", false), lit("abc"));
        assert_eq!(required("(?:abc|defg)+?h", true), GramQuery::Or(vec![lit("abc"), lit("defg")]));
        assert_eq!(required("caf\\u00e9", false), GramQuery::All);
        assert_eq!(required("café!!", true), lit("caf"), "non-ASCII ends a folded run");
        assert_eq!(required("café!!", false), lit("café!!"));
        assert_eq!(required("a\\.b\\-c\\#", false), lit("a.b-c#"), "identity escapes");
        assert_eq!(required("ab+cde", false), lit("cde"));
    }
}
