//! A static guard against patterns that can backtrack exponentially (ReDoS), run before any
//! pattern is compiled, on both engines.
//!
//! Why: in the Worker the patterns run on V8's irregexp, which has no backtracking limit
//! (workerd refuses the `l` flag), so `/(a+)+$/` over a line of a's burns CPU up to the 30 s
//! request limit (1.9 s on 26 a's). The pattern is read as JS syntax and refused when one of
//! the classic exponential shapes appears inside a *loop* (a repeat with no maximum or a
//! maximum of at least `LOOP_MAX`):
//! 1. a variable repeat (`*`, `+`, `?`, `{n,m}`) whose characters can also start what follows
//!    it inside the loop's body, the body's next iteration included: `(a+)+`, `(\w+\s?)*`,
//!    `(?:x*y?)+`, `(a?a?)+`; `(\w+\s)*` is accepted, as the `\s` decides where `\w+` ends;
//! 2. a loop over an alternation with two branches that can start with the same character:
//!    `(a|a)*`, `(a|ab)*`, `(\w|\d)+`; `(foo|bar)+` is accepted;
//! 3. a backreference inside a loop.
//!
//! First characters are sets of code point ranges (classes and `\d`/`\w`/`\s` exactly,
//! ASCII case folding under `i`, anything unclear as every character), so an overlap is
//! assumed whenever one is possible. Polynomial shapes (`.*a.*a.*b`, a repeat over a class
//! that overlaps its neighbour) are not refused: their cost on grep's lines stays bounded.

use super::Flags;

/// A bounded repeat with at least this maximum counts as a loop (`(a+){10}` is already
/// `n^10` work); `(ab){2,3}` does not.
const LOOP_MAX: u32 = 10;
/// How deep groups may nest before the pattern is refused as too deep to check.
const MAX_DEPTH: usize = 100;

/// Why a pattern is refused: the construct, the part of the pattern it is, and how to
/// rewrite it (the message the model sees).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Catastrophic {
    /// A variable repeat inside a loop whose exit is ambiguous.
    NestedRepeat {
        /// The whole pattern.
        pattern: String,
        /// The loop, e.g. `(a+)+`.
        outer: String,
        /// The inner repeat, e.g. `a+`.
        inner: String,
    },
    /// A loop over branches that can start with the same character.
    OverlappingBranches {
        /// The whole pattern.
        pattern: String,
        /// The loop, e.g. `(a|ab)*`.
        part: String,
    },
    /// A backreference inside a loop.
    RepeatedBackreference {
        /// The whole pattern.
        pattern: String,
        /// The loop, e.g. `(a\1)+`.
        part: String,
    },
    /// Groups nested deeper than `MAX_DEPTH`.
    TooDeep {
        /// The whole pattern.
        pattern: String,
    },
}

impl std::fmt::Display for Catastrophic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Catastrophic::NestedRepeat { pattern, outer, inner } => write!(
                f,
                "the pattern \"{pattern}\" nests a repeat inside a repeat (\"{outer}\"), which can \
                 take exponential time; use a single repeat such as \"{inner}\", or make what \
                 follows \"{inner}\" start with a character it cannot match"
            ),
            Catastrophic::OverlappingBranches { pattern, part } => write!(
                f,
                "the pattern \"{pattern}\" repeats alternatives that can start with the same \
                 character (\"{part}\"), which can take exponential time; factor out the common \
                 start (\"a(?:b)?\" rather than \"a|ab\") or merge the branches into one class \
                 (\"\\w\" rather than \"\\w|\\d\")"
            ),
            Catastrophic::RepeatedBackreference { pattern, part } => write!(
                f,
                "the pattern \"{pattern}\" repeats a backreference (\"{part}\"), which can take \
                 exponential time; match the repeated text without the backreference"
            ),
            Catastrophic::TooDeep { pattern } => write!(
                f,
                "the pattern \"{pattern}\" nests groups more than {MAX_DEPTH} deep, too deep to \
                 check that it runs in bounded time"
            ),
        }
    }
}

