//! The agent's MCP servers: the built-in callables that manage them over the `rpc` frame,
//! the `cf_agent_mcp_servers` push on every change, and the background listeners that
//! receive `tools/list_changed` from servers.

use futures::future::LocalBoxFuture;
use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::capability::Capability;
use super::{Agent, CallError, Feature, HttpReply};
use crate::mcp::{AddServerOptions, ConnectionState, ListenEnd, McpClient, TransportKind};
use crate::tools::{Layer, ToolRef};

/// Config key of the origin the object was last reached at, for OAuth callback URLs.
const CONFIG_ORIGIN: &str = "mcpCallbackOrigin";

/// How long a listener waits before reopening a stream that ended.
const RELISTEN_MS: u64 = 1_000;
/// Listener restarts per server before giving up until the next change or restart.
const RELISTEN_LIMIT: u32 = 30;

impl Agent {
    /// The MCP client, for Rust code that manages servers directly.
    pub fn mcp(&self) -> Option<&McpClient> {
        self.mcp.as_ref()
    }

    /// Connects the MCP client to the agent: servers' `elicitation/create` requests reach
    /// every tab as `cf_agent_mcp_elicitation` frames, and tools annotated
    /// `destructiveHint: true` need approval unless `THINK_APPROVAL` exempts them (`!glob`);
    /// as their own `needs_approval`, so calls from Code Mode's `execute` wait too.
    pub(super) fn wire_mcp(self: &Rc<Self>) {
        let Some(mcp) = &self.mcp else { return };
        let policy = self.spec.approval.clone();
        mcp.set_destructive_gate(Rc::new(move |name: &str| policy.hinted_needs_approval(name)));
        let weak = Rc::downgrade(self);
        mcp.set_on_elicitation(Rc::new(move |frame: &str| {
            if let Some(agent) = weak.upgrade() {
                agent.broadcast_text(frame);
            }
        }));
    }

    /// The pending MCP inputs, for a tab that just connected.
    pub(super) fn send_mcp_elicitations(&self, conn: &str) {
        if let Some(mcp) = &self.mcp {
            for frame in mcp.elicitation_frames() {
                self.deps.sockets.send(conn, &frame);
            }
        }
    }

    /// `cf_agent_mcp_elicitation_response {id, action, content?}` from a tab. A bad answer
    /// gets `cf_agent_mcp_elicitation_error {id, error}` back and the input stays pending.
    /// Other frames of no known type are left alone.
    pub(super) async fn on_mcp_frame(&self, conn: &str, frame: &Map<String, Value>) {
        if frame.get("type").and_then(Value::as_str) != Some("cf_agent_mcp_elicitation_response") {
            return;
        }
        let id = frame.get("id").and_then(Value::as_str).unwrap_or_default();
        let outcome = match (&self.mcp, frame.get("action").and_then(Value::as_str)) {
            (None, _) => Err("MCP is unavailable in this agent".to_owned()),
            (_, None) => Err("action must be accept, decline or cancel".to_owned()),
            (Some(mcp), Some(action)) => mcp
                .answer_elicitation(id, action, frame.get("content"))
                .await
                .map_err(|e| e.to_string()),
        };
        if let Err(error) = outcome {
            let reply = json!({"type": "cf_agent_mcp_elicitation_error", "id": id, "error": error});
            self.deps.sockets.send(conn, &reply.to_string());
        }
    }

    /// Remembers the origin (`https://host`) requests reach the object at, so OAuth callback
    /// URLs can be built for servers added later, also over DO RPC.
    pub fn set_public_origin(&self, origin: &str) {
        if !origin.starts_with("http") {
            return;
        }
        if let Ok(store) = self.store() {
            if store.config(CONFIG_ORIGIN).ok().flatten().as_deref() != Some(origin) {
                let _ = store.set_config(CONFIG_ORIGIN, origin);
            }
        }
    }

    /// The OAuth redirect URI for a server: `callbackHost` (or the remembered origin) and
    /// `callbackPath` (or `/agents/<class>/<name>/callback`, where `<name>` is this instance).
    fn callback_url(&self, host: Option<&str>, path: Option<&str>) -> Option<String> {
        let origin = match host {
            Some(h) => h.to_owned(),
            None => self.store().ok()?.config(CONFIG_ORIGIN).ok().flatten()?,
        };
        let path = match path {
            Some(p) => p.to_owned(),
            None => format!("/agents/{}/{}/callback", self.agent_kebab, self.name()),
        };
        Some(format!("{}/{}", origin.trim_end_matches('/'), path.trim_start_matches('/')))
    }

