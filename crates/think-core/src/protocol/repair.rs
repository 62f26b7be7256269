//! Transcript repair before every model call.
//!
//! A tool call left without a result (the isolate died mid-execution, or the stream was cut)
//! makes providers reject the whole request, so such calls are turned into an errored result
//! and malformed tool inputs are coerced to objects. Calls still waiting for a human can be
//! kept instead: Think errors them, think-rs keeps such a turn paused.

use super::accumulator::normalize_tool_input;
use super::message::{is_tool_part, state, state_of, tool_call_id_of, UIMessage};
use super::tool_state::part_awaits_client_interaction;
use serde_json::Value;
use std::collections::BTreeSet;

/// The error text an interrupted tool call is settled with.
pub const INTERRUPTED_TOOL_ERROR: &str =
    "The tool call was interrupted before a result was recorded.";

/// The error an approved call that never ran is settled with once a later turn moves past it.
pub const APPROVED_NOT_RUN_ERROR: &str =
    "The tool call was approved but did not run before the next turn started.";

/// Think 0.23's approval repair, run when a new user turn starts and no continuation is due:
/// a call answered in an earlier message (any but the last) that never ran, because no
/// continuation ran it, is settled: approved as `output-error` with
/// [`APPROVED_NOT_RUN_ERROR`], denied as `output-denied`. Returns the indices of the messages
/// it changed.
pub fn settle_passed_approvals(messages: &mut [UIMessage]) -> Vec<usize> {
    let mut changed = Vec::new();
    let last = messages.len().saturating_sub(1);
    for (i, message) in messages.iter_mut().enumerate().take(last) {
        let mut touched = false;
        for part in message.parts.iter_mut() {
            if !is_tool_part(part)
                || state_of(part) != Some(state::APPROVAL_RESPONDED)
                || tool_part_has_settled_result(part)
            {
                continue;
            }
            let denied = part.pointer("/approval/approved").and_then(Value::as_bool) == Some(false);
            let (input, _) = normalize_tool_input(part.get("input"));
            if let Value::Object(p) = part {
                p.insert("input".into(), input);
                if denied {
                    p.insert("state".into(), state::OUTPUT_DENIED.into());
                } else {
                    p.insert("state".into(), state::OUTPUT_ERROR.into());
                    p.insert("errorText".into(), APPROVED_NOT_RUN_ERROR.into());
                }
                touched = true;
            }
        }
        if touched {
            changed.push(i);
        }
    }
    changed
}

/// Whether a tool part already carries a result the provider accepts (an output, or a
/// terminal state), so repair must not overwrite it.
pub fn tool_part_has_settled_result(part: &Value) -> bool {
    part.get("output").is_some()
        || part.get("result").is_some()
        || matches!(
            state_of(part),
            Some(state::OUTPUT_AVAILABLE | state::OUTPUT_ERROR | state::OUTPUT_DENIED)
        )
}

/// The default repair: settle the part as `output-error` with [`INTERRUPTED_TOOL_ERROR`].
pub fn error_interrupted_part(part: Value) -> Value {
    let mut part = part;
    if let Value::Object(p) = &mut part {
        p.insert("state".into(), state::OUTPUT_ERROR.into());
        p.insert("errorText".into(), INTERRUPTED_TOOL_ERROR.into());
    }
    part
}

/// Which unsettled parts repair leaves alone.
#[derive(Debug, Clone, Copy)]
pub enum PendingPolicy<'a> {
    /// Think's behaviour: only `approval-responded` parts survive; a pending client call or
    /// approval request becomes an error once another turn starts.
    RepairAll,
    /// Also keep parts a client can still answer: approval requests, and `input-available`
    /// calls of the named client tools.
    KeepAwaitingClient(&'a BTreeSet<String>),
}

/// The repaired transcript and what changed.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairResult {
    /// The repaired transcript.
    pub messages: Vec<UIMessage>,
    /// Indices of the messages that changed and need persisting.
    pub changed: Vec<usize>,
    /// Interrupted calls settled by the repair.
    pub removed_tool_calls: usize,
    /// Tool parts whose `input` was coerced to an object.
    pub normalized_inputs: usize,
    /// The `toolCallId`s of the settled calls, in transcript order.
    pub tool_call_ids: Vec<String>,
}

