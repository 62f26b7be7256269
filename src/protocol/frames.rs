//! WebSocket frames between the npm `agents` clients and the agent: a tolerant parser for
//! what clients send, and builders for every frame the server sends.
//!
//! Builders return `serde_json::Value` objects whose key order matches what the TypeScript
//! server emits (serde_json keeps insertion order here), so captured transcripts compare
//! byte for byte. Clients only care about keys, not order.

use super::message::{json_kind, truthy, UIMessage};
use super::tool_state::ToolResultOutcome;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::fmt;

/// Frame `type` strings.
pub mod types {
    pub const CHAT_MESSAGES: &str = "cf_agent_chat_messages";
    pub const USE_CHAT_REQUEST: &str = "cf_agent_use_chat_request";
    pub const USE_CHAT_RESPONSE: &str = "cf_agent_use_chat_response";
    pub const CHAT_CLEAR: &str = "cf_agent_chat_clear";
    pub const CHAT_REQUEST_CANCEL: &str = "cf_agent_chat_request_cancel";
    pub const STREAM_RESUMING: &str = "cf_agent_stream_resuming";
    pub const STREAM_RESUME_ACK: &str = "cf_agent_stream_resume_ack";
    pub const STREAM_RESUME_REQUEST: &str = "cf_agent_stream_resume_request";
    pub const STREAM_RESUME_NONE: &str = "cf_agent_stream_resume_none";
    pub const STREAM_PENDING: &str = "cf_agent_stream_pending";
    pub const TOOL_RESULT: &str = "cf_agent_tool_result";
    pub const TOOL_APPROVAL: &str = "cf_agent_tool_approval";
    pub const MESSAGE_UPDATED: &str = "cf_agent_message_updated";
    pub const CHAT_RECOVERING: &str = "cf_agent_chat_recovering";
    pub const IDENTITY: &str = "cf_agent_identity";
    pub const STATE: &str = "cf_agent_state";
    pub const STATE_ERROR: &str = "cf_agent_state_error";
    pub const MCP_SERVERS: &str = "cf_agent_mcp_servers";
    pub const SESSION: &str = "cf_agent_session";
    pub const SESSION_ERROR: &str = "cf_agent_session_error";
    pub const RPC: &str = "rpc";
    pub const AGENT_TOOL_EVENT: &str = "agent-tool-event";
    /// think-rs extension: the answer to a frame that could not be understood. Clients
    /// ignore unknown types.
    pub const PROTOCOL_ERROR: &str = "cf_agent_protocol_error";
}

/// Body text of the frame that ends a turn which produced nothing.
pub const NO_RESPONSE_BODY: &str = "No response was generated.";

// ── Incoming ────────────────────────────────────────────────────────────────

/// A tool the client can run, as declared in `clientTools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientToolSchema {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// Why the client sent a chat request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    SubmitMessage,
    /// Branch a new answer from the last message sent instead of appending.
    RegenerateMessage,
}

/// A `cf_agent_use_chat_request` with its JSON-string body parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub id: String,
    /// The client's full transcript.
    pub messages: Vec<UIMessage>,
    pub trigger: Trigger,
    /// `None`: field absent, keep the persisted schemas. `Some(empty)`: present but empty
    /// (or null), clear them. Otherwise replace them.
    pub client_tools: Option<Vec<ClientToolSchema>>,
    /// Every other body field (the app's custom body), exposed to the turn as its body.
    pub body: Map<String, Value>,
}

/// A client's result for a client tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultFrame {
    pub tool_call_id: String,
    pub tool_name: String,
    pub output: Option<Value>,
    pub state: Option<String>,
    pub error_text: Option<String>,
    pub auto_continue: bool,
    pub client_tools: Option<Vec<ClientToolSchema>>,
}

impl ToolResultFrame {
    /// The result to apply to the tool part.
    pub fn outcome(&self) -> ToolResultOutcome {
        ToolResultOutcome::from_frame(
            self.state.as_deref(),
            self.output.clone(),
            self.error_text.clone(),
        )
    }
}

/// A user's answer to an approval request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolApprovalFrame {
    pub tool_call_id: String,
    pub approved: bool,
    pub auto_continue: bool,
}

/// A call of a `@callable` method.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    pub id: String,
    pub method: String,
    pub args: Vec<Value>,
}

/// Everything a client can send.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientFrame {
    ChatRequest(ChatRequest),
    Cancel {
        id: String,
    },
    ToolResult(ToolResultFrame),
    ToolApproval(ToolApprovalFrame),
    Clear,
    StreamResumeRequest {
        probe_id: Option<String>,
    },
    StreamResumeAck {
        id: String,
    },
    /// A client pushing its transcript; the server is authoritative and ignores it.
    ChatMessages {
        messages: Vec<Value>,
    },
    State {
        state: Value,
    },
    Rpc(RpcRequest),
    /// A JSON object of no known type: the app's own message, for its `onMessage`.
    Other(Map<String, Value>),
}

/// Which reply a malformed frame deserves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorReply {
    /// A chat request with an id: end that request with an error response so the client's
    /// `useChat` surfaces it instead of waiting.
    ChatResponse { id: String },
    /// An rpc call with an id: fail that call so the client does not wait for its timeout.
    Rpc { id: String },
    /// No id to answer: send a `cf_agent_protocol_error` frame.
    ProtocolError,
}

/// A frame that could not be understood, and how to answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    pub message: String,
    pub reply: ErrorReply,
}

impl FrameError {
    fn protocol(message: impl Into<String>) -> Self {
        FrameError { message: message.into(), reply: ErrorReply::ProtocolError }
    }

    fn chat(id: &str, message: impl Into<String>) -> Self {
        FrameError {
            message: message.into(),
            reply: ErrorReply::ChatResponse { id: id.to_owned() },
        }
    }

    fn rpc(id: &str, message: impl Into<String>) -> Self {
        FrameError { message: message.into(), reply: ErrorReply::Rpc { id: id.to_owned() } }
    }

