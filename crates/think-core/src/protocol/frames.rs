//! WebSocket frames between the npm `agents` clients and the agent: a tolerant parser for
//! what clients send, and a serde type for every frame the server sends.
//!
//! Each server frame's fields are declared in the order the TypeScript server emits its keys
//! (serde writes them in declaration order), so captured transcripts compare byte for byte.
//! Clients only care about keys, not order.

use super::message::{json_kind, truthy, UIMessage};
use super::tool_state::ToolResultOutcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// Frame `type` strings.
pub mod types {
    /// The whole transcript (server to client; a client's copy is ignored).
    pub const CHAT_MESSAGES: &str = "cf_agent_chat_messages";
    /// A chat request from `useAgentChat`'s transport.
    pub const USE_CHAT_REQUEST: &str = "cf_agent_use_chat_request";
    /// One frame of a chat stream (live or replayed).
    pub const USE_CHAT_RESPONSE: &str = "cf_agent_use_chat_response";
    /// Clear the transcript (both ways).
    pub const CHAT_CLEAR: &str = "cf_agent_chat_clear";
    /// Cancel a running chat request.
    pub const CHAT_REQUEST_CANCEL: &str = "cf_agent_chat_request_cancel";
    /// A stream is live: ACK to be replayed it.
    pub const STREAM_RESUMING: &str = "cf_agent_stream_resuming";
    /// The client accepts a resume offer.
    pub const STREAM_RESUME_ACK: &str = "cf_agent_stream_resume_ack";
    /// The client asks whether a stream can be resumed.
    pub const STREAM_RESUME_REQUEST: &str = "cf_agent_stream_resume_request";
    /// Nothing to resume.
    pub const STREAM_RESUME_NONE: &str = "cf_agent_stream_resume_none";
    /// A turn is accepted but not streaming yet.
    pub const STREAM_PENDING: &str = "cf_agent_stream_pending";
    /// A client tool's result.
    pub const TOOL_RESULT: &str = "cf_agent_tool_result";
    /// A human's answer to an approval request.
    pub const TOOL_APPROVAL: &str = "cf_agent_tool_approval";
    /// One message changed in place.
    pub const MESSAGE_UPDATED: &str = "cf_agent_message_updated";
    /// Recovery of a crashed turn started or settled.
    pub const CHAT_RECOVERING: &str = "cf_agent_chat_recovering";
    /// Who the client is connected to.
    pub const IDENTITY: &str = "cf_agent_identity";
    /// The agent's state (client updates are accepted and ignored).
    pub const STATE: &str = "cf_agent_state";
    /// A refused state update (not sent by think-rs).
    pub const STATE_ERROR: &str = "cf_agent_state_error";
    /// The MCP servers, tools, prompts and resources.
    pub const MCP_SERVERS: &str = "cf_agent_mcp_servers";
    /// Session phase (not sent by think-rs).
    pub const SESSION: &str = "cf_agent_session";
    /// Session failure (not sent by think-rs).
    pub const SESSION_ERROR: &str = "cf_agent_session_error";
    /// A callable's call or its answer.
    pub const RPC: &str = "rpc";
    /// Sub-agent progress (not sent by think-rs).
    pub const AGENT_TOOL_EVENT: &str = "agent-tool-event";
    /// think-rs extension: the answer to a frame that could not be understood. Clients
    /// ignore unknown types.
    pub const PROTOCOL_ERROR: &str = "cf_agent_protocol_error";
    /// think-rs extension: workspace paths changed (coalesced), so a tab re-reads its tree.
    pub const WORKSPACE_CHANGED: &str = "think_workspace_changed";
}

// ── Incoming ────────────────────────────────────────────────────────────────

/// A tool the client can run, as declared in `clientTools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientToolSchema {
    /// The tool's name, as the model calls it.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What the tool does, for the model.
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The JSON Schema of its input.
    pub parameters: Option<Value>,
}

/// Why the client sent a chat request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Answer the new user message.
    SubmitMessage,
    /// Branch a new answer from the last message sent instead of appending.
    RegenerateMessage,
}

/// A `cf_agent_use_chat_request` with its JSON-string body parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The request id every frame of its stream carries.
    pub id: String,
    /// The client's full transcript.
    pub messages: Vec<UIMessage>,
    /// Why the request was sent.
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
    /// The call this answers.
    pub tool_call_id: String,
    /// The tool's name (may be empty).
    pub tool_name: String,
    /// The output, when the tool succeeded.
    pub output: Option<Value>,
    /// `output-available` or `output-error`, when the client says.
    pub state: Option<String>,
    /// The error, when the tool failed.
    pub error_text: Option<String>,
    /// Continue the turn once every call of the batch has its answer.
    pub auto_continue: bool,
    /// The client's current tool schemas, when it sends them (as in a chat request).
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
    /// The call this answers.
    pub tool_call_id: String,
    /// Whether the human approved the call.
    pub approved: bool,
    /// Continue the turn once every call of the batch has its answer.
    pub auto_continue: bool,
}

/// A call of a `@callable` method.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    /// The call id its answer carries.
    pub id: String,
    /// The callable's name.
    pub method: String,
    /// Its positional arguments.
    pub args: Vec<Value>,
}

/// Everything a client can send.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientFrame {
    /// `cf_agent_use_chat_request`.
    ChatRequest(ChatRequest),
    /// `cf_agent_chat_request_cancel`.
    Cancel {
        /// The request to cancel.
        id: String,
    },
    /// `cf_agent_tool_result`.
    ToolResult(ToolResultFrame),
    /// `cf_agent_tool_approval`.
    ToolApproval(ToolApprovalFrame),
    /// `cf_agent_chat_clear`.
    Clear,
    /// `cf_agent_stream_resume_request`.
    StreamResumeRequest {
        /// Echoed in the answer so the client can match it.
        probe_id: Option<String>,
    },
    /// `cf_agent_stream_resume_ack`.
    StreamResumeAck {
        /// The stream the offer was for.
        id: String,
    },
    /// A client pushing its transcript; the server is authoritative and ignores it.
    ChatMessages {
        /// The client's messages (ignored).
        messages: Vec<Value>,
    },
    /// `cf_agent_state`: a client state update.
    State {
        /// The state the client sent.
        state: Value,
    },
    /// `rpc`: a callable's call.
    Rpc(RpcRequest),
    /// A JSON object of no known type: the app's own message, for its `onMessage`.
    Other(Map<String, Value>),
}