impl std::error::Error for Catastrophic {}

/// Refuses `source` (a pattern the engine accepted) when it can backtrack exponentially;
/// a pattern this reader does not understand is left to the engine.
pub fn check(source: &str, flags: Flags) -> Result<(), Catastrophic> {
    let p: Vec<char> = source.chars().collect();
    let mut parser = Parser { p: &p, at: 0, fold: flags.ignore_case, depth: 0, too_deep: false };
    let Some(root) = parser.alternation() else {
        return if parser.too_deep {
            Err(Catastrophic::TooDeep { pattern: source.to_owned() })
        } else {
            Ok(())
        };
    };
    if parser.at != p.len() {
        return Ok(());
    }
    let span = |(a, b): (usize, usize)| p[a..b].iter().collect::<String>();
    walk(&root, &Set::default(), None).map_err(|found| match found {
        Found::Nested { outer, inner } => Catastrophic::NestedRepeat {
            pattern: source.to_owned(),
            outer: span(outer),
            inner: span(inner),
        },
        Found::Branches(part) => {
            Catastrophic::OverlappingBranches { pattern: source.to_owned(), part: span(part) }
        }
        Found::Backreference(part) => {
            Catastrophic::RepeatedBackreference { pattern: source.to_owned(), part: span(part) }
        }
    })
}

/// A set of characters as sorted, disjoint, non-adjacent inclusive code point ranges.
#[derive(Debug, Clone, Default, PartialEq)]
struct Set(Vec<(u32, u32)>);

impl Set {
    fn of(ranges: &[(u32, u32)]) -> Set {
        Set::normalized(ranges.to_vec())
    }

    fn normalized(mut ranges: Vec<(u32, u32)>) -> Set {
        for r in &mut ranges {
            *r = (r.0.min(r.1), r.0.max(r.1));
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        Set(merged)
    }

    fn any() -> Set {
        Set(vec![(0, 0x10FFFF)])
    }

    fn union(&self, other: &Set) -> Set {
        if other.0.is_empty() {
            return self.clone();
        }
        Set::normalized(self.0.iter().chain(&other.0).copied().collect())
    }

    /// Whether the sets share a character (a merge walk over both sorted lists).
    fn overlaps(&self, other: &Set) -> bool {
        let (mut i, mut j) = (0, 0);
        while let (Some(&(a, b)), Some(&(c, d))) = (self.0.get(i), other.0.get(j)) {
            if a <= d && c <= b {
                return true;
            }
            if b < d {
                i += 1;
            } else {
                j += 1;
            }
        }
        false
    }

    fn complement(&self) -> Set {
        let mut out = Vec::new();
        let mut next = 0u32;
        for &(a, b) in &self.0 {
            if a > next {
                out.push((next, a - 1));
            }
            next = b + 1;
        }
        if next <= 0x10FFFF {
            out.push((next, 0x10FFFF));
        }
        Set(out)
    }

    /// The set with the other ASCII case of its letters (and U+212A/U+017F, which fold to
    /// `k`/`s` in `u` mode).
    fn folded(&self) -> Set {
        let mut ranges = self.0.clone();
        for &(a, b) in &self.0 {
            for (lo, hi, shift) in [(0x41u32, 0x5Au32, 32i64), (0x61, 0x7A, -32)] {
                let (x, y) = (a.max(lo), b.min(hi));
                if x <= y {
                    ranges.push(((x as i64 + shift) as u32, (y as i64 + shift) as u32));
                }
            }
        }
        for (ascii, other) in [('k', 0x212A), ('K', 0x212A), ('s', 0x17F), ('S', 0x17F)] {
            if self.overlaps(&Set::of(&[(ascii as u32, ascii as u32)])) {
                ranges.push((other, other));
            }
        }
        Set::normalized(ranges)
    }
}

const DIGIT: &[(u32, u32)] = &[(0x30, 0x39)];
const WORD: &[(u32, u32)] = &[(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)];
const SPACE: &[(u32, u32)] = &[
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
];

/// A node of the pattern, with what the analysis needs: the characters a match can start
/// with, whether it can match the empty string, and its span in the pattern (in chars).
struct Node {
    kind: Kind,
    first: Set,
    nullable: bool,
    span: (usize, usize),
}

enum Kind {
    /// A character, class, or assertion.
    Leaf,
    Backreference,
    Group(Box<Node>),
    /// Look-around: zero-width, checked on its own.
    Look(Box<Node>),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        body: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

/// A recursive-descent reader of JS pattern syntax; `None` for what it does not know.
struct Parser<'p> {
    p: &'p [char],
    at: usize,
    fold: bool,
    depth: usize,
    too_deep: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.p.get(self.at).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(c);
        self.at += usize::from(hit);
        hit
    }

