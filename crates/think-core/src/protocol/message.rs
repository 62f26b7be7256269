//! The AI SDK `UIMessage` as persisted and sent to clients.
//!
//! Parts stay raw JSON objects: the clients and providers invent part types and fields
//! (`data-*`, provider metadata, future SDK parts) that must survive a round trip untouched,
//! so only the handful of fields the server reasons about get typed accessors.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who wrote a message; the three roles the AI SDK `UIMessage` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A system message.
    System,
    /// A message the user sent.
    User,
    /// An answer of the model.
    Assistant,
}

impl Role {
    /// The wire name, as stored in the role column.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One chat message: `{id, role, metadata?, parts}`. Unknown top-level fields a client sent
/// are kept in `extra` so they are written back as they came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UIMessage {
    /// The message id, unique in the transcript.
    pub id: String,
    /// Who wrote it.
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// App metadata, merged from the stream's start, finish and metadata chunks.
    pub metadata: Option<Value>,
    /// The parts (text, reasoning, tool calls, files, steps), kept as JSON.
    pub parts: Vec<Value>,
    #[serde(flatten)]
    /// Fields this crate does not know, kept so they round-trip.
    pub extra: Map<String, Value>,
}

/// Why client JSON is not a UI message; the text names the offending field.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageError {
    /// The message is not a JSON object.
    NotAnObject {
        /// The JSON kind it is.
        got: &'static str,
    },
    /// A required field (`id`, `role` or `parts`) is absent.
    Missing(&'static str),
    /// A field has the wrong JSON kind.
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be ("a string", "an array").
        expected: &'static str,
        /// The JSON kind it is.
        got: &'static str,
    },
    /// The role is none of system, user and assistant.
    UnknownRole(String),
    /// A part is not a JSON object.
    PartNotAnObject {
        /// The part's index.
        index: usize,
        /// The JSON kind it is.
        got: &'static str,
    },
    /// A part has no string `type`.
    PartWithoutType {
        /// The part's index.
        index: usize,
    },
    /// The message passed the checks but serde refused it.
    Invalid(String),
}

impl MessageError {
    fn not_a_string(field: &'static str, v: &Value) -> Self {
        MessageError::WrongType { field, expected: "a string", got: json_kind(v) }
    }
}

impl std::fmt::Display for MessageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageError::NotAnObject { got } => write!(f, "message is not an object (got {got})"),
            MessageError::Missing(field) => write!(f, "message has no {field}"),
            MessageError::WrongType { field, expected, got } => {
                write!(f, "message {field} is not {expected} (got {got})")
            }
            MessageError::UnknownRole(r) => {
                write!(f, "message role \"{r}\" is not system, user or assistant")
            }
            MessageError::PartNotAnObject { index, got } => {
                write!(f, "parts[{index}] is not an object (got {got})")
            }
            MessageError::PartWithoutType { index } => {
                write!(f, "parts[{index}] has no string type")
            }
            MessageError::Invalid(e) => write!(f, "invalid message: {e}"),
        }
    }
}

impl std::error::Error for MessageError {}

impl UIMessage {
    /// A message with no metadata, as the accumulator and tests build them.
    pub fn new(id: impl Into<String>, role: Role, parts: Vec<Value>) -> Self {
        UIMessage { id: id.into(), role, metadata: None, parts, extra: Map::new() }
    }

