//! Which tool calls need a human's approval: a declarative policy of tool-name patterns
//! (globs such as `tool_*_delete*` so MCP tools are covered), each optionally narrowed by a
//! predicate on the call's input. One policy serves workspace, agent, MCP and client-facing
//! tools alike.

use std::rc::Rc;

use serde_json::Value;

/// A predicate over a call's input.
pub type InputPredicate = Rc<dyn Fn(&Value) -> bool>;

#[derive(Clone)]
struct Rule {
    pattern: String,
    matcher: NameGlob,
    when: Option<InputPredicate>,
}

/// A pattern of the approval policy that is not a valid glob.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ApprovalError {
    /// `pattern` is not a glob; `reason` says why.
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
        /// Why it is not a glob.
        reason: String,
    },
}

impl std::fmt::Display for ApprovalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApprovalError::InvalidPattern { pattern, reason } => {
                write!(f, "invalid approval pattern {pattern:?}: {reason}")
            }
        }
    }
}

impl std::error::Error for ApprovalError {}

/// The approval policy of an agent.
#[derive(Clone, Default)]
pub struct ApprovalPolicy {
    rules: Vec<Rule>,
    /// Tools whose own annotations (an MCP tool's `destructiveHint`) do not ask for approval.
    exempt: Vec<NameGlob>,
}

impl ApprovalPolicy {
    /// An empty policy: no tool needs approval.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a comma-separated list of names or globs (the `THINK_APPROVAL` format); an
    /// entry `!pattern` is an [`exempt`](Self::exempt) one.
    pub fn from_list(list: &str) -> Result<Self, ApprovalError> {
        let mut policy = Self::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            policy = match name.strip_prefix('!') {
                Some(pattern) => policy.exempt(pattern.trim())?,
                None => policy.require(name)?,
            };
        }
        Ok(policy)
    }

    /// Tools matching `pattern` no longer need approval just because they declare themselves
    /// destructive (MCP `destructiveHint: true`); the other rules still apply to them.
    pub fn exempt(mut self, pattern: &str) -> Result<Self, ApprovalError> {
        self.exempt.push(compile(pattern)?);
        Ok(self)
    }

    /// Whether a tool that declares itself destructive needs approval: yes unless exempted.
    pub fn hinted_needs_approval(&self, tool_name: &str) -> bool {
        !self.exempt.iter().any(|m| m.is_match(tool_name))
    }

    /// Every call of a tool whose name matches `pattern` needs approval.
    pub fn require(self, pattern: &str) -> Result<Self, ApprovalError> {
        self.rule(pattern, None)
    }

    /// Calls of matching tools need approval when `when(input)` is true.
    pub fn require_when(
        self,
        pattern: &str,
        when: impl Fn(&Value) -> bool + 'static,
    ) -> Result<Self, ApprovalError> {
        self.rule(pattern, Some(Rc::new(when)))
    }

    fn rule(mut self, pattern: &str, when: Option<InputPredicate>) -> Result<Self, ApprovalError> {
        let matcher = compile(pattern)?;
        self.rules.push(Rule { pattern: pattern.to_owned(), matcher, when });
        Ok(self)
    }

    /// Whether a call of `tool_name` with `input` must wait for a human's approval.
    pub fn needs_approval(&self, tool_name: &str, input: &Value) -> bool {
        self.rules
            .iter()
            .any(|r| r.matcher.is_match(tool_name) && r.when.as_ref().is_none_or(|w| w(input)))
    }

    /// The patterns in order, for diagnostics.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.pattern.as_str())
    }

    /// True when no rule and no exemption is set.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.exempt.is_empty()
    }
}

fn compile(pattern: &str) -> Result<NameGlob, ApprovalError> {
    NameGlob::new(pattern).map_err(|reason| ApprovalError::InvalidPattern {
        pattern: pattern.to_owned(),
        reason: reason.to_owned(),
    })
}

/// A glob over tool names, with `globset`'s syntax for them: `*` any run of characters,
/// `?` one character, `[ab]`/`[a-z]`/`[!a]`/`[^a]` a class, `{a,b}` alternatives (which nest
/// and may hold glob syntax) and `\` an escape. Hand-written (about 90 lines) because
/// `globset` forced `regex-automata`'s search optimisations into the wasm build, and tool
/// names are short enough for a backtracking match.
#[derive(Debug, Clone, PartialEq)]
pub struct NameGlob(Vec<Token>);

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Char(char),
    Any,
    Star,
    /// Ranges, and whether the class is negated.
    Class(Vec<(char, char)>, bool),
    Alternatives(Vec<Vec<Token>>),
}

impl NameGlob {
    /// Parses `pattern`; the error says what is wrong with it.
    pub fn new(pattern: &str) -> Result<NameGlob, &'static str> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut at = 0;
        let tokens = parse(&chars, &mut at, false)?;
        Ok(NameGlob(tokens))
    }

    /// Whether `name` matches the whole glob.
    pub fn is_match(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        matches(&self.0, &name)
    }
}

