//! Builders for the AI SDK `UIMessageChunk` bodies the server streams.
//!
//! Each chunk is JSON-serialized into the `body` of a `cf_agent_use_chat_response` frame and
//! parsed by the client's `useChat`, so key names must match the AI SDK exactly. `type` comes
//! first, then the fields in the order the SDK emits them.

use serde_json::{json, Map, Value};

/// `{"type":"start"[,"messageId"][,"messageMetadata"]}` opens an assistant message.
pub fn start(message_id: Option<&str>, message_metadata: Option<Value>) -> Value {
    let mut m = typed("start");
    if let Some(id) = message_id {
        m.insert("messageId".into(), json!(id));
    }
    if let Some(meta) = message_metadata {
        m.insert("messageMetadata".into(), meta);
    }
    Value::Object(m)
}

/// `{"type":"start-step"}`; the accumulator turns it into a `step-start` part.
pub fn start_step() -> Value {
    json!({"type": "start-step"})
}

/// `{"type":"finish-step"}` closes one model step.
pub fn finish_step() -> Value {
    json!({"type": "finish-step"})
}

/// `{"type":"text-start","id"}` opens a text part.
pub fn text_start(id: &str) -> Value {
    json!({"type": "text-start", "id": id})
}

/// `{"type":"text-delta","id","delta"}` appends to the open text part.
pub fn text_delta(id: &str, delta: &str) -> Value {
    json!({"type": "text-delta", "id": id, "delta": delta})
}

/// `{"type":"text-end","id"}` marks the text part done.
pub fn text_end(id: &str) -> Value {
    json!({"type": "text-end", "id": id})
}

/// `{"type":"reasoning-start","id"}` opens a reasoning part.
pub fn reasoning_start(id: &str) -> Value {
    json!({"type": "reasoning-start", "id": id})
}

/// `{"type":"reasoning-delta","id","delta"}` appends reasoning text.
pub fn reasoning_delta(id: &str, delta: &str) -> Value {
    json!({"type": "reasoning-delta", "id": id, "delta": delta})
}

/// `{"type":"reasoning-end","id"}`; providers attach a signature via `providerMetadata`
/// (see [`with_field`]).
pub fn reasoning_end(id: &str) -> Value {
    json!({"type": "reasoning-end", "id": id})
}

/// `{"type":"tool-input-start","toolCallId","toolName"}` announces a tool call whose
/// arguments are about to stream.
pub fn tool_input_start(tool_call_id: &str, tool_name: &str) -> Value {
    json!({"type": "tool-input-start", "toolCallId": tool_call_id, "toolName": tool_name})
}

/// `{"type":"tool-input-delta","toolCallId","inputTextDelta"}` carries raw argument text.
pub fn tool_input_delta(tool_call_id: &str, input_text_delta: &str) -> Value {
    json!({"type": "tool-input-delta", "toolCallId": tool_call_id, "inputTextDelta": input_text_delta})
}

/// `{"type":"tool-input-available","toolCallId","toolName","input"}`: the call is complete.
/// The input is moved in (`json!` would copy it, and it can hold a whole file), as in the
/// other chunks that carry a value.
pub fn tool_input_available(tool_call_id: &str, tool_name: &str, input: Value) -> Value {
    let chunk =
        json!({"type": "tool-input-available", "toolCallId": tool_call_id, "toolName": tool_name});
    with_field(chunk, "input", input)
}

/// `{"type":"tool-input-error","toolCallId","toolName","input","errorText"}`: the arguments
/// were invalid or the tool is unknown; persisted as `output-error`.
pub fn tool_input_error(
    tool_call_id: &str,
    tool_name: &str,
    input: Value,
    error_text: &str,
) -> Value {
    let chunk =
        json!({"type": "tool-input-error", "toolCallId": tool_call_id, "toolName": tool_name});
    with_field(with_field(chunk, "input", input), "errorText", json!(error_text))
}

/// `{"type":"tool-approval-request","approvalId","toolCallId"}` asks the user to approve.
pub fn tool_approval_request(approval_id: &str, tool_call_id: &str) -> Value {
    json!({"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": tool_call_id})
}

/// `{"type":"tool-output-available","toolCallId","output"}`.
pub fn tool_output_available(tool_call_id: &str, output: Value) -> Value {
    with_field(
        json!({"type": "tool-output-available", "toolCallId": tool_call_id}),
        "output",
        output,
    )
}

/// `{"type":"tool-output-error","toolCallId","errorText"}`.
pub fn tool_output_error(tool_call_id: &str, error_text: &str) -> Value {
    json!({"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": error_text})
}

/// `{"type":"tool-output-denied","toolCallId"}`: the user denied the call.
pub fn tool_output_denied(tool_call_id: &str) -> Value {
    json!({"type": "tool-output-denied", "toolCallId": tool_call_id})
}

/// `{"type":"finish"[,"finishReason"]}` ends the message.
pub fn finish(finish_reason: Option<&str>) -> Value {
    let mut m = typed("finish");
    if let Some(r) = finish_reason {
        m.insert("finishReason".into(), json!(r));
    }
    Value::Object(m)
}

/// `{"type":"message-metadata","messageMetadata"}` merges metadata mid-stream.
pub fn message_metadata(metadata: Value) -> Value {
    with_field(Value::Object(typed("message-metadata")), "messageMetadata", metadata)
}

/// `{"type":"error","errorText"}`. The server does not forward this chunk; the turn ends
/// with an error frame instead (see `frames::ChatResponse::error`).
pub fn error(error_text: &str) -> Value {
    json!({"type": "error", "errorText": error_text})
}

/// `{"type":"abort"[,"reason"]}` signals a cancelled stream.
pub fn abort(reason: Option<&str>) -> Value {
    let mut m = typed("abort");
    if let Some(r) = reason {
        m.insert("reason".into(), json!(r));
    }
    Value::Object(m)
}