/// Which reply a malformed frame deserves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorReply {
    /// A chat request with an id: end that request with an error response so the client's
    /// `useChat` surfaces it instead of waiting.
    ChatResponse {
        /// The chat request to end.
        id: String,
    },
    /// An rpc call with an id: fail that call so the client does not wait for its timeout.
    Rpc {
        /// The call to fail.
        id: String,
    },
    /// No id to answer: send a `cf_agent_protocol_error` frame.
    ProtocolError,
}

/// A frame that could not be understood, and how to answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    /// What was wrong, for the reply.
    pub message: String,
    /// Which reply the frame deserves.
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
    pub fn reply_frame(&self) -> ErrorFrame<'_> {
        match &self.reply {
            ErrorReply::ChatResponse { id } => {
                ErrorFrame::Chat(ChatResponse::request_error(id, &self.message))
            }
            ErrorReply::Rpc { id } => ErrorFrame::Rpc(RpcError::new(id, &self.message)),
            ErrorReply::ProtocolError => ErrorFrame::Protocol(ProtocolError::new(&self.message)),
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FrameError {}

/// One field of a client frame as sent: absent, or any JSON value (null included). The
/// frame shapes below are serde types built from these, so which keys a frame has is
/// declared once; a field is typed when it is read, so a wrong one is named in the reply
/// instead of failing the frame with serde's generic text.
#[derive(Debug, Default)]
struct Field(Option<Value>);

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(|v| Field(Some(v)))
    }
}

impl Field {
    fn get(&self) -> Option<&Value> {
        self.0.as_ref()
    }

    /// A required string; the error names frame `kind` and field `key`.
    fn string(&self, kind: &str, key: &str) -> Result<String, FrameError> {
        match self.get() {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(FrameError::protocol(format!(
                "{kind}: {key} must be a string (got {})",
                json_kind(other)
            ))),
            None => Err(FrameError::protocol(format!("{kind}: missing {key}"))),
        }
    }

    /// An optional string: absent and null are `None`.
    fn opt_string(&self, kind: &str, key: &str) -> Result<Option<String>, FrameError> {
        match self.get() {
            None | Some(Value::Null) => Ok(None),
            _ => self.string(kind, key).map(Some),
        }
    }

    /// JavaScript truthiness, as the clients' `if (autoContinue)`.
    fn truthy(&self) -> bool {
        truthy(self.get())
    }
}

/// `cf_agent_chat_request_cancel` and `cf_agent_stream_resume_ack`.
#[derive(Deserialize)]
struct IdWire {
    #[serde(default)]
    id: Field,
}

/// `cf_agent_tool_approval`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolApprovalWire {
    #[serde(default)]
    tool_call_id: Field,
    #[serde(default)]
    approved: Field,
    #[serde(default)]
    auto_continue: Field,
}

/// `cf_agent_tool_result`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolResultWire {
    #[serde(default)]
    tool_call_id: Field,
    #[serde(default)]
    tool_name: Field,
    #[serde(default)]
    output: Field,
    #[serde(default)]
    state: Field,
    #[serde(default)]
    error_text: Field,
    #[serde(default)]
    auto_continue: Field,
    #[serde(default)]
    client_tools: Field,
}

/// `cf_agent_stream_resume_request`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResumeRequestWire {
    #[serde(default)]
    probe_id: Field,
}

/// `cf_agent_chat_messages` (a client pushing its transcript) and `cf_agent_state`.
#[derive(Deserialize)]
struct PushWire {
    #[serde(default)]
    messages: Field,
    #[serde(default)]
    state: Field,
}

/// `rpc`.
#[derive(Deserialize)]
struct RpcWire {
    #[serde(default)]
    id: Field,
    #[serde(default)]
    method: Field,
    #[serde(default)]
    args: Field,
}

/// `cf_agent_use_chat_request`, and the `init` it carries.
#[derive(Deserialize)]
struct ChatRequestWire {
    #[serde(default)]
    id: Field,
    #[serde(default)]
    init: Field,
}

/// The `init` of a chat request: a fetch `RequestInit`.
#[derive(Deserialize)]
struct InitWire {
    #[serde(default)]
    method: Field,
    #[serde(default)]
    body: Field,
}

/// The JSON-string body of a chat request; every other field is the app's custom body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChatBodyWire {
    #[serde(default)]
    messages: Field,
    #[serde(default)]
    trigger: Field,
    #[serde(default)]
    client_tools: Field,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Reads a frame object as wire shape `W` (only [`Field`]s, so any object fits).
fn wire<W: serde::de::DeserializeOwned>(
    obj: Map<String, Value>,
    kind: &str,
) -> Result<W, FrameError> {
    serde_json::from_value(Value::Object(obj))
        .map_err(|e| FrameError::protocol(format!("{kind}: {e}")))
}

/// Parses one text frame. Never panics; anything malformed becomes a [`FrameError`] that
/// says how to answer.
pub fn parse_client_frame(raw: &str) -> Result<ClientFrame, FrameError> {
    let value: Value = super::json::from_str_deep(raw)
        .map_err(|e| FrameError::protocol(format!("frame is not valid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(FrameError::protocol(format!(
            "frame is not a JSON object (got {})",
            json_kind(&value)
        )));
    };
    let Some(kind) = obj.get("type").and_then(Value::as_str).map(str::to_owned) else {
        return Ok(ClientFrame::Other(obj));
    };
    let kind = kind.as_str();
    match kind {
        types::USE_CHAT_REQUEST => {
            parse_chat_request(wire(obj, kind)?).map(ClientFrame::ChatRequest)
        }
        types::CHAT_REQUEST_CANCEL => {
            Ok(ClientFrame::Cancel { id: wire::<IdWire>(obj, kind)?.id.string(kind, "id")? })
        }
        types::TOOL_RESULT => parse_tool_result(wire(obj, kind)?).map(ClientFrame::ToolResult),
        types::TOOL_APPROVAL => {
            let w: ToolApprovalWire = wire(obj, kind)?;
            let tool_call_id = w.tool_call_id.string(kind, "toolCallId")?;
            let approved = match w.approved.get() {
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
                auto_continue: w.auto_continue.truthy(),
            }))
        }
        types::CHAT_CLEAR => Ok(ClientFrame::Clear),
        types::STREAM_RESUME_REQUEST => {
            let w: ResumeRequestWire = wire(obj, kind)?;
            // A probe id of the wrong type is dropped, not refused: the answer still comes.
            let probe_id = w.probe_id.get().and_then(Value::as_str).map(str::to_owned);
            Ok(ClientFrame::StreamResumeRequest { probe_id })
        }
        types::STREAM_RESUME_ACK => Ok(ClientFrame::StreamResumeAck {
            id: wire::<IdWire>(obj, kind)?.id.string(kind, "id")?,
        }),
        types::CHAT_MESSAGES => {
            let w: PushWire = wire(obj, kind)?;
            let messages = w.messages.get().and_then(Value::as_array).cloned().unwrap_or_default();
            Ok(ClientFrame::ChatMessages { messages })
        }
        types::STATE => match wire::<PushWire>(obj, kind)?.state.0 {
            Some(state) => Ok(ClientFrame::State { state }),
            None => Err(FrameError::protocol(format!("{kind}: missing state"))),
        },
        types::RPC => parse_rpc(wire(obj, kind)?).map(ClientFrame::Rpc),
        _ => Ok(ClientFrame::Other(obj)),
    }
}

