//! Dispatch: requests to a server (tool calls, resources, prompts) with the session, timeout,
//! expiry and 401 handling they share, and `listen` for server-initiated messages.

use super::{with_server_id, Inner, ListenEnd, McpClient};
use crate::mcp::resource_tools::{self, ResourceAccess};
use crate::mcp::session::Session;
use crate::mcp::tools::{self, ToolCaller};
use crate::mcp::McpError;
use crate::platform::Clock;
use crate::tools::{ToolError, ToolRef};
use futures::future::{select, Either};
use serde_json::{json, Map, Value};
use std::cell::Cell;
use std::future::Future;
use std::rc::{Rc, Weak};

/// Like [`with_timeout`](super::with_timeout), but the time does not run out while `busy` is
/// non-zero (a person is filling in a form the request waits on).
async fn with_timeout_unless_busy<T>(
    clock: &dyn Clock,
    ms: u64,
    busy: &Cell<u32>,
    fut: impl Future<Output = T>,
) -> Option<T> {
    let mut fut = std::pin::pin!(fut);
    loop {
        let sleep = clock.sleep(ms);
        match select(fut.as_mut(), sleep).await {
            Either::Left((v, _)) => return Some(v),
            Either::Right(_) if busy.get() > 0 => continue,
            Either::Right(_) => return None,
        }
    }
}

#[async_trait::async_trait(?Send)]
impl ResourceAccess for Inner {
    fn list_resources(&self, server: Option<&str>) -> Vec<Value> {
        let servers = self.servers.borrow();
        servers
            .iter()
            .filter(|s| server.is_none_or(|id| id == s.row.id))
            .filter_map(|s| {
                Some(with_server_id(&s.catalog.as_ref()?.resources, &s.row.id).collect::<Vec<_>>())
            })
            .flatten()
            .collect()
    }

    async fn read_resource(&self, server: &str, uri: &str) -> Result<Value, McpError> {
        Inner::read_resource(self, server, uri).await
    }
}

#[async_trait::async_trait(?Send)]
impl ToolCaller for Inner {
    async fn call_tool(
        &self,
        server_id: &str,
        tool: &str,
        input: Value,
    ) -> Result<Value, ToolError> {
        Inner::call_tool(self, server_id, tool, input).await
    }
}

/// Releases a server's listener claim however `listen` ends, unless a newer session's
/// listener has taken it over.
struct Listening<'a> {
    inner: &'a Inner,
    id: &'a str,
    session: &'a Rc<Session>,
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        if let Ok(mut servers) = self.inner.servers.try_borrow_mut() {
            if let Some(s) = servers.iter_mut().find(|s| s.row.id == self.id) {
                if s.listener
                    .as_ref()
                    .and_then(Weak::upgrade)
                    .is_some_and(|l| Rc::ptr_eq(&l, self.session))
                {
                    s.listener = None;
                }
            }
        }
    }
}

