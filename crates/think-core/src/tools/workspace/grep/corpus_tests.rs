//! The JS-pattern translation of the host engine (`crate::regexp`), checked through grep's
//! matcher: JavaScript's own results on the regex corpus (`tests/regex-corpus`).

mod translation {
    fn m(js: &str, s: &str) -> bool {
        let matcher = super::super::Matcher::new(js, false, true).expect(js);
        !matcher.matching_lines(s, 1).is_empty()
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
        assert!(m("foo(?=bar)", "foobar"));
        assert!(!m("foo(?=bar)", "foobaz"));
        assert!(m("(?<=\\$)\\d+", "cost $42"));
        assert!(m("(\\w)\\1", "hello"));
        assert!(m("(?<q>['\"]).*\\k<q>", "say 'hi'"));
    }

    #[test]
    fn invalid_patterns_stay_invalid() {
        for bad in ["(", "a)", "[a", "*a", "a**", "\\", "a{2,1}", "(?<n>a)(?<n>b)"] {
            assert!(super::super::Matcher::new(bad, false, true).is_err(), "{bad}");
        }
    }
}

mod corpus {
    use serde_json::Value;

    #[derive(serde::Deserialize)]
    struct Corpus {
        cases: Vec<Case>,
    }

    #[derive(serde::Deserialize)]
    struct Case {
        pattern: String,
        flags: String,
        inputs: Vec<String>,
        js: Value,
    }

    /// Inputs on which the translation knowingly differs from JS (for the given flags), and
    /// why. Each must still differ somewhere, or the entry is stale.
    const KNOWN: &[(&str, &str, &str)] = &[
        ("\u{212A}", "gi", "Rust folds KELVIN SIGN to k; JS without the u flag does not"),
        ("\u{17F}", "gi", "Rust folds LONG S to s; JS without the u flag does not"),
        ("STRA\u{1E9E}E", "gi", "Rust folds ẞ to ß; JS without the u flag does not"),
        ("a\u{1F600}b", "gi", "an astral character is one character in Rust, two code units in JS"),
        ("\u{1F600}", "g", "an astral character is one character in Rust, two code units in JS"),
    ];

    /// Our first match per input, or "SyntaxError", in the corpus's `js` shape.
    fn ours(case: &Case) -> Value {
        let insensitive = case.flags.contains('i');
        let matcher = super::super::Matcher::new(&case.pattern, false, !insensitive);
        let Ok(matcher) = matcher else {
            return Value::from("SyntaxError");
        };
        let results = case.inputs.iter().map(|s| {
            let found = matcher.find_in_line(s).map(|(a, b)| s[a..b].to_owned());
            // grep's own path must agree on whether the line matches.
            assert_eq!(
                !matcher.matching_lines(s, 1).is_empty(),
                found.is_some(),
                "{} on {s:?}",
                case.pattern
            );
            found.map_or(Value::Null, Value::from)
        });
        Value::Array(results.collect())
    }

    #[test]
    fn regex_corpus() {
        let corpus: Corpus =
            serde_json::from_str(include_str!("../../../../../../tests/regex-corpus/cases.json"))
                .unwrap();
        assert!(corpus.cases.len() >= 100);
        let mut unknown = Vec::new();
        let mut seen = vec![false; KNOWN.len()];
        for case in &corpus.cases {
            let got = ours(case);
            if got == case.js {
                continue;
            }
            if !got.is_array() || !case.js.is_array() {
                unknown
                    .push(format!("/{}/{}: js {} ours {got}", case.pattern, case.flags, case.js));
                continue;
            }
            for (k, input) in case.inputs.iter().enumerate() {
                if got[k] == case.js[k] {
                    continue;
                }
                match KNOWN.iter().position(|(s, f, _)| s == input && *f == case.flags) {
                    Some(n) => seen[n] = true,
                    None => unknown.push(format!(
                        "/{}/{} on {input:?}: js {} ours {}",
                        case.pattern, case.flags, case.js[k], got[k]
                    )),
                }
            }
        }
        assert!(
            unknown.is_empty(),
            "{} results differ from JS:\n{}",
            unknown.len(),
            unknown.join("\n")
        );
        let stale: Vec<&str> =
            KNOWN.iter().zip(&seen).filter(|(_, s)| !**s).map(|(k, _)| k.0).collect();
        assert!(stale.is_empty(), "known differences that went away: {stale:?}");
    }
}