    /// The frame to send back to the sender.
    pub fn reply_frame(&self) -> Value {
        match &self.reply {
            ErrorReply::ChatResponse { id } => chat_request_error_frame(id, &self.message),
            ErrorReply::Rpc { id } => rpc_error_frame(id, &self.message),
            ErrorReply::ProtocolError => protocol_error_frame(&self.message),
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FrameError {}

/// Parses one text frame. Never panics; anything malformed becomes a [`FrameError`] that
/// says how to answer.
pub fn parse_client_frame(raw: &str) -> Result<ClientFrame, FrameError> {
    let value: Value = serde_json::from_str(raw)
        .map_err(|e| FrameError::protocol(format!("frame is not valid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(FrameError::protocol(format!(
            "frame is not a JSON object (got {})",
            json_kind(&value)
        )));
    };
    let Some(kind) = obj.get("type").and_then(Value::as_str) else {
        return Ok(ClientFrame::Other(obj));
    };
    match kind {
        types::USE_CHAT_REQUEST => parse_chat_request(&obj).map(ClientFrame::ChatRequest),
        types::CHAT_REQUEST_CANCEL => {
            Ok(ClientFrame::Cancel { id: required_str(&obj, "id", kind)? })
        }
        types::TOOL_RESULT => parse_tool_result(&obj).map(ClientFrame::ToolResult),
        types::TOOL_APPROVAL => {
            let tool_call_id = required_str(&obj, "toolCallId", kind)?;
            let approved = match obj.get("approved") {
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(FrameError::protocol(format!(
                        "{kind}: approved must be a boolean (got {})",
                        json_kind(other)
                    )))
                }
                None => return Err(FrameError::protocol(format!("{kind}: missing approved"))),
            };
            Ok(ClientFrame::ToolApproval(ToolApprovalFrame {
                tool_call_id,
                approved,
                auto_continue: truthy(obj.get("autoContinue")),
            }))
        }
        types::CHAT_CLEAR => Ok(ClientFrame::Clear),
        types::STREAM_RESUME_REQUEST => Ok(ClientFrame::StreamResumeRequest {
            probe_id: obj.get("probeId").and_then(Value::as_str).map(str::to_owned),
        }),
        types::STREAM_RESUME_ACK => {
            Ok(ClientFrame::StreamResumeAck { id: required_str(&obj, "id", kind)? })
        }
        types::CHAT_MESSAGES => Ok(ClientFrame::ChatMessages {
            messages: obj.get("messages").and_then(Value::as_array).cloned().unwrap_or_default(),
        }),
        types::STATE => match obj.get("state") {
            Some(state) => Ok(ClientFrame::State { state: state.clone() }),
            None => Err(FrameError::protocol(format!("{kind}: missing state"))),
        },
        types::RPC => parse_rpc(&obj).map(ClientFrame::Rpc),
        _ => Ok(ClientFrame::Other(obj)),
    }
}

fn required_str(obj: &Map<String, Value>, key: &str, kind: &str) -> Result<String, FrameError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(FrameError::protocol(format!(
            "{kind}: {key} must be a string (got {})",
            json_kind(other)
        ))),
        None => Err(FrameError::protocol(format!("{kind}: missing {key}"))),
    }
}

fn parse_rpc(obj: &Map<String, Value>) -> Result<RpcRequest, FrameError> {
    let id = required_str(obj, "id", types::RPC)?;
    let method = match obj.get("method") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        Some(Value::String(_)) => return Err(FrameError::rpc(&id, "rpc: method is empty")),
        Some(other) => {
            return Err(FrameError::rpc(
                &id,
                format!("rpc: method must be a string (got {})", json_kind(other)),
            ))
        }
        None => return Err(FrameError::rpc(&id, "rpc: missing method")),
    };
    let args = match obj.get("args") {
        Some(Value::Array(a)) => a.clone(),
        Some(other) => {
            return Err(FrameError::rpc(
                &id,
                format!("rpc: args must be an array (got {})", json_kind(other)),
            ))
        }
        None => return Err(FrameError::rpc(&id, "rpc: missing args (must be an array)")),
    };
    Ok(RpcRequest { id, method, args })
}

/// Reads `clientTools`: absent → `None`, null → `Some([])` (clear), array of `{name, ...}`.
fn parse_client_tools(v: Option<&Value>) -> Result<Option<Vec<ClientToolSchema>>, String> {
    let items = match v {
        None => return Ok(None),
        Some(Value::Null) => return Ok(Some(Vec::new())),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(format!("clientTools must be an array (got {})", json_kind(other)))
        }
    };
    let mut tools = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(o) = item else {
            return Err(format!("clientTools[{i}] is not an object (got {})", json_kind(item)));
        };
        let name = match o.get("name") {
            Some(Value::String(n)) if !n.is_empty() => n.clone(),
            _ => return Err(format!("clientTools[{i}] has no name")),
        };
        let description = match o.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(other) => {
                return Err(format!(
                    "clientTools[{i}].description must be a string (got {})",
                    json_kind(other)
                ))
            }
        };
        let parameters = o.get("parameters").filter(|p| !p.is_null()).cloned();
        tools.push(ClientToolSchema { name, description, parameters });
    }
    Ok(Some(tools))
}

fn parse_tool_result(obj: &Map<String, Value>) -> Result<ToolResultFrame, FrameError> {
    let kind = types::TOOL_RESULT;
    let tool_call_id = required_str(obj, "toolCallId", kind)?;
    let opt_str = |key: &str| -> Result<Option<String>, FrameError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(FrameError::protocol(format!(
                "{kind}: {key} must be a string (got {})",
                json_kind(other)
            ))),
        }
    };
    Ok(ToolResultFrame {
        tool_name: opt_str("toolName")?.unwrap_or_default(),
        output: obj.get("output").cloned(),
        state: opt_str("state")?,
        error_text: opt_str("errorText")?,
        auto_continue: truthy(obj.get("autoContinue")),
        client_tools: parse_client_tools(obj.get("clientTools"))
            .map_err(|e| FrameError::protocol(format!("{kind}: {e}")))?,
        tool_call_id,
    })
}

fn parse_chat_request(obj: &Map<String, Value>) -> Result<ChatRequest, FrameError> {
    let kind = types::USE_CHAT_REQUEST;
    let id = match obj.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(FrameError::protocol(format!("{kind}: id is empty"))),
        Some(other) => {
            return Err(FrameError::protocol(format!(
                "{kind}: id must be a string (got {})",
                json_kind(other)
            )))
        }
        None => return Err(FrameError::protocol(format!("{kind}: missing id"))),
    };
    let init = match obj.get("init") {
        Some(Value::Object(init)) => init,
        Some(other) => {
            return Err(FrameError::chat(
                &id,
                format!("init must be an object (got {})", json_kind(other)),
            ))
        }
        None => return Err(FrameError::chat(&id, "missing init")),
    };
    match init.get("method") {
        Some(Value::String(m)) if m == "POST" => {}
        Some(Value::String(m)) => {
            return Err(FrameError::chat(
                &id,
                format!("unsupported method {m}; only POST is accepted"),
            ))
        }
        _ => return Err(FrameError::chat(&id, "missing method; only POST is accepted")),
    }
    let body = match init.get("body") {
        Some(Value::String(b)) if !b.trim().is_empty() => b,
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(FrameError::chat(&id, "missing request body"))
        }
        Some(other) => {
            return Err(FrameError::chat(
                &id,
                format!("body must be a JSON string (got {})", json_kind(other)),
            ))
        }
    };
    parse_chat_body(&id, body)
}

