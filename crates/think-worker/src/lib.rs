//! think-worker: think-rs on Cloudflare Workers. It adapts Durable Object storage, R2,
//! WebSockets, time, fetch, the Worker Loader and Browser Run to the traits of
//! [`think_core`], routes `/agents/<ns>/<name>` requests like `routeAgentRequest` (after the
//! access check of [`think_core::auth`]), and provides [`think_agent!`](crate::think_agent)
//! to declare an agent class. With the default `shipped-agent` feature it also exports the
//! ready-made `ThinkAgent` class and the Worker's `fetch` handler.
//!
//! The JavaScript the Worker needs at run time is in this package's `js/` directory: the
//! entry and its `agentClass` wrapper, the shim, the Code Mode host, the extensions' network
//! gateway and the bash bridge (docs/rust-library.md says how a build reaches it).
//!
//! The crate is empty outside `wasm32`: everything in it calls the Workers runtime.

#![cfg(target_arch = "wasm32")]

/// The core, re-exported so that [`think_agent!`](crate::think_agent) and downstream crates
/// name one version of it.
pub use think_core;

mod ai;
pub mod auth;
mod bash;
mod browser;
mod clock;
mod extensions;
mod fork;
mod http;
pub mod idle;
mod loader;
mod natives;
mod r2;
mod regexp;
mod rpc;
mod sockets;
mod sql;
mod subagents;

use std::rc::Rc;

use wasm_bindgen::{JsCast, JsValue};
use worker::{
    Env, Request, Response, Result, State, WebSocket, WebSocketIncomingMessage, WebSocketPair,
};

use think_core::agent::{Agent, AgentSpec, Deps};
use think_core::protocol::routing::{camel_case_to_kebab_case, parse_agent_path, RouteError};

pub use ai::WorkerAi;
pub use bash::JustBash;
pub use clock::WorkerClock;
pub use extensions::ExtensionNetGate;
pub use http::FetchHttp;
pub use r2::R2Blobs;
pub use sockets::DoSockets;
pub use sql::DoSql;

/// The R2 binding the workspace spills large files to, when present.
pub const R2_BINDING: &str = "WORKSPACE_R2";

/// Background work on the isolate's event loop.
pub struct LocalTasks;

impl think_core::platform::Tasks for LocalTasks {
    fn spawn(&self, task: futures::future::LocalBoxFuture<'static, ()>) {
        idle::spawn(task);
    }
}

/// The object's alarm over `ctx.storage.setAlarm`. Changes are applied one at a time in
/// the order they were asked for, so a `set_no_later` reads the alarm no other change is
/// about to replace.
pub struct DoAlarm {
    state: Rc<State>,
    /// Changes not applied yet: the time, and whether an earlier alarm is kept.
    queue: Rc<std::cell::RefCell<std::collections::VecDeque<(f64, bool)>>>,
}

impl DoAlarm {
    fn new(state: Rc<State>) -> Self {
        Self { state, queue: Rc::default() }
    }

    /// Queues a change; the first one starts the task that applies the queue.
    fn push(&self, at_ms: f64, keep_earlier: bool) {
        let mut queue = self.queue.borrow_mut();
        queue.push_back((at_ms, keep_earlier));
        if queue.len() > 1 {
            return;
        }
        let (storage, queue) = (self.state.storage(), self.queue.clone());
        idle::spawn(async move {
            loop {
                let Some(&(at_ms, keep_earlier)) = queue.borrow().front() else { break };
                let keep = keep_earlier
                    && matches!(storage.get_alarm().await, Ok(Some(t)) if (t as f64) <= at_ms);
                if !keep {
                    let when = worker::ScheduledTime::new(js_sys::Date::new(&at_ms.into()));
                    if let Err(e) = storage.set_alarm(when).await {
                        think_core::platform::log(&format!(
                            "think-rs: setting the alarm failed: {e}"
                        ));
                    }
                }
                queue.borrow_mut().pop_front();
            }
        });
    }
}