fn parse_rpc(w: RpcWire) -> Result<RpcRequest, FrameError> {
    let id = w.id.string(types::RPC, "id")?;
    let method = match w.method.0 {
        Some(Value::String(m)) if !m.is_empty() => m,
        Some(Value::String(_)) => return Err(FrameError::rpc(&id, "rpc: method is empty")),
        Some(other) => {
            return Err(FrameError::rpc(
                &id,
                format!("rpc: method must be a string (got {})", json_kind(&other)),
            ))
        }
        None => return Err(FrameError::rpc(&id, "rpc: missing method")),
    };
    let args = match w.args.0 {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(FrameError::rpc(
                &id,
                format!("rpc: args must be an array (got {})", json_kind(&other)),
            ))
        }
        None => return Err(FrameError::rpc(&id, "rpc: missing args (must be an array)")),
    };
    Ok(RpcRequest { id, method, args })
}

/// Reads `clientTools`: absent → `None`, null → `Some([])` (clear), array of `{name, ...}`.
/// `fail` turns a problem into the error the enclosing frame deserves.
fn parse_client_tools(
    v: Option<&Value>,
    fail: impl Fn(String) -> FrameError,
) -> Result<Option<Vec<ClientToolSchema>>, FrameError> {
    let items = match v {
        None => return Ok(None),
        Some(Value::Null) => return Ok(Some(Vec::new())),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(fail(format!("clientTools must be an array (got {})", json_kind(other))))
        }
    };
    let mut tools = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(o) = item else {
            return Err(fail(format!(
                "clientTools[{i}] is not an object (got {})",
                json_kind(item)
            )));
        };
        let name = match o.get("name") {
            Some(Value::String(n)) if !n.is_empty() => n.clone(),
            _ => return Err(fail(format!("clientTools[{i}] has no name"))),
        };
        let description = match o.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(other) => {
                return Err(fail(format!(
                    "clientTools[{i}].description must be a string (got {})",
                    json_kind(other)
                )))
            }
        };
        let parameters = o.get("parameters").filter(|p| !p.is_null()).cloned();
        tools.push(ClientToolSchema { name, description, parameters });
    }
    Ok(Some(tools))
}

fn parse_tool_result(w: ToolResultWire) -> Result<ToolResultFrame, FrameError> {
    let kind = types::TOOL_RESULT;
    Ok(ToolResultFrame {
        tool_call_id: w.tool_call_id.string(kind, "toolCallId")?,
        tool_name: w.tool_name.opt_string(kind, "toolName")?.unwrap_or_default(),
        state: w.state.opt_string(kind, "state")?,
        error_text: w.error_text.opt_string(kind, "errorText")?,
        auto_continue: w.auto_continue.truthy(),
        client_tools: parse_client_tools(w.client_tools.get(), |e| {
            FrameError::protocol(format!("{kind}: {e}"))
        })?,
        output: w.output.0,
    })
}

fn parse_chat_request(w: ChatRequestWire) -> Result<ChatRequest, FrameError> {
    let kind = types::USE_CHAT_REQUEST;
    let id = w.id.string(kind, "id")?;
    if id.is_empty() {
        return Err(FrameError::protocol(format!("{kind}: id is empty")));
    }
    let init: InitWire = match w.init.0 {
        Some(Value::Object(init)) => wire(init, kind)?,
        Some(other) => {
            return Err(FrameError::chat(
                &id,
                format!("init must be an object (got {})", json_kind(&other)),
            ))
        }
        None => return Err(FrameError::chat(&id, "missing init")),
    };
    match init.method.get() {
        Some(Value::String(m)) if m == "POST" => {}
        Some(Value::String(m)) => {
            return Err(FrameError::chat(
                &id,
                format!("unsupported method {m}; only POST is accepted"),
            ))
        }
        _ => return Err(FrameError::chat(&id, "missing method; only POST is accepted")),
    }
    match init.body.get() {
        Some(Value::String(b)) if !b.trim().is_empty() => parse_chat_body(&id, b),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            Err(FrameError::chat(&id, "missing request body"))
        }
        Some(other) => Err(FrameError::chat(
            &id,
            format!("body must be a JSON string (got {})", json_kind(other)),
        )),
    }
}

/// Parses the JSON-string body of a chat request.
pub fn parse_chat_body(id: &str, body: &str) -> Result<ChatRequest, FrameError> {
    let parsed: Value = super::json::from_str_deep(body)
        .map_err(|e| FrameError::chat(id, format!("request body is not valid JSON: {e}")))?;
    let Value::Object(fields) = parsed else {
        return Err(FrameError::chat(
            id,
            format!("request body is not a JSON object (got {})", json_kind(&parsed)),
        ));
    };
    let w: ChatBodyWire = serde_json::from_value(Value::Object(fields))
        .map_err(|e| FrameError::chat(id, format!("request body: {e}")))?;
    let raw_messages = match w.messages.0 {
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
    let trigger = match w.trigger.get() {
        Some(Value::String(t)) if t == "regenerate-message" => Trigger::RegenerateMessage,
        _ => Trigger::SubmitMessage,
    };
    let client_tools = parse_client_tools(w.client_tools.get(), |e| FrameError::chat(id, e))?;
    Ok(ChatRequest { id: id.to_owned(), messages, trigger, client_tools, body: w.rest })
}

// ── Outgoing ────────────────────────────────────────────────────────────────

/// The `type` key of a server frame. Each frame type declares it among its fields where the
/// TypeScript server puts it, since serde writes fields in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameType {
    Identity,
    McpServers,
    Rpc,
    ProtocolError,
    UseChatResponse,
    ChatMessages,
    MessageUpdated,
    ChatClear,
    StreamResuming,
    StreamResumeNone,
    StreamPending,
    ChatRecovering,
    WorkspaceChanged,
}

