//! WebSocket frames between the npm `agents` clients and the agent: a tolerant parser for
//! what clients send, and a serde type for every frame the server sends.
//!
//! Each server frame's fields are declared in the order the TypeScript server emits its keys
//! (serde writes them in declaration order), so captured transcripts compare byte for byte.
//! Clients only care about keys, not order.

mod incoming;
mod outgoing;

pub use incoming::*;
pub use outgoing::*;

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

#[cfg(test)]
mod tests;
