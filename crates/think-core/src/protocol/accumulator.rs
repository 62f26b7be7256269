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
/// level: start, finish, metadata, error) or unknown ones. Each group of chunk types is a
/// function of its own, never inlined, so a chunk runs (and V8 compiles) only its group's
/// code: a sandbox isolate's creation makes the agent's wasm compile again before it runs
/// (`crate::codemode::sandbox`), and a tool's output is applied right after one.
fn apply_chunk_to_parts(parts: &mut Vec<Value>, c: &Map<String, Value>) -> bool {
    let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
    let call_id = c.get("toolCallId").and_then(Value::as_str);
    match kind {
        "text-start" | "reasoning-start" | "text-delta" | "reasoning-delta" | "text-end"
        | "reasoning-end" => apply_text(parts, kind, c),
        "file" | "source-url" | "source-document" => apply_source(parts, kind, c),
        "tool-input-start" | "tool-input-delta" | "tool-input-available" | "tool-input-error" => {
            apply_tool_input(parts, kind, call_id, c)
        }
        "tool-approval-request"
        | "tool-output-denied"
        | "tool-output-available"
        | "tool-output-error" => apply_tool_outcome(parts, kind, call_id, c),
        "step-start" | "start-step" => {
            parts.push(json!({"type": "step-start"}));
            true
        }
        t if t.starts_with("data-") => apply_data(parts, t, c),
        _ => false,
    }
}

/// Text and reasoning: start, delta, end.
#[inline(never)]
fn apply_text(parts: &mut Vec<Value>, kind: &str, c: &Map<String, Value>) -> bool {
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
        _ => {}
    }
    true
}

/// Files and sources.
#[inline(never)]
fn apply_source(parts: &mut Vec<Value>, kind: &str, c: &Map<String, Value>) -> bool {
    match kind {
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
        _ => {}
    }
    true
}

/// A tool call's input: start, delta, available, error.
#[inline(never)]
fn apply_tool_input(
    parts: &mut Vec<Value>,
    kind: &str,
    call_id: Option<&str>,
    c: &Map<String, Value>,
) -> bool {
    match kind {
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
        _ => {}
    }
    true
}

/// How a tool call ended or waits: approval request, denial, output, error.
#[inline(never)]
fn apply_tool_outcome(
    parts: &mut [Value],
    kind: &str,
    call_id: Option<&str>,
    c: &Map<String, Value>,
) -> bool {
    match kind {
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
        _ => {}
    }
    true
}

/// A `data-*` part: transient ones are not kept, one with an id replaces its earlier data.
#[inline(never)]
fn apply_data(parts: &mut Vec<Value>, t: &str, c: &Map<String, Value>) -> bool {
    if truthy(c.get("transient")) {
        return true;
    }
    let id = c.get("id").filter(|v| !v.is_null());
    if let Some(id) = id.filter(|v| !v.is_object() && !v.is_array()) {
        let existing = parts
            .iter_mut()
            .rev()
            .find(|p| p.get("type").and_then(Value::as_str) == Some(t) && p.get("id") == Some(id));
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
    true
}

#[cfg(test)]
mod tests;
