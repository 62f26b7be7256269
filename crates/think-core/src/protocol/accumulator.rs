//! Builds the persisted assistant `UIMessage` from the chunks a turn streams.
//!
//! It must reach the same parts the client's `useChat` builds from the same chunks, so the
//! stored transcript and the screen agree, and it must be robust to providers that replay
//! earlier tool round trips in a continuation (a replay never regresses a settled part).

use super::arguments::ToolArguments;
use super::message::{
    is_terminal_state, json_kind, state, state_of, tool_call_id_of, truthy, Role, UIMessage,
};
use super::tool_state::{apply_to_parts, CrossMessageUpdate, ToolPartUpdate};
use serde_json::{json, Map, Value};

/// Coerces a tool input to the plain object every provider requires: objects pass, a string
/// holding a JSON object is parsed, anything else becomes `{}`. The flag tells whether the
/// value changed.
pub fn normalize_tool_input(raw: Option<&Value>) -> (Value, bool) {
    match raw {
        Some(v @ Value::Object(_)) => (v.clone(), false),
        Some(Value::String(s)) if s.trim_start().starts_with('{') => {
            match serde_json::from_str::<Value>(s) {
                Ok(v @ Value::Object(_)) => (v, true),
                _ => (json!({}), true),
            }
        }
        _ => (json!({}), true),
    }
}

/// What the caller must do after a chunk was applied.
#[derive(Debug, Clone, PartialEq)]
pub enum ChunkAction {
    /// The chunk changed (or deliberately did not change) the parts; nothing else to do.
    Applied,
    /// Not a chunk type the accumulator knows; it is still forwarded to clients.
    Ignored,
    /// `start`: the message id it carried (already adopted unless continuing) and its metadata.
    Start {
        /// The id the chunk named, if any.
        message_id: Option<String>,
        /// Its metadata, if any.
        metadata: Option<Map<String, Value>>,
    },
    /// `finish`, with its reason and metadata.
    Finish {
        /// Why the model stopped.
        finish_reason: Option<String>,
        /// Its metadata, if any.
        metadata: Option<Map<String, Value>>,
    },
    /// `message-metadata`, merged already.
    MessageMetadata {
        /// The metadata merged.
        metadata: Map<String, Value>,
    },
    /// An approval was requested: persist early so the request survives eviction.
    ToolApprovalRequest {
        /// The call waiting for approval.
        tool_call_id: String,
    },
    /// A tool output for a call this message does not hold: apply it to the earlier message
    /// that does (first write wins), persist, and broadcast `cf_agent_message_updated`.
    CrossMessageToolUpdate {
        /// The call the output is for.
        tool_call_id: String,
        /// The output or error to apply.
        update: CrossMessageUpdate,
    },
    /// An `error` chunk: end the turn with an error frame carrying this text.
    Error(String),
}

impl ChunkAction {
    /// The update to hand to `tool_state::apply_to_messages`, for a cross-message action.
    pub fn cross_message_update(&self) -> Option<ToolPartUpdate> {
        match self {
            ChunkAction::CrossMessageToolUpdate { tool_call_id, update } => {
                Some(ToolPartUpdate::cross_message(tool_call_id.clone(), update.clone()))
            }
            _ => None,
        }
    }
}

/// Accumulates one assistant message from stream chunks.
#[derive(Debug, Clone)]
pub struct StreamAccumulator {
    message_id: String,
    continuation: bool,
    parts: Vec<Value>,
    metadata: Option<Map<String, Value>>,
    /// Tool inputs kept as the model's argument text (shared with the turn's history)
    /// instead of a parsed copy, by call id: their parts hold `null` as `input` until the
    /// message is read, when the text is parsed into place.
    text_inputs: Vec<(String, ToolArguments)>,
}

impl StreamAccumulator {
    /// A fresh message. A continuation keeps `message_id` even if the stream's `start` names
    /// another one.
    pub fn new(message_id: impl Into<String>, continuation: bool) -> Self {
        StreamAccumulator {
            message_id: message_id.into(),
            continuation,
            parts: Vec::new(),
            metadata: None,
            text_inputs: Vec::new(),
        }
    }

    /// Resumes from parts and metadata already built (e.g. replayed from stored chunks).
    pub fn with_existing(
        mut self,
        parts: Vec<Value>,
        metadata: Option<Map<String, Value>>,
    ) -> Self {
        self.parts = parts;
        self.metadata = metadata;
        self
    }

    /// The id the message will be persisted under.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// Whether this accumulator builds a continuation.
    pub fn is_continuation(&self) -> bool {
        self.continuation
    }

    /// The parts built so far (an input kept as text reads `null` here; see [`StreamAccumulator::message`]).
    pub fn parts(&self) -> &[Value] {
        &self.parts
    }

    /// The merged message metadata, if any chunk carried some.
    pub fn metadata(&self) -> Option<&Map<String, Value>> {
        self.metadata.as_ref()
    }

    /// Applies a client tool result or approval that arrived while this message is still
    /// streaming, so the end-of-turn persist does not regress it. `true` when a part changed.
    pub fn apply_tool_update(&mut self, update: &ToolPartUpdate) -> bool {
        apply_to_parts(&mut self.parts, update).is_some()
    }

    /// Applies a `tool-input-available` chunk whose input (null in `chunk`) is `arguments`,
    /// keeping the shared text rather than a parsed copy of a large input: the message
    /// reads the same, the input is parsed when the message is read.
    pub fn apply_input_available(
        &mut self,
        chunk: &Value,
        arguments: ToolArguments,
    ) -> ChunkAction {
        let id = chunk.get("toolCallId").and_then(Value::as_str);
        let takes_input = match find_tool_part(&self.parts, id) {
            Some(i) => state_of(&self.parts[i]) == Some(state::INPUT_STREAMING),
            None => true,
        };
        let action = self.apply(chunk);
        if let (true, Some(id)) = (takes_input, id) {
            if let Some(i) = find_tool_part(&self.parts, Some(id)) {
                self.parts[i]["input"] = Value::Null;
                self.text_inputs.push((id.to_owned(), arguments));
            }
        }
        action
    }

