//! The agent's MCP servers: the built-in callables that manage them over the `rpc` frame,
//! the `cf_agent_mcp_servers` push on every change, and the background listeners that
//! receive `tools/list_changed` from servers.

use std::rc::Rc;

use serde_json::{json, Map, Value};

use super::{Agent, CallError};
use crate::mcp::{AddServerOptions, ConnectionState, ListenEnd, McpClient, TransportKind};

/// How long a listener waits before reopening a stream that ended.
const RELISTEN_MS: u64 = 1_000;
/// Listener restarts per server before giving up until the next change or restart.
const RELISTEN_LIMIT: u32 = 30;

impl Agent {
    /// The MCP client, for Rust code that manages servers directly.
    pub fn mcp(&self) -> Option<&McpClient> {
        self.mcp.as_ref()
    }

    /// Answers the built-in MCP callables; `None` when `method` is not one of them.
    pub(super) async fn mcp_callable(
        self: &Rc<Self>,
        method: &str,
        args: &[Value],
    ) -> Option<Result<Value, CallError>> {
        let mcp = match method {
            "addMcpServer" | "removeMcpServer" | "getMcpServers" | "acceptMcpToolChanges" => {
                match &self.mcp {
                    Some(m) => m,
                    None => {
                        return Some(Err(CallError::Unavailable(
                            "MCP is unavailable in this agent (its storage failed to open)".into(),
                        )))
                    }
                }
            }
            _ => return None,
        };
        let arg_str = |i: usize, what: &str| -> Result<String, CallError> {
            args.get(i).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
                CallError::BadArguments(format!("{method}: {what} must be a string"))
            })
        };
        Some(match method {
            "addMcpServer" => {
                let name = match arg_str(0, "the name") {
                    Ok(n) => n,
                    Err(e) => return Some(Err(e)),
                };
                let url = match arg_str(1, "the URL") {
                    Ok(u) => u,
                    Err(e) => return Some(Err(e)),
                };
                let options = match args.get(2) {
                    None | Some(Value::Null) => Ok(AddServerOptions::default()),
                    Some(Value::Object(o)) => add_options(o),
                    Some(_) => Err(CallError::BadArguments(
                        "addMcpServer: options must be an object".to_owned(),
                    )),
                };
                match options {
                    Err(e) => Err(e),
                    Ok(options) => match mcp.add_mcp_server(&name, &url, options).await {
                        Ok(added) => {
                            if added.state == ConnectionState::Ready {
                                self.spawn_listener(added.id.clone());
                            }
                            let mut out = json!({"id": added.id, "state": added.state.as_str()});
                            if let Some(error) = added.error {
                                out["error"] = json!(error);
                            }
                            Ok(out)
                        }
                        Err(e) => Err(CallError::Failed(e.to_string())),
                    },
                }
            }
            "removeMcpServer" => match arg_str(0, "the server id") {
                Ok(id) => mcp
                    .remove_mcp_server(&id)
                    .await
                    .map(|_| Value::Null)
                    .map_err(|e| CallError::Failed(e.to_string())),
                Err(e) => Err(e),
            },
            "acceptMcpToolChanges" => match arg_str(0, "the server id") {
                Ok(id) => mcp
                    .accept_mcp_tool_changes(&id)
                    .map(|n| json!({"accepted": n}))
                    .map_err(|e| CallError::Failed(e.to_string())),
                Err(e) => Err(e),
            },
            _ => Ok(mcp.get_mcp_servers()),
        })
    }

    /// Reconnects the persisted servers after a start and opens their listeners.
    pub(super) async fn restore_mcp(self: &Rc<Self>) {
        let Some(mcp) = &self.mcp else { return };
        mcp.restore().await;
        for server in mcp.servers() {
            if server.state == ConnectionState::Ready {
                self.spawn_listener(server.id);
            }
        }
    }

    /// Keeps a stream open for the server's own notifications (`tools/list_changed`), reopening
    /// it when it ends while the server is still registered.
    fn spawn_listener(self: &Rc<Self>, id: String) {
        let weak = Rc::downgrade(self);
        self.deps.tasks.spawn(Box::pin(async move {
            for _ in 0..RELISTEN_LIMIT {
                let Some(agent) = weak.upgrade() else { return };
                let Some(mcp) = agent.mcp.as_ref() else { return };
                if !mcp.servers().iter().any(|s| s.id == id) {
                    return;
                }
                match mcp.listen(&id).await {
                    Ok(ListenEnd::Unsupported | ListenEnd::AlreadyListening) => return,
                    Ok(ListenEnd::Ended) | Err(_) => {}
                }
                let clock = agent.deps.clock.clone();
                drop(agent);
                clock.sleep(RELISTEN_MS).await;
            }
        }));
    }
}

/// Reads `addMcpServer`'s options: `{transport?: "streamable-http"|"sse"|"auto" |
/// {type, headers?}, headers?, id?}` (both the flat and the reference's nested form).
fn add_options(o: &Map<String, Value>) -> Result<AddServerOptions, CallError> {
    let mut options = AddServerOptions::default();
    let mut headers = Map::new();
    match o.get("transport") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) => options.transport = Some(parse_transport(t)?),
        Some(Value::Object(t)) => {
            if let Some(kind) = t.get("type").and_then(Value::as_str) {
                options.transport = Some(parse_transport(kind)?);
            }
            if let Some(Value::Object(h)) = t.get("headers") {
                headers.extend(h.clone());
            }
        }
        Some(_) => {
            return Err(CallError::BadArguments(
                "addMcpServer: transport must be a string or an object".into(),
            ))
        }
    }
    if let Some(Value::Object(h)) = o.get("headers") {
        headers.extend(h.clone());
    }
    for (k, v) in headers {
        let v = v.as_str().ok_or_else(|| {
            CallError::BadArguments(format!("addMcpServer: header {k} must be a string"))
        })?;
        options.headers.push((k, v.to_owned()));
    }
    if let Some(id) = o.get("id") {
        let id = id
            .as_str()
            .ok_or_else(|| CallError::BadArguments("addMcpServer: id must be a string".into()))?;
        options.id = Some(id.to_owned());
    }
    Ok(options)
}

fn parse_transport(t: &str) -> Result<TransportKind, CallError> {
    TransportKind::parse(t).ok_or_else(|| {
        CallError::BadArguments(format!(
            "addMcpServer: unknown transport {t:?} (use streamable-http, sse or auto)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_options_accept_flat_and_nested_forms() {
        let o = json!({"transport": {"type": "sse", "headers": {"Authorization": "Bearer t"}}, "id": "fixed"});
        let parsed = add_options(o.as_object().unwrap()).unwrap();
        assert_eq!(parsed.transport, Some(TransportKind::Sse));
        assert_eq!(parsed.headers, vec![("Authorization".to_owned(), "Bearer t".to_owned())]);
        assert_eq!(parsed.id.as_deref(), Some("fixed"));
        let flat = json!({"transport": "auto", "headers": {"x-key": "1"}});
        let parsed = add_options(flat.as_object().unwrap()).unwrap();
        assert_eq!(parsed.transport, Some(TransportKind::Auto));
        assert_eq!(parsed.headers.len(), 1);
        assert!(add_options(json!({"transport": "carrier-pigeon"}).as_object().unwrap()).is_err());
        assert!(add_options(json!({"headers": {"x": 1}}).as_object().unwrap()).is_err());
    }
}
