//! Applying client tool results, approvals and late tool outputs to stored tool parts, and
//! the predicates the turn loop uses to decide whether a turn waits for a human.
//!
//! Unlike Think, every apply reports a no-op (unknown `toolCallId`, a part already past the
//! states the update may touch, or an identical re-apply) as `None`, so the caller neither
//! persists, broadcasts nor schedules a continuation for it.

use super::message::{state, state_of, tool_call_id_of, tool_name_of, Role, UIMessage};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// Error text stored when a client reports `output-error` without saying why.
pub const DEFAULT_CLIENT_ERROR_TEXT: &str = "Tool execution denied by user";
/// Error text stored when a late server tool error carries no text.
pub const DEFAULT_CROSS_MESSAGE_ERROR_TEXT: &str = "Tool execution failed";

/// What a client reported for a tool it ran.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResultOutcome {
    /// `state:"output-available"` (or no state) with the tool's output; `None` when the frame
    /// had no `output` field.
    Output(Option<Value>),
    /// `state:"output-error"`; `None` falls back to [`DEFAULT_CLIENT_ERROR_TEXT`].
    Error(Option<String>),
}

impl ToolResultOutcome {
    /// Reads a `cf_agent_tool_result` frame's fields the way Think does: only the state
    /// `"output-error"` makes an error; anything else is an output.
    pub fn from_frame(
        state: Option<&str>,
        output: Option<Value>,
        error_text: Option<String>,
    ) -> Self {
        if state == Some(state::OUTPUT_ERROR) {
            ToolResultOutcome::Error(error_text)
        } else {
            ToolResultOutcome::Output(output)
        }
    }
}

/// A tool output that arrived in a later stream (typically an approved tool run at the start
/// of a continuation) for a part stored in an earlier message.
#[derive(Debug, Clone, PartialEq)]
pub enum CrossMessageUpdate {
    /// The call succeeded.
    Output {
        /// Its output.
        output: Option<Value>,
        /// Set while the tool streams partial outputs.
        preliminary: Option<bool>,
    },
    /// The call failed.
    Error {
        /// Its error.
        error_text: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Result(ToolResultOutcome),
    Approval(bool),
    CrossMessage(CrossMessageUpdate),
    PausedExecution { execution_id: String, output: Value },
}

/// A pending change to the part with one `toolCallId`: which states it may touch and how
/// it rewrites the part.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPartUpdate {
    /// The call whose part the update is for.
    pub tool_call_id: String,
    kind: Kind,
}

const RESULT_STATES: &[&str] =
    &[state::INPUT_AVAILABLE, state::APPROVAL_REQUESTED, state::APPROVAL_RESPONDED];
const APPROVAL_STATES: &[&str] = &[state::INPUT_AVAILABLE, state::APPROVAL_REQUESTED];
const CROSS_MESSAGE_STATES: &[&str] = &[
    state::INPUT_STREAMING,
    state::INPUT_AVAILABLE,
    state::APPROVAL_REQUESTED,
    state::APPROVAL_RESPONDED,
    state::OUTPUT_AVAILABLE,
    state::OUTPUT_ERROR,
    state::OUTPUT_DENIED,
];
const PAUSED_STATES: &[&str] = &[state::OUTPUT_AVAILABLE];

impl ToolPartUpdate {
    /// A client's result for a client tool (`cf_agent_tool_result`).
    pub fn tool_result(tool_call_id: impl Into<String>, outcome: ToolResultOutcome) -> Self {
        ToolPartUpdate { tool_call_id: tool_call_id.into(), kind: Kind::Result(outcome) }
    }

    /// A user's answer to an approval request (`cf_agent_tool_approval`).
    pub fn approval(tool_call_id: impl Into<String>, approved: bool) -> Self {
        ToolPartUpdate { tool_call_id: tool_call_id.into(), kind: Kind::Approval(approved) }
    }

    /// A late server tool result for an earlier message; first write wins, so a provider
    /// replaying an already-settled call changes nothing.
    pub fn cross_message(tool_call_id: impl Into<String>, update: CrossMessageUpdate) -> Self {
        ToolPartUpdate { tool_call_id: tool_call_id.into(), kind: Kind::CrossMessage(update) }
    }

