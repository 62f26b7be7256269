//! The `allowed-tools` rule (beyond Think, which parses the field and ignores it): a skill
//! is *activated* once `activate_skill` returned its content in this conversation (a
//! `tool-activate_skill` part with an output in the transcript, or a call in an earlier step
//! of the running turn; the calls of one step are all decided before any of them runs).
//! While any activated skill declares `allowed-tools`, a call of a tool in none of the
//! declared lists needs a human's approval. The skill tools are always allowed.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Catalog;
use crate::protocol::message::{part_type, state_of, UIMessage};

/// The tools a skill never has to list.
pub const SKILL_TOOLS: [&str; 3] = ["activate_skill", "read_skill_resource", "run_skill_script"];

/// The names of the skills `activate_skill` loaded in `messages`.
pub fn activated_in(messages: &[UIMessage]) -> BTreeSet<String> {
    messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter(|p| part_type(p) == Some("tool-activate_skill"))
        .filter(|p| state_of(p) == Some("output-available"))
        .filter_map(|p| p.get("input")?.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Whether a call of `tool_name` needs approval under the activated skills' lists. Names
/// compare without case, so a skill written for `Read`/`Bash` covers `read`/`bash`.
pub fn needs_approval(catalog: &Catalog, activated: &BTreeSet<String>, tool_name: &str) -> bool {
    if SKILL_TOOLS.contains(&tool_name) {
        return false;
    }
    let mut declared = false;
    for skill in activated.iter().filter_map(|name| catalog.get(name)) {
        if let Some(list) = &skill.meta.allowed_tools {
            declared = true;
            if list.iter().any(|t| t.eq_ignore_ascii_case(tool_name)) {
                return false;
            }
        }
    }
    declared
}