impl think_core::platform::Alarm for DoAlarm {
    fn set(&self, at_ms: f64) {
        self.push(at_ms, false);
    }
    fn set_no_later(&self, at_ms: f64) {
        self.push(at_ms, true);
    }
}

/// The state behind one agent Durable Object: the core agent plus its adapters.
pub struct ThinkHost {
    state: Rc<State>,
    /// Replaced once when the instance becomes a child (agents as tools) and takes its spec.
    agent: std::cell::RefCell<Rc<Agent>>,
    sockets: Rc<DoSockets>,
    class_name: String,
    env: Env,
    /// The class's own spec, from which a child's is derived.
    root_spec: AgentSpec,
}

fn console_log(msg: &str) {
    web_sys::console::log_1(&msg.into());
}

/// Gives the core the platform's parts it reaches through globals: the panic hook, the
/// console logger, the natives (`think_core::platform::natives`) and V8's regular expressions
/// (`think_core::regexp`). Idempotent; the agent class and the request router call it first.
pub fn install_platform() {
    console_error_panic_hook::set_once();
    think_core::platform::set_logger(console_log);
    natives::install();
    regexp::install();
}

impl ThinkHost {
    /// Builds the agent of class `class_name` on this object's storage and starts it.
    pub fn new(class_name: &str, state: State, env: &Env, spec: AgentSpec) -> Self {
        install_platform();
        let state = Rc::new(state);
        let sockets = Rc::new(DoSockets::new(state.clone()));
        // A child of an agent tool runs its tool's child spec from its first start on.
        let own_spec = think_core::subagents::child::ChildLog::role(&DoSql::new(&state))
            .and_then(|path| spec.child_spec(&path))
            .unwrap_or_else(|| spec.clone());
        let agent = Self::build(class_name, &state, env, &sockets, own_spec);
        Self {
            agent: std::cell::RefCell::new(agent),
            state,
            sockets,
            class_name: class_name.to_owned(),
            env: env.clone(),
            root_spec: spec,
        }
    }

    fn build(
        class_name: &str,
        state: &Rc<State>,
        env: &Env,
        sockets: &Rc<DoSockets>,
        spec: AgentSpec,
    ) -> Rc<Agent> {
        let state = state.clone();
        let sockets = sockets.clone();
        let deps = Deps {
            sql: Rc::new(DoSql::new(&state)),
            sockets: sockets.clone(),
            clock: Rc::new(WorkerClock),
            http: Rc::new(FetchHttp),
            blobs: env
                .bucket(R2_BINDING)
                .ok()
                .map(|b| Rc::new(R2Blobs(b)) as Rc<dyn think_core::store::BlobStore>),
            bash_engine: Some(Rc::new(JustBash)),
            sandbox: loader::LoaderSandbox::from_env(env)
                .map(|s| match extensions::gateway_factory(&state) {
                    Some(gateway) => s.with_gateway(gateway),
                    None => s,
                })
                .map(|s| Rc::new(s) as Rc<dyn think_core::codemode::Sandbox>),
            tasks: Rc::new(LocalTasks),
            alarm: Rc::new(DoAlarm::new(state.clone())),
            instance_id: state.id().to_string(),
            browser: Some(Rc::new(browser::WorkerBrowser::from_env(env))),
        };
        let agent = Agent::new(class_name, spec, deps);
        if let Some(link) = subagents::DoLink::new(env, class_name) {
            agent.subagents().set_link(Rc::new(link));
        }
        if let Some(link) = subagents::DoLink::new(env, class_name) {
            agent.set_fork_link(Rc::new(link));
        }
        idle::spawn(agent.clone().start());
        agent
    }

    /// The core agent, for Rust code that drives it directly.
    pub fn agent(&self) -> Rc<Agent> {
        self.agent.borrow().clone()
    }

