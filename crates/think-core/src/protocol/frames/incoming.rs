//! What clients send: the frame shapes and a parser that never panics and names the field
//! a malformed frame got wrong.

use super::outgoing::{ChatResponse, ErrorFrame, ProtocolError, RpcError};
use super::types;
use crate::protocol::message::{json_kind, truthy, UIMessage};
use crate::protocol::tool_state::ToolResultOutcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

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
    let value: Value = crate::protocol::json::from_str_deep(raw)
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
    let parsed: Value = crate::protocol::json::from_str_deep(body)
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