    fn leaf(&self, set: Set, start: usize) -> Node {
        let first = if self.fold { set.folded() } else { set };
        Node { kind: Kind::Leaf, first, nullable: false, span: (start, self.at) }
    }

    fn assertion(&self, start: usize) -> Node {
        Node { kind: Kind::Leaf, first: Set::default(), nullable: true, span: (start, self.at) }
    }

    fn alternation(&mut self) -> Option<Node> {
        let start = self.at;
        let mut branches = vec![self.concat()?];
        while self.eat('|') {
            branches.push(self.concat()?);
        }
        if branches.len() == 1 {
            return branches.pop();
        }
        let first = branches.iter().fold(Set::default(), |s, b| s.union(&b.first));
        let nullable = branches.iter().any(|b| b.nullable);
        Some(Node { kind: Kind::Alt(branches), first, nullable, span: (start, self.at) })
    }

    fn concat(&mut self) -> Option<Node> {
        let start = self.at;
        let mut items = Vec::new();
        while !matches!(self.peek(), None | Some('|' | ')')) {
            let atom = self.atom()?;
            items.push(self.quantified(atom)?);
        }
        if items.len() == 1 {
            return items.pop();
        }
        let mut first = Set::default();
        let mut nullable = true;
        for item in &items {
            first = first.union(&item.first);
            if !item.nullable {
                nullable = false;
                break;
            }
        }
        Some(Node { kind: Kind::Concat(items), first, nullable, span: (start, self.at) })
    }

    fn quantified(&mut self, mut node: Node) -> Option<Node> {
        loop {
            let (min, max) = match self.peek() {
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('?') => (0, Some(1)),
                Some('{') => match self.bounds() {
                    Some((min, max, len)) => {
                        self.at += len - 1;
                        (min, max)
                    }
                    None => return Some(node),
                },
                _ => return Some(node),
            };
            self.at += 1;
            self.eat('?');
            let start = node.span.0;
            let first = if max == Some(0) { Set::default() } else { node.first.clone() };
            let nullable = min == 0 || node.nullable;
            node = Node {
                kind: Kind::Repeat { body: Box::new(node), min, max },
                first,
                nullable,
                span: (start, self.at),
            };
        }
    }