    /// DO RPC `subagentRpc(method, json)`: a parent's call on this instance as its child. The
    /// first `start` makes the instance a child: it is rebuilt with its tool's child spec.
    pub async fn rpc_subagent(
        &self,
        method: String,
        arg: String,
    ) -> std::result::Result<JsValue, JsValue> {
        if method == "start" {
            let req: think_core::subagents::StartRequest = serde_json::from_str(&arg)
                .map_err(|e| JsValue::from(js_sys::Error::new(&format!("subagentRpc: {e}"))))?;
            let sql = DoSql::new(&self.state);
            if think_core::subagents::child::ChildLog::role(&sql).is_none() {
                let Some(spec) = self.root_spec.child_spec(&req.tool_path) else {
                    return Err(js_sys::Error::new("subagentRpc: no such agent tool").into());
                };
                let agent =
                    Self::build(&self.class_name, &self.state, &self.env, &self.sockets, spec);
                *self.agent.borrow_mut() = agent;
            }
        }
        subagents::answer(&self.agent(), &method, &arg).await
    }

    /// DO RPC `forkRpc(method, json)`: another instance copying a checkpoint into this one
    /// (`forkSession`); JSON text in and out.
    pub async fn rpc_fork(
        &self,
        method: String,
        arg: String,
    ) -> std::result::Result<JsValue, JsValue> {
        match self.agent().fork_rpc(&method, &arg).await {
            Ok(v) => Ok(JsValue::from_str(&v.to_string())),
            Err(e) => Err(js_sys::Error::new(&e.to_string()).into()),
        }
    }