    /// Replaces the `{status:"paused", executionId}` output of a paused code execution with its
    /// final outcome once the host resolves it; anything else is left alone.
    pub fn paused_execution(
        tool_call_id: impl Into<String>,
        execution_id: impl Into<String>,
        output: Value,
    ) -> Self {
        ToolPartUpdate {
            tool_call_id: tool_call_id.into(),
            kind: Kind::PausedExecution { execution_id: execution_id.into(), output },
        }
    }

    /// The part states this update may match.
    pub fn match_states(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Result(_) => RESULT_STATES,
            Kind::Approval(_) => APPROVAL_STATES,
            Kind::CrossMessage(_) => CROSS_MESSAGE_STATES,
            Kind::PausedExecution { .. } => PAUSED_STATES,
        }
    }

    /// Whether this update targets `part` (same `toolCallId`, state in [`Self::match_states`]).
    pub fn matches(&self, part: &Value) -> bool {
        tool_call_id_of(part) == Some(self.tool_call_id.as_str())
            && state_of(part).is_some_and(|s| self.match_states().contains(&s))
    }

    /// The rewritten part. It equals the input when the update is a first-write-wins no-op.
    pub fn apply(&self, part: &Value) -> Value {
        let Value::Object(obj) = part else { return part.clone() };
        let mut p = obj.clone();
        match &self.kind {
            Kind::Result(ToolResultOutcome::Output(output)) => {
                p.insert("state".into(), state::OUTPUT_AVAILABLE.into());
                set_or_remove(&mut p, "output", output.clone());
                p.insert("preliminary".into(), Value::Bool(false));
            }
            Kind::Result(ToolResultOutcome::Error(text)) => {
                p.insert("state".into(), state::OUTPUT_ERROR.into());
                let text = text.clone().unwrap_or_else(|| DEFAULT_CLIENT_ERROR_TEXT.to_owned());
                p.insert("errorText".into(), Value::String(text));
            }
            Kind::Approval(approved) => {
                let mut approval = match obj.get("approval") {
                    Some(Value::Object(a)) => a.clone(),
                    _ => Map::new(),
                };
                if !matches!(approval.get("id"), Some(Value::String(_))) {
                    approval.insert("id".into(), Value::String(self.tool_call_id.clone()));
                }
                approval.insert("approved".into(), Value::Bool(*approved));
                let new_state =
                    if *approved { state::APPROVAL_RESPONDED } else { state::OUTPUT_DENIED };
                p.insert("state".into(), new_state.into());
                p.insert("approval".into(), Value::Object(approval));
            }
            Kind::CrossMessage(update) => {
                if state_of(part).is_some_and(super::message::is_terminal_state) {
                    return part.clone();
                }
                match update {
                    CrossMessageUpdate::Output { output, preliminary } => {
                        p.insert("state".into(), state::OUTPUT_AVAILABLE.into());
                        set_or_remove(&mut p, "output", output.clone());
                        p.insert("preliminary".into(), Value::Bool(preliminary.unwrap_or(false)));
                    }
                    CrossMessageUpdate::Error { error_text } => {
                        p.insert("state".into(), state::OUTPUT_ERROR.into());
                        let text = error_text
                            .clone()
                            .unwrap_or_else(|| DEFAULT_CROSS_MESSAGE_ERROR_TEXT.to_owned());
                        p.insert("errorText".into(), Value::String(text));
                    }
                }
            }
            Kind::PausedExecution { execution_id, output } => {
                let paused = obj.get("output").and_then(Value::as_object).is_some_and(|o| {
                    o.get("status").and_then(Value::as_str) == Some("paused")
                        && o.get("executionId").and_then(Value::as_str)
                            == Some(execution_id.as_str())
                });
                if !paused {
                    return part.clone();
                }
                p.insert("output".into(), output.clone());
                p.insert("preliminary".into(), Value::Bool(false));
            }
        }
        Value::Object(p)
    }
}

fn set_or_remove(p: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(v) => {
            p.insert(key.to_owned(), v);
        }
        None => {
            p.shift_remove(key);
        }
    }
}

/// Finds the first part the update matches and returns its index and rewritten form, even
/// when the rewrite is a no-op (so callers can tell "found but settled" from "not found").
pub fn find_tool_update(parts: &[Value], update: &ToolPartUpdate) -> Option<(usize, Value)> {
    parts.iter().enumerate().find(|(_, p)| update.matches(p)).map(|(i, p)| (i, update.apply(p)))
}