/// Tokens up to the end, or (inside braces) up to the `,` or `}` that ends an alternative.
fn parse(p: &[char], at: &mut usize, in_braces: bool) -> Result<Vec<Token>, &'static str> {
    let mut out = Vec::new();
    while *at < p.len() {
        let c = p[*at];
        *at += 1;
        out.push(match c {
            '*' => Token::Star,
            '?' => Token::Any,
            '\\' => Token::Char(*p.get(*at).inspect(|_| *at += 1).ok_or("dangling '\\'")?),
            '[' => class(p, at)?,
            '{' => {
                let mut alternatives = vec![parse(p, at, true)?];
                while p.get(*at - 1) == Some(&',') {
                    alternatives.push(parse(p, at, true)?);
                }
                Token::Alternatives(alternatives)
            }
            ',' | '}' if in_braces => return Ok(out),
            '}' => return Err("unopened alternate group; missing '{'"),
            c => Token::Char(c),
        });
    }
    if in_braces {
        return Err("unclosed alternate group; missing '}'");
    }
    Ok(out)
}

/// The class after a `[`: `]` first is a member, `-` between two characters a range.
fn class(p: &[char], at: &mut usize) -> Result<Token, &'static str> {
    let negated = matches!(p.get(*at), Some('!' | '^'));
    if negated {
        *at += 1;
    }
    let mut ranges = Vec::new();
    let first = *at;
    loop {
        let Some(&c) = p.get(*at) else { return Err("unclosed character class; missing ']'") };
        *at += 1;
        if c == ']' && *at - 1 > first {
            return Ok(Token::Class(ranges, negated));
        }
        match (p.get(*at), p.get(*at + 1)) {
            (Some('-'), Some(&end)) if end != ']' => {
                if end < c {
                    return Err("invalid range in character class");
                }
                ranges.push((c, end));
                *at += 2;
            }
            _ => ranges.push((c, c)),
        }
    }
}

fn matches(tokens: &[Token], name: &[char]) -> bool {
    let Some((first, rest)) = tokens.split_first() else { return name.is_empty() };
    let one = |ok: bool| ok && matches(rest, &name[1..]);
    match first {
        Token::Star => (0..=name.len()).any(|k| matches(rest, &name[k..])),
        Token::Alternatives(alts) => alts.iter().any(|alt| {
            let joined: Vec<Token> = alt.iter().chain(rest).cloned().collect();
            matches(&joined, name)
        }),
        _ if name.is_empty() => false,
        Token::Char(c) => one(name[0] == *c),
        Token::Any => one(true),
        Token::Class(ranges, negated) => {
            one(ranges.iter().any(|&(a, b)| (a..=b).contains(&name[0])) != *negated)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exemptions_lift_only_what_annotations_ask_for() {
        let p = ApprovalPolicy::from_list("tool_a_wipe, !tool_a_*, ! tool_b_drop").unwrap();
        assert!(!p.hinted_needs_approval("tool_a_wipe"));
        assert!(p.needs_approval("tool_a_wipe", &json!({})), "an explicit rule still applies");
        assert!(!p.hinted_needs_approval("tool_b_drop"));
        assert!(p.hinted_needs_approval("tool_c_drop"));
        assert!(ApprovalPolicy::new().hinted_needs_approval("anything"));
        assert!(!ApprovalPolicy::from_list("!x").unwrap().is_empty());
        assert!(ApprovalPolicy::from_list("![").is_err());
    }

    #[test]
    fn names_globs_and_predicates() {
        let p = ApprovalPolicy::from_list(" delete, bash ,tool_*_delete*")
            .unwrap()
            .require_when("write", |i| i["path"].as_str().is_some_and(|p| p.starts_with("/etc")))
            .unwrap();
        assert!(p.needs_approval("delete", &json!({})));
        assert!(p.needs_approval("bash", &json!({})));
        assert!(!p.needs_approval("read", &json!({})));
        assert!(p.needs_approval("tool_abc123_delete_file", &json!({})));
        assert!(!p.needs_approval("tool_abc123_list", &json!({})));
        assert!(p.needs_approval("write", &json!({"path": "/etc/x"})));
        assert!(!p.needs_approval("write", &json!({"path": "/home/x"})));
        assert!(ApprovalPolicy::from_list("").unwrap().is_empty());
        assert!(ApprovalPolicy::from_list("a[").is_err());
    }

    #[test]
    fn name_globs_follow_globset_syntax() {
        let m = |p: &str, name: &str| NameGlob::new(p).unwrap().is_match(name);
        assert!(m("tool_*_delete*", "tool_x_delete_all"));
        assert!(!m("tool_*_delete*", "tool_x_list"));
        assert!(m("a?c", "abc") && !m("a?c", "ac"));
        assert!(m("[a-c]x", "bx") && !m("[a-c]x", "dx"));
        assert!(m("[!a-c]x", "dx") && m("[^a]x", "bx") && !m("[!a-c]x", "ax"));
        assert!(m("[]]", "]") && m("[a-]", "-"));
        assert!(m("{read,write}_*", "write_file") && !m("{read,write}_*", "list_x"));
        assert!(m("x{a,{b,c*}}", "xcz"), "nested alternatives with glob syntax");
        assert!(m("a\\*", "a*") && !m("a\\*", "ab"));
        assert!(m("*", "") && m("", ""));
        for bad in ["[", "a[b", "{a", "a}", "\\", "[z-a]"] {
            assert!(NameGlob::new(bad).is_err(), "{bad}");
        }
    }
}