    /// At a `{`: a `{n}`, `{n,}` or `{n,m}` quantifier's bounds and length, or `None` when
    /// the brace is a literal.
    fn bounds(&self) -> Option<(u32, Option<u32>, usize)> {
        let rest = &self.p[self.at..];
        let close = rest.iter().position(|&c| c == '}')?;
        let inner: String = rest[1..close].iter().collect();
        let number = |s: &str| {
            (!s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
                .then(|| s.parse().unwrap_or(u32::MAX))
        };
        let (min, max) = match inner.split_once(',') {
            None => (number(&inner)?, number(&inner)),
            Some((lo, "")) => (number(lo)?, None),
            Some((lo, hi)) => (number(lo)?, Some(number(hi)?)),
        };
        Some((min, max, close + 1))
    }

    fn atom(&mut self) -> Option<Node> {
        let start = self.at;
        let c = self.peek()?;
        self.at += 1;
        Some(match c {
            '(' => return self.group(start),
            '[' => {
                let set = self.class()?;
                self.leaf(set, start)
            }
            '\\' => return self.escape(start),
            '.' => self.leaf(Set::any(), start),
            '^' | '$' => self.assertion(start),
            c => self.leaf(Set::of(&[(c as u32, c as u32)]), start),
        })
    }

    fn group(&mut self, start: usize) -> Option<Node> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.too_deep = true;
            return None;
        }
        let mut look = false;
        if self.eat('?') {
            match (self.peek(), self.p.get(self.at + 1)) {
                (Some('=' | '!'), _) => {
                    self.at += 1;
                    look = true;
                }
                (Some('<'), Some('=' | '!')) => {
                    self.at += 2;
                    look = true;
                }
                (Some('<'), _) => {
                    let close = self.p[self.at..].iter().position(|&c| c == '>')?;
                    self.at += close + 1;
                }
                _ => {
                    // `(?:` and modifier groups such as `(?i:`.
                    while self.peek()?.is_ascii_alphabetic() || self.peek() == Some('-') {
                        self.at += 1;
                    }
                    if !self.eat(':') {
                        return None;
                    }
                }
            }
        }
        let body = self.alternation()?;
        if !self.eat(')') {
            return None;
        }
        self.depth -= 1;
        let span = (start, self.at);
        Some(if look {
            Node { kind: Kind::Look(Box::new(body)), first: Set::default(), nullable: true, span }
        } else {
            Node {
                first: body.first.clone(),
                nullable: body.nullable,
                kind: Kind::Group(Box::new(body)),
                span,
            }
        })
    }

    /// After a `\` outside a class.
    fn escape(&mut self, start: usize) -> Option<Node> {
        let e = self.peek()?;
        Some(match e {
            'b' | 'B' => {
                self.at += 1;
                self.assertion(start)
            }
            '1'..='9' => {
                while self.peek().is_some_and(|d| d.is_ascii_digit()) {
                    self.at += 1;
                }
                self.backreference(start)
            }
            'k' if self.p.get(self.at + 1) == Some(&'<') => {
                let close = self.p[self.at..].iter().position(|&c| c == '>')?;
                self.at += close + 1;
                self.backreference(start)
            }
            _ => {
                let set = self.escaped_set()?;
                self.leaf(set, start)
            }
        })
    }

    fn backreference(&self, start: usize) -> Node {
        let span = (start, self.at);
        Node { kind: Kind::Backreference, first: Set::any(), nullable: true, span }
    }

    /// The characters of the escape after a `\` (at `self.at`), inside or outside a class.
    fn escaped_set(&mut self) -> Option<Set> {
        let e = self.peek()?;
        self.at += 1;
        let single = |c: u32| Set::of(&[(c, c)]);
        Some(match e {
            'd' => Set::of(DIGIT),
            'D' => Set::of(DIGIT).complement(),
            'w' => Set::of(WORD),
            'W' => Set::of(WORD).complement(),
            's' => Set::of(SPACE),
            'S' => Set::of(SPACE).complement(),
            'n' => single(0x0A),
            'r' => single(0x0D),
            't' => single(0x09),
            'f' => single(0x0C),
            'v' => single(0x0B),
            '0' => single(0),
            'x' | 'u' | 'c' | 'p' | 'P' => {
                // A character code, a control letter or a property: taken as any character,
                // and its digits or `{…}` read as part of it.
                if self.peek() == Some('{') {
                    self.at += self.p[self.at..].iter().position(|&c| c == '}')? + 1;
                } else {
                    let n = match e {
                        'x' => 2,
                        'u' => 4,
                        'c' => 1,
                        _ => 0,
                    };
                    let len = self.p[self.at..]
                        .iter()
                        .take(n)
                        .take_while(|c| c.is_ascii_alphanumeric())
                        .count();
                    self.at += len;
                }
                Set::any()
            }
            c => single(c as u32),
        })
    }

    /// After a `[`: the class's characters (JS: the first `]` closes, `[^]` is any).
    fn class(&mut self) -> Option<Set> {
        let negated = self.eat('^');
        let mut ranges = Vec::new();
        loop {
            let (item, single) = self.class_item()?;
            let Some(item) = item else { break };
            if self.peek() == Some('-') && self.p.get(self.at + 1) != Some(&']') {
                self.at += 1;
                let (end, end_single) = self.class_item()?;
                match (single, end_single) {
                    (Some(a), Some(b)) => ranges.push((a, b)),
                    // `[\w-x]` (Annex B): both ends and the `-` are members.
                    _ => {
                        ranges.extend(item.0.iter().chain(&end.unwrap_or_default().0));
                        ranges.push((0x2D, 0x2D));
                    }
                }
            } else {
                ranges.extend(item.0);
            }
        }
        let set = Set::normalized(ranges);
        Some(if negated { set.complement() } else { set })
    }

    /// One class member: its characters and, when it is one character, that character;
    /// `(None, None)` at the closing `]`.
    fn class_item(&mut self) -> Option<(Option<Set>, Option<u32>)> {
        let c = self.peek()?;
        self.at += 1;
        match c {
            ']' => Some((None, None)),
            '\\' => {
                let set = if self.peek() == Some('b') {
                    self.at += 1;
                    Set::of(&[(8, 8)])
                } else {
                    self.escaped_set()?
                };
                let single = match set.0.as_slice() {
                    [(a, b)] if a == b => Some(*a),
                    _ => None,
                };
                Some((Some(set), single))
            }
            c => Some((Some(Set::of(&[(c as u32, c as u32)])), Some(c as u32))),
        }
    }
}