/// Applies the update in place to the first matching part. `Some(index)` only when the part
/// actually changed.
pub fn apply_to_parts(parts: &mut [Value], update: &ToolPartUpdate) -> Option<usize> {
    let (i, new_part) = find_tool_update(parts, update)?;
    if new_part == parts[i] {
        return None;
    }
    parts[i] = new_part;
    Some(i)
}

/// Applies the update to the first message holding a matching part (Think stops at the
/// first match even when it is a no-op). `Some(message index)` only when that message
/// changed and so must be persisted and broadcast as `cf_agent_message_updated`.
pub fn apply_to_messages(messages: &mut [UIMessage], update: &ToolPartUpdate) -> Option<usize> {
    for (mi, msg) in messages.iter_mut().enumerate() {
        if let Some((pi, new_part)) = find_tool_update(&msg.parts, update) {
            if new_part == msg.parts[pi] {
                return None;
            }
            msg.parts[pi] = new_part;
            return Some(mi);
        }
    }
    None
}

/// Names of the tools the client can still answer: those in its last `clientTools`.
pub fn client_tool_names<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    names.into_iter().filter(|n| !n.is_empty()).map(str::to_owned).collect()
}

/// Whether a part still waits for something only a client can send after a restart: an
/// approval request, or an `input-available` call of a client tool. A server tool's
/// `input-available` does not count; its execution died with the isolate.
pub fn part_awaits_client_interaction(part: &Value, client_tools: &BTreeSet<String>) -> bool {
    match state_of(part) {
        Some(state::APPROVAL_REQUESTED) => true,
        Some(state::INPUT_AVAILABLE) => {
            tool_name_of(part).is_some_and(|n| client_tools.contains(n))
        }
        _ => false,
    }
}

/// Whether a message has a part awaiting a client interaction.
pub fn message_has_pending_interaction(
    message: &UIMessage,
    client_tools: &BTreeSet<String>,
) -> bool {
    message.parts.iter().any(|p| part_awaits_client_interaction(p, client_tools))
}

/// Whether any assistant message waits for a human: such a turn is paused, not failed, and
/// recovery spends no budget on it.
pub fn has_pending_interaction(messages: &[UIMessage], client_tools: &BTreeSet<String>) -> bool {
    messages
        .iter()
        .any(|m| m.role == Role::Assistant && message_has_pending_interaction(m, client_tools))
}

/// The latest assistant message: the step a continuation answers.
pub fn leaf_assistant(messages: &[UIMessage]) -> Option<&UIMessage> {
    messages.iter().rev().find(|m| m.role == Role::Assistant)
}

/// Whether a message is mid-batch: at least one tool part settled and at least one call or
/// approval still pending. The continuation barrier waits while this holds.
pub fn message_has_incomplete_tool_batch(message: &UIMessage) -> bool {
    let mut pending = false;
    let mut settled = false;
    for part in &message.parts {
        match state_of(part) {
            Some(state::INPUT_AVAILABLE) | Some(state::APPROVAL_REQUESTED) => pending = true,
            Some(state::OUTPUT_AVAILABLE)
            | Some(state::OUTPUT_ERROR)
            | Some(state::OUTPUT_DENIED)
            | Some(state::APPROVAL_RESPONDED)
                if super::message::is_tool_part(part) =>
            {
                settled = true
            }
            _ => {}
        }
        if pending && settled {
            return true;
        }
    }
    false
}