/// Parses the JSON-string body of a chat request.
pub fn parse_chat_body(id: &str, body: &str) -> Result<ChatRequest, FrameError> {
    let parsed: Value = serde_json::from_str(body)
        .map_err(|e| FrameError::chat(id, format!("request body is not valid JSON: {e}")))?;
    let Value::Object(mut fields) = parsed else {
        return Err(FrameError::chat(
            id,
            format!("request body is not a JSON object (got {})", json_kind(&parsed)),
        ));
    };
    let raw_messages = match fields.shift_remove("messages") {
        Some(Value::Array(m)) => m,
        Some(other) => {
            return Err(FrameError::chat(
                id,
                format!("messages must be an array (got {})", json_kind(&other)),
            ))
        }
        None => return Err(FrameError::chat(id, "request body has no messages")),
    };
    let mut messages = Vec::with_capacity(raw_messages.len());
    for (i, m) in raw_messages.into_iter().enumerate() {
        messages.push(
            UIMessage::from_value(m)
                .map_err(|e| FrameError::chat(id, format!("messages[{i}]: {e}")))?,
        );
    }
    let trigger = match fields.shift_remove("trigger") {
        Some(Value::String(t)) if t == "regenerate-message" => Trigger::RegenerateMessage,
        _ => Trigger::SubmitMessage,
    };
    let client_tools =
        parse_client_tools(fields.get("clientTools")).map_err(|e| FrameError::chat(id, e))?;
    fields.shift_remove("clientTools");
    Ok(ChatRequest { id: id.to_owned(), messages, trigger, client_tools, body: fields })
}

// ── Outgoing: base agent frames ─────────────────────────────────────────────

/// `{"name","agent","type":"cf_agent_identity"}`, sent on connect.
pub fn identity_frame(name: &str, agent: &str) -> Value {
    json!({"name": name, "agent": agent, "type": types::IDENTITY})
}

/// `{"state","type":"cf_agent_state"}`: the agent's state, on connect and after changes.
pub fn state_frame(state: &Value) -> Value {
    json!({"state": state, "type": types::STATE})
}

/// `{"type":"cf_agent_state_error","error"}`: a client's state update was refused.
pub fn state_error_frame(error: &str) -> Value {
    json!({"type": types::STATE_ERROR, "error": error})
}

/// `{"mcp":{servers,tools,prompts,resources},"type":"cf_agent_mcp_servers"}`.
pub fn mcp_servers_frame(mcp: &Value) -> Value {
    json!({"mcp": mcp, "type": types::MCP_SERVERS})
}

/// `{"done","id","result","success":true,"type":"rpc"}`; `done:false` for streamed chunks.
pub fn rpc_result_frame(id: &str, result: &Value, done: bool) -> Value {
    json!({"done": done, "id": id, "result": result, "success": true, "type": types::RPC})
}

/// `{"error","id","success":false,"type":"rpc"}`.
pub fn rpc_error_frame(id: &str, error: &str) -> Value {
    json!({"error": error, "id": id, "success": false, "type": types::RPC})
}

/// Session phase reported to clients after appends and compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionPhase {
    Idle,
    Compacting,
}

/// `{"type":"cf_agent_session","phase","tokenEstimate","tokenThreshold"[,"compacted":{"tokensBefore"}]}`.
pub fn session_frame(
    phase: SessionPhase,
    token_estimate: u64,
    token_threshold: Option<u64>,
    compacted_tokens_before: Option<u64>,
) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), types::SESSION.into());
    m.insert(
        "phase".into(),
        if phase == SessionPhase::Idle { "idle" } else { "compacting" }.into(),
    );
    m.insert("tokenEstimate".into(), json!(token_estimate));
    m.insert("tokenThreshold".into(), json!(token_threshold));
    if let Some(before) = compacted_tokens_before {
        m.insert("compacted".into(), json!({"tokensBefore": before}));
    }
    Value::Object(m)
}

/// `{"type":"cf_agent_session_error","error"}`.
pub fn session_error_frame(error: &str) -> Value {
    json!({"type": types::SESSION_ERROR, "error": error})
}

/// `{"type":"agent-tool-event"[,"parentToolCallId"],"sequence","event"[,"replay":true]}`:
/// progress of a sub-agent run as a tool.
pub fn agent_tool_event_frame(
    parent_tool_call_id: Option<&str>,
    sequence: u64,
    event: &Value,
    replay: bool,
) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), types::AGENT_TOOL_EVENT.into());
    if let Some(p) = parent_tool_call_id {
        m.insert("parentToolCallId".into(), p.into());
    }
    m.insert("sequence".into(), json!(sequence));
    m.insert("event".into(), event.clone());
    if replay {
        m.insert("replay".into(), Value::Bool(true));
    }
    Value::Object(m)
}

/// `{"type":"cf_agent_protocol_error","error"}`, think-rs's answer to an unparseable frame.
pub fn protocol_error_frame(error: &str) -> Value {
    json!({"type": types::PROTOCOL_ERROR, "error": error})
}

// ── Outgoing: chat frames ───────────────────────────────────────────────────

fn chat_response(id: &str, body: &str, done: bool, error: bool, continuation: bool) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), types::USE_CHAT_RESPONSE.into());
    m.insert("id".into(), id.into());
    m.insert("body".into(), body.into());
    m.insert("done".into(), Value::Bool(done));
    if error {
        m.insert("error".into(), Value::Bool(true));
    }
    if continuation {
        m.insert("continuation".into(), Value::Bool(true));
    }
    Value::Object(m)
}

/// One live stream chunk; `body` is the chunk's JSON text (as stored for replay).
pub fn chat_chunk_frame(id: &str, body: &str, continuation: bool) -> Value {
    chat_response(id, body, false, false, continuation)
}

/// The text of [`chat_chunk_value_frame`], written straight from `chunk` into a buffer of
/// its exact size: a chunk that carries a large tool input is not first held as a string
/// of its own, nor copied into a JSON tree.
pub fn chat_chunk_frame_text(id: &str, chunk: &Value, continuation: bool) -> String {
    let prefix = format!(
        "{{\"type\":\"{}\",\"id\":{},\"body\":\"",
        types::USE_CHAT_RESPONSE,
        Value::from(id)
    );
    let suffix = if continuation {
        "\",\"done\":false,\"continuation\":true}"
    } else {
        "\",\"done\":false}"
    };
    super::json::embed_exact(&prefix, chunk, suffix)
}

/// One live stream chunk from its JSON value.
pub fn chat_chunk_value_frame(id: &str, chunk: &Value, continuation: bool) -> Value {
    chat_chunk_frame(id, &chunk.to_string(), continuation)
}

/// The end of a stream, after completion or cancel.
pub fn chat_done_frame(id: &str, continuation: bool) -> Value {
    chat_response(id, "", true, false, continuation)
}

/// An in-stream error; the client errors its stream with `text`. Followed by the done frame.
pub fn chat_error_frame(id: &str, text: &str, continuation: bool) -> Value {
    chat_response(id, text, false, true, continuation)
}

/// Ends a request that failed before streaming: a single `done:true, error:true` frame.
pub fn chat_request_error_frame(id: &str, text: &str) -> Value {
    chat_response(id, text, true, true, false)
}

/// Ends a turn whose inference produced nothing.
pub fn chat_no_response_frame(id: &str) -> Value {
    chat_response(id, NO_RESPONSE_BODY, true, false, false)
}

