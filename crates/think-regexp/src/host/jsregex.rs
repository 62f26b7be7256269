//! Translation of a JavaScript regular expression (as the model writes it for Think's `grep`,
//! which uses `new RegExp(query, "gi")`) into `fancy_regex` syntax.
//!
//! `fancy_regex` runs plain patterns on the `regex` crate's automata and adds what JS has
//! beyond them: look-ahead, look-behind and backreferences. What differs is rewritten:
//! `\d`/`\w` (ASCII in JS, Unicode in Rust) become explicit ASCII classes, `.` excludes every
//! JS line terminator, `\uXXXX` becomes `\x{XXXX}`, `\0` is NUL, `\cX` a control character,
//! `[^]` any character and `[]` none, a `{`/`}`/`]` that is not syntax is a literal, and `[`,
//! `&` and `~` inside a class are escaped because Rust classes nest and have set operators.
//! Known remaining differences: `\b`, `\s` and case folding follow Unicode rather than JS's
//! ASCII-centred rules, and `\p{…}` means a Unicode class (JS without the `u` flag reads `p`).

/// A pattern ready for `fancy_regex`.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    /// The pattern, for the `regex` crate unless `context_sensitive`.
    pub pattern: String,
    /// The pattern uses look-around or backreferences, whose result can depend on text
    /// outside the current line, so it must be run line by line, with `fancy_regex`.
    pub context_sensitive: bool,
    /// For a context-sensitive pattern, a `regex`-crate pattern that matches at least every
    /// line it matches, to find candidate lines fast.
    pub prefilter: Option<String>,
}

/// JS's `\b` (an ASCII word boundary) for `fancy_regex`.
const WORD_BOUNDARY: &str =
    "(?:(?<=[A-Za-z0-9_])(?![A-Za-z0-9_])|(?<![A-Za-z0-9_])(?=[A-Za-z0-9_]))";
/// JS's `\B` (no ASCII word boundary), which the `regex` crate cannot express on `str`.
const NOT_WORD_BOUNDARY: &str =
    "(?:(?<=[A-Za-z0-9_])(?=[A-Za-z0-9_])|(?<![A-Za-z0-9_])(?![A-Za-z0-9_]))";
const ASCII_DIGIT: &str = "0-9";
const ASCII_WORD: &str = "A-Za-z0-9_";
/// JS's `\s`: WhiteSpace and LineTerminator (ECMA-262 §22.2.2.9), which differs from
/// Unicode's White_Space that Rust's `\s` follows (U+FEFF is in, U+0085 is out).
const JS_SPACE: &str =
    "\\t\\n\\x0B\\x0C\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

/// The members of a class escape (`\d`, `\w`, `\s`) and whether it is negated (`\D`,
/// `\W`, `\S`), or `None` for another escape.
fn class_escape(e: char) -> Option<(&'static str, bool)> {
    match e {
        'd' => Some((ASCII_DIGIT, false)),
        'D' => Some((ASCII_DIGIT, true)),
        'w' => Some((ASCII_WORD, false)),
        'W' => Some((ASCII_WORD, true)),
        's' => Some((JS_SPACE, false)),
        'S' => Some((JS_SPACE, true)),
        _ => None,
    }
}

/// Rewrites `js` for `fancy_regex`; `None` when JS rejects a pattern that Rust would
/// accept (bounds out of order, a duplicate group name). Other invalid input is passed
/// through so that compiling it reports the error.
pub fn translate(js: &str) -> Option<Translated> {
    if duplicate_group_names(js) {
        return None;
    }
    let plain = translate_for(js, Mode::Plain)?;
    if !plain.context_sensitive {
        return Some(plain);
    }
    let mut fancy = translate_for(js, Mode::Fancy)?;
    fancy.prefilter = translate_for(js, Mode::Prefilter).map(|t| t.pattern);
    Some(fancy)
}

/// What a translation is for.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// The `regex` crate (`\b` is `(?-u:\b)`).
    Plain,
    /// `fancy_regex`, whose parser rejects `(?-u:…)`: `\b` becomes a look-around.
    Fancy,
    /// A `regex`-crate pattern matching a superset of the lines the pattern matches:
    /// look-arounds become optional groups, backreferences any run of the line, `\B`
    /// nothing. It finds candidate lines in one linear pass over a file.
    Prefilter,
}

/// The kind of the previous token, for quantifier checks.
#[derive(Clone, Copy, PartialEq)]
enum Last {
    Atom,
    /// `(` or `|`, after which `?` is group syntax, not a quantifier.
    Open,
    Quantifier,
    /// A quantifier made lazy by `?`.
    Lazy,
}