/// `{"type":"data-<name>"[,"id"],"data"[,"transient":true]}`: app data. Same type and id
/// replace an earlier part; transient ones are shown live but never persisted.
pub fn data(name: &str, id: Option<&str>, data: Value, transient: bool) -> Value {
    let mut m = typed(&format!("data-{name}"));
    if let Some(id) = id {
        m.insert("id".into(), json!(id));
    }
    m.insert("data".into(), data);
    if transient {
        m.insert("transient".into(), Value::Bool(true));
    }
    Value::Object(m)
}

/// Adds or replaces one field, for the optional extras (`providerMetadata`, `dynamic`,
/// `providerExecuted`, `preliminary`, `title`, `approvalDescriptor`, ...). Non-objects are
/// returned unchanged.
pub fn with_field(mut chunk: Value, key: &str, value: Value) -> Value {
    if let Value::Object(m) = &mut chunk {
        m.insert(key.to_owned(), value);
    }
    chunk
}

/// Stamps the server's message id into a `start` chunk that lacks one, so the client and
/// the persisted message agree on the id. Continuations keep the client's id, so callers
/// skip this for them. Returns whether the chunk changed.
pub fn stamp_start_message_id(chunk: &mut Value, message_id: &str) -> bool {
    let Value::Object(m) = chunk else { return false };
    if m.get("type").and_then(Value::as_str) != Some("start") {
        return false;
    }
    if m.get("messageId").is_some_and(|v| !v.is_null()) {
        return false;
    }
    m.insert("messageId".into(), json!(message_id));
    true
}

fn typed(t: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!(t));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &Value) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn exact_key_names_and_order() {
        assert_eq!(s(&start(Some("m1"), None)), r#"{"type":"start","messageId":"m1"}"#);
        assert_eq!(s(&start(None, None)), r#"{"type":"start"}"#);
        assert_eq!(s(&start_step()), r#"{"type":"start-step"}"#);
        assert_eq!(s(&text_start("t0")), r#"{"type":"text-start","id":"t0"}"#);
        assert_eq!(s(&text_delta("t0", "Hel")), r#"{"type":"text-delta","id":"t0","delta":"Hel"}"#);
        assert_eq!(s(&text_end("t0")), r#"{"type":"text-end","id":"t0"}"#);
        assert_eq!(
            s(&reasoning_delta("r", "x")),
            r#"{"type":"reasoning-delta","id":"r","delta":"x"}"#
        );
        assert_eq!(
            s(&tool_input_start("c1", "read")),
            r#"{"type":"tool-input-start","toolCallId":"c1","toolName":"read"}"#
        );
        assert_eq!(
            s(&tool_input_delta("c1", "{\"pa")),
            r#"{"type":"tool-input-delta","toolCallId":"c1","inputTextDelta":"{\"pa"}"#
        );
        assert_eq!(
            s(&tool_input_available("c1", "read", json!({"path": "a"}))),
            r#"{"type":"tool-input-available","toolCallId":"c1","toolName":"read","input":{"path":"a"}}"#
        );
        assert_eq!(
            s(&tool_input_error("c1", "nope", json!({}), "no such tool")),
            r#"{"type":"tool-input-error","toolCallId":"c1","toolName":"nope","input":{},"errorText":"no such tool"}"#
        );
        assert_eq!(
            s(&tool_approval_request("ap1", "c1")),
            r#"{"type":"tool-approval-request","approvalId":"ap1","toolCallId":"c1"}"#
        );
        assert_eq!(
            s(&tool_output_available("c1", json!(1))),
            r#"{"type":"tool-output-available","toolCallId":"c1","output":1}"#
        );
        assert_eq!(
            s(&tool_output_error("c1", "boom")),
            r#"{"type":"tool-output-error","toolCallId":"c1","errorText":"boom"}"#
        );
        assert_eq!(
            s(&tool_output_denied("c1")),
            r#"{"type":"tool-output-denied","toolCallId":"c1"}"#
        );
        assert_eq!(s(&finish_step()), r#"{"type":"finish-step"}"#);
        assert_eq!(s(&finish(Some("stop"))), r#"{"type":"finish","finishReason":"stop"}"#);
        assert_eq!(s(&error("bad")), r#"{"type":"error","errorText":"bad"}"#);
        assert_eq!(s(&abort(None)), r#"{"type":"abort"}"#);
        assert_eq!(
            s(&data("status", Some("d1"), json!({"p": 1}), false)),
            r#"{"type":"data-status","id":"d1","data":{"p":1}}"#
        );
        assert_eq!(
            s(&data("tick", None, json!(2), true)),
            r#"{"type":"data-tick","data":2,"transient":true}"#
        );
        assert_eq!(
            s(&message_metadata(json!({"a": 1}))),
            r#"{"type":"message-metadata","messageMetadata":{"a":1}}"#
        );
        assert_eq!(
            s(&with_field(tool_input_error("c", "x", json!({}), "e"), "dynamic", json!(true))),
            r#"{"type":"tool-input-error","toolCallId":"c","toolName":"x","input":{},"errorText":"e","dynamic":true}"#
        );
    }

    #[test]
    fn stamps_start_id_only_when_missing() {
        let mut c = start(None, None);
        assert!(stamp_start_message_id(&mut c, "srv"));
        assert_eq!(c, json!({"type": "start", "messageId": "srv"}));
        let mut c = start(Some("provider"), None);
        assert!(!stamp_start_message_id(&mut c, "srv"));
        assert_eq!(c["messageId"], "provider");
        let mut t = text_start("t");
        assert!(!stamp_start_message_id(&mut t, "srv"));
    }
}