    /// Parses the inputs kept as text into `parts`, where their part still waits for one.
    /// An object (what a large input is) goes in as parsed, not through a copy.
    fn fill_text_inputs<'a>(
        parts: &mut [Value],
        text_inputs: impl IntoIterator<Item = (&'a str, &'a ToolArguments)>,
    ) {
        for (id, arguments) in text_inputs {
            let Some(i) = find_tool_part(parts, Some(id)) else { continue };
            if parts[i].get("input").is_some_and(Value::is_null) {
                let input = arguments.to_value();
                parts[i]["input"] = match input {
                    Value::Object(_) => input,
                    other => normalize_tool_input(Some(&other)).0,
                };
            }
        }
    }

    /// Applies one parsed chunk body.
    pub fn apply(&mut self, chunk: &Value) -> ChunkAction {
        let Some(obj) = chunk.as_object() else { return ChunkAction::Ignored };
        let Some(kind) = obj.get("type").and_then(Value::as_str) else {
            return ChunkAction::Ignored;
        };
        let handled = apply_chunk_to_parts(&mut self.parts, obj);
        let call_id = obj.get("toolCallId").and_then(Value::as_str).filter(|s| !s.is_empty());

        if kind == "tool-approval-request" {
            if let Some(id) = call_id {
                return ChunkAction::ToolApprovalRequest { tool_call_id: id.to_owned() };
            }
        }
        if kind == "tool-output-available" || kind == "tool-output-error" {
            if let Some(id) = call_id {
                if !self.parts.iter().any(|p| tool_call_id_of(p) == Some(id)) {
                    let update = if kind == "tool-output-available" {
                        CrossMessageUpdate::Output {
                            output: obj.get("output").cloned(),
                            preliminary: obj.get("preliminary").and_then(Value::as_bool),
                        }
                    } else {
                        CrossMessageUpdate::Error {
                            error_text: obj
                                .get("errorText")
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                        }
                    };
                    return ChunkAction::CrossMessageToolUpdate {
                        tool_call_id: id.to_owned(),
                        update,
                    };
                }
            }
        }
        if handled {
            return ChunkAction::Applied;
        }
        match kind {
            "start" => {
                let message_id = obj.get("messageId").and_then(Value::as_str).map(str::to_owned);
                if let Some(id) = &message_id {
                    if !self.continuation {
                        self.message_id = id.clone();
                    }
                }
                let metadata = self.merge_metadata(obj.get("messageMetadata"));
                ChunkAction::Start { message_id, metadata }
            }
            "finish" => {
                let metadata = self.merge_metadata(obj.get("messageMetadata"));
                let finish_reason =
                    obj.get("finishReason").and_then(Value::as_str).map(str::to_owned);
                ChunkAction::Finish { finish_reason, metadata }
            }
            "message-metadata" => {
                let metadata = self.merge_metadata(obj.get("messageMetadata")).unwrap_or_default();
                ChunkAction::MessageMetadata { metadata }
            }
            "finish-step" => ChunkAction::Applied,
            "error" => {
                let text = match obj.get("errorText") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) if !v.is_null() => v.to_string(),
                    _ => chunk.to_string(),
                };
                ChunkAction::Error(text)
            }
            _ => ChunkAction::Ignored,
        }
    }

    fn merge_metadata(&mut self, raw: Option<&Value>) -> Option<Map<String, Value>> {
        let new = raw.and_then(Value::as_object)?;
        let merged = self.metadata.get_or_insert_with(Map::new);
        for (k, v) in new {
            merged.insert(k.clone(), v.clone());
        }
        Some(new.clone())
    }

    /// A snapshot of the message as it would be persisted now.
    pub fn message(&self) -> UIMessage {
        let mut parts = self.parts.clone();
        Self::fill_text_inputs(&mut parts, self.text_inputs.iter().map(|(id, a)| (id.as_str(), a)));
        let mut m = UIMessage::new(self.message_id.clone(), Role::Assistant, parts);
        m.metadata = self.metadata.clone().map(Value::Object);
        m
    }

    /// The message, with the parts moved out rather than copied (they can hold a large tool
    /// input): for the end of a stream, after which the accumulator is left empty.
    pub fn take_message(&mut self) -> UIMessage {
        let mut parts = std::mem::take(&mut self.parts);
        // Each text is dropped once parsed: here the accumulator is its last holder.
        for (id, arguments) in std::mem::take(&mut self.text_inputs) {
            Self::fill_text_inputs(&mut parts, [(id.as_str(), &arguments)]);
        }
        let mut m = UIMessage::new(self.message_id.clone(), Role::Assistant, parts);
        m.metadata = self.metadata.take().map(Value::Object);
        m
    }

    /// Places the message into a transcript: replaces the message with the same id, or for
    /// a continuation the last assistant message, or appends it.
    pub fn merge_into(&self, messages: &[UIMessage]) -> Vec<UIMessage> {
        let mut out = messages.to_vec();
        let mut idx = out.iter().position(|m| m.id == self.message_id);
        if idx.is_none() && self.continuation {
            idx = out.iter().rposition(|m| m.role == Role::Assistant);
        }
        let mut msg = self.message();
        match idx {
            Some(i) => {
                msg.id = out[i].id.clone();
                out[i] = msg;
            }
            None => out.push(msg),
        }
        out
    }
}

/// Whether re-sending `chunk` to clients would visibly regress a tool part they already
/// show settled (a provider replaying an earlier round trip). Think forwards such chunks
/// anyway; this lets a caller suppress them.
pub fn is_replay_chunk(parts: &[Value], chunk: &Value) -> bool {
    let Some(kind) = chunk.get("type").and_then(Value::as_str) else { return false };
    let Some(id) = chunk.get("toolCallId").and_then(Value::as_str).filter(|s| !s.is_empty()) else {
        return false;
    };
    let Some(existing) = find_tool_part(parts, Some(id)).map(|i| &parts[i]) else { return false };
    let st = state_of(existing).unwrap_or("");
    match kind {
        "tool-output-denied" | "tool-approval-request" => {
            is_terminal_state(st) || st == state::APPROVAL_RESPONDED
        }
        "tool-input-start" => true,
        "tool-input-delta" | "tool-input-available" => st != state::INPUT_STREAMING,
        _ => false,
    }
}