impl Serialize for FrameType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            FrameType::Identity => types::IDENTITY,
            FrameType::McpServers => types::MCP_SERVERS,
            FrameType::Rpc => types::RPC,
            FrameType::ProtocolError => types::PROTOCOL_ERROR,
            FrameType::UseChatResponse => types::USE_CHAT_RESPONSE,
            FrameType::ChatMessages => types::CHAT_MESSAGES,
            FrameType::MessageUpdated => types::MESSAGE_UPDATED,
            FrameType::ChatClear => types::CHAT_CLEAR,
            FrameType::StreamResuming => types::STREAM_RESUMING,
            FrameType::StreamResumeNone => types::STREAM_RESUME_NONE,
            FrameType::StreamPending => types::STREAM_PENDING,
            FrameType::ChatRecovering => types::CHAT_RECOVERING,
            FrameType::WorkspaceChanged => types::WORKSPACE_CHANGED,
        })
    }
}

/// The text of a server frame. These frames hold only strings, booleans and JSON values, so
/// serializing them cannot fail.
pub fn to_text(frame: &impl Serialize) -> String {
    serde_json::to_string(frame).unwrap_or_default()
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Optional ids are left out when absent or empty, as the TypeScript server does.
fn is_blank(v: &Option<&str>) -> bool {
    v.is_none_or(str::is_empty)
}

/// `{"name","agent","type":"cf_agent_identity"}`: who the client is talking to, on connect.
#[derive(Debug, Clone, Serialize)]
pub struct Identity<'a> {
    /// The instance name from the URL.
    pub name: &'a str,
    /// The agent's URL namespace (its kebab-case class name).
    pub agent: &'a str,
    #[serde(rename = "type")]
    kind: FrameType,
}

impl<'a> Identity<'a> {
    /// The identity of instance `name` of agent `agent`.
    pub fn new(name: &'a str, agent: &'a str) -> Self {
        Self { name, agent, kind: FrameType::Identity }
    }
}

/// `{"mcp":{prompts,resources,servers,tools},"type":"cf_agent_mcp_servers"}`: the MCP state.
#[derive(Debug, Clone, Serialize)]
pub struct McpServers<'a> {
    /// The state, as `getMcpServers()` returns it.
    pub mcp: &'a Value,
    #[serde(rename = "type")]
    kind: FrameType,
}

impl<'a> McpServers<'a> {
    /// The frame for MCP state `mcp`.
    pub fn new(mcp: &'a Value) -> Self {
        Self { mcp, kind: FrameType::McpServers }
    }
}

/// `{"paths","truncated","type":"think_workspace_changed"}`: the workspace paths written,
/// created or removed since the last such frame (at most a bounded number; `truncated` says
/// more changed), pushed to every tab so a file tree follows the agent without polling.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceChanged<'a> {
    /// Normalized paths that changed, sorted.
    pub paths: &'a [String],
    /// More paths changed than are listed.
    pub truncated: bool,
    #[serde(rename = "type")]
    kind: FrameType,
}

impl<'a> WorkspaceChanged<'a> {
    /// The frame for the changed `paths`.
    pub fn new(paths: &'a [String], truncated: bool) -> Self {
        Self { paths, truncated, kind: FrameType::WorkspaceChanged }
    }
}

/// `{"done":true,"id","result","success":true,"type":"rpc"}`: a callable's result.
#[derive(Debug, Clone, Serialize)]
pub struct RpcResult<'a> {
    done: bool,
    /// The call's id.
    pub id: &'a str,
    /// What the callable returned.
    pub result: &'a Value,
    success: bool,
    #[serde(rename = "type")]
    kind: FrameType,
}

impl<'a> RpcResult<'a> {
    /// The final (and only) result of call `id`.
    pub fn new(id: &'a str, result: &'a Value) -> Self {
        Self { done: true, id, result, success: true, kind: FrameType::Rpc }
    }
}

/// `{"error","id","success":false,"type":"rpc"}`: a callable failed or does not exist.
#[derive(Debug, Clone, Serialize)]
pub struct RpcError<'a> {
    /// Why the call failed.
    pub error: &'a str,
    /// The call's id.
    pub id: &'a str,
    success: bool,
    #[serde(rename = "type")]
    kind: FrameType,
}

impl<'a> RpcError<'a> {
    /// The failure of call `id`.
    pub fn new(id: &'a str, error: &'a str) -> Self {
        Self { error, id, success: false, kind: FrameType::Rpc }
    }
}

/// `{"type":"cf_agent_protocol_error","error"}`, think-rs's answer to a frame it could not
/// understand and cannot answer on a request id.
#[derive(Debug, Clone, Serialize)]
pub struct ProtocolError<'a> {
    #[serde(rename = "type")]
    kind: FrameType,
    /// What was wrong with the frame.
    pub error: &'a str,
}

impl<'a> ProtocolError<'a> {
    /// The answer to a frame that was wrong because of `error`.
    pub fn new(error: &'a str) -> Self {
        Self { kind: FrameType::ProtocolError, error }
    }
}

/// How a chat request ended, on its terminal frame (`outcome`, read by `agents` 0.32 and
/// later for `onTurnEnd` and the "recovering" indicator; older clients ignore it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatOutcome {
    /// The turn finished (also when it stopped to wait for a human).
    Completed,
    /// The turn failed.
    Error,
    /// The turn was cancelled while it ran (or a crash cut it and it was not continued).
    Aborted,
    /// The turn never ran: a newer send replaced it or the concurrency policy dropped it.
    Skipped,
    /// This request stopped, and recovery continues the same turn under a new request that
    /// carries the same `messageIds`.
    Recovering,
}

