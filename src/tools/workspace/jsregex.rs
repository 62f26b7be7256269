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
    pub pattern: String,
    /// The pattern uses look-around or backreferences, whose result can depend on text
    /// outside the current line, so it must be run line by line.
    pub context_sensitive: bool,
}

const ASCII_DIGIT: &str = "0-9";
const ASCII_WORD: &str = "A-Za-z0-9_";

/// Rewrites `js` for `fancy_regex`. Invalid input is passed through so that compiling it
/// reports the error.
pub fn translate(js: &str) -> Translated {
    let c: Vec<char> = js.chars().collect();
    let mut out = String::with_capacity(js.len() + 8);
    let mut context_sensitive = false;
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\\' => {
                i += 1;
                let Some(&e) = c.get(i) else {
                    out.push('\\');
                    break;
                };
                match e {
                    'd' => out.push_str("[0-9]"),
                    'D' => out.push_str("[^0-9]"),
                    'w' => out.push_str("[A-Za-z0-9_]"),
                    'W' => out.push_str("[^A-Za-z0-9_]"),
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
                if rest.starts_with("(?=")
                    || rest.starts_with("(?!")
                    || rest.starts_with("(?<=")
                    || rest.starts_with("(?<!")
                {
                    context_sensitive = true;
                }
                out.push('(');
                i += 1;
            }
            '{' => match quantifier_end(&c, i) {
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
    Translated { pattern: out, context_sensitive }
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
                match e {
                    'd' => out.push_str(ASCII_DIGIT),
                    'w' => out.push_str(ASCII_WORD),
                    _ => i = escape(c, i, out, true),
                }
                i += 1;
            }
            '[' | '&' | '~' => {
                out.push('\\');
                out.push(c[i]);
                i += 1;
            }
            '-' if c.get(i + 1) == Some(&'-') => {
                out.push_str("\\-");
                i += 1;
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
    use super::*;

    fn compile(js: &str) -> fancy_regex::Regex {
        fancy_regex::Regex::new(&translate(js).pattern).expect(js)
    }

    fn m(js: &str, s: &str) -> bool {
        compile(js).is_match(s).unwrap()
    }

    #[test]
    fn literal_braces_and_brackets() {
        assert!(m("function foo\\(\\) {", "function foo() {"));
        assert!(m("function foo() {", "function foo {"), "() is an empty group");
        assert!(m("a}", "a}"));
        assert!(m("x]", "x]"));
        assert!(m("a{2}", "aa"));
        assert!(!m("^a{2}$", "a"));
        assert!(m("a{1,}", "aaa"));
        assert!(m("\\{\\}", "{}"));
    }

    #[test]
    fn ascii_classes_like_js() {
        assert!(m("^\\d+$", "123"));
        assert!(!m("^\\d$", "٣"), "Arabic-Indic digit is not \\d in JS");
        assert!(!m("^\\w$", "é"));
        assert!(m("[\\w-]+", "a-b"));
        assert!(m("^[\\d.]+$", "1.5"));
    }

    #[test]
    fn dot_and_escapes() {
        assert!(!m("a.b", "a\rb"));
        assert!(m("a.b", "a b"));
        assert!(m("\\u0041", "A"));
        assert!(m("a\\/b", "a/b"));
        assert!(m("\\x41", "A"));
        assert!(m("[^]", "x"));
        assert!(!m("[]", "x"));
        assert!(m("[[]", "["));
        assert!(m("[a&&b]", "&"));
    }

    #[test]
    fn lookaround_and_backrefs_are_supported() {
        let t = translate("foo(?=bar)");
        assert!(t.context_sensitive);
        assert!(m("foo(?=bar)", "foobar"));
        assert!(!m("foo(?=bar)", "foobaz"));
        assert!(m("(?<=\\$)\\d+", "cost $42"));
        assert!(m("(\\w)\\1", "hello"));
        assert!(m("(?<q>['\"]).*\\k<q>", "say 'hi'"));
        assert!(!translate("a|b").context_sensitive);
    }

    #[test]
    fn invalid_patterns_stay_invalid() {
        for bad in ["(", "a)", "[a", "*a", "a**", "\\"] {
            assert!(fancy_regex::Regex::new(&translate(bad).pattern).is_err(), "{bad}");
        }
    }
}