fn find_last_of_type(parts: &[Value], t: &str) -> Option<usize> {
    parts.iter().rposition(|p| p.get("type").and_then(Value::as_str) == Some(t))
}

fn find_tool_part(parts: &[Value], id: Option<&str>) -> Option<usize> {
    let id = id.filter(|s| !s.is_empty())?;
    parts.iter().rposition(|p| tool_call_id_of(p) == Some(id))
}

/// A JSON value as JavaScript's string concatenation would render it; deltas are strings in
/// practice, this only keeps odd input from being dropped.
fn delta_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other @ (Value::Number(_) | Value::Bool(_))) => other.to_string(),
        Some(other) => format!("[{}]", json_kind(other)),
    }
}

fn copy_present(dst: &mut Map<String, Value>, src: &Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = src.get(from) {
        dst.insert(to.to_owned(), v.clone());
    }
}

fn copy_non_null(dst: &mut Map<String, Value>, src: &Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = src.get(from).filter(|v| !v.is_null()) {
        dst.insert(to.to_owned(), v.clone());
    }
}

fn set_or_remove(dst: &mut Map<String, Value>, key: &str, v: Option<&Value>) {
    match v {
        Some(v) => {
            dst.insert(key.to_owned(), v.clone());
        }
        None => {
            dst.shift_remove(key);
        }
    }
}

fn merge_provider_metadata(part: &mut Map<String, Value>, meta: Option<&Value>) {
    let Some(meta) = meta.filter(|v| !v.is_null()) else { return };
    let mut merged = match part.get("providerMetadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    if let Value::Object(m) = meta {
        for (k, v) in m {
            merged.insert(k.clone(), v.clone());
        }
    }
    part.insert("providerMetadata".into(), Value::Object(merged));
}

/// A new `tool-<name>` part. A chunk without a string `toolName` gets type `tool-` (the
/// reference would write `tool-undefined`).
fn new_tool_part(chunk: &Map<String, Value>, st: &str) -> Map<String, Value> {
    let name = chunk.get("toolName").and_then(Value::as_str).unwrap_or("");
    let mut p = Map::new();
    p.insert("type".into(), Value::String(format!("tool-{name}")));
    copy_present(&mut p, chunk, "toolCallId", "toolCallId");
    copy_present(&mut p, chunk, "toolName", "toolName");
    p.insert("state".into(), st.into());
    p
}