    /// HTTP requests to the object: WebSocket upgrades and `get-messages`.
    pub async fn fetch(&self, req: Request) -> Result<Response> {
        let url = req.url()?;
        if auth::exempt_marker(&req).as_deref() == Some(think_core::auth::EXEMPT_OAUTH_CALLBACK) {
            return self.oauth_callback_only(&req, &url).await;
        }
        // A child of an agent tool is read only through its parent's drill-in route.
        if think_core::subagents::child::ChildLog::role(&DoSql::new(&self.state)).is_some() {
            return Response::error("Not found: this agent runs as a child of another", 404);
        }
        if let Ok(route) = parse_agent_path(url.path(), "agents") {
            self.agent().set_name(&route.name);
            self.agent().set_public_origin(&url.origin().ascii_serialization());
        }
        let upgrade = req.headers().get("Upgrade")?.unwrap_or_default();
        if upgrade.eq_ignore_ascii_case("websocket") {
            let conn_id = url
                .query_pairs()
                .find(|(k, _)| k == "_pk")
                .map(|(_, v)| v.into_owned())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| think_core::platform::random_id(&WorkerClock, 21));
            let pair = WebSocketPair::new()?;
            pair.server.serialize_attachment(&conn_id)?;
            self.state.accept_web_socket(&pair.server);
            self.sockets.invalidate();
            self.agent().on_connect(&conn_id);
            return Response::from_websocket(pair.client);
        }
        if let Some(path) = think_core::subagents::drill_in_segments(url.path()) {
            return self.child_messages(&path).await;
        }
        let agent = self.agent();
        let callback = match req.method() {
            worker::Method::Get => {
                agent.on_mcp_callback(url.path(), url.query().unwrap_or_default()).await
            }
            _ => None,
        };
        match callback.or_else(|| agent.on_http(req.method().as_ref(), url.path())) {
            Some(reply) => {
                let mut resp = Response::ok(reply.body)?.with_status(reply.status);
                resp.headers_mut().set("content-type", reply.content_type)?;
                Ok(resp)
            }
            None => Response::error("Not found", 404),
        }
    }

    /// A request the Worker let through unauthenticated because it is an MCP OAuth callback:
    /// it is answered as one (its `state` is its credential), and anything else gets the
    /// answer of an unknown state, the same whether the instance exists or not.
    async fn oauth_callback_only(
        &self,
        req: &Request,
        url: &think_core::net::Url,
    ) -> Result<Response> {
        let reply = match req.method() {
            worker::Method::Get => {
                self.agent().on_mcp_callback(url.path(), url.query().unwrap_or_default()).await
            }
            _ => None,
        };
        let reply = reply.unwrap_or_else(think_core::agent::HttpReply::unknown_oauth_state);
        let mut resp = Response::ok(reply.body)?.with_status(reply.status);
        resp.headers_mut().set("content-type", reply.content_type)?;
        Ok(resp)
    }

    /// `GET …/sub/<child>[/sub/<grandchild>…]/get-messages`: a descendant's transcript, only
    /// when each parent on the way has that run.
    async fn child_messages(&self, path: &[String]) -> Result<Response> {
        match self.agent().subagents().child_messages(path).await {
            Ok(serde_json::Value::Null) => Response::error("Not found: no such child run", 404),
            Ok(messages) => {
                let mut resp = Response::ok(messages.to_string())?;
                resp.headers_mut().set("content-type", "application/json")?;
                Ok(resp)
            }
            Err(e) => Response::error(e.to_string(), 502),
        }
    }

    /// A WebSocket frame from a tab.
    pub async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let Some(conn_id) = ws.deserialize_attachment::<String>().ok().flatten() else {
            return Ok(());
        };
        if let WebSocketIncomingMessage::String(text) = message {
            self.agent().on_message(&conn_id, &text).await;
        }
        Ok(())
    }

    /// A tab closed its WebSocket.
    pub async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        reason: String,
        _clean: bool,
    ) -> Result<()> {
        self.sockets.invalidate();
        if let Some(conn_id) = ws.deserialize_attachment::<String>().ok().flatten() {
            // A tab that already reconnected under this id keeps its state.
            if !self.sockets.open_elsewhere(&conn_id, &ws) {
                self.agent().on_close(&conn_id);
            }
        }
        // 1005/1006 cannot be echoed back; the socket is gone either way.
        let code = if (1000..=4999).contains(&code) && code != 1005 && code != 1006 {
            code as u16
        } else {
            1000
        };
        let _ = ws.close(Some(code), Some(reason));
        Ok(())
    }

    /// A tab's WebSocket failed.
    pub async fn websocket_error(&self, _ws: WebSocket) -> Result<()> {
        self.sockets.invalidate();
        Ok(())
    }

    /// The object's alarm fired: recovery and cleanup.
    pub async fn alarm(&self) -> Result<Response> {
        self.agent().on_alarm().await;
        Response::ok("ok")
    }

    /// DO RPC `chat(message, callback, options)`.
    pub async fn rpc_chat(
        &self,
        message: JsValue,
        callback: JsValue,
        options: JsValue,
    ) -> std::result::Result<JsValue, JsValue> {
        rpc::chat(&self.agent(), message, callback, options).await
    }

    /// DO RPC `getMessages()`.
    pub fn rpc_get_messages(&self) -> std::result::Result<JsValue, JsValue> {
        rpc::get_messages(&self.agent())
    }

    /// DO RPC `clearMessages()`.
    pub fn rpc_clear_messages(&self) {
        self.agent().clear_messages();
    }

    /// DO RPC call of a callable (`addMcpServer`, `removeMcpServer`, `getMcpServers`, …).
    pub async fn rpc_call(
        &self,
        method: String,
        args: JsValue,
    ) -> std::result::Result<JsValue, JsValue> {
        rpc::call_method(&self.agent(), method, args).await
    }
}

/// A var or secret of the Worker's environment.
pub fn env_setting(env: &Env, name: &str) -> Option<String> {
    env.var(name)
        .ok()
        .map(|v| v.to_string())
        .or_else(|| env.secret(name).ok().map(|v| v.to_string()))
}

/// The access rules of the environment's `THINK_AUTH_*` settings (see [`think_core::auth`]).
pub fn access_from_env(env: &Env) -> think_core::auth::AccessControl {
    think_core::auth::AccessControl::from_settings(|name| env_setting(env, name))
}

/// Routes `/agents/<namespace>/<name>[/…]` to the Durable Object whose binding name, in
/// kebab-case, is `<namespace>` (the `agents` routing rule), once the environment's
/// `THINK_AUTH_*` settings admit it. `Ok(None)` means the path is not an agent path; an
/// unknown namespace gets `400 Invalid request`.
pub async fn route_agent_request(req: Request, env: &Env) -> Result<Option<Response>> {
    route_agent_request_with(req, env, &access_from_env(env)).await
}