impl Inner {
    /// Sends one request to the server, connecting first if needed. An expired session is
    /// re-initialised once, and a 401 is answered by refreshing the tokens or, failing that,
    /// by a new authorization (the error is then `AuthorizationRequired`).
    pub(crate) async fn request(
        &self,
        id: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, McpError> {
        let mut retried = false;
        let mut reauthorized = false;
        loop {
            let session = self.ready_session(id).await?;
            self.refresh_if_due(id).await;
            let timeout = self.config.request_timeout_ms;
            let Some(outcome) = with_timeout_unless_busy(
                self.clock.as_ref(),
                timeout,
                &self.eliciting,
                session.request(method, Some(params.clone())),
            )
            .await
            else {
                return Err(McpError::Timeout(timeout));
            };
            self.after_exchange(id, &session).await;
            match outcome {
                Ok(result) => return Ok(result),
                Err(McpError::SessionExpired) if !retried => {
                    retried = true;
                    self.drop_session(id, &session);
                }
                Err(McpError::Unauthorized { challenge }) if !reauthorized => {
                    reauthorized = true;
                    let seen = self.bearer(id);
                    if self.has_refresh_token(id)
                        && self.refresh_tokens(id, seen.as_deref()).await.is_ok()
                    {
                        continue;
                    }
                    let e = self.begin_authorization(id, challenge.as_deref()).await;
                    self.apply_auth_lost(id, &session, &e);
                    return Err(e);
                }
                Err(e @ McpError::Rpc { .. }) => return Err(e),
                Err(e) => {
                    if e.is_connection_failure() || e == McpError::SessionExpired {
                        self.mark_failed(id, &session, &e);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Refuses a request for a feature the connected server did not declare. A server not yet
    /// connected is let through (the request connects it and the server answers for itself).
    fn require_capability(&self, id: &str, capability: &str) -> Result<(), McpError> {
        let declared = self
            .with_server(id, |s| s.session.as_ref().map(|x| x.has_capability(capability)))
            .ok_or_else(|| McpError::UnknownServer(id.into()))?;
        match declared {
            Some(false) => {
                Err(McpError::Invalid(format!("MCP server \"{id}\" does not offer {capability}")))
            }
            _ => Ok(()),
        }
    }

    async fn read_resource(&self, id: &str, uri: &str) -> Result<Value, McpError> {
        self.require_capability(id, "resources")?;
        self.request(id, "resources/read", json!({ "uri": uri })).await
    }

    /// Calls a tool; every failure becomes a `ToolError` the model can read.
    pub(crate) async fn call_tool(
        &self,
        id: &str,
        tool: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        let Some(name) = self.with_server(id, |s| s.row.name.clone()) else {
            return Err(ToolError::Failed(format!("MCP server \"{id}\" has been removed.")));
        };
        let params = json!({"name": tool, "arguments": args});
        match self.request(id, "tools/call", params).await {
            Ok(result) if result.get("isError").and_then(Value::as_bool) == Some(true) => {
                let text = tools::content_text(&result);
                Err(ToolError::Failed(if text.is_empty() {
                    "Tool call failed".into()
                } else {
                    text
                }))
            }
            Ok(result) => Ok(result),
            Err(McpError::Rpc { message, .. }) => Err(ToolError::Failed(format!(
                "MCP tool \"{tool}\" on server \"{name}\" failed: {message}"
            ))),
            Err(e) => Err(ToolError::Failed(format!("MCP server \"{name}\" is unavailable: {e}"))),
        }
    }
}

impl McpClient {
    /// Listens for server-initiated messages (a Streamable HTTP GET stream, or the legacy SSE
    /// stream) and refreshes the catalog on `list_changed`, until the stream ends. One call
    /// listens per session; a concurrent one returns `AlreadyListening` at once.
    pub async fn listen(&self, id: &str) -> Result<ListenEnd, McpError> {
        let inner = &self.inner;
        let session = inner.ready_session(id).await?;
        let claimed = inner
            .with_server(id, |s| {
                let taken = s
                    .listener
                    .as_ref()
                    .and_then(Weak::upgrade)
                    .is_some_and(|l| Rc::ptr_eq(&l, &session));
                if !taken {
                    s.listener = Some(Rc::downgrade(&session));
                }
                !taken
            })
            .ok_or_else(|| McpError::UnknownServer(id.into()))?;
        if !claimed {
            return Ok(ListenEnd::AlreadyListening);
        }
        let _claim = Listening { inner, id, session: &session };
        inner.refresh_if_due(id).await;
        let mut listener = match session.listen().await {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(ListenEnd::Unsupported),
            Err(McpError::SessionExpired) => {
                inner.drop_session(id, &session);
                return Ok(ListenEnd::Ended);
            }
            Err(e) => return Err(e),
        };
        loop {
            let still_current = inner
                .with_server(id, |s| s.session.as_ref().is_some_and(|c| Rc::ptr_eq(c, &session)));
            if still_current != Some(true) {
                return Ok(ListenEnd::Ended);
            }
            match session.listen_next(&mut listener).await {
                Ok(true) => inner.after_exchange(id, &session).await,
                Ok(false) => return Ok(ListenEnd::Ended),
                Err(e) => {
                    if e.is_connection_failure() {
                        inner.mark_failed(id, &session, &e);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Calls a tool by its server-side name, as the model's tool would.
    pub async fn call_tool(&self, id: &str, tool: &str, args: Value) -> Result<Value, ToolError> {
        self.inner.call_tool(id, tool, args).await
    }

    /// `resources/read`: the contents of the resource `uri` on server `id`, as the server
    /// returns them (`{contents: [{uri, mimeType?, text | blob}]}`).
    pub async fn read_resource(&self, id: &str, uri: &str) -> Result<Value, McpError> {
        self.inner.read_resource(id, uri).await
    }

    /// `mcp_list_resources` and `mcp_read_resource`, for agents that let the model read
    /// servers' resources.
    pub fn resource_tools(&self) -> Vec<ToolRef> {
        let access: Weak<dyn ResourceAccess> = self.inner.me.clone();
        resource_tools::tools(access)
    }

    /// `prompts/get`: the prompt `name` filled with `args` (string values, as MCP requires),
    /// as the server returns it (`{description?, messages}`).
    pub async fn get_prompt(
        &self,
        id: &str,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<Value, McpError> {
        self.inner.require_capability(id, "prompts")?;
        if let Some((k, v)) = args.iter().find(|(_, v)| !v.is_string()) {
            return Err(McpError::Invalid(format!(
                "prompt argument {k} must be a string, not {v}"
            )));
        }
        self.inner.request(id, "prompts/get", json!({ "name": name, "arguments": args })).await
    }
}