/// Applies a chunk to the parts. `false` for chunk types handled by the caller (message
/// level: start, finish, metadata, error) or unknown ones.
fn apply_chunk_to_parts(parts: &mut Vec<Value>, c: &Map<String, Value>) -> bool {
    let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
    let call_id = c.get("toolCallId").and_then(Value::as_str);
    match kind {
        "text-start" | "reasoning-start" => {
            let t = if kind == "text-start" { "text" } else { "reasoning" };
            parts.push(json!({"type": t, "text": "", "state": "streaming"}));
        }
        "text-delta" | "reasoning-delta" => {
            let t = if kind == "text-delta" { "text" } else { "reasoning" };
            let delta = delta_text(c.get("delta"));
            match find_last_of_type(parts, t).and_then(|i| parts[i].as_object_mut()) {
                Some(p) => {
                    let mut text = p.get("text").and_then(Value::as_str).unwrap_or("").to_owned();
                    text.push_str(&delta);
                    p.insert("text".into(), Value::String(text));
                    if t == "reasoning" {
                        merge_provider_metadata(p, c.get("providerMetadata"));
                    }
                }
                None => {
                    let mut p = Map::new();
                    p.insert("type".into(), t.into());
                    p.insert("text".into(), Value::String(delta));
                    p.insert("state".into(), "streaming".into());
                    if t == "reasoning" {
                        copy_non_null(&mut p, c, "providerMetadata", "providerMetadata");
                    }
                    parts.push(Value::Object(p));
                }
            }
        }
        "text-end" | "reasoning-end" => {
            let t = if kind == "text-end" { "text" } else { "reasoning" };
            if let Some(p) = find_last_of_type(parts, t).and_then(|i| parts[i].as_object_mut()) {
                if p.contains_key("state") {
                    p.insert("state".into(), "done".into());
                    if t == "reasoning" {
                        merge_provider_metadata(p, c.get("providerMetadata"));
                    }
                }
            }
        }
        "file" => {
            let mut p = Map::new();
            p.insert("type".into(), "file".into());
            copy_present(&mut p, c, "mediaType", "mediaType");
            copy_present(&mut p, c, "url", "url");
            parts.push(Value::Object(p));
        }
        "source-url" | "source-document" => {
            let mut p = Map::new();
            p.insert("type".into(), kind.into());
            let fields: &[&str] = if kind == "source-url" {
                &["sourceId", "url", "title", "providerMetadata"]
            } else {
                &["sourceId", "mediaType", "title", "filename", "providerMetadata"]
            };
            for f in fields {
                copy_present(&mut p, c, f, f);
            }
            parts.push(Value::Object(p));
        }
        "tool-input-start" => {
            if find_tool_part(parts, call_id).is_some() {
                return true;
            }
            let mut p = new_tool_part(c, state::INPUT_STREAMING);
            copy_non_null(&mut p, c, "providerExecuted", "providerExecuted");
            copy_non_null(&mut p, c, "providerMetadata", "callProviderMetadata");
            copy_non_null(&mut p, c, "title", "title");
            parts.push(Value::Object(p));
        }
        "tool-input-delta" => {
            if let Some(p) = find_tool_part(parts, call_id).and_then(|i| parts[i].as_object_mut()) {
                if p.get("state").and_then(Value::as_str) == Some(state::INPUT_STREAMING) {
                    set_or_remove(p, "input", c.get("input"));
                }
            }
        }
        "tool-input-available" => {
            let (input, _) = normalize_tool_input(c.get("input"));
            match find_tool_part(parts, call_id).and_then(|i| parts[i].as_object_mut()) {
                Some(p) => {
                    if p.get("state").and_then(Value::as_str) == Some(state::INPUT_STREAMING) {
                        p.insert("state".into(), state::INPUT_AVAILABLE.into());
                        p.insert("input".into(), input);
                        copy_non_null(p, c, "providerExecuted", "providerExecuted");
                        copy_non_null(p, c, "providerMetadata", "callProviderMetadata");
                        copy_non_null(p, c, "title", "title");
                    }
                }
                None => {
                    let mut p = new_tool_part(c, state::INPUT_AVAILABLE);
                    p.insert("input".into(), input);
                    copy_non_null(&mut p, c, "providerExecuted", "providerExecuted");
                    copy_non_null(&mut p, c, "providerMetadata", "callProviderMetadata");
                    copy_non_null(&mut p, c, "title", "title");
                    parts.push(Value::Object(p));
                }
            }
        }
        "tool-input-error" => {
            let (input, _) = normalize_tool_input(c.get("input"));
            match find_tool_part(parts, call_id).and_then(|i| parts[i].as_object_mut()) {
                Some(p) => {
                    if p.get("state").and_then(Value::as_str).is_some_and(is_terminal_state) {
                        return true;
                    }
                    p.insert("state".into(), state::OUTPUT_ERROR.into());
                    set_or_remove(p, "errorText", c.get("errorText"));
                    p.insert("input".into(), input);
                    copy_non_null(p, c, "providerExecuted", "providerExecuted");
                    copy_non_null(p, c, "providerMetadata", "callProviderMetadata");
                }
                None => {
                    let mut p = new_tool_part(c, state::OUTPUT_ERROR);
                    p.insert("input".into(), input);
                    copy_present(&mut p, c, "errorText", "errorText");
                    copy_non_null(&mut p, c, "providerExecuted", "providerExecuted");
                    copy_non_null(&mut p, c, "providerMetadata", "callProviderMetadata");
                    parts.push(Value::Object(p));
                }
            }
        }
        "tool-approval-request" => {
            if let Some(p) = find_tool_part(parts, call_id).and_then(|i| parts[i].as_object_mut()) {
                let st = p.get("state").and_then(Value::as_str).unwrap_or("");
                if st == state::APPROVAL_RESPONDED || is_terminal_state(st) {
                    return true;
                }
                let mut approval = Map::new();
                copy_present(&mut approval, c, "approvalId", "id");
                copy_present(&mut approval, c, "approvalDescriptor", "descriptor");
                p.insert("state".into(), state::APPROVAL_REQUESTED.into());
                p.insert("approval".into(), Value::Object(approval));
            }
        }
        "tool-output-denied" => {
            if let Some(p) = find_tool_part(parts, call_id).and_then(|i| parts[i].as_object_mut()) {
                let st = p.get("state").and_then(Value::as_str).unwrap_or("");
                if st == state::APPROVAL_RESPONDED || is_terminal_state(st) {
                    return true;
                }
                p.insert("state".into(), state::OUTPUT_DENIED.into());
            }
        }
        "tool-output-available" => {
            if let Some(p) = find_tool_part(parts, call_id).and_then(|i| parts[i].as_object_mut()) {
                p.insert("state".into(), state::OUTPUT_AVAILABLE.into());
                set_or_remove(p, "output", c.get("output"));
                copy_present(p, c, "preliminary", "preliminary");
            }
        }
        "tool-output-error" => {
            if let Some(p) = find_tool_part(parts, call_id).and_then(|i| parts[i].as_object_mut()) {
                p.insert("state".into(), state::OUTPUT_ERROR.into());
                set_or_remove(p, "errorText", c.get("errorText"));
            }
        }
        "step-start" | "start-step" => parts.push(json!({"type": "step-start"})),
        t if t.starts_with("data-") => {
            if truthy(c.get("transient")) {
                return true;
            }
            let id = c.get("id").filter(|v| !v.is_null());
            if let Some(id) = id.filter(|v| !v.is_object() && !v.is_array()) {
                let existing = parts.iter_mut().rev().find(|p| {
                    p.get("type").and_then(Value::as_str) == Some(t) && p.get("id") == Some(id)
                });
                if let Some(Value::Object(p)) = existing {
                    set_or_remove(p, "data", c.get("data"));
                    return true;
                }
            }
            let mut p = Map::new();
            p.insert("type".into(), t.into());
            if let Some(id) = id {
                p.insert("id".into(), id.clone());
            }
            copy_present(&mut p, c, "data", "data");
            parts.push(Value::Object(p));
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc() -> StreamAccumulator {
        StreamAccumulator::new("msg-1", false)
    }

    fn feed(a: &mut StreamAccumulator, chunks: &[Value]) {
        for c in chunks {
            a.apply(c);
        }
    }

    #[test]
    fn an_input_kept_as_text_reads_as_the_parsed_input() {
        let input = json!({"path": "/a", "content": "x\ny"});
        let arguments = ToolArguments::from_text(input.to_string()).unwrap();
        let start = json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "write"});
        let available = |input: Value| json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "write", "input": input});
        let output =
            json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"ok": true}});
        let mut parsed = acc();
        feed(&mut parsed, &[start.clone(), available(input.clone()), output.clone()]);
        let mut text = acc();
        text.apply(&start);
        text.apply_input_available(&available(Value::Null), arguments.clone());
        text.apply(&output);
        assert_eq!(text.parts()[0]["input"], Value::Null, "not held parsed");
        assert_eq!(text.message(), parsed.message());
        assert_eq!(text.take_message(), parsed.take_message());
        // An input settled before is not replaced by a later announcement.
        let mut settled = acc();
        feed(&mut settled, &[start, available(json!({"a": 1}))]);
        settled.apply_input_available(&available(Value::Null), arguments);
        assert_eq!(settled.message().parts[0]["input"], json!({"a": 1}));
    }

    #[test]
    fn text_lifecycle() {
        let mut a = acc();
        assert_eq!(a.apply(&json!({"type": "text-start"})), ChunkAction::Applied);
        assert_eq!(a.parts(), &[json!({"type": "text", "text": "", "state": "streaming"})]);
        feed(
            &mut a,
            &[
                json!({"type": "text-delta", "delta": "hello "}),
                json!({"type": "text-delta", "delta": "world"}),
            ],
        );
        assert_eq!(a.parts()[0]["text"], "hello world");
        a.apply(&json!({"type": "text-end"}));
        assert_eq!(a.parts()[0]["state"], "done");
    }

    #[test]
    fn text_delta_without_start_creates_part() {
        let mut a = acc();
        a.apply(&json!({"type": "text-delta", "delta": "resumed"}));
        assert_eq!(a.parts(), &[json!({"type": "text", "text": "resumed", "state": "streaming"})]);
        a.apply(&json!({"type": "text-end"}));
        assert_eq!(a.parts()[0]["state"], "done");
    }

    #[test]
    fn multiple_text_segments_are_separate_parts() {
        let mut a = acc();
        feed(
            &mut a,
            &[
                json!({"type": "text-start"}),
                json!({"type": "text-delta", "delta": "first"}),
                json!({"type": "text-end"}),
                json!({"type": "text-start"}),
                json!({"type": "text-delta", "delta": "second"}),
            ],
        );
        assert_eq!(a.parts().len(), 2);
        assert_eq!(a.parts()[0]["text"], "first");
        assert_eq!(a.parts()[1]["text"], "second");
    }

    #[test]
    fn reasoning_lifecycle_and_provider_metadata() {
        let mut a = acc();
        feed(
            &mut a,
            &[
                json!({"type": "reasoning-start"}),
                json!({"type": "reasoning-delta", "delta": "thinking", "providerMetadata": {"custom": {"fromDelta": true}}}),
                json!({"type": "reasoning-end", "providerMetadata": {"anthropic": {"signature": "sig-xyz"}}}),
            ],
        );
        assert_eq!(a.parts().len(), 1);
        assert_eq!(a.parts()[0]["text"], "thinking");
        assert_eq!(a.parts()[0]["state"], "done");
        assert_eq!(
            a.parts()[0]["providerMetadata"],
            json!({"custom": {"fromDelta": true}, "anthropic": {"signature": "sig-xyz"}})
        );
    }

    #[test]
    fn reasoning_without_metadata_has_no_field() {
        let mut a = acc();
        feed(
            &mut a,
            &[
                json!({"type": "reasoning-start"}),
                json!({"type": "reasoning-delta", "delta": "t"}),
                json!({"type": "reasoning-end"}),
            ],
        );
        assert!(a.parts()[0].get("providerMetadata").is_none());
        let mut b = acc();
        b.apply(&json!({"type": "reasoning-delta", "delta": "resumed", "providerMetadata": {"anthropic": {"redactedData": "enc"}}}));
        assert_eq!(b.parts()[0]["providerMetadata"], json!({"anthropic": {"redactedData": "enc"}}));
        assert_eq!(b.parts()[0]["text"], "resumed");
    }

    #[test]
    fn file_and_source_parts() {
        let mut a = acc();
        feed(
            &mut a,
            &[
                json!({"type": "file", "mediaType": "image/png", "url": "https://e/img.png"}),
                json!({"type": "source-url", "sourceId": "s1", "url": "https://e", "title": "Example"}),
                json!({"type": "source-document", "sourceId": "s2", "mediaType": "application/pdf", "title": "Doc", "filename": "doc.pdf"}),
            ],
        );
        assert_eq!(
            a.parts()[0],
            json!({"type": "file", "mediaType": "image/png", "url": "https://e/img.png"})
        );
        assert_eq!(
            a.parts()[1],
            json!({"type": "source-url", "sourceId": "s1", "url": "https://e", "title": "Example"})
        );
        assert_eq!(
            a.parts()[2],
            json!({"type": "source-document", "sourceId": "s2", "mediaType": "application/pdf", "title": "Doc", "filename": "doc.pdf"})
        );
    }

    #[test]
    fn step_start_aliases() {
        let mut a = acc();
        assert_eq!(a.apply(&json!({"type": "step-start"})), ChunkAction::Applied);
        a.apply(&json!({"type": "start-step"}));
        assert_eq!(a.parts(), &[json!({"type": "step-start"}), json!({"type": "step-start"})]);
    }

    #[test]
    fn data_parts_append_reconcile_and_skip_transient() {
        let mut a = acc();
        feed(
            &mut a,
            &[
                json!({"type": "data-status", "id": "d1", "data": {"v": 1}}),
                json!({"type": "data-status", "id": "d1", "data": {"v": 2}}),
                json!({"type": "data-status", "id": "d2", "data": {"v": 3}}),
                json!({"type": "data-other", "id": "d1", "data": {"v": 4}}),
                json!({"type": "data-log", "data": {"msg": "first"}}),
                json!({"type": "data-log", "data": {"msg": "second"}}),
                json!({"type": "data-log"}),
            ],
        );
        assert_eq!(a.parts().len(), 6);
        assert_eq!(a.parts()[0], json!({"type": "data-status", "id": "d1", "data": {"v": 2}}));
        assert_eq!(a.parts()[5], json!({"type": "data-log"}));
        assert_eq!(
            a.apply(&json!({"type": "data-ephemeral", "transient": true, "data": {}})),
            ChunkAction::Applied
        );
        assert_eq!(
            a.apply(
                &json!({"type": "data-status", "id": "d1", "transient": true, "data": {"v": 9}})
            ),
            ChunkAction::Applied
        );
        assert_eq!(a.parts().len(), 6);
        assert_eq!(a.parts()[0]["data"], json!({"v": 2}));
    }

    #[test]
    fn tool_streaming_lifecycle() {
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-start", "toolCallId": "tc1", "toolName": "search"}));
        assert_eq!(
            a.parts()[0],
            json!({"type": "tool-search", "toolCallId": "tc1", "toolName": "search", "state": "input-streaming"})
        );
        a.apply(&json!({"type": "tool-input-delta", "toolCallId": "tc1", "input": {"query": "partial"}}));
        assert_eq!(a.parts()[0]["input"], json!({"query": "partial"}));
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "search", "input": {"query": "full"}}));
        assert_eq!(a.parts()[0]["state"], "input-available");
        assert_eq!(a.parts()[0]["input"], json!({"query": "full"}));
        assert_eq!(a.apply(&json!({"type": "tool-output-available", "toolCallId": "tc1", "output": {"result": 42}})), ChunkAction::Applied);
        assert_eq!(a.parts()[0]["state"], "output-available");
        assert_eq!(a.parts()[0]["output"], json!({"result": 42}));
        assert!(a.parts()[0].get("preliminary").is_none());
        assert_eq!(a.parts().len(), 1);
    }

    #[test]
    fn tool_input_available_without_start_and_metadata_fields() {
        let mut a = acc();
        a.apply(&json!({
            "type": "tool-input-available", "toolCallId": "tc1", "toolName": "calc", "input": {"x": 1},
            "providerExecuted": true, "providerMetadata": {"p": {"k": 1}}, "title": "Calc"
        }));
        assert_eq!(
            a.parts()[0],
            json!({"type": "tool-calc", "toolCallId": "tc1", "toolName": "calc", "state": "input-available",
                   "input": {"x": 1}, "providerExecuted": true, "callProviderMetadata": {"p": {"k": 1}}, "title": "Calc"})
        );
        let mut b = acc();
        b.apply(&json!({"type": "tool-input-start", "toolCallId": "t", "toolName": "x", "providerExecuted": false, "title": "T"}));
        assert_eq!(b.parts()[0]["providerExecuted"], false);
        assert_eq!(b.parts()[0]["title"], "T");
        assert!(b.parts()[0].get("callProviderMetadata").is_none());
    }

    #[test]
    fn tool_input_normalization() {
        for bad in [
            json!(null),
            json!(""),
            json!([{"id": 1}]),
            json!([]),
            json!(42),
            json!(true),
            json!("hello"),
            json!("{\"a\":"),
        ] {
            let mut a = acc();
            a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": bad}));
            assert_eq!(a.parts()[0]["input"], json!({}), "new part, input {bad}");
            let mut b = acc();
            b.apply(&json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t"}));
            b.apply(&json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "t", "input": bad, "errorText": "boom"}));
            assert_eq!(b.parts()[0]["input"], json!({}));
            assert_eq!(b.parts()[0]["state"], "output-error");
        }
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t"}));
        assert_eq!(a.parts()[0]["input"], json!({}), "absent input");
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": "{\"prompt\":\"a cat\"}"}));
        assert_eq!(a.parts()[0]["input"], json!({"prompt": "a cat"}));
        assert_eq!(normalize_tool_input(Some(&json!({"a": 1}))), (json!({"a": 1}), false));
        assert_eq!(normalize_tool_input(Some(&json!("[1,2]"))), (json!({}), true));
        assert_eq!(normalize_tool_input(None), (json!({}), true));
    }

    fn resolved(a: &mut StreamAccumulator, id: &str, name: &str, input: Value, output: Value) {
        feed(
            a,
            &[
                json!({"type": "tool-input-start", "toolCallId": id, "toolName": name}),
                json!({"type": "tool-input-available", "toolCallId": id, "toolName": name, "input": input}),
                json!({"type": "tool-output-available", "toolCallId": id, "output": output}),
            ],
        );
    }

    #[test]
    fn replayed_tool_round_trip_leaves_part_untouched() {
        let mut a = acc();
        resolved(
            &mut a,
            "call_1",
            "changeBackground",
            json!({"color": "green"}),
            json!({"success": true}),
        );
        let before = a.parts().to_vec();
        feed(
            &mut a,
            &[
                json!({"type": "tool-input-start", "toolCallId": "call_1", "toolName": "changeBackground"}),
                json!({"type": "tool-input-delta", "toolCallId": "call_1", "input": {}}),
                json!({"type": "tool-input-available", "toolCallId": "call_1", "toolName": "changeBackground", "input": {"color": "green"}}),
                json!({"type": "tool-output-available", "toolCallId": "call_1", "output": {"success": true}}),
            ],
        );
        assert_eq!(a.parts(), &before[..]);
    }

    #[test]
    fn input_start_does_not_regress_in_flight_part() {
        let mut a = acc();
        feed(
            &mut a,
            &[
                json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "w"}),
                json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "w", "input": {"city": "London"}}),
                json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "w"}),
            ],
        );
        assert_eq!(a.parts().len(), 1);
        assert_eq!(a.parts()[0]["state"], "input-available");
        assert_eq!(a.parts()[0]["input"], json!({"city": "London"}));
    }

    #[test]
    fn input_error_guards() {
        let mut a = acc();
        resolved(&mut a, "c", "w", json!({"city": "London"}), json!("Sunny"));
        a.apply(&json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "w", "input": "{\"city\": \"Lond", "errorText": "Unexpected end"}));
        assert_eq!(a.parts()[0]["state"], "output-available");
        assert!(a.parts()[0].get("errorText").is_none());
        assert_eq!(a.parts()[0]["input"], json!({"city": "London"}));

        let mut b = acc();
        b.apply(&json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "w"}));
        b.apply(&json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "w", "errorText": "Unexpected end"}));
        assert_eq!(b.parts()[0]["state"], "output-error");
        assert_eq!(b.parts()[0]["errorText"], "Unexpected end");
    }

    #[test]
    fn unknown_tool_input_error_persists_as_tool_part() {
        // §7: a call to an unknown tool arrives as tool-input-error with dynamic:true.
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "nope", "input": {"a": 1}, "errorText": "no such tool", "dynamic": true}));
        assert_eq!(
            a.parts()[0],
            json!({"type": "tool-nope", "toolCallId": "c", "toolName": "nope", "state": "output-error", "input": {"a": 1}, "errorText": "no such tool"})
        );
    }

    #[test]
    fn approval_request_sets_state_and_reports_action() {
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "danger", "input": {}}));
        let r = a.apply(&json!({
            "type": "tool-approval-request", "toolCallId": "tc1", "approvalId": "apr-1",
            "approvalDescriptor": {"action": "danger", "summary": "Approve danger"}
        }));
        assert_eq!(r, ChunkAction::ToolApprovalRequest { tool_call_id: "tc1".into() });
        assert_eq!(a.parts()[0]["state"], "approval-requested");
        assert_eq!(
            a.parts()[0]["approval"],
            json!({"id": "apr-1", "descriptor": {"action": "danger", "summary": "Approve danger"}})
        );
        // A replayed tool-input-available must not regress it.
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "danger", "input": {}}));
        assert_eq!(a.parts()[0]["state"], "approval-requested");
        // Missing part still reports the action.
        let mut b = acc();
        let r = b.apply(&json!({"type": "tool-approval-request", "toolCallId": "tc-missing", "approvalId": "x"}));
        assert_eq!(r, ChunkAction::ToolApprovalRequest { tool_call_id: "tc-missing".into() });
        assert!(b.parts().is_empty());
    }

    #[test]
    fn approval_request_and_denial_do_not_regress_settled_parts() {
        for st in ["approval-responded", "output-available", "output-error", "output-denied"] {
            let existing = json!({"type": "tool-x", "toolCallId": "c", "state": st, "approval": {"id": "a", "approved": true}});
            let mut a = acc().with_existing(vec![existing.clone()], None);
            a.apply(
                &json!({"type": "tool-approval-request", "toolCallId": "c", "approvalId": "b"}),
            );
            a.apply(&json!({"type": "tool-output-denied", "toolCallId": "c"}));
            assert_eq!(a.parts()[0], existing, "state {st}");
        }
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "rm", "input": {}}));
        a.apply(&json!({"type": "tool-output-denied", "toolCallId": "c"}));
        assert_eq!(a.parts()[0]["state"], "output-denied");
    }

    #[test]
    fn output_error_and_preliminary() {
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "calc", "input": {}}));
        a.apply(&json!({"type": "tool-output-available", "toolCallId": "c", "output": {"partial": true}, "preliminary": true}));
        assert_eq!(a.parts()[0]["preliminary"], true);
        a.apply(&json!({"type": "tool-output-available", "toolCallId": "c", "output": {"partial": false}, "preliminary": false}));
        assert_eq!(a.parts()[0]["preliminary"], false);
        a.apply(&json!({"type": "tool-output-error", "toolCallId": "c", "errorText": "timeout"}));
        assert_eq!(a.parts()[0]["state"], "output-error");
        assert_eq!(a.parts()[0]["errorText"], "timeout");
    }

    #[test]
    fn cross_message_tool_updates() {
        let mut a = acc();
        let r = a.apply(&json!({"type": "tool-output-available", "toolCallId": "tc-other", "output": {"data": "prev"}}));
        assert_eq!(
            r,
            ChunkAction::CrossMessageToolUpdate {
                tool_call_id: "tc-other".into(),
                update: CrossMessageUpdate::Output {
                    output: Some(json!({"data": "prev"})),
                    preliminary: None
                }
            }
        );
        assert!(a.parts().is_empty());
        let r = a.apply(
            &json!({"type": "tool-output-error", "toolCallId": "tc-other", "errorText": "failed"}),
        );
        assert_eq!(
            r,
            ChunkAction::CrossMessageToolUpdate {
                tool_call_id: "tc-other".into(),
                update: CrossMessageUpdate::Error { error_text: Some("failed".into()) }
            }
        );
        let r = a.apply(&json!({"type": "tool-output-available", "toolCallId": "tc-other", "output": "partial", "preliminary": true}));
        let u = r.cross_message_update().unwrap();
        let applied = u.apply(
            &json!({"type": "tool-x", "toolCallId": "tc-other", "state": "approval-responded"}),
        );
        assert_eq!(applied["preliminary"], true);
        assert_eq!(applied["output"], "partial");

        a.apply(&json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "calc", "input": {}}));
        assert_eq!(
            a.apply(&json!({"type": "tool-output-available", "toolCallId": "tc1", "output": 42})),
            ChunkAction::Applied
        );
    }

    #[test]
    fn start_adopts_id_and_merges_metadata() {
        let mut a = acc();
        let r = a.apply(&json!({"type": "start", "messageId": "server-id-1", "messageMetadata": {"model": "gpt-4"}}));
        assert_eq!(
            r,
            ChunkAction::Start {
                message_id: Some("server-id-1".into()),
                metadata: Some(json!({"model": "gpt-4"}).as_object().unwrap().clone())
            }
        );
        assert_eq!(a.message_id(), "server-id-1");
        assert_eq!(a.metadata(), json!({"model": "gpt-4"}).as_object());

        let mut b = StreamAccumulator::new("m1", false)
            .with_existing(vec![], json!({"existing": true}).as_object().cloned());
        b.apply(&json!({"type": "start", "messageMetadata": {"model": "gpt-4"}}));
        assert_eq!(b.metadata(), json!({"existing": true, "model": "gpt-4"}).as_object());
        assert_eq!(b.message_id(), "m1");

        let mut c = acc();
        c.apply(&json!({"type": "start", "messageId": "x"}));
        assert_eq!(c.message_id(), "x");
        assert!(c.metadata().is_none());
    }

    #[test]
    fn continuation_keeps_id_and_existing_parts() {
        let mut a = StreamAccumulator::new("client-id", true).with_existing(
            vec![json!({"type": "text", "text": "previous"})],
            json!({"model": "gpt-4"}).as_object().cloned(),
        );
        assert!(a.is_continuation());
        assert_eq!(a.parts().len(), 1);
        a.apply(&json!({"type": "start", "messageId": "server-id"}));
        assert_eq!(a.message_id(), "client-id");
        assert_eq!(a.metadata(), json!({"model": "gpt-4"}).as_object());
    }

    #[test]
    fn finish_metadata_and_errors() {
        let mut a = acc();
        let r = a.apply(
            &json!({"type": "finish", "finishReason": "stop", "messageMetadata": {"tokens": 100}}),
        );
        assert_eq!(
            r,
            ChunkAction::Finish {
                finish_reason: Some("stop".into()),
                metadata: json!({"tokens": 100}).as_object().cloned()
            }
        );
        assert_eq!(
            a.apply(&json!({"type": "finish"})),
            ChunkAction::Finish { finish_reason: None, metadata: None }
        );
        let r = a.apply(&json!({"type": "message-metadata", "messageMetadata": {"b": 2}}));
        assert_eq!(
            r,
            ChunkAction::MessageMetadata {
                metadata: json!({"b": 2}).as_object().cloned().unwrap()
            }
        );
        assert_eq!(a.metadata(), json!({"tokens": 100, "b": 2}).as_object());
        assert_eq!(
            a.apply(&json!({"type": "message-metadata", "messageMetadata": [1]})),
            ChunkAction::MessageMetadata { metadata: Map::new() }
        );
        assert_eq!(a.apply(&json!({"type": "finish-step"})), ChunkAction::Applied);
        assert!(a.parts().is_empty());
        assert_eq!(
            a.apply(&json!({"type": "error", "errorText": "LLM failed"})),
            ChunkAction::Error("LLM failed".into())
        );
        match a.apply(&json!({"type": "error"})) {
            ChunkAction::Error(t) => assert!(t.contains("error")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_and_malformed_chunks_are_ignored() {
        let mut a = acc();
        assert_eq!(a.apply(&json!({"type": "unknown-type"})), ChunkAction::Ignored);
        assert_eq!(a.apply(&json!({"no": "type"})), ChunkAction::Ignored);
        assert_eq!(a.apply(&json!("text-start")), ChunkAction::Ignored);
        assert_eq!(a.apply(&json!({"type": 5})), ChunkAction::Ignored);
        assert_eq!(
            a.apply(&json!({"type": "text-delta", "delta": {"x": 1}})),
            ChunkAction::Applied
        );
        assert_eq!(a.apply(&json!({"type": "tool-input-delta"})), ChunkAction::Applied);
        assert_eq!(a.parts().len(), 1);
    }

    #[test]
    fn message_snapshot() {
        let mut a = StreamAccumulator::new("m1", false);
        feed(
            &mut a,
            &[
                json!({"type": "text-start"}),
                json!({"type": "text-delta", "delta": "hello"}),
                json!({"type": "start", "messageMetadata": {"model": "gpt-4"}}),
            ],
        );
        let m = a.message();
        assert_eq!(m.id, "m1");
        assert_eq!(m.role, Role::Assistant);
        assert_eq!(m.parts.len(), 1);
        assert_eq!(m.metadata, Some(json!({"model": "gpt-4"})));
        assert!(acc().message().to_value().get("metadata").is_none());
    }

    fn msg(id: &str, role: Role, text: &str) -> UIMessage {
        UIMessage::new(id, role, vec![json!({"type": "text", "text": text})])
    }

    #[test]
    fn merge_into_transcripts() {
        let user = msg("user-1", Role::User, "hello");
        let asst = msg("asst-1", Role::Assistant, "hi");
        let mut a = StreamAccumulator::new("new-msg", false);
        a.apply(&json!({"type": "text-start"}));
        let r = a.merge_into(std::slice::from_ref(&user));
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].id, "new-msg");
        assert_eq!(a.merge_into(&[]).len(), 1);

        let mut b = StreamAccumulator::new("asst-1", false);
        feed(
            &mut b,
            &[json!({"type": "text-start"}), json!({"type": "text-delta", "delta": "updated"})],
        );
        let r = b.merge_into(&[user.clone(), asst.clone()]);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].parts[0]["text"], "updated");
        assert_eq!(r[0], user);

        let mut c = StreamAccumulator::new("unknown-id", true);
        feed(
            &mut c,
            &[json!({"type": "text-start"}), json!({"type": "text-delta", "delta": "continued"})],
        );
        let r = c.merge_into(&[user.clone(), asst.clone()]);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].id, "asst-1");
        assert_eq!(r[1].parts[0]["text"], "continued");
        let r = c.merge_into(std::slice::from_ref(&user));
        assert_eq!(r[1].id, "unknown-id");

        let first = msg("asst-first", Role::Assistant, "old");
        let target = msg("target-id", Role::Assistant, "target");
        let mut d = StreamAccumulator::new("target-id", true);
        feed(
            &mut d,
            &[json!({"type": "text-start"}), json!({"type": "text-delta", "delta": "updated"})],
        );
        let r = d.merge_into(&[target, first.clone()]);
        assert_eq!(r[0].id, "target-id");
        assert_eq!(r[0].parts[0]["text"], "updated");
        assert_eq!(r[1], first);
    }

    #[test]
    fn mid_stream_tool_result_lands_in_accumulator() {
        let mut a = acc();
        a.apply(&json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "getUserTimezone", "input": {}}));
        let u = ToolPartUpdate::tool_result(
            "c",
            super::super::tool_state::ToolResultOutcome::Output(Some(json!("Europe/Paris"))),
        );
        assert!(a.apply_tool_update(&u));
        assert!(!a.apply_tool_update(&u));
        assert_eq!(a.message().parts[0]["output"], "Europe/Paris");
    }

    #[test]
    fn replay_chunk_detection() {
        let parts = vec![
            json!({"type": "tool-a", "toolCallId": "s", "state": "input-streaming"}),
            json!({"type": "tool-a", "toolCallId": "r", "state": "output-available"}),
            json!({"type": "tool-a", "toolCallId": "ap", "state": "approval-responded"}),
            json!({"type": "tool-a", "toolCallId": "ia", "state": "input-available"}),
        ];
        assert!(!is_replay_chunk(&parts, &json!({"type": "text-start"})));
        assert!(!is_replay_chunk(
            &parts,
            &json!({"type": "tool-input-start", "toolCallId": "new"})
        ));
        assert!(is_replay_chunk(&parts, &json!({"type": "tool-input-start", "toolCallId": "s"})));
        assert!(!is_replay_chunk(&parts, &json!({"type": "tool-input-delta", "toolCallId": "s"})));
        assert!(is_replay_chunk(&parts, &json!({"type": "tool-input-delta", "toolCallId": "r"})));
        assert!(is_replay_chunk(
            &parts,
            &json!({"type": "tool-input-available", "toolCallId": "ia"})
        ));
        assert!(!is_replay_chunk(&parts, &json!({"type": "tool-input-available"})));
        assert!(is_replay_chunk(
            &parts,
            &json!({"type": "tool-output-denied", "toolCallId": "ap"})
        ));
        assert!(is_replay_chunk(
            &parts,
            &json!({"type": "tool-approval-request", "toolCallId": "r"})
        ));
        assert!(!is_replay_chunk(
            &parts,
            &json!({"type": "tool-approval-request", "toolCallId": "ia"})
        ));
        assert!(!is_replay_chunk(
            &parts,
            &json!({"type": "tool-output-denied", "toolCallId": "zz"})
        ));
    }
}