/// `{"type":"cf_agent_use_chat_response","id","body","done"[,"error"][,"seq"][,"outcome"]
/// [,"continuation"][,"messageIds"]}`: one live frame of a chat stream: a chunk, its end, or
/// an error. The optional fields are in the order Think 0.23 writes them.
#[derive(Debug, Clone, Serialize)]
pub struct ChatResponse<'a> {
    #[serde(rename = "type")]
    kind: FrameType,
    /// The chat request's id.
    pub id: &'a str,
    /// One UIMessageChunk as JSON text, an error text, or empty.
    pub body: &'a str,
    /// The stream ends with this frame.
    pub done: bool,
    /// `body` is an error the client shows instead of a chunk.
    #[serde(skip_serializing_if = "is_false")]
    pub error: bool,
    /// A chunk's index in its stream, the same as its replay carries, so a client can skip
    /// replayed chunks it already applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// How the request ended, on the `done` frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ChatOutcome>,
    /// The stream continues the last assistant message (an auto-continuation).
    #[serde(skip_serializing_if = "is_false")]
    pub continuation: bool,
    /// The ids of the user messages the request carried, on terminal (`done` or `error`)
    /// frames, so a client settles exactly the sends the end belongs to.
    #[serde(rename = "messageIds", skip_serializing_if = "is_empty_ids")]
    pub message_ids: &'a [String],
}

impl<'a> ChatResponse<'a> {
    fn frame(id: &'a str, body: &'a str, done: bool, error: bool) -> Self {
        Self {
            kind: FrameType::UseChatResponse,
            id,
            body,
            done,
            error,
            seq: None,
            outcome: None,
            continuation: false,
            message_ids: &[],
        }
    }

    /// One live chunk; `body` is the chunk's JSON text (as stored for replay), `seq` its
    /// index in the stream.
    pub fn chunk(id: &'a str, body: &'a str, seq: u64) -> Self {
        Self { seq: Some(seq), ..Self::frame(id, body, false, false) }
    }

    /// The end of a stream, ended as `outcome`.
    pub fn done(id: &'a str, outcome: ChatOutcome) -> Self {
        Self { outcome: Some(outcome), ..Self::frame(id, "", true, false) }
    }

    /// An in-stream error; the client errors its stream with `text`. The done frame follows.
    pub fn error(id: &'a str, text: &'a str) -> Self {
        Self::frame(id, text, false, true)
    }

    /// Ends a request that failed before streaming: a single `done:true, error:true` frame.
    pub fn request_error(id: &'a str, text: &'a str) -> Self {
        Self::frame(id, text, true, true)
    }

    /// Marks the frame as part of a continuation stream (or not).
    pub fn in_continuation(mut self, continuation: bool) -> Self {
        self.continuation = continuation;
        self
    }

    /// Names the user messages the request carried (kept on terminal frames only).
    pub fn for_messages(mut self, ids: &'a [String]) -> Self {
        if self.done || self.error {
            self.message_ids = ids;
        }
        self
    }
}

fn is_empty_ids(ids: &&[String]) -> bool {
    ids.is_empty()
}

/// The ids of the trailing user messages of a request's `messages` (Think's
/// `originMessageIds`): the sends a turn answers.
pub fn origin_message_ids(messages: &[UIMessage]) -> Vec<String> {
    let mut ids: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|m| m.role == crate::protocol::message::Role::User)
        .filter(|m| !m.id.is_empty())
        .map(|m| m.id.clone())
        .collect();
    ids.reverse();
    ids
}

/// The text of [`ChatResponse::chunk`] for `chunk`, written straight from the value into a
/// buffer of its exact size: a chunk that carries a large tool input is not first held as a
/// string of its own, nor copied into a JSON tree.
pub fn chat_chunk_frame_text<T: Serialize + ?Sized>(
    id: &str,
    chunk: &T,
    seq: u64,
    continuation: bool,
) -> String {
    let prefix = format!(
        "{{\"type\":\"{}\",\"id\":{},\"body\":\"",
        types::USE_CHAT_RESPONSE,
        Value::from(id)
    );
    let suffix = if continuation {
        format!("\",\"done\":false,\"seq\":{seq},\"continuation\":true}}")
    } else {
        format!("\",\"done\":false,\"seq\":{seq}}}")
    };
    super::json::embed_exact(&prefix, chunk, &suffix)
}

/// `{"body","done","id","type":"cf_agent_use_chat_response","replay":true[,"seq"]
/// [,"replayComplete"][,"continuation"][,"messageIds"][,"outcome"]}`: a stored chunk replayed
/// after a resume ACK, or the end of that replay. A replay mirrors what a live client saw: a
/// chunk carries the `seq` its live frame carried, and a continuation's frames say so.
#[derive(Debug, Clone, Serialize)]
pub struct Replay<'a> {
    /// A stored chunk's JSON text, or empty for the end frames.
    pub body: &'a str,
    /// The replayed stream has ended (finished or orphaned).
    pub done: bool,
    /// The stream's request id.
    pub id: &'a str,
    #[serde(rename = "type")]
    kind: FrameType,
    replay: bool,
    /// The chunk's index in its stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The replay of a still live stream is over; live chunks follow.
    #[serde(rename = "replayComplete", skip_serializing_if = "is_false")]
    pub replay_complete: bool,
    /// The replayed stream continued the last assistant message.
    #[serde(skip_serializing_if = "is_false")]
    pub continuation: bool,
    /// The user messages the request carried, on the `done` frame.
    #[serde(rename = "messageIds", skip_serializing_if = "is_empty_ids")]
    pub message_ids: &'a [String],
    /// How the replayed request ended, on the `done` frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ChatOutcome>,
}

impl<'a> Replay<'a> {
    fn frame(id: &'a str, body: &'a str, done: bool, replay_complete: bool) -> Self {
        Self {
            body,
            done,
            id,
            kind: FrameType::UseChatResponse,
            replay: true,
            seq: None,
            replay_complete,
            continuation: false,
            message_ids: &[],
            outcome: None,
        }
    }

    /// Stored chunk number `seq` of stream `id`.
    pub fn chunk(id: &'a str, body: &'a str, seq: u64) -> Self {
        Self { seq: Some(seq), ..Self::frame(id, body, false, false) }
    }

    /// The end of a replay of a stream still live: the client flushes and keeps listening.
    pub fn complete(id: &'a str) -> Self {
        Self::frame(id, "", false, true)
    }

    /// The end of a replay of a finished or orphaned stream (the golden `replayDoneFrame`,
    /// also the ACK fallback when nothing is left to replay).
    pub fn done(id: &'a str) -> Self {
        Self::frame(id, "", true, false)
    }

    /// Marks the frame as part of a continuation stream (or not).
    pub fn in_continuation(mut self, continuation: bool) -> Self {
        self.continuation = continuation;
        self
    }