/// [`route_agent_request`] with the app's own access rules, e.g.
/// `access_from_env(&env).authorize(hook)`: the check runs before the request reaches the
/// Durable Object, and a `token` query parameter is stripped before it is forwarded.
pub async fn route_agent_request_with(
    req: Request,
    env: &Env,
    access: &think_core::auth::AccessControl,
) -> Result<Option<Response>> {
    install_platform();
    let url = req.url()?;
    let route = match parse_agent_path(url.path(), "agents") {
        Ok(route) => route,
        Err(RouteError::InvalidName(e)) => {
            return Ok(Some(Response::error(format!("Invalid request: {e}"), 400)?))
        }
        // NotAgentPath: not for an agent, fall through (RouteError is non-exhaustive).
        Err(_) => return Ok(None),
    };
    let req = match auth::gate(req, &route, access).await? {
        Ok(req) => req,
        Err(refused) => return Ok(Some(refused)),
    };
    let env_obj: &js_sys::Object = AsRef::<wasm_bindgen::JsValue>::as_ref(env).unchecked_ref();
    let binding = js_sys::Object::keys(env_obj).iter().filter_map(|k| k.as_string()).find(|key| {
        camel_case_to_kebab_case(key) == route.namespace
            && js_sys::Reflect::get(env_obj, &key.into())
                .ok()
                .and_then(|ns| js_sys::Reflect::get(&ns, &"idFromName".into()).ok())
                .is_some_and(|f| f.is_function())
    });
    let Some(binding) = binding else { return Ok(Some(Response::error("Invalid request", 400)?)) };
    let namespace = env.durable_object(&binding)?;
    let stub = namespace.id_from_name(&route.name)?.get_stub()?;
    Ok(Some(stub.fetch_with_request(req).await?))
}

/// Declares a Durable Object class that runs a Think agent. `$spec` is a function from the
/// Worker's `Env` to the agent's [`AgentSpec`]. The crate using it must depend on `worker`.
///
/// ```ignore
/// think_worker::think_agent!(ResearchAgent, |env: &worker::Env| {
///     think_worker::think_core::agent::AgentSpec::new(think_worker::think_core::agent::ModelChoice::from_settings(
///         env.var("BASE").ok().map(|v| v.to_string()).as_deref(), None, Some("gpt-4o")))
///         .system_prompt("You research things.")
/// });
/// ```
#[macro_export]
macro_rules! think_agent {
    ($class:ident, $spec:expr) => {
        #[::worker::durable_object]
        pub struct $class($crate::ThinkHost);

        impl ::worker::DurableObject for $class {
            fn new(state: ::worker::State, env: ::worker::Env) -> Self {
                $crate::install_platform();
                let build: fn(&::worker::Env) -> $crate::think_core::agent::AgentSpec = $spec;
                let spec = build(&env);
                Self($crate::ThinkHost::new(stringify!($class), state, &env, spec))
            }
            async fn fetch(&self, req: ::worker::Request) -> ::worker::Result<::worker::Response> {
                self.0.fetch(req).await
            }
            async fn websocket_message(
                &self,
                ws: ::worker::WebSocket,
                message: ::worker::WebSocketIncomingMessage,
            ) -> ::worker::Result<()> {
                self.0.websocket_message(ws, message).await
            }
            async fn websocket_close(
                &self,
                ws: ::worker::WebSocket,
                code: usize,
                reason: String,
                was_clean: bool,
            ) -> ::worker::Result<()> {
                self.0.websocket_close(ws, code, reason, was_clean).await
            }
            async fn websocket_error(
                &self,
                ws: ::worker::WebSocket,
                _error: ::worker::Error,
            ) -> ::worker::Result<()> {
                self.0.websocket_error(ws).await
            }
            async fn alarm(&self) -> ::worker::Result<::worker::Response> {
                self.0.alarm().await
            }
        }

        /// The RPC surface the JS `DurableObject` wrapper forwards to (`js/entry.mjs`).
        #[::worker::wasm_bindgen::prelude::wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, wasm_bindgen_futures = ::worker::wasm_bindgen_futures, js_sys = ::worker::js_sys)]
        impl $class {
            #[wasm_bindgen(js_name = rpcChat)]
            pub async fn rpc_chat(
                &self,
                message: ::worker::wasm_bindgen::JsValue,
                callback: ::worker::wasm_bindgen::JsValue,
                options: ::worker::wasm_bindgen::JsValue,
            ) -> ::std::result::Result<
                ::worker::wasm_bindgen::JsValue,
                ::worker::wasm_bindgen::JsValue,
            > {
                self.0.rpc_chat(message, callback, options).await
            }
            #[wasm_bindgen(js_name = rpcGetMessages)]
            pub fn rpc_get_messages(
                &self,
            ) -> ::std::result::Result<
                ::worker::wasm_bindgen::JsValue,
                ::worker::wasm_bindgen::JsValue,
            > {
                self.0.rpc_get_messages()
            }
            #[wasm_bindgen(js_name = rpcClearMessages)]
            pub fn rpc_clear_messages(&self) {
                self.0.rpc_clear_messages()
            }
            #[wasm_bindgen(js_name = rpcSubagent)]
            pub async fn rpc_subagent(
                &self,
                method: String,
                arg: String,
            ) -> ::std::result::Result<
                ::worker::wasm_bindgen::JsValue,
                ::worker::wasm_bindgen::JsValue,
            > {
                self.0.rpc_subagent(method, arg).await
            }
            #[wasm_bindgen(js_name = rpcFork)]
            pub async fn rpc_fork(
                &self,
                method: String,
                arg: String,
            ) -> ::std::result::Result<
                ::worker::wasm_bindgen::JsValue,
                ::worker::wasm_bindgen::JsValue,
            > {
                self.0.rpc_fork(method, arg).await
            }
            #[wasm_bindgen(js_name = rpcCall)]
            pub async fn rpc_call(
                &self,
                method: String,
                args: ::worker::wasm_bindgen::JsValue,
            ) -> ::std::result::Result<
                ::worker::wasm_bindgen::JsValue,
                ::worker::wasm_bindgen::JsValue,
            > {
                self.0.rpc_call(method, args).await
            }
        }
    };
}

