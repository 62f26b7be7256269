//! Turns the persisted transcript (UI messages) into the model's conversation, like the AI
//! SDK's `convertToModelMessages` with `ignoreIncompleteToolCalls`: each step of an assistant
//! message becomes an assistant message with its tool calls, followed by their results.

use std::collections::HashSet;

use serde_json::Value;

use crate::model::{ModelMessage, ModelToolCall, ToolArguments};
use crate::protocol::message::{
    part_type, state_of, tool_call_id_of, tool_name_of, Role, UIMessage,
};
use crate::tools::ToolSet;

/// What the model is told when a human denied a tool call.
pub const DENIED_TEXT: &str = "The user denied this tool call.";

/// Converts `messages`; `tools` supplies each tool's model view of its output.
/// A `load_context` result whose skill a later `unload_context` unloaded becomes a short
/// placeholder, so the context is reclaimed while the transcript keeps it.
pub fn to_model_messages(messages: &[UIMessage], tools: &ToolSet) -> Vec<ModelMessage> {
    let unloaded = unloaded_loads(messages);
    let mut out = Vec::new();
    for m in messages {
        match m.role {
            Role::User => out.push(ModelMessage::User { content: user_text(&m.parts) }),
            Role::System => out.push(ModelMessage::System { content: user_text(&m.parts) }),
            Role::Assistant => assistant(&m.parts, tools, &unloaded, &mut out),
        }
    }
    out
}

fn user_text(parts: &[Value]) -> String {
    let mut pieces = Vec::new();
    for p in parts {
        match part_type(p) {
            Some("text") => {
                pieces.push(p.get("text").and_then(Value::as_str).unwrap_or("").to_owned())
            }
            Some("file") => {
                let name = p.get("filename").and_then(Value::as_str).unwrap_or("file");
                let mime = p
                    .get("mediaType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream");
                pieces.push(format!("[attached {name} ({mime})]"));
            }
            _ => {}
        }
    }
    pieces.join("\n")
}

struct Step {
    text: String,
    calls: Vec<ModelToolCall>,
    results: Vec<ModelMessage>,
}

fn assistant(
    parts: &[Value],
    tools: &ToolSet,
    unloaded: &HashSet<String>,
    out: &mut Vec<ModelMessage>,
) {
    let mut step = Step { text: String::new(), calls: Vec::new(), results: Vec::new() };
    for p in parts {
        match part_type(p) {
            Some("step-start") => flush(&mut step, out),
            Some("text") => step.text.push_str(p.get("text").and_then(Value::as_str).unwrap_or("")),
            _ => {
                if let Some((call, result)) = tool_exchange(p, tools, unloaded) {
                    step.calls.push(call);
                    step.results.push(result);
                }
            }
        }
    }
    flush(&mut step, out);
}

fn flush(step: &mut Step, out: &mut Vec<ModelMessage>) {
    if step.text.is_empty() && step.calls.is_empty() {
        return;
    }
    out.push(ModelMessage::Assistant {
        content: std::mem::take(&mut step.text),
        tool_calls: std::mem::take(&mut step.calls),
    });
    out.append(&mut step.results);
}

/// The call and its result for a settled tool part; `None` for text, data and unsettled calls.
fn tool_exchange(
    part: &Value,
    tools: &ToolSet,
    unloaded: &HashSet<String>,
) -> Option<(ModelToolCall, ModelMessage)> {
    let id = tool_call_id_of(part)?;
    let name = tool_name_of(part)?;
    let content = match state_of(part)? {
        "output-available" if unloaded.contains(id) => {
            let key = part.pointer("/input/key").and_then(Value::as_str).unwrap_or("");
            unloaded_placeholder(key)
        }
        "output-available" => {
            let output = part.get("output").cloned().unwrap_or(Value::Null);
            match tools.get(name) {
                Some(tool) => tool.model_output(&output).to_text(),
                None => serde_json::to_string(&output).unwrap_or_default(),
            }
        }
        "output-error" => crate::tools::error_json(
            part.get("errorText").and_then(Value::as_str).unwrap_or("Tool failed"),
        ),
        "output-denied" => match part.pointer("/approval/reason").and_then(Value::as_str) {
            Some(reason) if !reason.is_empty() => format!("{DENIED_TEXT} Reason: {reason}"),
            _ => DENIED_TEXT.to_owned(),
        },
        _ => return None,
    };
    let arguments = match part.get("input") {
        Some(input @ Value::Object(_)) => ToolArguments::from_value(input),
        _ => ToolArguments::empty(),
    };
    Some((
        ModelToolCall { id: id.to_owned(), name: name.to_owned(), arguments },
        ModelMessage::Tool {
            tool_call_id: id.to_owned(),
            tool_name: name.to_owned(),
            content,
            images: Vec::new(),
        },
    ))
}

