//! What the server sends: one serde type per frame, fields in the order the TypeScript
//! server writes its keys.

use super::types;
use crate::protocol::message::UIMessage;
use serde::Serialize;
use serde_json::Value;

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
    crate::protocol::json::embed_exact(&prefix, chunk, &suffix)
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