#[cfg(feature = "shipped-agent")]
mod shipped {
    use worker::{event, Context, Env, Request, Response, Result};

    use think_core::agent::settings::spec_from_settings_and_ai;
    use think_core::agent::AgentSpec;

    use super::env_setting as setting;

    /// The ready-made agent, configured from the environment's `THINK_*` settings and its
    /// `AI` binding (see [`think_core::agent::settings`]).
    pub fn spec_from_env(env: &Env) -> AgentSpec {
        let ai = super::WorkerAi::from_env(env).map(|ai| {
            std::rc::Rc::new(ai) as std::rc::Rc<dyn think_core::model::workers_ai::AiBinding>
        });
        let spec = spec_from_settings_and_ai(|name| setting(env, name), ai);
        // Without a cdpUrl, the Browser Run binding is the browser when the Worker has one,
        // unless THINK_BROWSER_BINDING=false says it reaches no Browser Run here (`npm start`).
        if spec.has_browser() || env.service(super::browser::BROWSER_BINDING).is_err() {
            return spec;
        }
        match think_core::agent::settings::browser_options(&|name| setting(env, name), true) {
            Ok(Some(options)) => spec.browser(options),
            Ok(None) => spec,
            Err(e) => {
                think_core::platform::log(&format!("think-rs: {e}"));
                spec
            }
        }
    }

    crate::think_agent!(ThinkAgent, spec_from_env);

    #[event(fetch)]
    async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
        match super::route_agent_request(req, &env).await? {
            Some(resp) => Ok(resp),
            None => Response::error("Not found", 404),
        }
    }
}

/// The shipped agent counts its live heap bytes, for the idle reset ([`idle::LiveHeap`]).
#[cfg(feature = "shipped-agent")]
#[global_allocator]
static ALLOCATOR: idle::LiveHeap = idle::LiveHeap;