/// What the model is sent instead of a skill's content once it unloaded it.
pub fn unloaded_placeholder(key: &str) -> String {
    format!("[skill unloaded: {key}]")
}

/// The `load_context` calls of the transcript whose skill a later `unload_context` unloaded:
/// the model is sent a placeholder for their results (the transcript itself is kept).
pub fn unloaded_loads(messages: &[UIMessage]) -> HashSet<String> {
    let mut loads: Vec<(String, String, String)> = Vec::new();
    let mut unloaded = HashSet::new();
    for part in messages.iter().flat_map(|m| &m.parts) {
        if state_of(part) != Some("output-available") {
            continue;
        }
        let (Some(name), Some(id)) = (tool_name_of(part), tool_call_id_of(part)) else { continue };
        let field = |f: &str| part.pointer(&format!("/input/{f}")).and_then(Value::as_str);
        let (Some(label), Some(key)) = (field("label"), field("key")) else { continue };
        match name {
            "load_context" => loads.push((id.to_owned(), label.to_owned(), key.to_owned())),
            "unload_context"
                if part
                    .get("output")
                    .and_then(Value::as_str)
                    .is_some_and(|o| o.starts_with("Unloaded")) =>
            {
                for (id, l, k) in &loads {
                    if l == label && k == key {
                        unloaded.insert(id.clone());
                    }
                }
            }
            _ => {}
        }
    }
    unloaded
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(role: Role, parts: Value) -> UIMessage {
        UIMessage::new("m", role, parts.as_array().unwrap().clone())
    }

    #[test]
    fn steps_split_calls_and_results_and_skip_incomplete_calls() {
        let messages = vec![
            msg(Role::User, json!([{"type": "text", "text": "hi"}])),
            msg(
                Role::Assistant,
                json!([
                    {"type": "step-start"},
                    {"type": "text", "text": "Looking", "state": "done"},
                    {"type": "tool-read", "toolCallId": "c1", "state": "output-available", "input": {"path": "/a"}, "output": {"x": 1}},
                    {"type": "tool-delete", "toolCallId": "c2", "state": "output-denied", "input": {"path": "/b"}, "approval": {"id": "a", "approved": false}},
                    {"type": "tool-client", "toolCallId": "c3", "state": "input-available", "input": {}},
                    {"type": "step-start"},
                    {"type": "dynamic-tool", "toolName": "nope", "toolCallId": "c4", "state": "output-error", "input": "{bad", "errorText": "no such tool"},
                    {"type": "step-start"},
                    {"type": "text", "text": "Done", "state": "done"}
                ]),
            ),
        ];
        let out = to_model_messages(&messages, &ToolSet::new());
        assert_eq!(out.len(), 7, "{out:#?}");
        assert_eq!(out[0], ModelMessage::User { content: "hi".into() });
        match &out[1] {
            ModelMessage::Assistant { content, tool_calls } => {
                assert_eq!(content, "Looking");
                assert_eq!(
                    tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
                    ["c1", "c2"]
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            out[2],
            ModelMessage::Tool {
                tool_call_id: "c1".into(),
                tool_name: "read".into(),
                content: "{\"x\":1}".into(),
                images: Vec::new(),
            }
        );
        assert_eq!(
            out[3],
            ModelMessage::Tool {
                tool_call_id: "c2".into(),
                tool_name: "delete".into(),
                content: DENIED_TEXT.into(),
                images: Vec::new(),
            }
        );
        match &out[4] {
            ModelMessage::Assistant { tool_calls, .. } => {
                assert_eq!(tool_calls[0].arguments, json!({}).into())
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            out[5],
            ModelMessage::Tool {
                tool_call_id: "c4".into(),
                tool_name: "nope".into(),
                content: r#"{"error":"no such tool"}"#.into(),
                images: Vec::new(),
            }
        );
        assert_eq!(out[6], ModelMessage::Assistant { content: "Done".into(), tool_calls: vec![] });
    }
}