    /// The end of the replayed request: how it ended and the user messages it carried.
    pub fn ended(mut self, outcome: ChatOutcome, ids: &'a [String]) -> Self {
        if self.done {
            self.outcome = Some(outcome);
            self.message_ids = ids;
        }
        self
    }
}

/// `{"body","done":true,"error":true,"id","type":"cf_agent_use_chat_response"[,"messageIds"]}`:
/// the terminal error of a turn that failed while nobody was connected, delivered after the
/// ACK. No `replay` flag: it must look like a live terminal so `useChat` shows the error.
#[derive(Debug, Clone, Serialize)]
pub struct TerminalError<'a> {
    /// The error text.
    pub body: &'a str,
    done: bool,
    error: bool,
    /// The failed stream's request id.
    pub id: &'a str,
    #[serde(rename = "type")]
    kind: FrameType,
    /// The user messages the failed request carried.
    #[serde(rename = "messageIds", skip_serializing_if = "is_empty_ids")]
    pub message_ids: &'a [String],
}

impl<'a> TerminalError<'a> {
    /// The terminal error `body` of stream `id`.
    pub fn new(id: &'a str, body: &'a str) -> Self {
        Self {
            body,
            done: true,
            error: true,
            id,
            kind: FrameType::UseChatResponse,
            message_ids: &[],
        }
    }

    /// Names the user messages the request carried.
    pub fn for_messages(mut self, ids: &'a [String]) -> Self {
        self.message_ids = ids;
        self
    }
}

/// `{"type":"cf_agent_chat_messages","messages"[,"connect":true]}`: the whole transcript.
#[derive(Debug, Clone, Serialize)]
pub struct ChatMessages<'a> {
    #[serde(rename = "type")]
    kind: FrameType,
    /// The transcript, in order.
    pub messages: &'a [UIMessage],
    /// Set on the transcript a newly connected tab gets: it predates any request the tab
    /// buffered while disconnected, so the tab keeps those sends in view (`agents` #1983);
    /// any other transcript is authoritative.
    #[serde(skip_serializing_if = "is_false")]
    pub connect: bool,
}

impl<'a> ChatMessages<'a> {
    /// The frame for transcript `messages`.
    pub fn new(messages: &'a [UIMessage]) -> Self {
        Self { kind: FrameType::ChatMessages, messages, connect: false }
    }

    /// The transcript sent to a tab as it connects.
    pub fn on_connect(messages: &'a [UIMessage]) -> Self {
        Self { connect: true, ..Self::new(messages) }
    }
}

/// `{"type":"cf_agent_message_updated","message"}`: one message changed in place (a tool
/// result or approval was applied).
#[derive(Debug, Clone, Serialize)]
pub struct MessageUpdated<'a> {
    #[serde(rename = "type")]
    kind: FrameType,
    /// The message as it is now.
    pub message: &'a UIMessage,
}

impl<'a> MessageUpdated<'a> {
    /// The frame for the updated `message`.
    pub fn new(message: &'a UIMessage) -> Self {
        Self { kind: FrameType::MessageUpdated, message }
    }
}

/// `{"type":"cf_agent_chat_clear"}`, sent to the other tabs after a clear.
#[derive(Debug, Clone, Serialize)]
pub struct ChatClear {
    #[serde(rename = "type")]
    kind: FrameType,
}

impl ChatClear {
    /// The clear frame.
    pub fn new() -> Self {
        Self { kind: FrameType::ChatClear }
    }
}

impl Default for ChatClear {
    fn default() -> Self {
        Self::new()
    }
}

/// `{"type":"cf_agent_stream_resuming","id"[,"probeId"]}`: a stream is live; ACK it to be
/// replayed what was missed.
#[derive(Debug, Clone, Serialize)]
pub struct StreamResuming<'a> {
    #[serde(rename = "type")]
    kind: FrameType,
    /// The live stream's request id.
    pub id: &'a str,
    /// The probe this answers, if it answers one.
    #[serde(rename = "probeId", skip_serializing_if = "is_blank")]
    pub probe_id: Option<&'a str>,
}

impl<'a> StreamResuming<'a> {
    /// The offer of stream `id`, answering `probe_id` if given.
    pub fn new(id: &'a str, probe_id: Option<&'a str>) -> Self {
        Self { kind: FrameType::StreamResuming, id, probe_id }
    }
}

/// Why no stream was offered to a resume probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResumeNoneReason {
    /// Nothing is active, pending or terminal: the agent is globally idle.
    Idle,
    /// A continuation is running for another live connection.
    ContinuationOwned,
}

/// `{"type":"cf_agent_stream_resume_none","reason"[,"probeId"]}`: nothing to resume.
#[derive(Debug, Clone, Serialize)]
pub struct StreamResumeNone<'a> {
    #[serde(rename = "type")]
    kind: FrameType,
    /// Why nothing is offered.
    pub reason: ResumeNoneReason,
    /// The probe this answers.
    #[serde(rename = "probeId", skip_serializing_if = "is_blank")]
    pub probe_id: Option<&'a str>,
}

impl<'a> StreamResumeNone<'a> {
    /// The answer to `probe_id`: nothing to resume, because of `reason`.
    pub fn new(reason: ResumeNoneReason, probe_id: Option<&'a str>) -> Self {
        Self { kind: FrameType::StreamResumeNone, reason, probe_id }
    }
}

/// `{"type":"cf_agent_stream_pending"[,"id"][,"probeId"]}`: a turn is accepted but not yet
/// streaming; keep waiting for its `stream_resuming`.
#[derive(Debug, Clone, Serialize)]
pub struct StreamPending<'a> {
    #[serde(rename = "type")]
    kind: FrameType,
    /// The accepted request's id, when known.
    #[serde(skip_serializing_if = "is_blank")]
    pub id: Option<&'a str>,
    /// The probe this answers.
    #[serde(rename = "probeId", skip_serializing_if = "is_blank")]
    pub probe_id: Option<&'a str>,
}

impl<'a> StreamPending<'a> {
    /// The answer to `probe_id`: turn `id` (if known) is on its way.
    pub fn new(id: Option<&'a str>, probe_id: Option<&'a str>) -> Self {
        Self { kind: FrameType::StreamPending, id, probe_id }
    }
}

/// `{"type":"cf_agent_chat_recovering","recovering"[,"id"]}`: recovery of a turn a crash cut
/// short started (`true`) or settled (`false`).
#[derive(Debug, Clone, Serialize)]
pub struct ChatRecovering<'a> {
    #[serde(rename = "type")]
    kind: FrameType,
    /// Whether recovery is under way.
    pub recovering: bool,
    /// The interrupted stream's id, when known.
    #[serde(skip_serializing_if = "is_blank")]
    pub id: Option<&'a str>,
}