/// A stored chunk replayed after a resume ACK.
pub fn replay_chunk_frame(id: &str, body: &str, continuation: bool) -> Value {
    replay_frame(id, body, false, false, continuation)
}

/// The end of a replay of a stream still live: the client flushes and keeps listening.
pub fn replay_complete_frame(id: &str, continuation: bool) -> Value {
    replay_frame(id, "", false, true, continuation)
}

/// The end of a replay of a finished or orphaned stream; with `continuation:false` this is
/// the golden `replayDoneFrame` (also the ACK fallback when nothing is left to replay).
pub fn replay_done_frame(id: &str, continuation: bool) -> Value {
    replay_frame(id, "", true, false, continuation)
}

fn replay_frame(
    id: &str,
    body: &str,
    done: bool,
    replay_complete: bool,
    continuation: bool,
) -> Value {
    let mut m = Map::new();
    m.insert("body".into(), body.into());
    m.insert("done".into(), Value::Bool(done));
    m.insert("id".into(), id.into());
    m.insert("type".into(), types::USE_CHAT_RESPONSE.into());
    m.insert("replay".into(), Value::Bool(true));
    if replay_complete {
        m.insert("replayComplete".into(), Value::Bool(true));
    }
    if continuation {
        m.insert("continuation".into(), Value::Bool(true));
    }
    Value::Object(m)
}

/// The terminal error of a turn that failed while nobody was connected, delivered after the
/// ACK. No `replay` flag: it must look like a live terminal so `useChat` shows the error.
pub fn terminal_error_frame(id: &str, body: &str) -> Value {
    json!({"body": body, "done": true, "error": true, "id": id, "type": types::USE_CHAT_RESPONSE})
}

/// `{"type":"cf_agent_chat_messages","messages"}`: the whole transcript.
pub fn chat_messages_frame(messages: &[UIMessage]) -> Value {
    json!({"type": types::CHAT_MESSAGES, "messages": messages})
}

/// `{"type":"cf_agent_message_updated","message"}` after a tool result or approval apply.
pub fn message_updated_frame(message: &UIMessage) -> Value {
    json!({"type": types::MESSAGE_UPDATED, "message": message})
}

/// `{"type":"cf_agent_chat_clear"}`, sent to the other tabs after a clear.
pub fn chat_clear_frame() -> Value {
    json!({"type": types::CHAT_CLEAR})
}

/// `{"type":"cf_agent_stream_resuming","id"[,"probeId"]}`: ACK to receive the replay.
pub fn stream_resuming_frame(id: &str, probe_id: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), types::STREAM_RESUMING.into());
    m.insert("id".into(), id.into());
    insert_nonempty(&mut m, "probeId", probe_id);
    Value::Object(m)
}

/// Why no stream was offered to a resume probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeNoneReason {
    /// Nothing is active, pending or terminal: the agent is globally idle.
    Idle,
    /// A continuation is running for another live connection.
    ContinuationOwned,
}

impl ResumeNoneReason {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ResumeNoneReason::Idle => "idle",
            ResumeNoneReason::ContinuationOwned => "continuation-owned",
        }
    }
}

/// `{"type":"cf_agent_stream_resume_none","reason"[,"probeId"]}`.
pub fn stream_resume_none_frame(reason: ResumeNoneReason, probe_id: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), types::STREAM_RESUME_NONE.into());
    m.insert("reason".into(), reason.as_str().into());
    insert_nonempty(&mut m, "probeId", probe_id);
    Value::Object(m)
}

/// `{"type":"cf_agent_stream_pending"[,"id"][,"probeId"]}`: a turn is accepted but not yet
/// streaming, keep waiting.
pub fn stream_pending_frame(id: Option<&str>, probe_id: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), types::STREAM_PENDING.into());
    insert_nonempty(&mut m, "id", id);
    insert_nonempty(&mut m, "probeId", probe_id);
    Value::Object(m)
}

/// `{"type":"cf_agent_chat_recovering","recovering"[,"id"]}`: durable recovery started
/// (`true`) or settled (`false`).
pub fn chat_recovering_frame(recovering: bool, id: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), types::CHAT_RECOVERING.into());
    m.insert("recovering".into(), Value::Bool(recovering));
    insert_nonempty(&mut m, "id", id);
    Value::Object(m)
}

/// The golden "recovering…" hint: [`chat_recovering_frame`] with `recovering:true`.
pub fn recovering_frame(id: Option<&str>) -> Value {
    chat_recovering_frame(true, id)
}

fn insert_nonempty(m: &mut Map<String, Value>, key: &str, v: Option<&str>) {
    if let Some(v) = v.filter(|s| !s.is_empty()) {
        m.insert(key.to_owned(), v.into());
    }
}

/// The chat side of a connection's greeting.
#[derive(Debug, Clone, Copy)]
pub enum ConnectChatState<'a> {
    /// No stream is live: send the transcript, then the recovering hint (with its request
    /// id, if known) and the pending notice (with the accepted request id, if known).
    Idle {
        messages: &'a [UIMessage],
        recovering: Option<Option<&'a str>>,
        pending: Option<Option<&'a str>>,
    },
    /// A stream is live: only offer it; the connection gets no live chunks until it ACKs.
    Streaming { request_id: &'a str },
}