/// The translation of `js` for `mode`.
fn translate_for(js: &str, mode: Mode) -> Option<Translated> {
    let c: Vec<char> = js.chars().collect();
    let mut out = String::with_capacity(js.len() + 8);
    let mut context_sensitive = false;
    // For each open group, whether it is a look-around (closed as `)?` in a prefilter).
    let mut groups: Vec<bool> = Vec::new();
    let mut i = 0;
    // What the previous token was, to reject a quantifier on a quantifier as JS does
    // (`a**`, `a+{2}`) while `a*?` stays lazy; the `regex` crate would accept them.
    let mut last = Last::Atom;
    while i < c.len() {
        let is_quantifier = match c[i] {
            '*' | '+' => true,
            '?' => last != Last::Open,
            '{' => quantifier_end(&c, i).is_some(),
            _ => false,
        };
        if is_quantifier && (last == Last::Lazy || (last == Last::Quantifier && c[i] != '?')) {
            return None;
        }
        last = match (c[i], last) {
            ('?', Last::Quantifier) => Last::Lazy,
            ('(' | '|', _) => Last::Open,
            _ if is_quantifier => Last::Quantifier,
            _ => Last::Atom,
        };
        match c[i] {
            '\\' => {
                i += 1;
                let Some(&e) = c.get(i) else {
                    out.push('\\');
                    break;
                };
                if let Some((members, negated)) = class_escape(e) {
                    out.push_str(if negated { "[^" } else { "[" });
                    out.push_str(members);
                    out.push(']');
                    i += 1;
                    continue;
                }
                match e {
                    // JS word boundaries look at ASCII word characters only.
                    'b' if mode == Mode::Fancy => out.push_str(WORD_BOUNDARY),
                    'b' => out.push_str("(?-u:\\b)"),
                    'B' => {
                        context_sensitive = true;
                        if mode != Mode::Prefilter {
                            out.push_str(NOT_WORD_BOUNDARY);
                        }
                    }
                    '1'..='9' | 'k' if mode == Mode::Prefilter => {
                        context_sensitive = true;
                        out.push_str("[^\\n]*");
                        if e == 'k' {
                            while i + 1 < c.len() && c[i] != '>' {
                                i += 1;
                            }
                        } else {
                            while c.get(i + 1).is_some_and(char::is_ascii_digit) {
                                i += 1;
                            }
                        }
                    }
                    '1'..='9' | 'k' => {
                        context_sensitive = true;
                        out.push('\\');
                        out.push(e);
                    }
                    _ => i = escape(&c, i, &mut out, false),
                }
                i += 1;
            }
            '[' => i = class(&c, i, &mut out),
            '.' => {
                out.push_str("[^\\n\\r\\x{2028}\\x{2029}]");
                i += 1;
            }
            '(' => {
                let rest: String = c[i..c.len().min(i + 4)].iter().collect();
                let look = if rest.starts_with("(?=") || rest.starts_with("(?!") {
                    3
                } else if rest.starts_with("(?<=") || rest.starts_with("(?<!") {
                    4
                } else {
                    0
                };
                context_sensitive |= look > 0;
                groups.push(look > 0);
                if look > 0 && mode == Mode::Prefilter {
                    out.push_str("(?:");
                    i += look;
                } else {
                    out.push('(');
                    i += 1;
                }
            }
            ')' => {
                let look = groups.pop().unwrap_or(false);
                out.push_str(if look && mode == Mode::Prefilter { ")?" } else { ")" });
                i += 1;
            }
            '{' => match quantifier_end(&c, i) {
                Some(end) if !quantifier_in_order(&c[i + 1..end]) => return None,
                Some(end) => {
                    out.extend(&c[i..=end]);
                    i = end + 1;
                }
                None => {
                    out.push_str("\\{");
                    i += 1;
                }
            },
            '}' => {
                out.push_str("\\}");
                i += 1;
            }
            ']' => {
                out.push_str("\\]");
                i += 1;
            }
            ch => {
                out.push(ch);
                i += 1;
            }
        }
    }
    Some(Translated { pattern: out, context_sensitive, prefilter: None })
}

/// Emits the escape whose letter is at `c[i]`, returning the index of its last character.
fn escape(c: &[char], i: usize, out: &mut String, in_class: bool) -> usize {
    let e = c[i];
    match e {
        '0' if !c.get(i + 1).is_some_and(char::is_ascii_digit) => {
            out.push_str("\\x00");
            i
        }
        'u' if c.len() > i + 4 && c[i + 1..=i + 4].iter().all(char::is_ascii_hexdigit) => {
            out.push_str("\\x{");
            out.extend(&c[i + 1..=i + 4]);
            out.push('}');
            i + 4
        }
        'c' if c.get(i + 1).is_some_and(char::is_ascii_alphabetic) => {
            let code = (c[i + 1] as u32) % 32;
            out.push_str(&format!("\\x{{{code:X}}}"));
            i + 1
        }
        'b' if in_class => {
            out.push_str("\\x08");
            i
        }
        '/' => {
            out.push('/');
            i
        }
        _ => {
            out.push('\\');
            out.push(e);
            i
        }
    }
}