impl<'a> ChatRecovering<'a> {
    /// Recovery of stream `id` (if known) started.
    pub fn started(id: Option<&'a str>) -> Self {
        Self { kind: FrameType::ChatRecovering, recovering: true, id }
    }

    /// Recovery of stream `id` (if known) settled.
    pub fn settled(id: Option<&'a str>) -> Self {
        Self { kind: FrameType::ChatRecovering, recovering: false, id }
    }
}

/// `{"type":"agent-tool-event","parentToolCallId","sequence","event":{kind,…}[,"replay":true]}`:
/// one event of a child agent that runs as the tool call `parentToolCallId` (agents as tools).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentToolEvent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    /// The parent's tool call the child runs as.
    pub parent_tool_call_id: &'a str,
    /// The event's place in the run, from 0.
    pub sequence: u64,
    /// `{kind:"started"|"chunk"|"finished"|"error"|"aborted"|"interrupted", …}`.
    pub event: Value,
    /// Set on events sent again to a tab that joined mid-run.
    #[serde(skip_serializing_if = "is_false")]
    pub replay: bool,
}

impl<'a> AgentToolEvent<'a> {
    /// The `type` of these frames.
    pub const TYPE: &'static str = "agent-tool-event";

    /// Event number `sequence` of the child running as `parent_tool_call_id`.
    pub fn new(parent_tool_call_id: &'a str, sequence: u64, event: Value) -> Self {
        Self { kind: Self::TYPE, parent_tool_call_id, sequence, event, replay: false }
    }
}