    /// Parses one message from client JSON and checks what serde cannot: every part is an
    /// object with a string `type`. The error names the offending field.
    pub fn from_value(value: Value) -> Result<Self, MessageError> {
        let obj = match value {
            Value::Object(o) => o,
            other => return Err(MessageError::NotAnObject { got: json_kind(&other) }),
        };
        match obj.get("id") {
            Some(Value::String(_)) => {}
            Some(other) => return Err(MessageError::not_a_string("id", other)),
            None => return Err(MessageError::Missing("id")),
        }
        match obj.get("role") {
            Some(Value::String(r)) if matches!(r.as_str(), "system" | "user" | "assistant") => {}
            Some(Value::String(r)) => return Err(MessageError::UnknownRole(r.clone())),
            Some(other) => return Err(MessageError::not_a_string("role", other)),
            None => return Err(MessageError::Missing("role")),
        }
        match obj.get("parts") {
            Some(Value::Array(parts)) => {
                for (index, part) in parts.iter().enumerate() {
                    match part {
                        Value::Object(p) => match p.get("type") {
                            Some(Value::String(_)) => {}
                            _ => return Err(MessageError::PartWithoutType { index }),
                        },
                        other => {
                            return Err(MessageError::PartNotAnObject {
                                index,
                                got: json_kind(other),
                            })
                        }
                    }
                }
            }
            Some(other) => {
                return Err(MessageError::WrongType {
                    field: "parts",
                    expected: "an array",
                    got: json_kind(other),
                })
            }
            None => return Err(MessageError::Missing("parts")),
        }
        serde_json::from_value(Value::Object(obj)).map_err(|e| MessageError::Invalid(e.to_string()))
    }

    /// The JSON form sent on the wire and stored in SQLite.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// `metadata` as an object, if it is one.
    pub fn metadata_object(&self) -> Option<&Map<String, Value>> {
        self.metadata.as_ref().and_then(Value::as_object)
    }

    /// The index of the first part carrying `tool_call_id`.
    pub fn find_tool_part(&self, tool_call_id: &str) -> Option<usize> {
        self.parts.iter().position(|p| tool_call_id_of(p) == Some(tool_call_id))
    }
}

/// Tool part states of the AI SDK, as strings on the wire.
pub mod state {
    /// The call's input is still streaming.
    pub const INPUT_STREAMING: &str = "input-streaming";
    /// The input is complete; the call waits to run (or for the client).
    pub const INPUT_AVAILABLE: &str = "input-available";
    /// The call waits for a human's approval.
    pub const APPROVAL_REQUESTED: &str = "approval-requested";
    /// The human answered; an approved call runs next.
    pub const APPROVAL_RESPONDED: &str = "approval-responded";
    /// The call succeeded.
    pub const OUTPUT_AVAILABLE: &str = "output-available";
    /// The call failed.
    pub const OUTPUT_ERROR: &str = "output-error";
    /// The human denied the call.
    pub const OUTPUT_DENIED: &str = "output-denied";
}

/// A part's `type` string.
pub fn part_type(part: &Value) -> Option<&str> {
    part.get("type").and_then(Value::as_str)
}

/// Whether a part is a tool invocation: `tool-<name>` or `dynamic-tool`.
pub fn is_tool_part(part: &Value) -> bool {
    matches!(part_type(part), Some(t) if t.starts_with("tool-") || t == "dynamic-tool")
}

/// The `toolCallId` of any part that carries one as a string.
pub fn tool_call_id_of(part: &Value) -> Option<&str> {
    part.get("toolCallId").and_then(Value::as_str)
}

/// The tool name: the `tool-<name>` suffix, or `toolName` of a `dynamic-tool` part.
pub fn tool_name_of(part: &Value) -> Option<&str> {
    let t = part_type(part)?;
    if t == "dynamic-tool" {
        return part.get("toolName").and_then(Value::as_str);
    }
    t.strip_prefix("tool-")
}

/// A part's `state` string.
pub fn state_of(part: &Value) -> Option<&str> {
    part.get("state").and_then(Value::as_str)
}

/// Whether a tool state is final: the provider gets a tool result for it and later chunks
/// must not change it.
pub fn is_terminal_state(state: &str) -> bool {
    matches!(state, state::OUTPUT_AVAILABLE | state::OUTPUT_ERROR | state::OUTPUT_DENIED)
}