/// Emits the class starting at `c[open]` (a `[`), returning the index after it.
fn class(c: &[char], open: usize, out: &mut String) -> usize {
    let mut i = open + 1;
    let negated = c.get(i) == Some(&'^');
    if negated {
        i += 1;
    }
    if c.get(i) == Some(&']') {
        // JS: `[]` matches nothing and `[^]` matches anything.
        out.push_str(if negated { "[\\s\\S]" } else { "[^\\s\\S]" });
        return i + 1;
    }
    out.push('[');
    if negated {
        out.push('^');
    }
    while i < c.len() {
        match c[i] {
            ']' => {
                out.push(']');
                return i + 1;
            }
            '\\' => {
                i += 1;
                let Some(&e) = c.get(i) else { break };
                match class_escape(e) {
                    // A negated escape inside a class is a nested negated class (Rust
                    // classes nest and union): `[\D]` is `[[^0-9]]`, `[^\S]` `[^[^…]]`.
                    Some((members, true)) => {
                        out.push_str("[^");
                        out.push_str(members);
                        out.push(']');
                    }
                    Some((members, false)) => out.push_str(members),
                    None => i = escape(c, i, out, true),
                }
                // JS (Annex B) reads a `-` next to a class escape literally; Rust would
                // take it for a range.
                if class_escape(e).is_some()
                    && c.get(i + 1) == Some(&'-')
                    && c.get(i + 2) != Some(&']')
                {
                    out.push_str("\\-");
                    i += 1;
                }
                i += 1;
            }
            '-' if c.get(i + 1) == Some(&'\\')
                && c.get(i + 2).is_some_and(|&e| class_escape(e).is_some()) =>
            {
                out.push_str("\\-");
                i += 1;
            }
            '[' | '&' | '~' => {
                out.push('\\');
                out.push(c[i]);
                i += 1;
            }
            // `--` is Rust's set difference; in JS the second `-` ends a range (or, at the
            // start of the class, the first is a literal).
            '-' if c.get(i + 1) == Some(&'-') => {
                if out.ends_with('[') || out.ends_with("[^") {
                    out.push_str("\\-");
                    i += 1;
                } else {
                    out.push_str("-\\-");
                    i += 2;
                }
            }
            ch => {
                out.push(ch);
                i += 1;
            }
        }
    }
    // Unterminated: leave it to the compiler to reject.
    i
}

/// Whether the bounds of `{n,m}` (the text between the braces) are in order, which JS
/// requires and Rust does not.
fn quantifier_in_order(bounds: &[char]) -> bool {
    let text: String = bounds.iter().collect();
    match text.split_once(',') {
        Some((n, m)) if !m.is_empty() => match (n.parse::<u64>(), m.parse::<u64>()) {
            (Ok(n), Ok(m)) => n <= m,
            _ => true,
        },
        _ => true,
    }
}

/// Whether two named groups share a name, which JS rejects (outside alternatives, which
/// the translation does not tell apart) and `fancy_regex` accepts.
fn duplicate_group_names(js: &str) -> bool {
    let mut names: Vec<&str> = Vec::new();
    let mut rest = js;
    while let Some(at) = rest.find("(?<") {
        rest = &rest[at + 3..];
        if rest.starts_with('=') || rest.starts_with('!') {
            continue;
        }
        let Some(end) = rest.find('>') else { break };
        if names.contains(&&rest[..end]) {
            return true;
        }
        names.push(&rest[..end]);
    }
    false
}

/// The index of the `}` closing a `{n}`, `{n,}` or `{n,m}` quantifier starting at `open`.
fn quantifier_end(c: &[char], open: usize) -> Option<usize> {
    let mut i = open + 1;
    let digits = |i: &mut usize| {
        let start = *i;
        while c.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return None;
    }
    if c.get(i) == Some(&',') {
        i += 1;
        digits(&mut i);
    }
    (c.get(i) == Some(&'}')).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::translate;

    #[test]
    fn alternation_is_not_context_sensitive() {
        assert!(!translate("a|b").unwrap().context_sensitive);
        assert!(translate("(?<q>a)\\k<q>").unwrap().context_sensitive);
        assert!(translate("foo(?=bar)").unwrap().context_sensitive);
    }
}
