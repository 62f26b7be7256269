//! One initialised MCP session: the `initialize` handshake with version negotiation, numbered
//! requests, paginated listing, and the inbox of notifications the server sent meanwhile.

use super::jsonrpc::{self, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
use super::store::SavedSession;
use super::transport::{Env, Inbox, LegacySse, Listener, StreamableHttp, Transport, TransportKind};
use super::McpError;
use crate::net::Url;
use serde_json::{json, Value};
use std::cell::Cell;

/// A guard against servers whose `nextCursor` never ends.
const MAX_PAGES: usize = 100;

pub(crate) struct Session {
    transport: Transport,
    next_id: Cell<i64>,
    pub inbox: Inbox,
    pub protocol_version: String,
    /// The server's `capabilities` from `initialize`.
    pub capabilities: Value,
    pub instructions: Option<String>,
}

/// Statuses on which `auto` gives up on Streamable HTTP and tries the legacy SSE transport:
/// what an SSE-only server answers to a POST. Auth and rate-limit errors are real answers.
fn legacy_hint(e: &McpError) -> bool {
    match e {
        McpError::Http { status, .. } => {
            ((400..500).contains(status) && !matches!(status, 401 | 403 | 408 | 429))
                || *status == 501
        }
        _ => false,
    }
}

impl Session {
    /// Connects with `kind` and runs the `initialize` handshake.
    pub async fn connect(
        kind: TransportKind,
        env: &Env,
        url: &Url,
        client_info: &Value,
    ) -> Result<Session, McpError> {
        let elicits = env.requests.is_some();
        match kind {
            TransportKind::StreamableHttp => {
                Self::initialize(
                    Transport::Streamable(StreamableHttp::new(env.clone(), url)),
                    client_info,
                    elicits,
                )
                .await
            }
            TransportKind::Sse => {
                Self::initialize(
                    Transport::Sse(LegacySse::open(env.clone(), url).await?),
                    client_info,
                    elicits,
                )
                .await
            }
            TransportKind::Auto => {
                let first = Self::initialize(
                    Transport::Streamable(StreamableHttp::new(env.clone(), url)),
                    client_info,
                    elicits,
                )
                .await;
                match first {
                    Err(e) if legacy_hint(&e) => {
                        let sse = async {
                            let t = LegacySse::open(env.clone(), url).await?;
                            Self::initialize(Transport::Sse(t), client_info, elicits).await
                        };
                        sse.await.map_err(|sse_err| {
                            McpError::Transport(format!("Streamable HTTP: {e}; SSE: {sse_err}"))
                        })
                    }
                    other => other,
                }
            }
        }
    }

    async fn initialize(
        transport: Transport,
        client_info: &Value,
        elicits: bool,
    ) -> Result<Session, McpError> {
        let inbox = Inbox::default();
        let params = json!({
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            // Form elicitation only: URL mode would send the user to the server's own pages.
            "capabilities": if elicits { json!({"elicitation": {"form": {}}}) } else { json!({}) },
            "clientInfo": client_info,
        });
        let result =
            transport.request(0, &jsonrpc::request(0, "initialize", Some(params)), &inbox).await?;
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&version) {
            // The handshake is over from the server's side: release its session.
            transport.close().await;
            return Err(McpError::Transport(format!(
                "the server speaks MCP protocol version \"{version}\", which this client does not support"
            )));
        }
        transport.set_protocol_version(version);
        transport.notify(&jsonrpc::notification("notifications/initialized")).await?;
        Ok(Session {
            transport,
            next_id: Cell::new(1),
            inbox,
            protocol_version: version.to_owned(),
            capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
        })
    }

    /// Picks up a Streamable HTTP session saved before the object slept. Nothing is sent:
    /// a session the server has forgotten shows as `SessionExpired` on first use.
    pub fn resume(env: &Env, url: &Url, saved: &SavedSession, first_id: i64) -> Session {
        let t =
            StreamableHttp::resumed(env.clone(), url, &saved.session_id, &saved.protocol_version);
        Session {
            transport: Transport::Streamable(t),
            next_id: Cell::new(first_id),
            inbox: Inbox::default(),
            protocol_version: saved.protocol_version.clone(),
            capabilities: saved.capabilities.clone(),
            instructions: saved.instructions.clone(),
        }
    }

    /// What to save so this session can be resumed; `None` for sessions without an id.
    pub fn saved(&self) -> Option<SavedSession> {
        Some(SavedSession {
            session_id: self.transport.session_id()?,
            protocol_version: self.protocol_version.clone(),
            capabilities: self.capabilities.clone(),
            instructions: self.instructions.clone(),
        })
    }

    pub fn transport_kind(&self) -> TransportKind {
        self.transport.kind()
    }

    /// Whether the server declared `capability` (`tools`, `prompts`, `resources`).
    pub fn has_capability(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some_and(|v| !v.is_null())
    }

    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, McpError> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.transport.request(id, &jsonrpc::request(id, method, params), &self.inbox).await
    }

    /// Every item of a paginated list (`tools/list` → `tools`), following `nextCursor`.
    pub async fn list_all(&self, method: &str, field: &str) -> Result<Vec<Value>, McpError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
            let page = self.request(method, params).await?;
            if let Some(list) = page.get(field).and_then(Value::as_array) {
                items.extend(list.iter().filter(|v| v.is_object()).cloned());
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() && seen.insert(next.to_owned()) => {
                    cursor = Some(next.to_owned())
                }
                _ => return Ok(items),
            }
        }
        Ok(items)
    }

    pub async fn close(&self) {
        self.transport.close().await;
    }

    pub async fn listen(&self) -> Result<Option<Listener>, McpError> {
        self.transport.listen().await
    }

    pub async fn listen_next(&self, l: &mut Listener) -> Result<bool, McpError> {
        self.transport.listen_next(l, &self.inbox).await
    }
}