/// Repairs with the default error shape under `policy`.
pub fn repair_interrupted_tool_parts(
    messages: &[UIMessage],
    policy: PendingPolicy<'_>,
) -> RepairResult {
    repair_interrupted_tool_parts_with(
        messages,
        |part| match policy {
            PendingPolicy::RepairAll => true,
            PendingPolicy::KeepAwaitingClient(tools) => {
                !part_awaits_client_interaction(part, tools)
            }
        },
        error_interrupted_part,
    )
}

/// Repairs with a custom choice of parts (`should_repair`) and replacement (`repair_part`,
/// which receives the part with its input already normalized), like Think's overridable
/// `repairInterruptedToolPart` hook.
pub fn repair_interrupted_tool_parts_with(
    messages: &[UIMessage],
    should_repair: impl Fn(&Value) -> bool,
    repair_part: impl Fn(Value) -> Value,
) -> RepairResult {
    let mut out = RepairResult {
        messages: Vec::with_capacity(messages.len()),
        changed: Vec::new(),
        removed_tool_calls: 0,
        normalized_inputs: 0,
        tool_call_ids: Vec::new(),
    };
    for (mi, message) in messages.iter().enumerate() {
        let mut msg = message.clone();
        let mut changed = false;
        for part in msg.parts.iter_mut() {
            let Some(call_id) = tool_call_id_of(part).filter(|s| !s.is_empty()).map(str::to_owned)
            else {
                continue;
            };
            if !is_tool_part(part) {
                continue;
            }
            let (input, input_changed) = normalize_tool_input(part.get("input"));
            if !tool_part_has_settled_result(part) {
                if state_of(part) == Some(state::APPROVAL_RESPONDED) || !should_repair(part) {
                    continue;
                }
                let mut with_input = part.clone();
                with_input["input"] = input;
                *part = repair_part(with_input);
                if input_changed {
                    out.normalized_inputs += 1;
                }
                out.removed_tool_calls += 1;
                out.tool_call_ids.push(call_id);
                changed = true;
            } else if input_changed {
                part["input"] = input;
                out.normalized_inputs += 1;
                changed = true;
            }
        }
        if changed {
            out.changed.push(mi);
        }
        out.messages.push(msg);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::Role;
    use serde_json::json;

    fn tool_msg(id: &str, part: Value) -> UIMessage {
        UIMessage::new(id, Role::Assistant, vec![part])
    }

    fn repair(messages: &[UIMessage]) -> RepairResult {
        repair_interrupted_tool_parts(messages, PendingPolicy::RepairAll)
    }

    #[test]
    fn settled_detection() {
        assert!(tool_part_has_settled_result(&json!({"output": 1})));
        assert!(tool_part_has_settled_result(&json!({"result": 1})));
        for s in ["output-available", "output-error", "output-denied"] {
            assert!(tool_part_has_settled_result(&json!({"state": s})));
        }
        assert!(!tool_part_has_settled_result(&json!({"state": "input-available"})));
        assert!(!tool_part_has_settled_result(&json!({"state": "input-streaming"})));
        assert!(!tool_part_has_settled_result(&json!({})));
    }

    #[test]
    fn flips_interrupted_call_to_error() {
        let msgs = [tool_msg(
            "a1",
            json!({"type": "tool-search", "toolCallId": "tc1", "toolName": "search", "state": "input-available", "input": {"q": "cats"}}),
        )];
        let r = repair(&msgs);
        assert_eq!(r.removed_tool_calls, 1);
        assert_eq!(r.tool_call_ids, vec!["tc1"]);
        assert_eq!(r.changed, vec![0]);
        let p = &r.messages[0].parts[0];
        assert_eq!(p["state"], "output-error");
        assert_eq!(p["errorText"], INTERRUPTED_TOOL_ERROR);
        assert_eq!(p["input"], json!({"q": "cats"}));
    }

    #[test]
    fn leaves_settled_calls_untouched() {
        let msgs = [tool_msg(
            "a1",
            json!({"type": "tool-search", "toolCallId": "tc1", "state": "output-available", "input": {"q": "cats"}, "output": {"hits": 1}}),
        )];
        let r = repair(&msgs);
        assert_eq!((r.removed_tool_calls, r.normalized_inputs), (0, 0));
        assert!(r.changed.is_empty());
        assert_eq!(r.messages[..], msgs[..]);
    }

    #[test]
    fn keeps_approval_responded_verbatim() {
        let msgs = [tool_msg(
            "a1",
            json!({"type": "tool-deploy", "toolCallId": "tc1", "state": "approval-responded", "input": {"env": "prod"}}),
        )];
        let r = repair(&msgs);
        assert_eq!(r.removed_tool_calls, 0);
        assert_eq!(r.messages[..], msgs[..]);
    }

    #[test]
    fn normalizes_settled_input_without_erroring() {
        let msgs = [tool_msg(
            "a1",
            json!({"type": "tool-search", "toolCallId": "tc1", "state": "output-available", "input": "{\"q\":\"cats\"}", "output": {"hits": 1}}),
        )];
        let r = repair(&msgs);
        assert_eq!((r.removed_tool_calls, r.normalized_inputs), (0, 1));
        assert_eq!(r.messages[0].parts[0]["state"], "output-available");
        assert_eq!(r.messages[0].parts[0]["input"], json!({"q": "cats"}));
        assert_eq!(r.changed, vec![0]);
    }

    #[test]
    fn normalizes_interrupted_input_before_repair() {
        let msgs = [tool_msg(
            "a1",
            json!({"type": "tool-search", "toolCallId": "tc1", "state": "input-available", "input": ""}),
        )];
        let r = repair(&msgs);
        assert_eq!((r.removed_tool_calls, r.normalized_inputs), (1, 1));
        assert_eq!(r.messages[0].parts[0]["input"], json!({}));
        assert_eq!(r.messages[0].parts[0]["state"], "output-error");
        let streaming = [tool_msg(
            "a1",
            json!({"type": "tool-s", "toolCallId": "tc1", "state": "input-streaming"}),
        )];
        assert_eq!(repair(&streaming).messages[0].parts[0]["input"], json!({}));
    }

    #[test]
    fn handles_dynamic_tools_and_skips_non_tools() {
        let msgs = [UIMessage::new(
            "a1",
            Role::Assistant,
            vec![
                json!({"type": "text", "text": "hello"}),
                json!({"type": "dynamic-tool", "toolCallId": "tc1", "toolName": "whatever", "state": "input-available", "input": {}}),
                json!({"type": "data-x", "toolCallId": "tc2", "state": "input-available"}),
                json!({"type": "tool-x", "state": "input-available"}),
            ],
        )];
        let r = repair(&msgs);
        assert_eq!(r.removed_tool_calls, 1);
        assert_eq!(r.messages[0].parts[0], json!({"type": "text", "text": "hello"}));
        assert_eq!(r.messages[0].parts[1]["state"], "output-error");
        assert_eq!(r.messages[0].parts[2], msgs[0].parts[2]);
        assert_eq!(r.messages[0].parts[3], msgs[0].parts[3]);
    }

    #[test]
    fn custom_repair_hook() {
        let msgs = [tool_msg(
            "a1",
            json!({"type": "tool-ask_user", "toolCallId": "tc1", "state": "input-available", "input": {"question": "Which file?"}}),
        )];
        let r = repair_interrupted_tool_parts_with(
            &msgs,
            |_| true,
            |p| json!({"type": "text", "text": p["input"]["question"].as_str().unwrap_or("")}),
        );
        assert_eq!(r.removed_tool_calls, 1);
        assert_eq!(r.messages[0].parts[0], json!({"type": "text", "text": "Which file?"}));
    }

    #[test]
    fn keep_awaiting_client_policy() {
        let tools: BTreeSet<String> = ["chooseOption".to_owned()].into();
        let msgs = [
            tool_msg(
                "a1",
                json!({"type": "tool-chooseOption", "toolCallId": "client-1", "state": "input-available", "input": {}}),
            ),
            tool_msg(
                "a2",
                json!({"type": "tool-previewTool", "toolCallId": "server-1", "state": "input-available", "input": {}}),
            ),
            tool_msg(
                "a3",
                json!({"type": "tool-edit", "toolCallId": "ap-1", "state": "approval-requested", "input": {}, "approval": {"id": "x"}}),
            ),
        ];
        let r = repair_interrupted_tool_parts(&msgs, PendingPolicy::KeepAwaitingClient(&tools));
        assert_eq!(r.removed_tool_calls, 1);
        assert_eq!(r.tool_call_ids, vec!["server-1"]);
        assert_eq!(r.changed, vec![1]);
        assert_eq!(r.messages[0], msgs[0]);
        assert_eq!(r.messages[2], msgs[2]);
        assert_eq!(r.messages[1].parts[0]["state"], "output-error");
        // Think's policy errors all three.
        let all = repair(&msgs);
        assert_eq!(all.tool_call_ids, vec!["client-1", "server-1", "ap-1"]);
    }

    #[test]
    fn an_answered_call_a_later_turn_passed_is_settled() {
        let part = |id: &str, approved: bool| {
            json!({"type": "tool-write", "toolCallId": id, "state": "approval-responded",
                   "input": {"path": "/a"}, "approval": {"id": format!("ap-{id}"), "approved": approved}})
        };
        let mut msgs = vec![
            UIMessage::new("a1", Role::Assistant, vec![part("yes", true), part("no", false)]),
            UIMessage::new("u2", Role::User, vec![json!({"type": "text", "text": "next"})]),
        ];
        assert_eq!(settle_passed_approvals(&mut msgs), vec![0]);
        let [yes, no] = &msgs[0].parts[..] else { panic!() };
        assert_eq!(yes["state"], "output-error");
        assert_eq!(yes["errorText"], APPROVED_NOT_RUN_ERROR);
        assert_eq!(yes["input"], json!({"path": "/a"}));
        assert_eq!(no["state"], "output-denied");
        assert!(no.get("errorText").is_none());
        assert!(settle_passed_approvals(&mut msgs).is_empty(), "settled once");
    }

    #[test]
    fn the_last_message_and_settled_or_pending_calls_are_kept() {
        let responded = json!({"type": "tool-write", "toolCallId": "t", "state": "approval-responded",
                               "input": {}, "approval": {"id": "x", "approved": true}});
        let requested = json!({"type": "tool-write", "toolCallId": "r", "state": "approval-requested",
                               "input": {}, "approval": {"id": "y"}});
        let ran = json!({"type": "tool-write", "toolCallId": "o", "state": "approval-responded",
                         "input": {}, "output": {"ok": true}, "approval": {"id": "z", "approved": true}});
        // The answered call of the last message waits for its continuation.
        let mut last = vec![UIMessage::new("a1", Role::Assistant, vec![responded.clone()])];
        assert!(settle_passed_approvals(&mut last).is_empty());
        assert_eq!(last[0].parts[0], responded);
        let mut msgs = vec![
            UIMessage::new("a1", Role::Assistant, vec![requested.clone(), ran.clone()]),
            UIMessage::new("u2", Role::User, vec![]),
        ];
        assert!(settle_passed_approvals(&mut msgs).is_empty());
        assert_eq!(msgs[0].parts, vec![requested, ran]);
    }

    #[test]
    fn repairs_across_messages() {
        let msgs = [
            tool_msg(
                "a1",
                json!({"type": "tool-a", "toolCallId": "tc1", "state": "input-available", "input": {}}),
            ),
            tool_msg(
                "a2",
                json!({"type": "tool-b", "toolCallId": "tc2", "state": "output-available", "input": {}, "output": {}}),
            ),
            tool_msg(
                "a3",
                json!({"type": "tool-c", "toolCallId": "tc3", "state": "input-streaming", "input": {}}),
            ),
        ];
        let r = repair(&msgs);
        assert_eq!(r.removed_tool_calls, 2);
        assert_eq!(r.tool_call_ids, vec!["tc1", "tc3"]);
        assert_eq!(r.changed, vec![0, 2]);
        assert_eq!(r.messages[1], msgs[1]);
    }
}
