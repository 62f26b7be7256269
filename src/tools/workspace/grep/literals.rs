//! The literals a pattern requires, as a [`GramQuery`] for the workspace's trigram index
//! (what ripgrep and Zoekt call inner-literal extraction).
//!
//! The pattern is parsed by `regex-syntax` with the flags the search compiles it with, and
//! the HIR is walked: a literal is required as it is, a concatenation requires its runs of
//! literal characters and what each other part requires, an alternation requires one of
//! its branches, a repetition of at least one what its body requires, and anything else
//! (classes, empty matches, assertions) nothing. Under case-insensitivity `regex-syntax`
//! turns a letter into a class of its cases; a class of exactly one ASCII letter in both
//! cases counts as that letter (the index folds ASCII case), and any wider class (`k` also
//! matches the Kelvin sign) ends the run, so no file that matches is ever excluded.

use crate::workspace::GramQuery;
use regex_syntax::hir::{Class, Hir, HirKind};

/// What a match of the `regex`-syntax `pattern` must contain; `All` when the pattern
/// does not parse or requires nothing usable.
pub fn required(pattern: &str, case_insensitive: bool) -> GramQuery {
    let parsed = regex_syntax::ParserBuilder::new()
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .build()
        .parse(pattern);
    match parsed {
        Ok(hir) => simplify(of(&hir)),
        Err(_) => GramQuery::All,
    }
}

/// The byte an item stands for when it is one character, up to ASCII case.
fn folded_char(hir: &Hir) -> Option<Vec<u8>> {
    match hir.kind() {
        HirKind::Literal(lit) => Some(lit.0.to_vec()),
        HirKind::Class(Class::Unicode(c)) => {
            let ranges = c.ranges();
            let [a, b] = ranges else { return None };
            let (a, b) = ((a.start(), a.end()), (b.start(), b.end()));
            let single = a.0 == a.1 && b.0 == b.1;
            let pair = a.0.is_ascii_uppercase() && b.0 == a.0.to_ascii_lowercase();
            (single && pair).then(|| vec![b.0 as u8])
        }
        HirKind::Class(Class::Bytes(c)) => {
            let ranges = c.ranges();
            let [a, b] = ranges else { return None };
            let single = a.start() == a.end() && b.start() == b.end();
            let pair =
                a.start().is_ascii_uppercase() && b.start() == a.start().to_ascii_lowercase();
            (single && pair).then(|| vec![b.start()])
        }
        HirKind::Capture(cap) => folded_char(&cap.sub),
        _ => None,
    }
}

fn of(hir: &Hir) -> GramQuery {
    match hir.kind() {
        HirKind::Literal(lit) => GramQuery::Literal(lit.0.to_ascii_lowercase()),
        HirKind::Capture(cap) => of(&cap.sub),
        HirKind::Repetition(rep) if rep.min >= 1 => of(&rep.sub),
        HirKind::Concat(items) => {
            let mut parts = Vec::new();
            let mut run: Vec<u8> = Vec::new();
            for item in items {
                match folded_char(item) {
                    Some(bytes) => run.extend(bytes.to_ascii_lowercase()),
                    None => {
                        if !run.is_empty() {
                            parts.push(GramQuery::Literal(std::mem::take(&mut run)));
                        }
                        parts.push(of(item));
                    }
                }
            }
            if !run.is_empty() {
                parts.push(GramQuery::Literal(run));
            }
            GramQuery::And(parts)
        }
        HirKind::Alternation(alts) => GramQuery::Or(alts.iter().map(of).collect()),
        _ => GramQuery::All,
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
}
