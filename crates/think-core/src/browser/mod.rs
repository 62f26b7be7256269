//! Browser tools over the Chrome DevTools Protocol: `browser_execute` (model-written code on
//! the Code Mode sandbox with a `cdp` global) and the quick actions (`browser_markdown`,
//! `browser_links`, `browser_scrape`, `browser_extract`, `browser_content`).
//!
//! The browser is any Chrome reached at a `cdpUrl` (`THINK_BROWSER_CDP_URL`) or Browser Run
//! (the `BROWSER` binding); both give one browser-level WebSocket, and everything above that
//! (the CDP client, sessions, the allow-list, result bounding, HTML to Markdown) is plain Rust
//! tested on the host against a scripted peer. The Workers glue is `src/wasm/browser.rs`.

pub mod bound;
pub mod cdp;
pub mod chunks;
pub mod connector;
pub mod html;
pub mod policy;
pub mod session;
pub mod tools;

#[cfg(test)]
mod tests;

use async_trait::async_trait;

pub use cdp::{CdpClient, CdpEvent, WsConnection, WsSender};
pub use connector::{Browser, CdpConnector};
pub use policy::HostPolicy;
pub use session::SessionMode;

use crate::store::StoreError;

/// Think's `maxChars` default for quick-action results.
pub const DEFAULT_MAX_CHARS: usize = 50_000;
/// Time one CDP command may take.
pub const DEFAULT_COMMAND_TIMEOUT_MS: u64 = 10_000;
/// Idle per-run sessions are closed by the sweep after this long.
pub const DEFAULT_IDLE_MS: f64 = 10.0 * 60_000.0;

/// Where the browser comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrowserEndpoint {
    /// A Chrome with `--remote-debugging-port`, e.g. `http://127.0.0.1:9222`: its
    /// `/json/version` names the browser's WebSocket.
    CdpUrl(String),
    /// Browser Run, through the Worker's `BROWSER` binding.
    Binding,
}

/// How the browser tools are configured (`AgentSpec::browser`).
#[derive(Debug, Clone, PartialEq)]
pub struct BrowserOptions {
    /// Where the browser comes from.
    pub endpoint: BrowserEndpoint,
    /// Which session each `browser_execute` run uses (default one-shot).
    pub session_mode: SessionMode,
    /// Hosts navigation and quick actions may reach (`example.com`, `*.example.com`,
    /// `127.0.0.1`); empty allows every public host. Private and loopback hosts are refused
    /// unless listed.
    pub allowed_hosts: Vec<String>,
    /// Bound on quick-action results, in characters.
    pub max_chars: usize,
    /// Time one CDP command may take, in ms.
    pub command_timeout_ms: u64,
    /// Idle per-run sessions older than this are closed by the sweep, in ms.
    pub idle_ms: f64,
    /// Whether `browser_content` (the rendered HTML) is offered.
    pub content_action: bool,
}

impl BrowserOptions {
    /// Defaults for a browser at `endpoint`.
    pub fn new(endpoint: BrowserEndpoint) -> Self {
        Self {
            endpoint,
            session_mode: SessionMode::OneShot,
            allowed_hosts: Vec::new(),
            max_chars: DEFAULT_MAX_CHARS,
            command_timeout_ms: DEFAULT_COMMAND_TIMEOUT_MS,
            idle_ms: DEFAULT_IDLE_MS,
            content_action: false,
        }
    }
}

/// Opens the browser-level WebSocket for an endpoint (the Workers glue implements it with
/// `fetch` and the `BROWSER` binding; host tests with a scripted peer).
#[async_trait(?Send)]
pub trait BrowserLauncher {
    /// Connects to the browser at `endpoint`.
    async fn connect(&self, endpoint: &BrowserEndpoint) -> Result<WsConnection, BrowserError>;
    /// The browser's protocol description (`/json/protocol`: `{domains: [...]}`), for
    /// `cdp.spec()` and the errors that teach the fix.
    async fn protocol(&self, endpoint: &BrowserEndpoint)
        -> Result<serde_json::Value, BrowserError>;
}

/// Why a browser operation failed; the text is what the model or the sandboxed code sees.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BrowserError {
    /// No browser could be reached.
    Connect(String),
    /// The connection went away (the browser quit or closed the socket).
    Closed(String),
    /// A command got no reply in time.
    Timeout {
        /// The CDP method.
        method: String,
        /// The limit, in ms.
        ms: u64,
    },
    /// The browser answered with a CDP error.
    Protocol {
        /// The CDP method.
        method: String,
        /// The JSON-RPC error code.
        code: i64,
        /// The browser's message.
        message: String,
    },
    /// A URL the allow-list or the address policy refuses.
    Refused(String),
    /// Bad arguments, worded for the model.
    InvalidInput(String),
    /// The session of this run was closed (swept or closed by the code).
    SessionGone(String),
    /// The page did something other than expected (navigation failed, a script threw).
    Page(String),
    /// The session table failed.
    Store(StoreError),
}

impl std::fmt::Display for BrowserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "Could not connect to the browser: {e}"),
            Self::Closed(e) => write!(
                f,
                "The browser connection is gone ({e}); the page state of this session is lost"
            ),
            Self::Timeout { method, ms } => {
                write!(f, "CDP {method} got no answer within {ms} ms")
            }
            Self::Protocol { method, code, message } => {
                write!(f, "CDP {method} failed: {message} (code {code})")
            }
            Self::Refused(e) | Self::InvalidInput(e) | Self::SessionGone(e) | Self::Page(e) => {
                f.write_str(e)
            }
            Self::Store(e) => write!(f, "The browser session table failed: {e}"),
        }
    }
}

impl std::error::Error for BrowserError {}

impl From<StoreError> for BrowserError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}