/// A refused construct, by spans in the pattern.
enum Found {
    Nested { outer: (usize, usize), inner: (usize, usize) },
    Branches((usize, usize)),
    Backreference((usize, usize)),
}

/// Checks `node`, which `follow` may follow within the innermost enclosing loop (`in_loop`,
/// its span); what follows the outermost loop only makes a polynomial difference.
fn walk(node: &Node, follow: &Set, in_loop: Option<(usize, usize)>) -> Result<(), Found> {
    match &node.kind {
        Kind::Leaf => Ok(()),
        Kind::Backreference => match in_loop {
            Some(part) => Err(Found::Backreference(part)),
            None => Ok(()),
        },
        Kind::Group(body) => walk(body, follow, in_loop),
        Kind::Look(body) => walk(body, &Set::default(), None),
        Kind::Alt(branches) => branches.iter().try_for_each(|b| walk(b, follow, in_loop)),
        Kind::Concat(items) => {
            let mut after = follow.clone();
            for item in items.iter().rev() {
                walk(item, &after, in_loop)?;
                after = if item.nullable { item.first.union(&after) } else { item.first.clone() };
            }
            Ok(())
        }
        Kind::Repeat { body, min, max } => {
            if let Some(outer) = in_loop {
                if *max != Some(*min) && body.first.overlaps(follow) {
                    return Err(Found::Nested { outer, inner: node.span });
                }
            }
            let is_loop = max.is_none_or(|m| m >= LOOP_MAX);
            if !is_loop {
                let inner = if max.is_some_and(|m| m > 1) {
                    body.first.union(follow)
                } else {
                    follow.clone()
                };
                return walk(body, &inner, in_loop);
            }
            if overlapping_branches(body) {
                return Err(Found::Branches(node.span));
            }
            let outside = if in_loop.is_some() { follow.clone() } else { Set::default() };
            walk(body, &body.first.union(&outside), Some(node.span))
        }
    }
}