/// The chat frames sent on connect, before identity, state and MCP frames. A pending
/// terminal error is never part of them; it is delivered only through the resume handshake.
pub fn connect_chat_frames(state: ConnectChatState<'_>) -> Vec<Value> {
    match state {
        ConnectChatState::Streaming { request_id } => vec![stream_resuming_frame(request_id, None)],
        ConnectChatState::Idle { messages, recovering, pending } => {
            let mut frames = vec![chat_messages_frame(messages)];
            if let Some(id) = recovering {
                frames.push(recovering_frame(id));
            }
            if let Some(id) = pending {
                frames.push(stream_pending_frame(id, None));
            }
            frames
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::Role;

    #[test]
    fn chunk_frame_text_is_the_frame_as_json() {
        for continuation in [false, true] {
            let chunk = json!({"type": "text-delta", "id": "t", "delta": "é\n\"q\\"});
            let text = chat_chunk_frame_text("req-\"1", &chunk, continuation);
            assert_eq!(text, chat_chunk_value_frame("req-\"1", &chunk, continuation).to_string());
        }
    }

    fn s(v: &Value) -> String {
        serde_json::to_string(v).unwrap()
    }

    fn frame(v: Value) -> String {
        v.to_string()
    }

    fn chat_request(body: &Value) -> String {
        frame(
            json!({"id": "V1StGXR8", "init": {"method": "POST", "body": body.to_string()}, "type": types::USE_CHAT_REQUEST}),
        )
    }

    #[test]
    fn parses_reference_chat_request() {
        let raw = r#"{"id":"V1StGXR8","init":{"method":"POST","body":"{\"messages\":[{\"id\":\"msg_1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"hi\"}]}],\"trigger\":\"submit-message\",\"clientTools\":[{\"name\":\"getUserTimezone\",\"description\":\"tz\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}],\"myField\":1}"},"type":"cf_agent_use_chat_request"}"#;
        let ClientFrame::ChatRequest(req) = parse_client_frame(raw).unwrap() else { panic!() };
        assert_eq!(req.id, "V1StGXR8");
        assert_eq!(req.messages.len(), 1);
        assert_eq!(req.messages[0].role, Role::User);
        assert_eq!(req.trigger, Trigger::SubmitMessage);
        let tools = req.client_tools.unwrap();
        assert_eq!(tools[0].name, "getUserTimezone");
        assert_eq!(tools[0].description.as_deref(), Some("tz"));
        assert_eq!(tools[0].parameters, Some(json!({"type": "object", "properties": {}})));
        assert_eq!(req.body, *json!({"myField": 1}).as_object().unwrap());
    }

    #[test]
    fn chat_request_trigger_and_client_tools_variants() {
        let parse = |body: Value| match parse_client_frame(&chat_request(&body)) {
            Ok(ClientFrame::ChatRequest(r)) => r,
            other => panic!("{other:?}"),
        };
        let r = parse(json!({"messages": [], "trigger": "regenerate-message"}));
        assert_eq!(r.trigger, Trigger::RegenerateMessage);
        assert_eq!(r.client_tools, None);
        assert!(r.body.is_empty());
        assert_eq!(parse(json!({"messages": [], "clientTools": []})).client_tools, Some(vec![]));
        assert_eq!(parse(json!({"messages": [], "clientTools": null})).client_tools, Some(vec![]));
        assert_eq!(
            parse(json!({"messages": [], "trigger": "weird"})).trigger,
            Trigger::SubmitMessage
        );
    }

    fn chat_err(raw: &str) -> FrameError {
        match parse_client_frame(raw) {
            Err(e) => e,
            Ok(f) => panic!("expected error, got {f:?}"),
        }
    }

    #[test]
    fn malformed_chat_requests_are_answered_on_the_request() {
        let cases = [
            (
                frame(
                    json!({"id": "r1", "init": {"method": "POST", "body": "{not json"}, "type": types::USE_CHAT_REQUEST}),
                ),
                "not valid JSON",
            ),
            (
                frame(
                    json!({"id": "r1", "init": {"method": "GET", "body": "{}"}, "type": types::USE_CHAT_REQUEST}),
                ),
                "unsupported method GET",
            ),
            (
                frame(json!({"id": "r1", "init": {"body": "{}"}, "type": types::USE_CHAT_REQUEST})),
                "only POST",
            ),
            (frame(json!({"id": "r1", "type": types::USE_CHAT_REQUEST})), "missing init"),
            (
                frame(
                    json!({"id": "r1", "init": {"method": "POST"}, "type": types::USE_CHAT_REQUEST}),
                ),
                "missing request body",
            ),
            (
                frame(
                    json!({"id": "r1", "init": {"method": "POST", "body": {"messages": []}}, "type": types::USE_CHAT_REQUEST}),
                ),
                "JSON string",
            ),
            (chat_request(&json!([1])).replace("V1StGXR8", "r1"), "not a JSON object"),
            (
                chat_request(&json!({"messages": {}})).replace("V1StGXR8", "r1"),
                "messages must be an array",
            ),
            (
                chat_request(&json!({"trigger": "submit-message"})).replace("V1StGXR8", "r1"),
                "no messages",
            ),
            (
                chat_request(&json!({"messages": [{"id": "m", "role": "user", "parts": "x"}]}))
                    .replace("V1StGXR8", "r1"),
                "messages[0]: message parts is not an array",
            ),
            (
                chat_request(&json!({"messages": [], "clientTools": [{"description": "d"}]}))
                    .replace("V1StGXR8", "r1"),
                "clientTools[0] has no name",
            ),
            (
                chat_request(&json!({"messages": [], "clientTools": "x"}))
                    .replace("V1StGXR8", "r1"),
                "clientTools must be an array",
            ),
        ];
        for (raw, want) in cases {
            let e = chat_err(&raw);
            assert_eq!(e.reply, ErrorReply::ChatResponse { id: "r1".into() }, "{raw}");
            assert!(e.message.contains(want), "{raw}: {}", e.message);
            let reply = e.reply_frame();
            assert_eq!(
                s(&reply),
                format!(
                    r#"{{"type":"cf_agent_use_chat_response","id":"r1","body":{},"done":true,"error":true}}"#,
                    json!(e.message)
                )
            );
        }
    }

    #[test]
    fn chat_request_without_id_gets_protocol_error() {
        for raw in [
            frame(
                json!({"init": {"method": "POST", "body": "{}"}, "type": types::USE_CHAT_REQUEST}),
            ),
            frame(json!({"id": 5, "type": types::USE_CHAT_REQUEST})),
            frame(json!({"id": "", "type": types::USE_CHAT_REQUEST})),
        ] {
            let e = chat_err(&raw);
            assert_eq!(e.reply, ErrorReply::ProtocolError);
            assert_eq!(e.reply_frame()["type"], "cf_agent_protocol_error");
            assert_eq!(e.reply_frame()["error"], json!(e.message));
        }
    }

    #[test]
    fn non_json_and_non_objects_are_protocol_errors() {
        for raw in ["not json", "", "{broken", "[1,2]", "42", "\"cf_agent_chat_clear\"", "null"] {
            let e = chat_err(raw);
            assert_eq!(e.reply, ErrorReply::ProtocolError, "{raw}");
        }
        assert!(chat_err("[1]").message.contains("not a JSON object (got array)"));
    }

    #[test]
    fn unknown_or_untyped_objects_go_to_the_app() {
        assert_eq!(
            parse_client_frame(r#"{"id":"abc"}"#).unwrap(),
            ClientFrame::Other(json!({"id": "abc"}).as_object().unwrap().clone())
        );
        assert!(matches!(
            parse_client_frame(r#"{"type":"unknown_type"}"#).unwrap(),
            ClientFrame::Other(_)
        ));
        assert!(matches!(parse_client_frame(r#"{"type":7}"#).unwrap(), ClientFrame::Other(_)));
        // Server-to-client types sent by a client are not protocol requests either.
        for t in [
            types::USE_CHAT_RESPONSE,
            types::STREAM_RESUMING,
            types::STREAM_RESUME_NONE,
            types::MESSAGE_UPDATED,
        ] {
            assert!(
                matches!(
                    parse_client_frame(&frame(json!({"type": t}))).unwrap(),
                    ClientFrame::Other(_)
                ),
                "{t}"
            );
        }
    }

    #[test]
    fn parses_simple_frames() {
        assert_eq!(
            parse_client_frame(r#"{"type":"cf_agent_chat_clear"}"#).unwrap(),
            ClientFrame::Clear
        );
        assert_eq!(
            parse_client_frame(r#"{"id":"req-1","type":"cf_agent_chat_request_cancel"}"#).unwrap(),
            ClientFrame::Cancel { id: "req-1".into() }
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"cf_agent_stream_resume_request"}"#).unwrap(),
            ClientFrame::StreamResumeRequest { probe_id: None }
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"cf_agent_stream_resume_request","probeId":"probe-1"}"#)
                .unwrap(),
            ClientFrame::StreamResumeRequest { probe_id: Some("probe-1".into()) }
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"cf_agent_stream_resume_request","probeId":3}"#).unwrap(),
            ClientFrame::StreamResumeRequest { probe_id: None }
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"cf_agent_stream_resume_ack","id":"req-1"}"#).unwrap(),
            ClientFrame::StreamResumeAck { id: "req-1".into() }
        );
        let msgs = json!([{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]);
        assert_eq!(
            parse_client_frame(&frame(json!({"type": "cf_agent_chat_messages", "messages": msgs})))
                .unwrap(),
            ClientFrame::ChatMessages { messages: msgs.as_array().unwrap().clone() }
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"cf_agent_chat_messages"}"#).unwrap(),
            ClientFrame::ChatMessages { messages: vec![] }
        );
        assert_eq!(
            parse_client_frame(r#"{"state":{"n":1},"type":"cf_agent_state"}"#).unwrap(),
            ClientFrame::State { state: json!({"n": 1}) }
        );
        assert_eq!(
            parse_client_frame(r#"{"state":null,"type":"cf_agent_state"}"#).unwrap(),
            ClientFrame::State { state: Value::Null }
        );
        assert_eq!(chat_err(r#"{"type":"cf_agent_state"}"#).reply, ErrorReply::ProtocolError);
        assert!(chat_err(r#"{"type":"cf_agent_chat_request_cancel"}"#)
            .message
            .contains("missing id"));
        assert!(chat_err(r#"{"type":"cf_agent_stream_resume_ack","id":1}"#)
            .message
            .contains("id must be a string"));
    }

    #[test]
    fn parses_tool_results() {
        let full = frame(json!({
            "type": "cf_agent_tool_result", "toolCallId": "tc1", "toolName": "getWeather", "output": {"temp": 72},
            "state": "output-available", "autoContinue": true, "clientTools": [{"name": "tool1", "description": "desc"}]
        }));
        let ClientFrame::ToolResult(r) = parse_client_frame(&full).unwrap() else { panic!() };
        assert_eq!(r.tool_call_id, "tc1");
        assert_eq!(r.tool_name, "getWeather");
        assert_eq!(r.output, Some(json!({"temp": 72})));
        assert!(r.auto_continue);
        assert_eq!(
            r.client_tools,
            Some(vec![ClientToolSchema {
                name: "tool1".into(),
                description: Some("desc".into()),
                parameters: None
            }])
        );
        assert_eq!(r.outcome(), ToolResultOutcome::Output(Some(json!({"temp": 72}))));

        let ClientFrame::ToolResult(m) = parse_client_frame(
            r#"{"type":"cf_agent_tool_result","toolCallId":"tc1","output":"result"}"#,
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(m.tool_name, "");
        assert!(!m.auto_continue);
        assert_eq!(m.client_tools, None);

        let ClientFrame::ToolResult(e) = parse_client_frame(
            r#"{"type":"cf_agent_tool_result","toolCallId":"call_1","toolName":"x","output":null,"state":"output-error","errorText":"User declined","autoContinue":false}"#,
        )
        .unwrap() else { panic!() };
        assert_eq!(e.outcome(), ToolResultOutcome::Error(Some("User declined".into())));

        assert!(chat_err(r#"{"type":"cf_agent_tool_result","output":1}"#)
            .message
            .contains("missing toolCallId"));
        assert!(chat_err(r#"{"type":"cf_agent_tool_result","toolCallId":"a","errorText":5}"#)
            .message
            .contains("errorText must be a string"));
        assert!(chat_err(r#"{"type":"cf_agent_tool_result","toolCallId":"a","clientTools":[3]}"#)
            .message
            .contains("clientTools[0]"));
    }

    #[test]
    fn parses_tool_approvals() {
        assert_eq!(
            parse_client_frame(r#"{"type":"cf_agent_tool_approval","toolCallId":"call_2","approved":true,"autoContinue":true}"#).unwrap(),
            ClientFrame::ToolApproval(ToolApprovalFrame { tool_call_id: "call_2".into(), approved: true, auto_continue: true })
        );
        assert_eq!(
            parse_client_frame(
                r#"{"type":"cf_agent_tool_approval","toolCallId":"c","approved":false}"#
            )
            .unwrap(),
            ClientFrame::ToolApproval(ToolApprovalFrame {
                tool_call_id: "c".into(),
                approved: false,
                auto_continue: false
            })
        );
        assert!(chat_err(r#"{"type":"cf_agent_tool_approval","toolCallId":"c","approved":"yes"}"#)
            .message
            .contains("approved must be a boolean"));
        assert!(chat_err(r#"{"type":"cf_agent_tool_approval","toolCallId":"c"}"#)
            .message
            .contains("missing approved"));
    }

    #[test]
    fn parses_rpc_and_answers_malformed_calls() {
        assert_eq!(
            parse_client_frame(r#"{"args":[1,"a"],"id":"u-1","method":"getStats","type":"rpc"}"#)
                .unwrap(),
            ClientFrame::Rpc(RpcRequest {
                id: "u-1".into(),
                method: "getStats".into(),
                args: vec![json!(1), json!("a")]
            })
        );
        for (raw, want) in [
            (r#"{"args":[],"id":"u-1","type":"rpc"}"#, "missing method"),
            (r#"{"args":[],"id":"u-1","method":3,"type":"rpc"}"#, "method must be a string"),
            (r#"{"args":{},"id":"u-1","method":"m","type":"rpc"}"#, "args must be an array"),
            (r#"{"id":"u-1","method":"m","type":"rpc"}"#, "missing args"),
        ] {
            let e = chat_err(raw);
            assert_eq!(e.reply, ErrorReply::Rpc { id: "u-1".into() });
            assert!(e.message.contains(want), "{}", e.message);
            assert_eq!(
                s(&e.reply_frame()),
                format!(
                    r#"{{"error":{},"id":"u-1","success":false,"type":"rpc"}}"#,
                    json!(e.message)
                )
            );
        }
        assert_eq!(
            chat_err(r#"{"args":[],"method":"m","type":"rpc"}"#).reply,
            ErrorReply::ProtocolError
        );
    }

    #[test]
    fn base_agent_frames_key_order() {
        assert_eq!(
            s(&identity_frame("default", "my-agent")),
            r#"{"name":"default","agent":"my-agent","type":"cf_agent_identity"}"#
        );
        assert_eq!(
            s(&state_frame(&json!({"a": 1}))),
            r#"{"state":{"a":1},"type":"cf_agent_state"}"#
        );
        assert_eq!(
            s(&state_error_frame("Connection is readonly")),
            r#"{"type":"cf_agent_state_error","error":"Connection is readonly"}"#
        );
        assert_eq!(
            s(&mcp_servers_frame(
                &json!({"servers": {}, "tools": [], "prompts": [], "resources": []})
            )),
            r#"{"mcp":{"servers":{},"tools":[],"prompts":[],"resources":[]},"type":"cf_agent_mcp_servers"}"#
        );
        assert_eq!(
            s(&rpc_result_frame("i", &json!(3), true)),
            r#"{"done":true,"id":"i","result":3,"success":true,"type":"rpc"}"#
        );
        assert_eq!(
            s(&rpc_result_frame("i", &json!("c"), false)),
            r#"{"done":false,"id":"i","result":"c","success":true,"type":"rpc"}"#
        );
        assert_eq!(
            s(&rpc_error_frame("i", "Method x does not exist")),
            r#"{"error":"Method x does not exist","id":"i","success":false,"type":"rpc"}"#
        );
        assert_eq!(
            s(&session_frame(SessionPhase::Idle, 120, None, None)),
            r#"{"type":"cf_agent_session","phase":"idle","tokenEstimate":120,"tokenThreshold":null}"#
        );
        assert_eq!(
            s(&session_frame(SessionPhase::Compacting, 9, Some(100), Some(500))),
            r#"{"type":"cf_agent_session","phase":"compacting","tokenEstimate":9,"tokenThreshold":100,"compacted":{"tokensBefore":500}}"#
        );
        assert_eq!(
            s(&session_error_frame("x")),
            r#"{"type":"cf_agent_session_error","error":"x"}"#
        );
        assert_eq!(
            s(&agent_tool_event_frame(Some("p"), 3, &json!({"k": 1}), true)),
            r#"{"type":"agent-tool-event","parentToolCallId":"p","sequence":3,"event":{"k":1},"replay":true}"#
        );
        assert_eq!(
            s(&agent_tool_event_frame(None, 0, &json!({}), false)),
            r#"{"type":"agent-tool-event","sequence":0,"event":{}}"#
        );
        assert_eq!(
            s(&protocol_error_frame("bad")),
            r#"{"type":"cf_agent_protocol_error","error":"bad"}"#
        );
    }

    #[test]
    fn chat_stream_frames() {
        let chunk = crate::protocol::chunk::start(Some("srv"), None);
        assert_eq!(
            s(&chat_chunk_value_frame("V1StGXR8", &chunk, false)),
            r#"{"type":"cf_agent_use_chat_response","id":"V1StGXR8","body":"{\"type\":\"start\",\"messageId\":\"srv\"}","done":false}"#
        );
        assert_eq!(
            s(&chat_chunk_frame("r", "{}", true)),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"{}","done":false,"continuation":true}"#
        );
        assert_eq!(
            s(&chat_done_frame("r", false)),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"","done":true}"#
        );
        assert_eq!(
            s(&chat_done_frame("r", true)),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"","done":true,"continuation":true}"#
        );
        assert_eq!(
            s(&chat_error_frame("r", "boom", true)),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"boom","done":false,"error":true,"continuation":true}"#
        );
        assert_eq!(
            s(&chat_no_response_frame("r")),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"No response was generated.","done":true}"#
        );
        assert_eq!(
            s(&replay_chunk_frame("r", "{\"type\":\"text-start\"}", false)),
            r#"{"body":"{\"type\":\"text-start\"}","done":false,"id":"r","type":"cf_agent_use_chat_response","replay":true}"#
        );
        assert_eq!(
            s(&replay_complete_frame("r", true)),
            r#"{"body":"","done":false,"id":"r","type":"cf_agent_use_chat_response","replay":true,"replayComplete":true,"continuation":true}"#
        );
        assert_eq!(
            s(&replay_done_frame("r", true)),
            r#"{"body":"","done":true,"id":"r","type":"cf_agent_use_chat_response","replay":true,"continuation":true}"#
        );
    }

    #[test]
    fn transcript_frames() {
        let m = UIMessage::new("m1", Role::User, vec![json!({"type": "text", "text": "hi"})]);
        assert_eq!(
            s(&chat_messages_frame(std::slice::from_ref(&m))),
            r#"{"type":"cf_agent_chat_messages","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#
        );
        assert_eq!(
            s(&message_updated_frame(&m)),
            r#"{"type":"cf_agent_message_updated","message":{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}}"#
        );
        assert_eq!(s(&chat_clear_frame()), r#"{"type":"cf_agent_chat_clear"}"#);
        assert_eq!(
            s(&chat_recovering_frame(false, None)),
            r#"{"type":"cf_agent_chat_recovering","recovering":false}"#
        );
    }

    // Golden resume-handshake frames (resume-handshake-frames.ts), compared as exact bytes.

    #[test]
    fn golden_stream_resuming() {
        assert_eq!(
            s(&stream_resuming_frame("req-1", None)),
            r#"{"type":"cf_agent_stream_resuming","id":"req-1"}"#
        );
        assert_eq!(
            s(&stream_resuming_frame("req-1", Some("p"))),
            r#"{"type":"cf_agent_stream_resuming","id":"req-1","probeId":"p"}"#
        );
    }

    #[test]
    fn golden_stream_resume_none() {
        let idle = stream_resume_none_frame(ResumeNoneReason::Idle, None);
        assert_eq!(s(&idle), r#"{"type":"cf_agent_stream_resume_none","reason":"idle"}"#);
        assert!(idle.get("id").is_none());
        assert_eq!(
            s(&stream_resume_none_frame(ResumeNoneReason::ContinuationOwned, None)),
            r#"{"type":"cf_agent_stream_resume_none","reason":"continuation-owned"}"#
        );
        assert_eq!(
            s(&stream_resume_none_frame(ResumeNoneReason::Idle, Some("probe-1"))),
            r#"{"type":"cf_agent_stream_resume_none","reason":"idle","probeId":"probe-1"}"#
        );
    }

    #[test]
    fn golden_replay_done_is_clean_close() {
        let f = replay_done_frame("req-1", false);
        assert_eq!(
            s(&f),
            r#"{"body":"","done":true,"id":"req-1","type":"cf_agent_use_chat_response","replay":true}"#
        );
        assert!(f.get("error").is_none());
    }

    #[test]
    fn golden_terminal_error_has_no_replay_flag() {
        let f = terminal_error_frame("req-1", "boom");
        assert_eq!(
            s(&f),
            r#"{"body":"boom","done":true,"error":true,"id":"req-1","type":"cf_agent_use_chat_response"}"#
        );
        assert!(f.get("replay").is_none());
    }

    #[test]
    fn golden_stream_pending_id_only_when_present() {
        assert_eq!(
            s(&stream_pending_frame(Some("req-1"), None)),
            r#"{"type":"cf_agent_stream_pending","id":"req-1"}"#
        );
        assert_eq!(s(&stream_pending_frame(None, None)), r#"{"type":"cf_agent_stream_pending"}"#);
        assert_eq!(
            s(&stream_pending_frame(Some(""), Some("p"))),
            r#"{"type":"cf_agent_stream_pending","probeId":"p"}"#
        );
        assert_eq!(
            s(&stream_pending_frame(Some("c"), Some("p"))),
            r#"{"type":"cf_agent_stream_pending","id":"c","probeId":"p"}"#
        );
    }

    #[test]
    fn golden_recovering_id_only_when_present() {
        assert_eq!(
            s(&recovering_frame(Some("req-1"))),
            r#"{"type":"cf_agent_chat_recovering","recovering":true,"id":"req-1"}"#
        );
        let no_id = recovering_frame(None);
        assert_eq!(s(&no_id), r#"{"type":"cf_agent_chat_recovering","recovering":true}"#);
        assert!(no_id.get("id").is_none());
    }

    #[test]
    fn golden_frame_types_match_constants() {
        assert_eq!(stream_resuming_frame("x", None)["type"], types::STREAM_RESUMING);
        assert_eq!(
            stream_resume_none_frame(ResumeNoneReason::Idle, None)["type"],
            types::STREAM_RESUME_NONE
        );
        assert_eq!(replay_done_frame("x", false)["type"], types::USE_CHAT_RESPONSE);
        assert_eq!(terminal_error_frame("x", "y")["type"], types::USE_CHAT_RESPONSE);
        assert_eq!(recovering_frame(Some("x"))["type"], types::CHAT_RECOVERING);
        assert_eq!(stream_pending_frame(Some("x"), None)["type"], types::STREAM_PENDING);
    }

    #[test]
    fn invariant_resuming_sent_on_both_notify_and_request() {
        // #1733: the proactive connect notify and the explicit answer are both resuming frames
        // for the same id; builders keep no state, so nothing dedupes the second one.
        let notify = connect_chat_frames(ConnectChatState::Streaming { request_id: "req-1" });
        assert_eq!(notify, vec![stream_resuming_frame("req-1", None)]);
        let answer = stream_resuming_frame("req-1", Some("probe"));
        assert_eq!(answer["type"], notify[0]["type"]);
        assert_eq!(answer["id"], notify[0]["id"]);
        assert_eq!(
            connect_chat_frames(ConnectChatState::Streaming { request_id: "req-1" }),
            notify
        );
    }

    #[test]
    fn invariant_idle_connect_is_transcript_plus_recovering_without_terminal() {
        let m = [UIMessage::new("u", Role::User, vec![json!({"type": "text", "text": "x"})])];
        let frames = connect_chat_frames(ConnectChatState::Idle {
            messages: &m,
            recovering: Some(Some("req-9")),
            pending: Some(None),
        });
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0]["type"], types::CHAT_MESSAGES);
        assert_eq!(frames[1], recovering_frame(Some("req-9")));
        assert_eq!(frames[2], stream_pending_frame(None, None));
        // #1645: no use-chat-response (terminal) frame is ever part of the connect payload.
        assert!(frames.iter().all(|f| f["type"] != types::USE_CHAT_RESPONSE));
        let plain = connect_chat_frames(ConnectChatState::Idle {
            messages: &[],
            recovering: None,
            pending: None,
        });
        assert_eq!(plain, vec![json!({"type": "cf_agent_chat_messages", "messages": []})]);
    }

    /// Deterministic xorshift so the fuzz corpus is the same on every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn fuzz_parser_never_panics() {
        let seeds = [
            r#"{"id":"V1StGXR8","init":{"method":"POST","body":"{\"messages\":[{\"id\":\"m\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"hi\"}]}],\"trigger\":\"submit-message\",\"clientTools\":[{\"name\":\"t\"}]}"},"type":"cf_agent_use_chat_request"}"#,
            r#"{"type":"cf_agent_tool_result","toolCallId":"c","toolName":"x","output":{"a":[1,2]},"state":"output-error","errorText":"e","autoContinue":true,"clientTools":[{"name":"x"}]}"#,
            r#"{"type":"cf_agent_tool_approval","toolCallId":"c","approved":true,"autoContinue":true}"#,
            r#"{"args":[1,{"x":null}],"id":"u","method":"m","type":"rpc"}"#,
            r#"{"type":"cf_agent_stream_resume_request","probeId":"p"}"#,
            r#"{"state":{"deep":[[[]]]},"type":"cf_agent_state"}"#,
        ];
        let alphabet: Vec<char> =
            "{}[]\":,\\ abcdefghijklmnopqrstuvwxyz0123456789-_.eE+tfnul\u{0}\u{7f}é😀\n\t"
                .chars()
                .collect();
        let keys = [
            "type",
            "id",
            "init",
            "method",
            "body",
            "messages",
            "parts",
            "role",
            "toolCallId",
            "approved",
            "args",
            "state",
            "clientTools",
            "probeId",
        ];
        let values = [
            "null",
            "true",
            "1",
            "-0.5e9",
            "\"\"",
            "\"POST\"",
            "[]",
            "{}",
            "\"cf_agent_use_chat_request\"",
            "\"rpc\"",
            "\"cf_agent_tool_result\"",
            "\"cf_agent_tool_approval\"",
            "\"{\\\"messages\\\":[1]}\"",
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut inputs: Vec<String> = Vec::new();
        for i in 0..1000 {
            let input = match i % 5 {
                0 => (0..rng.below(80)).map(|_| alphabet[rng.below(alphabet.len())]).collect(),
                1 => {
                    let seed = seeds[rng.below(seeds.len())];
                    let cut = rng.below(seed.len() + 1);
                    let cut = (0..=cut).rev().find(|c| seed.is_char_boundary(*c)).unwrap_or(0);
                    seed[..cut].to_owned()
                }
                2 => {
                    let seed = seeds[rng.below(seeds.len())];
                    let mut bytes: Vec<char> = seed.chars().collect();
                    for _ in 0..1 + rng.below(4) {
                        let pos = rng.below(bytes.len());
                        bytes[pos] = alphabet[rng.below(alphabet.len())];
                    }
                    bytes.into_iter().collect()
                }
                3 => {
                    let n = rng.below(6);
                    let fields: Vec<String> = (0..n)
                        .map(|_| {
                            format!(
                                "\"{}\":{}",
                                keys[rng.below(keys.len())],
                                values[rng.below(values.len())]
                            )
                        })
                        .collect();
                    format!("{{{}}}", fields.join(","))
                }
                _ => {
                    let depth = 1 + rng.below(5000);
                    let open = if rng.below(2) == 0 { "[" } else { "{\"a\":" };
                    open.repeat(depth)
                }
            };
            inputs.push(input);
        }
        let mut ok = 0;
        for input in &inputs {
            match parse_client_frame(input) {
                Ok(_) => ok += 1,
                Err(e) => {
                    let reply = e.reply_frame();
                    assert!(reply.get("type").and_then(Value::as_str).is_some(), "{input:?}");
                    assert!(!e.message.is_empty());
                }
            }
        }
        assert!(ok > 0 && ok < inputs.len(), "corpus exercises both paths ({ok} ok)");
    }
}