/// [`message_has_incomplete_tool_batch`] of the leaf assistant message; earlier messages
/// with dangling calls do not block a continuation.
pub fn has_incomplete_tool_batch(messages: &[UIMessage]) -> bool {
    leaf_assistant(messages).is_some_and(message_has_incomplete_tool_batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn part(id: &str, st: &str) -> Value {
        json!({"type": "tool-invocation", "toolCallId": id, "state": st})
    }

    fn with(mut p: Value, k: &str, v: Value) -> Value {
        p[k] = v;
        p
    }

    fn result(id: &str, output: Value) -> ToolPartUpdate {
        ToolPartUpdate::tool_result(id, ToolResultOutcome::Output(Some(output)))
    }

    #[test]
    fn tool_result_output_available() {
        let u = result("tc1", json!({"result": 42}));
        assert_eq!(
            u.match_states(),
            &["input-available", "approval-requested", "approval-responded"]
        );
        let a = u.apply(&json!({"toolCallId": "tc1", "state": "input-available"}));
        assert_eq!(a["state"], "output-available");
        assert_eq!(a["output"], json!({"result": 42}));
        assert_eq!(a["preliminary"], false);
    }

    #[test]
    fn tool_result_output_error_with_and_without_text() {
        let u = ToolPartUpdate::tool_result("tc1", ToolResultOutcome::Error(Some("denied".into())));
        let a = u.apply(&part("tc1", "input-available"));
        assert_eq!(a["state"], "output-error");
        assert_eq!(a["errorText"], "denied");
        let u = ToolPartUpdate::tool_result("tc1", ToolResultOutcome::Error(None));
        assert_eq!(
            u.apply(&part("tc1", "input-available"))["errorText"],
            "Tool execution denied by user"
        );
    }

    #[test]
    fn outcome_from_frame() {
        assert_eq!(
            ToolResultOutcome::from_frame(
                Some("output-error"),
                Some(json!(null)),
                Some("no".into())
            ),
            ToolResultOutcome::Error(Some("no".into()))
        );
        assert_eq!(
            ToolResultOutcome::from_frame(Some("output-available"), Some(json!(1)), None),
            ToolResultOutcome::Output(Some(json!(1)))
        );
        assert_eq!(
            ToolResultOutcome::from_frame(None, None, None),
            ToolResultOutcome::Output(None)
        );
    }

    #[test]
    fn cross_message_match_states_and_resolution() {
        let u = ToolPartUpdate::cross_message(
            "tc1",
            CrossMessageUpdate::Output {
                output: Some(json!({"enabled": true})),
                preliminary: None,
            },
        );
        assert_eq!(u.match_states().len(), 7);
        let a = u.apply(&part("tc1", "approval-responded"));
        assert_eq!(a["state"], "output-available");
        assert_eq!(a["output"], json!({"enabled": true}));
        assert_eq!(a["preliminary"], false);

        let u = ToolPartUpdate::cross_message(
            "tc1",
            CrossMessageUpdate::Output { output: Some(json!("partial")), preliminary: Some(true) },
        );
        assert_eq!(u.apply(&part("tc1", "approval-responded"))["preliminary"], true);

        let u = ToolPartUpdate::cross_message(
            "tc1",
            CrossMessageUpdate::Error { error_text: Some("Trigger update failed".into()) },
        );
        let a = u.apply(&part("tc1", "approval-responded"));
        assert_eq!(a["state"], "output-error");
        assert_eq!(a["errorText"], "Trigger update failed");
        let u =
            ToolPartUpdate::cross_message("tc1", CrossMessageUpdate::Error { error_text: None });
        assert_eq!(
            u.apply(&part("tc1", "approval-responded"))["errorText"],
            "Tool execution failed"
        );
    }

    #[test]
    fn cross_message_is_first_write_wins() {
        let u = ToolPartUpdate::cross_message(
            "tc1",
            CrossMessageUpdate::Output { output: Some(json!("replayed")), preliminary: None },
        );
        for st in ["output-available", "output-error", "output-denied"] {
            let p = with(part("tc1", st), "output", json!("original"));
            assert_eq!(u.apply(&p), p);
        }
        let mut parts = vec![with(part("tc1", "output-available"), "output", json!("done"))];
        assert!(find_tool_update(&parts, &u).is_some(), "matches a settled part");
        assert_eq!(apply_to_parts(&mut parts, &u), None, "but changes nothing");
        assert_eq!(parts[0]["output"], "done");
    }

    #[test]
    fn cross_message_transitions_fresh_approval_via_apply() {
        let mut parts =
            vec![with(part("tc1", "approval-responded"), "approval", json!({"approved": true}))];
        let u = ToolPartUpdate::cross_message(
            "tc1",
            CrossMessageUpdate::Output { output: Some(json!({"ok": 1})), preliminary: None },
        );
        assert_eq!(apply_to_parts(&mut parts, &u), Some(0));
        assert_eq!(parts[0]["state"], "output-available");
        assert_eq!(parts[0]["output"], json!({"ok": 1}));
    }

    #[test]
    fn paused_execution_updates() {
        let paused = |eid: &str| {
            with(
                part("tc1", "output-available"),
                "output",
                json!({"status": "paused", "executionId": eid, "pending": []}),
            )
        };
        let outcome = json!({"status": "completed", "executionId": "exec_1", "result": 42});
        let u = ToolPartUpdate::paused_execution("tc1", "exec_1", outcome.clone());
        assert_eq!(u.match_states(), &["output-available"]);
        let a = u.apply(&paused("exec_1"));
        assert_eq!(a["output"], outcome);
        assert_eq!(a["preliminary"], false);
        let other = paused("exec_other");
        assert_eq!(u.apply(&other), other);
        let done = with(
            part("tc1", "output-available"),
            "output",
            json!({"status": "completed", "executionId": "exec_1"}),
        );
        assert_eq!(u.apply(&done), done);
        let plain = with(part("tc1", "output-available"), "output", json!("plain text"));
        assert_eq!(u.apply(&plain), plain);

        let mut parts = vec![
            with(
                part("tc0", "output-available"),
                "output",
                json!({"status": "paused", "executionId": "exec_0"}),
            ),
            paused("exec_1"),
        ];
        let before0 = parts[0].clone();
        assert_eq!(apply_to_parts(&mut parts, &u), Some(1));
        assert_eq!(parts[1]["output"], outcome);
        assert_eq!(parts[0], before0);
    }

    #[test]
    fn approval_updates() {
        let u = ToolPartUpdate::approval("tc1", true);
        assert_eq!(u.match_states(), &["input-available", "approval-requested"]);
        let p =
            json!({"toolCallId": "tc1", "state": "approval-requested", "approval": {"id": "a1"}});
        let a = u.apply(&p);
        assert_eq!(a["state"], "approval-responded");
        assert_eq!(a["approval"], json!({"id": "a1", "approved": true}));
        let d = ToolPartUpdate::approval("tc1", false).apply(&p);
        assert_eq!(d["state"], "output-denied");
        assert_eq!(d["approval"], json!({"id": "a1", "approved": false}));
    }

    #[test]
    fn approval_synthesizes_missing_id_and_keeps_descriptor() {
        let a = ToolPartUpdate::approval("tc-missing-id", true)
            .apply(&json!({"toolCallId": "tc-missing-id", "state": "approval-requested"}));
        assert_eq!(a["approval"], json!({"id": "tc-missing-id", "approved": true}));
        let a = ToolPartUpdate::approval("tc1", true).apply(&json!({
            "toolCallId": "tc1", "state": "approval-requested", "approval": {"id": "x", "descriptor": {"k": 1}}
        }));
        assert_eq!(a["approval"], json!({"id": "x", "descriptor": {"k": 1}, "approved": true}));
    }

    #[test]
    fn apply_to_parts_targets_first_match_only() {
        let mut parts = vec![
            part("tc1", "input-available"),
            json!({"type": "text", "text": "hello"}),
            part("tc2", "input-available"),
        ];
        let before = parts.clone();
        assert_eq!(apply_to_parts(&mut parts, &result("tc2", json!("output-value"))), Some(2));
        assert_eq!(parts[2]["state"], "output-available");
        assert_eq!(parts[2]["output"], "output-value");
        assert_eq!(parts[0], before[0]);
        assert_eq!(parts[1], before[1]);

        let mut twins = vec![part("tc1", "input-available"), part("tc1", "input-available")];
        assert_eq!(apply_to_parts(&mut twins, &result("tc1", json!(1))), Some(0));
        assert_eq!(twins[1]["state"], "input-available");
    }

    #[test]
    fn no_ops_return_none() {
        let mut parts = vec![part("tc1", "input-available")];
        assert_eq!(apply_to_parts(&mut parts, &result("tc-unknown", json!(1))), None);
        let mut settled = vec![part("tc1", "output-available")];
        assert_eq!(apply_to_parts(&mut settled, &result("tc1", json!(1))), None);
        // Re-applying the same result after it settled is a no-op.
        assert_eq!(apply_to_parts(&mut parts, &result("tc1", json!(7))), Some(0));
        assert_eq!(apply_to_parts(&mut parts, &result("tc1", json!(7))), None);
        // An approval re-sent after it was answered is a no-op too.
        let mut ap = vec![part("tc9", "approval-requested")];
        assert_eq!(apply_to_parts(&mut ap, &ToolPartUpdate::approval("tc9", true)), Some(0));
        assert_eq!(apply_to_parts(&mut ap, &ToolPartUpdate::approval("tc9", true)), None);
    }

    #[test]
    fn result_matches_approval_states() {
        let mut parts = vec![part("tc1", "approval-requested")];
        assert_eq!(apply_to_parts(&mut parts, &result("tc1", json!("v"))), Some(0));
        assert_eq!(parts[0]["state"], "output-available");
        let mut parts = vec![part("tc1", "approval-responded")];
        assert_eq!(apply_to_parts(&mut parts, &result("tc1", json!("v"))), Some(0));
    }

    fn asst(id: &str, parts: Vec<Value>) -> UIMessage {
        UIMessage::new(id, Role::Assistant, parts)
    }

    #[test]
    fn apply_to_messages_finds_the_owning_message() {
        let mut msgs = vec![
            UIMessage::new("u1", Role::User, vec![json!({"type": "text", "text": "hi"})]),
            asst(
                "a1",
                vec![json!({"type": "tool-x", "toolCallId": "c1", "state": "input-available"})],
            ),
            asst(
                "a2",
                vec![json!({"type": "tool-y", "toolCallId": "c2", "state": "input-available"})],
            ),
        ];
        assert_eq!(apply_to_messages(&mut msgs, &result("c2", json!("ok"))), Some(2));
        assert_eq!(msgs[2].parts[0]["output"], "ok");
        assert_eq!(apply_to_messages(&mut msgs, &result("c2", json!("ok"))), None);
        assert_eq!(apply_to_messages(&mut msgs, &result("nope", json!("ok"))), None);
    }

    #[test]
    fn pending_interaction_detection() {
        let tools = client_tool_names(["getUserTimezone", ""]);
        assert_eq!(tools.len(), 1);
        let client_call = asst(
            "a",
            vec![
                json!({"type": "tool-getUserTimezone", "toolCallId": "c", "state": "input-available"}),
            ],
        );
        let server_call = asst(
            "b",
            vec![json!({"type": "tool-read", "toolCallId": "d", "state": "input-available"})],
        );
        let approval = asst(
            "c",
            vec![json!({"type": "tool-edit", "toolCallId": "e", "state": "approval-requested"})],
        );
        let dynamic = asst(
            "d",
            vec![
                json!({"type": "dynamic-tool", "toolName": "getUserTimezone", "toolCallId": "f", "state": "input-available"}),
            ],
        );
        assert!(has_pending_interaction(std::slice::from_ref(&client_call), &tools));
        assert!(!has_pending_interaction(std::slice::from_ref(&server_call), &tools));
        assert!(has_pending_interaction(&[server_call, approval.clone()], &tools));
        assert!(has_pending_interaction(&[dynamic], &tools));
        assert!(!has_pending_interaction(std::slice::from_ref(&client_call), &BTreeSet::new()));
        let mut as_user = approval;
        as_user.role = Role::User;
        assert!(!has_pending_interaction(&[as_user], &tools));
    }

    #[test]
    fn incomplete_batch_only_on_leaf() {
        let mixed = asst(
            "a1",
            vec![
                json!({"type": "tool-a", "toolCallId": "1", "state": "output-available"}),
                json!({"type": "tool-b", "toolCallId": "2", "state": "input-available"}),
            ],
        );
        let all_pending = asst(
            "a2",
            vec![
                json!({"type": "tool-a", "toolCallId": "3", "state": "input-available"}),
                json!({"type": "tool-b", "toolCallId": "4", "state": "approval-requested"}),
            ],
        );
        let all_settled = asst(
            "a3",
            vec![
                json!({"type": "tool-a", "toolCallId": "5", "state": "output-error"}),
                json!({"type": "tool-b", "toolCallId": "6", "state": "approval-responded"}),
            ],
        );
        assert!(has_incomplete_tool_batch(std::slice::from_ref(&mixed)));
        assert!(!has_incomplete_tool_batch(std::slice::from_ref(&all_pending)));
        assert!(!has_incomplete_tool_batch(std::slice::from_ref(&all_settled)));
        assert!(!has_incomplete_tool_batch(&[mixed.clone(), all_settled]));
        let user = UIMessage::new("u", Role::User, vec![]);
        assert!(has_incomplete_tool_batch(&[mixed, user]));
        assert!(!has_incomplete_tool_batch(&[]));
        // A non-tool part in a terminal-looking state does not count as settled.
        let odd = asst(
            "a4",
            vec![
                json!({"type": "data-x", "state": "output-available"}),
                json!({"type": "tool-b", "toolCallId": "7", "state": "input-available"}),
            ],
        );
        assert!(!message_has_incomplete_tool_batch(&odd));
    }
}
