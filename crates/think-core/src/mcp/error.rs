//! Why an MCP operation failed, kept structured so the client can tell a stale session (retry
//! after re-initialising) from a dead server (mark it failed) from a tool's own error.

use super::oauth::OAuthError;
use crate::net::NetError;
use crate::store::StoreError;

/// A failed MCP operation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum McpError {
    /// The caller's input (name, id, options) is unusable.
    Invalid(String),
    /// The server URL is malformed or names an address the policy refuses.
    Url(NetError),
    /// No server is registered under this id.
    UnknownServer(String),
    /// The connection failed, broke, or the server spoke something other than MCP.
    Transport(String),
    /// The server answered with an HTTP error status.
    Http {
        /// The status code.
        status: u16,
        /// The start of the response body, for the message.
        body: String,
    },
    /// The server no longer knows our `Mcp-Session-Id` (HTTP 404): initialise again.
    SessionExpired,
    /// No answer within the given number of milliseconds.
    Timeout(u64),
    /// The server answered the request with a JSON-RPC error.
    Rpc {
        /// The JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
    },
    /// Persisting the server list (or its tokens, pins, pending inputs) failed.
    Store(StoreError),
    /// The server answered 401: credentials are missing, expired or revoked.
    Unauthorized {
        /// Its `WWW-Authenticate` header, which points to the OAuth metadata.
        challenge: Option<String>,
    },
    /// The server waits for the user to authorize the agent at this URL.
    AuthorizationRequired(String),
    /// An OAuth step failed.
    OAuth(OAuthError),
}

impl McpError {
    /// Whether the failure says the server (not the request) is unusable, so its state
    /// should become `failed`: a broken connection, rejected credentials, a gateway or
    /// availability error. A plain 500 is taken as that request's failure.
    pub(crate) fn is_connection_failure(&self) -> bool {
        match self {
            McpError::Transport(_) | McpError::Unauthorized { .. } => true,
            McpError::Http { status, .. } => {
                matches!(status, 401 | 403 | 404 | 405 | 410 | 502 | 503 | 504)
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for McpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpError::Invalid(m) | McpError::Transport(m) => f.write_str(m),
            McpError::Url(e @ NetError::Blocked { url, .. }) => write!(
                f,
                "Blocked URL: {url}: MCP client connections to private/internal addresses are not \
                 allowed: {e} (an app allows them with THINK_ALLOW_PRIVATE_NETWORK=true, or \
                 AgentSpec::allow_private_network)"
            ),
            McpError::Url(e) => write!(f, "invalid MCP server URL: {e}"),
            McpError::UnknownServer(id) => write!(f, "no MCP server with id \"{id}\""),
            McpError::Http { status, body } if body.is_empty() => write!(f, "HTTP {status}"),
            McpError::Http { status, body } => write!(f, "HTTP {status}: {body}"),
            McpError::SessionExpired => f.write_str("the server ended the MCP session (HTTP 404)"),
            McpError::Timeout(ms) => write!(f, "no response within {ms} ms"),
            McpError::Rpc { code, message } => write!(f, "{message} (JSON-RPC error {code})"),
            McpError::Store(e) => write!(f, "storage error: {e}"),
            McpError::Unauthorized { .. } => f.write_str("HTTP 401: Unauthorized"),
            McpError::AuthorizationRequired(_) => f.write_str(
                "the server waits for the user to authorize the agent (open the authUrl)",
            ),
            McpError::OAuth(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for McpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            McpError::Url(e) => Some(e),
            McpError::OAuth(e) => Some(e),
            McpError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<NetError> for McpError {
    fn from(e: NetError) -> Self {
        McpError::Url(e)
    }
}

impl From<StoreError> for McpError {
    fn from(e: StoreError) -> Self {
        McpError::Store(e)
    }
}

impl From<crate::platform::HttpError> for McpError {
    fn from(e: crate::platform::HttpError) -> Self {
        McpError::Transport(e.to_string())
    }
}

impl From<OAuthError> for McpError {
    fn from(e: OAuthError) -> Self {
        McpError::OAuth(e)
    }
}