/// Concatenated text of a message's `text` parts.
pub fn text_of(message: &UIMessage) -> String {
    message
        .parts
        .iter()
        .filter(|p| part_type(p) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect()
}

/// A short name of a JSON value's kind, for error messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JavaScript truthiness of a JSON value, for flags the TypeScript reference tests with `if (x)`.
pub(crate) fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(_)) | Some(Value::Object(_)) => true,
    }
}

/// Length of a string in UTF-16 code units, the unit of JavaScript's `String.length`.
pub(crate) fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The longest prefix of `s` that is at most `units` UTF-16 code units long. Unlike
/// JavaScript's `slice` it never splits a surrogate pair, so it may be one unit shorter.
pub(crate) fn utf16_prefix(s: &str, units: usize) -> &str {
    let mut used = 0;
    for (idx, ch) in s.char_indices() {
        let w = ch.len_utf16();
        if used + w > units {
            return &s[..idx];
        }
        used += w;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_unknown_parts_and_fields() {
        let raw = json!({
            "id": "m1", "role": "assistant", "createdAt": "2026-01-01",
            "parts": [
                {"type": "future-part", "weird": [1, {"x": null}]},
                {"type": "data-status", "id": "d1", "data": {"p": 1}}
            ]
        });
        let msg = UIMessage::from_value(raw.clone()).unwrap();
        assert_eq!(msg.extra.get("createdAt"), Some(&json!("2026-01-01")));
        assert_eq!(msg.to_value(), raw);
        assert!(msg.to_value().get("metadata").is_none());
    }

    #[test]
    fn rejects_malformed_messages_with_reasons() {
        let cases = [
            (json!(5), "not an object"),
            (json!({"role": "user", "parts": []}), "no id"),
            (json!({"id": 1, "role": "user", "parts": []}), "id is not a string"),
            (json!({"id": "a", "role": "tool", "parts": []}), "not system, user or assistant"),
            (json!({"id": "a", "role": "user", "parts": {}}), "parts is not an array"),
            (json!({"id": "a", "role": "user"}), "no parts"),
            (json!({"id": "a", "role": "user", "parts": [1]}), "parts[0] is not an object"),
            (
                json!({"id": "a", "role": "user", "parts": [{"text": "x"}]}),
                "parts[0] has no string type",
            ),
        ];
        for (raw, want) in cases {
            let err = UIMessage::from_value(raw.clone()).unwrap_err().to_string();
            assert!(err.contains(want), "{raw}: {err}");
        }
    }

    #[test]
    fn tool_part_helpers() {
        let p = json!({"type": "tool-getWeather", "toolCallId": "c1", "state": "input-available"});
        assert!(is_tool_part(&p));
        assert_eq!(tool_name_of(&p), Some("getWeather"));
        assert_eq!(tool_call_id_of(&p), Some("c1"));
        assert_eq!(state_of(&p), Some("input-available"));
        let d = json!({"type": "dynamic-tool", "toolName": "mcp_x", "toolCallId": "c2"});
        assert!(is_tool_part(&d));
        assert_eq!(tool_name_of(&d), Some("mcp_x"));
        let t = json!({"type": "text", "text": "hi"});
        assert!(!is_tool_part(&t));
        assert_eq!(tool_name_of(&t), None);
        assert!(is_terminal_state("output-denied"));
        assert!(!is_terminal_state("approval-responded"));
        let m = UIMessage::new("a", Role::Assistant, vec![t, p, d]);
        assert_eq!(m.find_tool_part("c2"), Some(2));
        assert_eq!(text_of(&m), "hi");
    }

    #[test]
    fn js_helpers() {
        assert!(!truthy(None));
        assert!(!truthy(Some(&json!(0))));
        assert!(!truthy(Some(&json!(""))));
        assert!(truthy(Some(&json!("x"))));
        assert!(truthy(Some(&json!({}))));
        assert_eq!(utf16_len("a😀"), 3);
        assert_eq!(utf16_prefix("a😀b", 2), "a");
        assert_eq!(utf16_prefix("a😀b", 3), "a😀");
        assert_eq!(utf16_prefix("ab", 10), "ab");
    }
}