/// Whether `body`, under its groups, is an alternation with two branches that can start
/// with the same character.
fn overlapping_branches(body: &Node) -> bool {
    match &body.kind {
        Kind::Group(inner) => overlapping_branches(inner),
        Kind::Alt(branches) => branches
            .iter()
            .enumerate()
            .any(|(i, a)| branches[i + 1..].iter().any(|b| a.first.overlaps(&b.first))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(p: &str) -> Option<String> {
        check(p, Flags::default()).err().map(|e| e.to_string())
    }

    #[test]
    fn exponential_shapes_are_refused_with_the_construct_named() {
        let nested = [
            "(a+)+$",
            "(a+)+",
            "(a*)*",
            "(\\w+\\s?)*",
            "(?:x*y?)+",
            "(a?a?)+",
            "(.*)*x",
            "(\\s*\\w+)*$",
            "(-?\\d+)+!",
            "(\\.?\\w+)+",
            "(a{1,2})+",
            "(?:\\s+|#[^\\n]*)*",
            "((ab)*c?)*",
            "(a+){10}",
            "x(?:[a-z]+\\d?)+y",
            "^(?<n>a+)+$",
        ];
        for p in nested {
            let m = refused(p).unwrap_or_else(|| panic!("{p:?} accepted"));
            assert!(m.contains("nests a repeat inside a repeat"), "{p:?}: {m}");
        }
        let branches = ["(a|a)*", "(a|ab)*", "(\\w|\\d)+", "(?:[a-c]|b)+", "((x|xy)){10,}"];
        for p in branches {
            let m = refused(p).unwrap_or_else(|| panic!("{p:?} accepted"));
            assert!(m.contains("alternatives that can start with the same"), "{p:?}: {m}");
        }
        assert!(refused("(a\\1)+").unwrap().contains("repeats a backreference (\"(a\\1)+\")"));
        assert!(refused("(?<q>.)(?:\\k<q>x)*").unwrap().contains("backreference"));
        assert!(refused(&"(".repeat(150)).is_some_and(|m| m.contains("more than 100 deep")));
        assert!(check("(a|A)+", Flags { ignore_case: true, ..Flags::default() }).is_err());
        assert_eq!(
            refused("(a+)+$").unwrap(),
            "the pattern \"(a+)+$\" nests a repeat inside a repeat (\"(a+)+\"), which can take \
             exponential time; use a single repeat such as \"a+\", or make what follows \"a+\" \
             start with a character it cannot match"
        );
    }

    #[test]
    fn bounded_and_unambiguous_patterns_are_accepted() {
        let ok = [
            "(ab){2,3}",
            "(foo|bar)+",
            "a+b+c*",
            "(a|A)+",
            "(\\w+\\s)*\\w+",
            "([a-z]+-)*x",
            "^([\\w.-]+)@([\\w-]+\\.)+[\\w-]{2,4}$",
            "(\\d{1,3}\\.){3}\\d{1,3}",
            "\"(?:[^\"\\\\]|\\\\.)*\"",
            ".*foo.*",
            "(ab?)+b",
            "\\b(?:fn|let|const)\\s+\\w+",
            "(a|b)\\1",
            "(?=(a+))\\1",
            "[\\w-]+",
            "x{2,}y{3}",
            "(a+){2}",
            "(?:https?|ftp)://\\S+",
            "a{",
            "(?:(?:[^/]+/)?)",
            "[^]*",
            "[]a]+",
        ];
        for p in ok {
            assert_eq!(refused(p), None, "{p:?}");
        }
    }

    #[test]
    fn no_case_of_the_regex_corpus_is_refused() {
        let corpus: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/regex-corpus/cases.json")).unwrap();
        let cases = corpus["cases"].as_array().unwrap();
        assert!(cases.len() > 100);
        // The engine refuses the `SyntaxError` cases before the guard reads them.
        for case in cases.iter().filter(|c| c["js"] != "SyntaxError") {
            let (p, f) = (case["pattern"].as_str().unwrap(), case["flags"].as_str().unwrap());
            let flags = Flags {
                ignore_case: f.contains('i'),
                unicode: f.contains('u'),
                ..Flags::default()
            };
            assert_eq!(check(p, flags), Ok(()), "{p:?}");
        }
    }
}
