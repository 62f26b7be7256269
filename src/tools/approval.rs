//! Which tool calls need a human's approval: a declarative policy of tool-name patterns
//! (globs such as `tool_*_delete*` so MCP tools are covered), each optionally narrowed by a
//! predicate on the call's input. One policy serves workspace, agent, MCP and client-facing
//! tools alike.

use std::rc::Rc;

use globset::{Glob, GlobMatcher};
use serde_json::Value;

/// A predicate over a call's input.
pub type InputPredicate = Rc<dyn Fn(&Value) -> bool>;

#[derive(Clone)]
struct Rule {
    pattern: String,
    matcher: GlobMatcher,
    when: Option<InputPredicate>,
}

/// A pattern of the approval policy that is not a valid glob.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ApprovalError {
    /// `pattern` did not compile; `reason` is globset's.
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
    exempt: Vec<GlobMatcher>,
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

fn compile(pattern: &str) -> Result<GlobMatcher, ApprovalError> {
    Ok(Glob::new(pattern)
        .map_err(|e| ApprovalError::InvalidPattern {
            pattern: pattern.to_owned(),
            reason: e.to_string(),
        })?
        .compile_matcher())
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
}
