//! The MCP client: remote MCP servers whose tools join every turn.
//!
//! [`McpClient`] keeps the agent's registered servers (persisted in its SQLite), connects them
//! over Streamable HTTP or the legacy HTTP+SSE transport through the `HttpClient` seam, lists
//! their tools and exposes them as [`crate::tools::Tool`]s named
//! `tool_<serverId without dashes>_<toolName>`. Every observable change is reported through
//! [`McpClient::set_on_change`] so the agent can push [`McpClient::frame`]
//! (`cf_agent_mcp_servers`) to all tabs.
//!
//! Beyond the reference, tool definitions are pinned: if a server changes a tool's description
//! or input schema after it was first seen, the tool is held back until the app calls
//! [`McpClient::accept_mcp_tool_changes`].
//!
//! Nothing here spawns. The glue runs [`McpClient::restore`] when the object starts (in the
//! background), turns may await [`McpClient::wait_for_connections`], and
//! [`McpClient::listen`] is optional: server notifications that arrive inside responses are
//! handled anyway. Response bodies must be cancel-safe streams (a dropped `next()` loses no
//! chunk), as the legacy SSE stream is read by whichever caller is waiting.

mod client;
mod elicitation;
mod error;
mod jsonrpc;
mod oauth;
mod resource_tools;
mod session;
mod store;
mod tools;
mod transport;

#[cfg(test)]
mod oauth_tests;
#[cfg(test)]
mod tests;

pub use client::{
    AddServerOptions, AddedServer, ConnectionState, ListenEnd, McpClient, McpConfig,
    PendingToolChange, ServerStatus,
};
pub use error::McpError;
pub use oauth::OAuthError;
pub use tools::tool_name;
pub use transport::TransportKind;