/// The answer to a malformed frame: on its chat request, on its rpc call, or a protocol error.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ErrorFrame<'a> {
    /// Ends the chat request with an error.
    Chat(ChatResponse<'a>),
    /// Fails the rpc call.
    Rpc(RpcError<'a>),
    /// No id to answer on.
    Protocol(ProtocolError<'a>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::Role;
    use serde_json::json;

    #[test]
    fn chunk_frame_text_is_the_serde_frame() {
        for (seq, continuation) in [(0, false), (7, true), (u64::MAX, false)] {
            let chunk = json!({"type": "text-delta", "id": "t", "delta": "é\n\"q\\"});
            let text = chat_chunk_frame_text("req-\"1", &chunk, seq, continuation);
            let body = chunk.to_string();
            let frame = ChatResponse::chunk("req-\"1", &body, seq).in_continuation(continuation);
            assert_eq!(text, to_text(&frame));
        }
    }

    fn s(v: &impl Serialize) -> String {
        serde_json::to_string(v).unwrap()
    }

    fn val(v: &impl Serialize) -> Value {
        serde_json::to_value(v).unwrap()
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
            assert_eq!(val(&e.reply_frame())["type"], "cf_agent_protocol_error");
            assert_eq!(val(&e.reply_frame())["error"], json!(e.message));
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
            s(&Identity::new("default", "my-agent")),
            r#"{"name":"default","agent":"my-agent","type":"cf_agent_identity"}"#
        );
        assert_eq!(
            s(&McpServers::new(
                &json!({"servers": {}, "tools": [], "prompts": [], "resources": []})
            )),
            r#"{"mcp":{"servers":{},"tools":[],"prompts":[],"resources":[]},"type":"cf_agent_mcp_servers"}"#
        );
        assert_eq!(
            s(&RpcResult::new("i", &json!(3))),
            r#"{"done":true,"id":"i","result":3,"success":true,"type":"rpc"}"#
        );
        assert_eq!(
            s(&RpcError::new("i", "Method x does not exist")),
            r#"{"error":"Method x does not exist","id":"i","success":false,"type":"rpc"}"#
        );
        assert_eq!(
            s(&ProtocolError::new("bad")),
            r#"{"type":"cf_agent_protocol_error","error":"bad"}"#
        );
    }

    #[test]
    fn chat_stream_frames() {
        let chunk = crate::protocol::chunk::start(Some("srv"), None).to_string();
        assert_eq!(
            s(&ChatResponse::chunk("V1StGXR8", &chunk, 0)),
            r#"{"type":"cf_agent_use_chat_response","id":"V1StGXR8","body":"{\"type\":\"start\",\"messageId\":\"srv\"}","done":false,"seq":0}"#
        );
        assert_eq!(
            s(&ChatResponse::chunk("r", "{}", 3).in_continuation(true)),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"{}","done":false,"seq":3,"continuation":true}"#
        );
        let ids = ["u1".to_owned(), "u2".to_owned()];
        assert_eq!(
            s(&ChatResponse::done("r", ChatOutcome::Completed).for_messages(&ids)),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"","done":true,"outcome":"completed","messageIds":["u1","u2"]}"#
        );
        assert_eq!(
            s(&ChatResponse::done("r", ChatOutcome::Recovering).in_continuation(true)),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"","done":true,"outcome":"recovering","continuation":true}"#
        );
        assert_eq!(
            s(&ChatResponse::error("r", "boom").in_continuation(true).for_messages(&ids)),
            r#"{"type":"cf_agent_use_chat_response","id":"r","body":"boom","done":false,"error":true,"continuation":true,"messageIds":["u1","u2"]}"#
        );
        // A chunk is not terminal: it never names the request's messages.
        assert!(val(&ChatResponse::chunk("r", "{}", 0).for_messages(&ids))
            .get("messageIds")
            .is_none());
        for (outcome, text) in [
            (ChatOutcome::Error, "error"),
            (ChatOutcome::Aborted, "aborted"),
            (ChatOutcome::Skipped, "skipped"),
        ] {
            assert_eq!(val(&ChatResponse::done("r", outcome))["outcome"], text);
        }
        assert_eq!(
            s(&Replay::chunk("r", "{\"type\":\"text-start\"}", 0)),
            r#"{"body":"{\"type\":\"text-start\"}","done":false,"id":"r","type":"cf_agent_use_chat_response","replay":true,"seq":0}"#
        );
        assert_eq!(
            s(&Replay::chunk("r", "{}", 4).in_continuation(true)),
            r#"{"body":"{}","done":false,"id":"r","type":"cf_agent_use_chat_response","replay":true,"seq":4,"continuation":true}"#
        );
        assert_eq!(
            s(&Replay::complete("r")),
            r#"{"body":"","done":false,"id":"r","type":"cf_agent_use_chat_response","replay":true,"replayComplete":true}"#
        );
        assert_eq!(
            s(&Replay::done("r").in_continuation(true).ended(ChatOutcome::Aborted, &ids)),
            r#"{"body":"","done":true,"id":"r","type":"cf_agent_use_chat_response","replay":true,"continuation":true,"messageIds":["u1","u2"],"outcome":"aborted"}"#
        );
        assert_eq!(
            s(&TerminalError::new("r", "boom").for_messages(&ids)),
            r#"{"body":"boom","done":true,"error":true,"id":"r","type":"cf_agent_use_chat_response","messageIds":["u1","u2"]}"#
        );
    }

    #[test]
    fn origin_message_ids_are_the_trailing_user_messages() {
        let m = |id: &str, role| UIMessage::new(id, role, vec![]);
        let msgs = [
            m("u0", Role::User),
            m("a1", Role::Assistant),
            m("u1", Role::User),
            m("u2", Role::User),
        ];
        assert_eq!(origin_message_ids(&msgs), ["u1", "u2"]);
        assert!(origin_message_ids(&msgs[..2]).is_empty(), "an assistant message last: none");
        assert!(origin_message_ids(&[]).is_empty());
    }

    #[test]
    fn transcript_frames() {
        let m = UIMessage::new("m1", Role::User, vec![json!({"type": "text", "text": "hi"})]);
        assert_eq!(
            s(&ChatMessages::new(std::slice::from_ref(&m))),
            r#"{"type":"cf_agent_chat_messages","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#
        );
        assert_eq!(
            s(&ChatMessages::on_connect(&[])),
            r#"{"type":"cf_agent_chat_messages","messages":[],"connect":true}"#
        );
        assert_eq!(
            s(&MessageUpdated::new(&m)),
            r#"{"type":"cf_agent_message_updated","message":{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}}"#
        );
        assert_eq!(s(&ChatClear::new()), r#"{"type":"cf_agent_chat_clear"}"#);
        assert_eq!(
            s(&ChatRecovering::settled(None)),
            r#"{"type":"cf_agent_chat_recovering","recovering":false}"#
        );
    }

    // Golden resume-handshake frames (resume-handshake-frames.ts), compared as exact bytes.

    #[test]
    fn golden_stream_resuming() {
        assert_eq!(
            s(&StreamResuming::new("req-1", None)),
            r#"{"type":"cf_agent_stream_resuming","id":"req-1"}"#
        );
        assert_eq!(
            s(&StreamResuming::new("req-1", Some("p"))),
            r#"{"type":"cf_agent_stream_resuming","id":"req-1","probeId":"p"}"#
        );
    }

    #[test]
    fn golden_stream_resume_none() {
        let idle = StreamResumeNone::new(ResumeNoneReason::Idle, None);
        assert_eq!(s(&idle), r#"{"type":"cf_agent_stream_resume_none","reason":"idle"}"#);
        assert!(val(&idle).get("id").is_none());
        assert_eq!(
            s(&StreamResumeNone::new(ResumeNoneReason::ContinuationOwned, None)),
            r#"{"type":"cf_agent_stream_resume_none","reason":"continuation-owned"}"#
        );
        assert_eq!(
            s(&StreamResumeNone::new(ResumeNoneReason::Idle, Some("probe-1"))),
            r#"{"type":"cf_agent_stream_resume_none","reason":"idle","probeId":"probe-1"}"#
        );
    }

    #[test]
    fn golden_replay_done_is_clean_close() {
        let f = Replay::done("req-1");
        assert_eq!(
            s(&f),
            r#"{"body":"","done":true,"id":"req-1","type":"cf_agent_use_chat_response","replay":true}"#
        );
        assert!(val(&f).get("error").is_none());
    }

    #[test]
    fn golden_terminal_error_has_no_replay_flag() {
        let f = TerminalError::new("req-1", "boom");
        assert_eq!(
            s(&f),
            r#"{"body":"boom","done":true,"error":true,"id":"req-1","type":"cf_agent_use_chat_response"}"#
        );
        assert!(val(&f).get("replay").is_none());
    }

    #[test]
    fn golden_stream_pending_id_only_when_present() {
        assert_eq!(
            s(&StreamPending::new(Some("req-1"), None)),
            r#"{"type":"cf_agent_stream_pending","id":"req-1"}"#
        );
        assert_eq!(s(&StreamPending::new(None, None)), r#"{"type":"cf_agent_stream_pending"}"#);
        assert_eq!(
            s(&StreamPending::new(Some(""), Some("p"))),
            r#"{"type":"cf_agent_stream_pending","probeId":"p"}"#
        );
        assert_eq!(
            s(&StreamPending::new(Some("c"), Some("p"))),
            r#"{"type":"cf_agent_stream_pending","id":"c","probeId":"p"}"#
        );
    }

    #[test]
    fn golden_recovering_id_only_when_present() {
        assert_eq!(
            s(&ChatRecovering::started(Some("req-1"))),
            r#"{"type":"cf_agent_chat_recovering","recovering":true,"id":"req-1"}"#
        );
        let no_id = ChatRecovering::started(None);
        assert_eq!(s(&no_id), r#"{"type":"cf_agent_chat_recovering","recovering":true}"#);
        assert!(val(&no_id).get("id").is_none());
    }

    #[test]
    fn golden_frame_types_match_constants() {
        let kind = |v: Value| v["type"].as_str().unwrap_or_default().to_owned();
        assert_eq!(kind(val(&StreamResuming::new("x", None))), types::STREAM_RESUMING);
        assert_eq!(
            kind(val(&StreamResumeNone::new(ResumeNoneReason::Idle, None))),
            types::STREAM_RESUME_NONE
        );
        assert_eq!(kind(val(&Replay::done("x"))), types::USE_CHAT_RESPONSE);
        assert_eq!(kind(val(&TerminalError::new("x", "y"))), types::USE_CHAT_RESPONSE);
        assert_eq!(kind(val(&ChatRecovering::started(Some("x")))), types::CHAT_RECOVERING);
        assert_eq!(kind(val(&StreamPending::new(Some("x"), None))), types::STREAM_PENDING);
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
                    let reply = val(&e.reply_frame());
                    assert!(reply.get("type").and_then(Value::as_str).is_some(), "{input:?}");
                    assert!(!e.message.is_empty());
                }
            }
        }
        assert!(ok > 0 && ok < inputs.len(), "corpus exercises both paths ({ok} ok)");
    }
}