    /// The OAuth callback (`GET <callback path>?code=…&state=…`): completes the authorization
    /// whose state it carries and answers with a page for the user. `None` when `path` is no
    /// server's callback path.
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn on_mcp_callback<'a>(
        self: &'a Rc<Self>,
        path: &'a str,
        query: &'a str,
    ) -> LocalBoxFuture<'a, Option<HttpReply>> {
        Box::pin(self.on_mcp_callback_inner(path, query))
    }

    /// The body of [`Self::on_mcp_callback`].
    async fn on_mcp_callback_inner(self: &Rc<Self>, path: &str, query: &str) -> Option<HttpReply> {
        let mcp = self.mcp.as_ref()?;
        if !mcp.is_callback_path(path) {
            return None;
        }
        let page = HttpReply::page;
        Some(match mcp.complete_authorization(query).await {
            Ok(id) => {
                let server = mcp.servers().into_iter().find(|s| s.id == id);
                let (name, ready) =
                    server.map(|s| (s.name, s.state == ConnectionState::Ready)).unwrap_or_default();
                if ready {
                    self.spawn_listener(id);
                }
                page(200, "Authorized", &format!("{name} is connected. You can close this window."))
            }
            Err(e) => page(400, "Authorization failed", &e.to_string()),
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

/// MCP as a capability: the callables that manage servers, the reconnection of the stored
/// ones at start, and their tools (with the resource tools when those are switched on).
pub(super) struct McpCapability;

#[async_trait(?Send)]
impl Capability for McpCapability {
    fn name(&self) -> &'static str {
        "MCP"
    }

    fn callables(&self) -> &[&'static str] {
        &[
            "addMcpServer",
            "removeMcpServer",
            "getMcpServers",
            "acceptMcpToolChanges",
            "readMcpResource",
            "getMcpPrompt",
        ]
    }

    async fn call(
        &self,
        agent: &Rc<Agent>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, CallError> {
        let Some(mcp) = &agent.mcp else {
            return Err(CallError::Unavailable(
                "MCP is unavailable in this agent (its storage failed to open)".into(),
            ));
        };
        let arg_str = |i: usize, what: &str| -> Result<String, CallError> {
            args.get(i).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
                CallError::BadArguments(format!("{method}: {what} must be a string"))
            })
        };
        match method {
            "addMcpServer" => {
                let name = arg_str(0, "the name")?;
                let url = arg_str(1, "the URL")?;
                let options = match args.get(2) {
                    None | Some(Value::Null) => Ok(Added::default()),
                    Some(Value::Object(o)) => add_options(o),
                    Some(_) => Err(CallError::BadArguments(
                        "addMcpServer: options must be an object".to_owned(),
                    )),
                };
                let options = options.map(|a| AddServerOptions {
                    callback_url: agent
                        .callback_url(a.callback_host.as_deref(), a.callback_path.as_deref()),
                    ..a.options
                });
                match options {
                    Err(e) => Err(e),
                    Ok(options) => match mcp.add_mcp_server(&name, &url, options).await {
                        Ok(added) => {
                            if added.state == ConnectionState::Ready {
                                agent.spawn_listener(added.id.clone());
                            }
                            let mut out = json!({"id": added.id, "state": added.state.as_str()});
                            if let Some(url) = added.auth_url {
                                out["authUrl"] = json!(url);
                            }
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
            "readMcpResource" => match (arg_str(0, "the server id"), arg_str(1, "the URI")) {
                (Ok(id), Ok(uri)) => {
                    mcp.read_resource(&id, &uri).await.map_err(|e| CallError::Failed(e.to_string()))
                }
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
            "getMcpPrompt" => {
                let prompt_args = match args.get(2) {
                    None | Some(Value::Null) => Ok(Map::new()),
                    Some(Value::Object(o)) => Ok(o.clone()),
                    Some(_) => {
                        Err(CallError::BadArguments("getMcpPrompt: args must be an object".into()))
                    }
                };
                match (arg_str(0, "the server id"), arg_str(1, "the prompt name"), prompt_args) {
                    (Ok(id), Ok(name), Ok(a)) => mcp
                        .get_prompt(&id, &name, a)
                        .await
                        .map_err(|e| CallError::Failed(e.to_string())),
                    (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e),
                }
            }
            _ => Ok(mcp.get_mcp_servers()),
        }
    }

    async fn start(&self, agent: &Rc<Agent>) {
        agent.restore_mcp().await;
    }

    fn tools(&self, agent: &Agent) -> Option<(Layer, Vec<ToolRef>)> {
        let mcp = agent.mcp.as_ref().filter(|_| agent.spec.include_mcp_tools)?;
        let mut tools = mcp.tools();
        if agent.spec.is_on(Feature::McpResources) {
            tools.extend(mcp.resource_tools());
        }
        Some((Layer::Mcp, tools))
    }
}

/// `addMcpServer`'s options as read: the client's, plus where OAuth callbacks go.
#[derive(Default)]
struct Added {
    options: AddServerOptions,
    callback_host: Option<String>,
    callback_path: Option<String>,
}

/// Reads `addMcpServer`'s options: `{transport?: "streamable-http"|"sse"|"auto" |
/// {type, headers?}, headers?, id?, callbackHost?, callbackPath?, clientId?, clientSecret?}`
/// (both the flat and the reference's nested form).
fn add_options(o: &Map<String, Value>) -> Result<Added, CallError> {
    let mut added = Added::default();
    let text = |key: &str| -> Result<Option<String>, CallError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) => Ok(Some(v.clone())),
            Some(_) => {
                Err(CallError::BadArguments(format!("addMcpServer: {key} must be a string")))
            }
        }
    };
    added.callback_host = text("callbackHost")?;
    added.callback_path = text("callbackPath")?;
    if let Some(client_id) = text("clientId")? {
        added.options.oauth_client = Some((client_id, text("clientSecret")?));
    }
    if let Some(host) = &added.callback_host {
        crate::net::Url::parse(host).map_err(|e| {
            CallError::BadArguments(format!(
                "addMcpServer: callbackHost {host:?} is not a URL: {e}"
            ))
        })?;
    }
    let options = &mut added.options;
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
    Ok(added)
}

impl HttpReply {
    /// A small HTML page for the user who followed an OAuth redirect.
    fn page(status: u16, title: &str, text: &str) -> Self {
        HttpReply {
            status,
            content_type: "text/html; charset=utf-8",
            body: format!(
                "<!doctype html><meta charset=utf-8><title>{title}</title><h1>{title}</h1><p>{}</p>",
                html_escape(text)
            ),
        }
    }

    /// The callback page for a `state` no authorization waits for: also the answer to an
    /// unauthenticated callback that matches no server's callback path, so the two cannot be
    /// told apart.
    pub fn unknown_oauth_state() -> Self {
        let error = crate::mcp::McpError::from(crate::mcp::OAuthError::UnknownState);
        Self::page(400, "Authorization failed", &error.to_string())
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
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
        let parsed = add_options(o.as_object().unwrap()).unwrap().options;
        assert_eq!(parsed.transport, Some(TransportKind::Sse));
        assert_eq!(parsed.headers, vec![("Authorization".to_owned(), "Bearer t".to_owned())]);
        assert_eq!(parsed.id.as_deref(), Some("fixed"));
        let flat = json!({"transport": "auto", "headers": {"x-key": "1"}, "callbackHost": "https://agent.example", "callbackPath": "/oauth/cb"});
        let parsed = add_options(flat.as_object().unwrap()).unwrap();
        assert_eq!(parsed.options.transport, Some(TransportKind::Auto));
        assert_eq!(parsed.options.headers.len(), 1);
        assert_eq!(parsed.callback_host.as_deref(), Some("https://agent.example"));
        assert_eq!(parsed.callback_path.as_deref(), Some("/oauth/cb"));
        assert!(add_options(json!({"callbackHost": "not a url"}).as_object().unwrap()).is_err());
        assert!(add_options(json!({"callbackPath": 7}).as_object().unwrap()).is_err());
        let preset = json!({"clientId": "c", "clientSecret": "s"});
        let parsed = add_options(preset.as_object().unwrap()).unwrap().options;
        assert_eq!(parsed.oauth_client, Some(("c".to_owned(), Some("s".to_owned()))));
        assert!(add_options(json!({"transport": "carrier-pigeon"}).as_object().unwrap()).is_err());
        assert!(add_options(json!({"headers": {"x": 1}}).as_object().unwrap()).is_err());
    }
}
