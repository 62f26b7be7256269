//! The browser runtime of one agent ([`Browser`]: the connection, the sessions, the pages
//! the quick actions open) and the `cdp` connector `browser_execute` code calls through the
//! Code Mode journal. The host owns the WebSocket: the sandbox only ever sees results.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::cdp::CdpClient;
use super::policy::HostPolicy;
use super::session::{run_key, SessionMode, Sessions, SHARED_KEY, TOMBSTONE_MS, USES_SHARED};
use super::{BrowserError, BrowserLauncher, BrowserOptions};
use crate::codemode::connectors::{
    check_args, spec, CallContext, CallKind, Connector, ConnectorError, MethodSpec,
};
use crate::platform::Clock;
use crate::store::Sql;
use crate::tools::approval::ApprovalPolicy;

/// Prefix of the stable page handles `attachToTarget` returns.
const HANDLE_PREFIX: &str = "page_";

/// CDP methods that work without a target session (browser-level domains).
const BROWSER_DOMAINS: &[&str] =
    &["Target", "Browser", "SystemInfo", "Schema", "Storage", "Tethering"];

/// The browser behind the tools of one agent.
pub struct Browser {
    options: BrowserOptions,
    policy: HostPolicy,
    launcher: Rc<dyn BrowserLauncher>,
    sql: Rc<dyn Sql>,
    clock: Rc<dyn Clock>,
    client: RefCell<Option<Rc<CdpClient>>>,
    connecting: futures::lock::Mutex<()>,
    /// Stable page handle → CDP session id on the current connection.
    attached: RefCell<HashMap<String, String>>,
    /// The protocol description, once fetched.
    protocol: RefCell<Option<Rc<Value>>>,
    /// Tool calls using the connection now; it is closed when the last one ends.
    users: Cell<usize>,
}

/// A page a quick action opened, in a context of its own.
pub struct QuickPage {
    /// The page's context, disposed by [`Browser::close_page`].
    pub context_id: String,
    /// The CDP session of the page.
    pub session_id: String,
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

impl Browser {
    /// The runtime over `sql` (its session table is created here), connecting with `launcher`.
    pub fn new(
        options: BrowserOptions,
        launcher: Rc<dyn BrowserLauncher>,
        sql: Rc<dyn Sql>,
        clock: Rc<dyn Clock>,
    ) -> Result<Rc<Self>, BrowserError> {
        Sessions::create_tables(sql.as_ref())?;
        Ok(Rc::new(Self {
            policy: HostPolicy::new(&options.allowed_hosts),
            options,
            launcher,
            sql,
            clock,
            client: RefCell::default(),
            connecting: futures::lock::Mutex::new(()),
            attached: RefCell::default(),
            protocol: RefCell::default(),
            users: Cell::new(0),
        }))
    }

    /// The options in force.
    pub fn options(&self) -> &BrowserOptions {
        &self.options
    }

    /// The allow-list.
    pub fn policy(&self) -> &HostPolicy {
        &self.policy
    }

    fn sessions(&self) -> Sessions<'_> {
        Sessions::new(self.sql.as_ref())
    }

    fn now(&self) -> f64 {
        self.clock.now_ms()
    }

    /// Marks the start of a tool call that uses the browser.
    pub fn begin(&self) {
        self.users.set(self.users.get() + 1);
    }

    /// Marks its end; the last one closes the connection (sessions stay in the browser).
    pub fn end(&self) {
        self.users.set(self.users.get().saturating_sub(1));
        if self.users.get() == 0 {
            if let Some(c) = self.client.borrow_mut().take() {
                c.close();
            }
            self.attached.borrow_mut().clear();
        }
    }

    /// The live connection, (re)connecting when there is none.
    pub async fn client(&self) -> Result<Rc<CdpClient>, BrowserError> {
        let _one = self.connecting.lock().await;
        if let Some(c) = self.client.borrow().as_ref().filter(|c| c.closed().is_none()) {
            return Ok(c.clone());
        }
        let conn = self.launcher.connect(&self.options.endpoint).await?;
        let client = Rc::new(CdpClient::new(conn, self.clock.clone()));
        let policy = self.policy.clone();
        client.set_interceptor(Box::new(move |e| guard_request(&policy, e)));
        self.attached.borrow_mut().clear();
        *self.client.borrow_mut() = Some(client.clone());
        Ok(client)
    }

    async fn send(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
    ) -> Result<Value, BrowserError> {
        let client = self.client().await?;
        client.send(method, Some(&params), session_id, self.options.command_timeout_ms).await
    }

    async fn new_context(&self) -> Result<String, BrowserError> {
        let r = self.send("Target.createBrowserContext", json!({}), None).await?;
        r.get("browserContextId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| BrowserError::Page("Target.createBrowserContext returned no id".into()))
    }

    async fn dispose_context(&self, context_id: &str) -> Result<(), BrowserError> {
        match self
            .send("Target.disposeBrowserContext", json!({"browserContextId": context_id}), None)
            .await
        {
            // Already gone (the browser restarted): nothing is left to close.
            Err(BrowserError::Protocol { .. }) | Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The session key and context of execution `exec_id`, opening one as its mode says.
    /// A session closed by the sweep (or by the code) fails loudly instead of starting over.
    async fn run_context(&self, exec_id: &str) -> Result<(String, String), BrowserError> {
        let key = run_key(exec_id);
        let now = self.now();
        if let Some(row) = self.sessions().get(&key)? {
            if let Some(why) = row.closed {
                return Err(BrowserError::SessionGone(format!(
                    "The browser session of this run was {why}; its pages are gone. Start a new browser_execute run."
                )));
            }
            self.sessions().touch(&key, now)?;
            if row.context_id != USES_SHARED {
                return Ok((key, row.context_id));
            }
            return self.shared_context().await;
        }
        if self.options.session_mode == SessionMode::Reuse {
            self.sessions().put(&key, USES_SHARED, now)?;
            return self.shared_context().await;
        }
        let context = self.new_context().await?;
        self.sessions().put(&key, &context, now)?;
        Ok((key, context))
    }

    /// The shared session, opened when there is none.
    async fn shared_context(&self) -> Result<(String, String), BrowserError> {
        let now = self.now();
        if let Some(row) = self.sessions().get(SHARED_KEY)?.filter(|r| r.closed.is_none()) {
            self.sessions().touch(SHARED_KEY, now)?;
            return Ok((SHARED_KEY.to_owned(), row.context_id));
        }
        let context = self.new_context().await?;
        self.sessions().put(SHARED_KEY, &context, now)?;
        Ok((SHARED_KEY.to_owned(), context))
    }

    /// Ends execution `exec_id`'s use of the browser: unless it is paused (it resumes on
    /// approval), a session of its own is closed and its row dropped.
    pub async fn finish_run(&self, exec_id: &str, paused: bool) {
        let key = run_key(exec_id);
        let Ok(Some(row)) = self.sessions().get(&key) else { return };
        if paused {
            let _ = self.sessions().touch(&key, self.now());
            return;
        }
        if row.context_id != USES_SHARED && row.closed.is_none() {
            if let Err(e) = self.dispose_context(&row.context_id).await {
                crate::platform::log(&format!("think-rs: closing a browser session failed: {e}"));
            }
        }
        if let Err(e) = self.sessions().delete(&key) {
            crate::platform::log(&format!("think-rs: forgetting a browser session failed: {e}"));
        }
    }

    /// The alarm's sweep: closes run sessions idle past `idle_ms` (marking them swept, so a
    /// resume fails loudly) and returns when the next one falls idle, if any is open.
    pub async fn sweep(&self) -> Result<Option<f64>, BrowserError> {
        let now = self.now();
        let idle = self.sessions().idle_runs(now - self.options.idle_ms)?;
        if !idle.is_empty() {
            self.begin();
            for row in idle {
                if let Err(e) = self.dispose_context(&row.context_id).await {
                    crate::platform::log(&format!(
                        "think-rs: the browser sweep could not close {}: {e}",
                        row.key
                    ));
                }
                let why = format!(
                    "closed by the sweep after {} s idle",
                    (self.options.idle_ms / 1000.0) as u64
                );
                if let Err(e) = self.sessions().mark_closed(&row.key, &why) {
                    crate::platform::log(&format!("think-rs: the browser sweep: {e}"));
                }
            }
            self.end();
        }
        self.sessions().prune_closed(now - TOMBSTONE_MS)?;
        self.next_sweep()
    }

    /// When the oldest open run session falls idle, if any is open.
    pub fn next_sweep(&self) -> Result<Option<f64>, BrowserError> {
        Ok(self.sessions().oldest_open_run()?.map(|t| t + self.options.idle_ms + 1.0))
    }

    /// The CDP session of a page handle (attaching again after a reconnect), or the id as
    /// given when it is a raw CDP session id.
    async fn resolve_session(&self, session: &str) -> Result<String, BrowserError> {
        let Some(target) = session.strip_prefix(HANDLE_PREFIX) else {
            return Ok(session.to_owned());
        };
        if let Some(s) = self.attached.borrow().get(target) {
            return Ok(s.clone());
        }
        let r = self
            .send("Target.attachToTarget", json!({"targetId": target, "flatten": true}), None)
            .await
            .map_err(|e| match e {
                BrowserError::Protocol { message, .. } => BrowserError::SessionGone(format!(
                    "The page {target} is gone ({message}); open a new one with cdp.openPage()."
                )),
                e => e,
            })?;
        let id = r.get("sessionId").and_then(Value::as_str).unwrap_or_default().to_owned();
        self.guard_session(&id).await?;
        self.attached.borrow_mut().insert(target.to_owned(), id.clone());
        Ok(id)
    }

    /// Holds every document request of the page of `session` until the allow-list has seen
    /// its URL (`Fetch.requestPaused`, answered by [`guard_request`]), so redirects and the
    /// page's own navigation are checked too, not only the URLs given to the tools.
    async fn guard_session(&self, session: &str) -> Result<(), BrowserError> {
        let patterns = json!({"patterns": [{"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]});
        self.send("Fetch.enable", patterns, Some(session)).await.map(|_| ())
    }

    /// Opens a blank page in `context` and returns its stable handle and target id.
    async fn open_target(&self, context: &str) -> Result<(String, String), BrowserError> {
        let r = self
            .send(
                "Target.createTarget",
                json!({"url": "about:blank", "browserContextId": context}),
                None,
            )
            .await?;
        let target = r.get("targetId").and_then(Value::as_str).unwrap_or_default().to_owned();
        let handle = format!("{HANDLE_PREFIX}{target}");
        self.resolve_session(&handle).await?;
        Ok((handle, target))
    }

    /// Loads `url` (checked against the allow-list) in the page of `session` and waits for
    /// its load event.
    pub async fn navigate(&self, session: &str, url: &str) -> Result<String, BrowserError> {
        let url = self.policy.check(url)?;
        let session = self.resolve_session(session).await?;
        let client = self.client().await?;
        let timeout = self.options.command_timeout_ms;
        client.send("Page.enable", None, Some(&session), timeout).await?;
        client.clear_events(Some(&session));
        let r = client
            .send("Page.navigate", Some(&json!({"url": url.as_str()})), Some(&session), timeout)
            .await?;
        if let Some(err) = r.get("errorText").and_then(Value::as_str).filter(|e| !e.is_empty()) {
            let why = if err.contains("ERR_BLOCKED_BY_CLIENT") {
                " (it redirected to a URL the browser allow-list refuses)"
            } else {
                ""
            };
            return Err(BrowserError::Page(format!("Could not open {url}: {err}{why}")));
        }
        client.wait_event("Page.loadEventFired", Some(&session), timeout).await?;
        Ok(url.to_string())
    }

    /// Runs `expression` in the page and returns its value (promises awaited); a throw is a
    /// [`BrowserError::Page`] with the page's message.
    pub async fn evaluate(&self, session: &str, expression: &str) -> Result<Value, BrowserError> {
        let session = self.resolve_session(session).await?;
        let r = self
            .send(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
                Some(&session),
            )
            .await?;
        if let Some(ex) = r.get("exceptionDetails") {
            let text = ex
                .pointer("/exception/description")
                .or_else(|| ex.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("the script threw");
            return Err(BrowserError::Page(format!("The page script failed: {text}")));
        }
        Ok(r.pointer("/result/value").cloned().unwrap_or(Value::Null))
    }

    /// A fresh page in a context of its own showing `url` (checked) or `html`, for a quick
    /// action; close it with [`Browser::close_page`].
    pub async fn open_page(
        &self,
        url: Option<&str>,
        html: Option<&str>,
    ) -> Result<QuickPage, BrowserError> {
        if let Some(u) = url {
            self.policy.check(u)?;
        }
        let context = self.new_context().await?;
        let page = async {
            let (handle, _) = self.open_target(&context).await?;
            match (url, html) {
                (Some(u), _) => {
                    self.navigate(&handle, u).await?;
                }
                (None, Some(h)) => {
                    let session = self.resolve_session(&handle).await?;
                    let tree = self.send("Page.getFrameTree", json!({}), Some(&session)).await?;
                    let frame = tree.pointer("/frameTree/frame/id").cloned().unwrap_or(Value::Null);
                    self.send(
                        "Page.setDocumentContent",
                        json!({"frameId": frame, "html": h}),
                        Some(&session),
                    )
                    .await?;
                }
                (None, None) => {}
            }
            self.resolve_session(&handle).await
        }
        .await;
        match page {
            Ok(session_id) => Ok(QuickPage { context_id: context, session_id }),
            Err(e) => {
                let _ = self.dispose_context(&context).await;
                Err(e)
            }
        }
    }

    /// Closes a quick action's page and its context.
    pub async fn close_page(&self, page: QuickPage) {
        if let Err(e) = self.dispose_context(&page.context_id).await {
            crate::platform::log(&format!("think-rs: closing a quick-action page failed: {e}"));
        }
    }

    /// The protocol description (fetched once), or one domain of it.
    async fn protocol(&self) -> Result<Rc<Value>, BrowserError> {
        if let Some(p) = self.protocol.borrow().clone() {
            return Ok(p);
        }
        let p = Rc::new(self.launcher.protocol(&self.options.endpoint).await?);
        *self.protocol.borrow_mut() = Some(p.clone());
        Ok(p)
    }

    /// What `method` is in the protocol: a command, an event, or unknown (`None` when there
    /// is no description to ask).
    async fn kind_of(&self, method: &str) -> Option<&'static str> {
        let p = self.protocol().await.ok()?;
        let (domain, name) = method.split_once('.')?;
        let d = p.get("domains")?.as_array()?.iter().find(|d| d["domain"] == domain)?;
        let has = |key: &str| {
            d.get(key)
                .and_then(Value::as_array)
                .is_some_and(|xs| xs.iter().any(|x| x["name"] == name))
        };
        Some(if has("commands") {
            "command"
        } else if has("events") {
            "event"
        } else {
            "unknown"
        })
    }

    /// A CDP failure reworded to teach the fix.
    async fn teach(&self, err: BrowserError, method: &str, session: Option<&str>) -> BrowserError {
        let BrowserError::Protocol { code: -32601, .. } = &err else { return err };
        let domain = method.split('.').next().unwrap_or_default();
        let kind = self.kind_of(method).await;
        let hint = match kind {
            Some("event") => format!(
                "{method} is an event, not a command: wait for it with cdp.waitForEvent({{method: \"{method}\", sessionId}})."
            ),
            Some("command") | None if session.is_none() && !BROWSER_DOMAINS.contains(&domain) => format!(
                "{method} needs a sessionId: open a page with `const {{sessionId}} = await cdp.openPage({{url}})` (or cdp.attachToTarget({{targetId}})) and pass it."
            ),
            _ => format!("{method} is not a command of this browser; cdp.spec({{domain: \"{domain}\"}}) lists the commands."),
        };
        BrowserError::InvalidInput(format!("{err}. {hint}"))
    }
}

/// The `cdp.*` global of `browser_execute`.
pub struct CdpConnector {
    browser: Rc<Browser>,
    approval: ApprovalPolicy,
    methods: Vec<MethodSpec>,
}

impl CdpConnector {
    /// The connector over `browser`; `approval` decides which `cdp.send` calls wait for a
    /// human (patterns such as `cdp.Page.navigate` or `cdp.Input.*`).
    pub fn new(browser: Rc<Browser>, approval: ApprovalPolicy) -> Self {
        use CallKind::{Read, Write};
        let s = |d: &str| json!({"type": "string", "description": d});
        let n = |d: &str| json!({"type": "integer", "minimum": 1, "description": d});
        let methods = vec![
            spec(
                "send",
                "Send a CDP command and return its result (without the JSON-RPC envelope). Page-level domains (Page, Runtime, DOM, Input, Network, …) need the sessionId of a page.",
                json!({"method": s("Domain.command, e.g. Page.navigate"), "params": {"type": "object", "description": "The command's parameters"}, "sessionId": s("The page session (from openPage or attachToTarget)"), "timeoutMs": n("Time limit of this command (default 10000)")}),
                &["method"],
                Write,
            ),
            spec(
                "openPage",
                "Open a new page in this run's browser session, optionally loading a URL (waits for its load event). Returns {targetId, sessionId}.",
                json!({"url": s("The URL to load")}),
                &[],
                Write,
            ),
            spec(
                "attachToTarget",
                "Attach to a target (a page) of this session; returns {sessionId}, a stable handle that survives reconnects.",
                json!({"targetId": s("The target id")}),
                &["targetId"],
                Write,
            ),
            spec(
                "waitForEvent",
                "Wait for a CDP event (e.g. Page.loadEventFired after Page.navigate; enable its domain first) and return {method, params, sessionId}.",
                json!({"method": s("The event name"), "sessionId": s("Only events of this page"), "timeoutMs": n("Time limit (default 10000)")}),
                &["method"],
                Write,
            ),
            spec(
                "spec",
                "The live protocol description: without a domain, the domains and their command and event names; with one, that domain's commands and events with their parameters.",
                json!({"domain": s("A domain, e.g. Page")}),
                &[],
                Read,
            ),
            spec(
                "startSession",
                "Keep this run's browser session as the shared one that later runs use (dynamic mode).",
                json!({}),
                &[],
                Write,
            ),
            spec("sessionInfo", "This run's browser session: mode, key, browserContextId and its pages.", json!({}), &[], Read),
            spec("closeSession", "Close this run's browser session and its pages.", json!({}), &[], Write),
            spec("getDebugLog", "The latest CDP commands and events of this connection, with timings and errors.", json!({"limit": n("How many entries (default 50)")}), &[], Read),
            spec("clearDebugLog", "Empty the debug log.", json!({}), &[], Write),
        ];
        Self { browser, approval, methods }
    }

    async fn send(&self, args: &Value, exec_id: &str) -> Result<Value, BrowserError> {
        let method = str_arg(args, "method").unwrap_or_default();
        let (domain, name) = method.split_once('.').unwrap_or(("", ""));
        if domain.is_empty() || name.is_empty() {
            return Err(BrowserError::InvalidInput(format!(
                "{method:?} is not a CDP method; methods are Domain.name, e.g. Page.navigate"
            )));
        }
        let (_, context) = self.browser.run_context(exec_id).await?;
        let mut params = args.get("params").cloned().unwrap_or_else(|| json!({}));
        match method {
            "Browser.close" | "Target.disposeBrowserContext" | "Target.createBrowserContext" => {
                return Err(BrowserError::InvalidInput(format!(
                    "{method} is managed by the host; use cdp.closeSession() or cdp.openPage()"
                )))
            }
            "Fetch.enable"
            | "Fetch.disable"
            | "Target.attachToBrowserTarget"
            | "Target.setAutoAttach" => {
                return Err(BrowserError::InvalidInput(format!(
                "{method} is reserved: the host uses it to keep navigation inside the allow-list"
            )))
            }
            "Page.navigate" | "Target.createTarget" => {
                let url = str_arg(&params, "url").unwrap_or("about:blank").to_owned();
                let checked = self.browser.policy.check(&url)?;
                params["url"] = json!(checked.as_str());
                if method == "Target.createTarget" {
                    params["browserContextId"] = json!(context);
                }
            }
            _ => {}
        }
        let session = match str_arg(args, "sessionId") {
            Some(s) => Some(self.browser.resolve_session(s).await?),
            None => None,
        };
        let timeout = args
            .get("timeoutMs")
            .and_then(Value::as_u64)
            .unwrap_or(self.browser.options.command_timeout_ms);
        let client = self.browser.client().await?;
        match client.send(method, Some(&params), session.as_deref(), timeout).await {
            Ok(v) => {
                if method == "Target.attachToTarget" {
                    if let Some(s) = v.get("sessionId").and_then(Value::as_str) {
                        self.browser.guard_session(s).await?;
                    }
                }
                Ok(v)
            }
            Err(e) => Err(self.browser.teach(e, method, session.as_deref()).await),
        }
    }

    async fn session_info(&self, exec_id: &str) -> Result<Value, BrowserError> {
        let (key, context) = self.browser.run_context(exec_id).await?;
        let targets = self.browser.send("Target.getTargets", json!({}), None).await?;
        let pages: Vec<Value> = targets["targetInfos"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .filter(|t| t["browserContextId"] == context.as_str() && t["type"] == "page")
                    .map(|t| json!({"targetId": t["targetId"], "url": t["url"], "title": t["title"]}))
                    .collect()
            })
            .unwrap_or_default();
        Ok(json!({
            "mode": self.browser.options.session_mode.as_str(),
            "key": key,
            "shared": key == SHARED_KEY,
            "browserContextId": context,
            "pages": pages,
        }))
    }

    async fn protocol_summary(&self, domain: Option<&str>) -> Result<Value, BrowserError> {
        let p = self.browser.protocol().await?;
        let domains = p.get("domains").and_then(Value::as_array).cloned().unwrap_or_default();
        let names = |d: &Value, key: &str| -> Vec<Value> {
            d.get(key)
                .and_then(Value::as_array)
                .map(|xs| xs.iter().map(|x| x["name"].clone()).collect())
                .unwrap_or_default()
        };
        match domain {
            None => Ok(Value::Array(
                domains
                    .iter()
                    .map(|d| json!({"domain": d["domain"], "commands": names(d, "commands"), "events": names(d, "events")}))
                    .collect(),
            )),
            Some(name) => {
                let d = domains.iter().find(|d| d["domain"] == name).ok_or_else(|| {
                    BrowserError::InvalidInput(format!(
                        "No CDP domain {name:?}; cdp.spec() lists the domains"
                    ))
                })?;
                let brief = |key: &str| -> Vec<Value> {
                    d.get(key)
                        .and_then(Value::as_array)
                        .map(|xs| {
                            xs.iter()
                                .map(|x| {
                                    let params: Vec<Value> = x
                                        .get("parameters")
                                        .and_then(Value::as_array)
                                        .map(|ps| {
                                            ps.iter()
                                                .map(|p| json!({"name": p["name"], "type": p.get("type").or_else(|| p.get("$ref")), "optional": p.get("optional").cloned().unwrap_or(json!(false))}))
                                                .collect()
                                        })
                                        .unwrap_or_default();
                                    let description: String = x["description"]
                                        .as_str()
                                        .unwrap_or("")
                                        .chars()
                                        .take(300)
                                        .collect();
                                    json!({"name": x["name"], "description": description, "parameters": params})
                                })
                                .collect()
                        })
                        .unwrap_or_default()
                };
                Ok(json!({"domain": name, "commands": brief("commands"), "events": brief("events")}))
            }
        }
    }

    async fn run(&self, method: &str, args: &Value, exec_id: &str) -> Result<Value, BrowserError> {
        let browser = &self.browser;
        match method {
            "send" => self.send(args, exec_id).await,
            "openPage" => {
                let (_, context) = browser.run_context(exec_id).await?;
                let (handle, target) = browser.open_target(&context).await?;
                let mut out = json!({"targetId": target, "sessionId": handle});
                if let Some(url) = str_arg(args, "url") {
                    out["url"] = json!(browser.navigate(&handle, url).await?);
                }
                Ok(out)
            }
            "attachToTarget" => {
                let (_, context) = browser.run_context(exec_id).await?;
                let target = str_arg(args, "targetId").unwrap_or_default();
                let targets = browser.send("Target.getTargets", json!({}), None).await?;
                let ours = targets["targetInfos"].as_array().is_some_and(|ts| {
                    ts.iter().any(|t| {
                        t["targetId"] == target && t["browserContextId"] == context.as_str()
                    })
                });
                if !ours {
                    return Err(BrowserError::InvalidInput(format!(
                        "Target {target} is not a page of this run's session; cdp.sessionInfo() lists its pages"
                    )));
                }
                let handle = format!("{HANDLE_PREFIX}{target}");
                browser.resolve_session(&handle).await?;
                Ok(json!({"sessionId": handle, "targetId": target}))
            }
            "waitForEvent" => {
                browser.run_context(exec_id).await?;
                let event = str_arg(args, "method").unwrap_or_default();
                let session = match str_arg(args, "sessionId") {
                    Some(s) => Some(browser.resolve_session(s).await?),
                    None => None,
                };
                let timeout = args
                    .get("timeoutMs")
                    .and_then(Value::as_u64)
                    .unwrap_or(browser.options.command_timeout_ms);
                let client = browser.client().await?;
                let e = client.wait_event(event, session.as_deref(), timeout).await?;
                Ok(serde_json::to_value(e).unwrap_or(Value::Null))
            }
            "spec" => self.protocol_summary(str_arg(args, "domain")).await,
            "startSession" => {
                let key = run_key(exec_id);
                let (_, context) = browser.run_context(exec_id).await?;
                if context_is_own(browser, &key)? {
                    let sessions = browser.sessions();
                    if let Some(old) = sessions.get(SHARED_KEY)?.filter(|r| r.closed.is_none()) {
                        browser.dispose_context(&old.context_id).await?;
                    }
                    sessions.put(SHARED_KEY, &context, browser.now())?;
                    sessions.put(&key, USES_SHARED, browser.now())?;
                }
                Ok(json!({"key": SHARED_KEY, "browserContextId": context, "shared": true}))
            }
            "sessionInfo" => self.session_info(exec_id).await,
            "closeSession" => {
                let (key, context) = browser.run_context(exec_id).await?;
                browser.dispose_context(&context).await?;
                let sessions = browser.sessions();
                if key == SHARED_KEY {
                    sessions.delete(SHARED_KEY)?;
                }
                sessions.mark_closed(&run_key(exec_id), "closed by cdp.closeSession()")?;
                Ok(json!({"closed": true}))
            }
            "getDebugLog" => {
                let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(50) as usize;
                let client = browser.client().await?;
                Ok(serde_json::to_value(client.debug_log(limit)).unwrap_or(Value::Null))
            }
            "clearDebugLog" => {
                browser.client().await?.clear_debug_log();
                Ok(Value::Null)
            }
            other => Err(BrowserError::InvalidInput(format!("cdp.{other} is not a function"))),
        }
    }
}

/// The allow-list's answer to a paused document request: continue it, or fail it as blocked.
fn guard_request(policy: &HostPolicy, e: &super::CdpEvent) -> Option<super::cdp::Answer> {
    if e.method != "Fetch.requestPaused" {
        return None;
    }
    let id = e.params.get("requestId").cloned().unwrap_or(Value::Null);
    let url = e.params.pointer("/request/url").and_then(Value::as_str).unwrap_or_default();
    let answer = match policy.check(url) {
        Ok(_) => ("Fetch.continueRequest".to_owned(), json!({"requestId": id})),
        Err(_) => (
            "Fetch.failRequest".to_owned(),
            json!({"requestId": id, "errorReason": "BlockedByClient"}),
        ),
    };
    Some((answer.0, answer.1, e.session_id.clone()))
}

/// Whether the run's row names a context of its own (not the shared one).
fn context_is_own(browser: &Browser, key: &str) -> Result<bool, BrowserError> {
    Ok(browser.sessions().get(key)?.is_some_and(|r| r.context_id != USES_SHARED))
}

#[async_trait(?Send)]
impl Connector for CdpConnector {
    fn name(&self) -> &str {
        "cdp"
    }

    fn hint(&self) -> &str {
        "the browser over the Chrome DevTools Protocol: `const {sessionId} = await cdp.openPage({url})`, then `cdp.send({method, params, sessionId})`"
    }

    fn methods(&self) -> &[MethodSpec] {
        &self.methods
    }

    fn needs_approval(&self, method: &str, args: &Value) -> bool {
        let name = match (method, str_arg(args, "method")) {
            ("send", Some(m)) => format!("cdp.{m}"),
            _ => format!("cdp.{method}"),
        };
        self.approval.needs_approval(&name, args.get("params").unwrap_or(&Value::Null))
    }

    fn may_need_approval(&self, method: &str) -> bool {
        self.approval.patterns().any(|p| p.starts_with("cdp.") || p == "*") && method == "send"
    }

    fn validate(&self, method: &str, args: &Value) -> Result<(), ConnectorError> {
        let Some(m) = self.methods.iter().find(|m| m.name == method) else {
            return Err(ConnectorError::UnknownMethod(format!("cdp.{method}")));
        };
        let empty = json!({});
        check_args(
            &format!("cdp.{method}"),
            &m.input_schema,
            if args.is_null() { &empty } else { args },
        )
    }

    async fn call(
        &self,
        method: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<Value, ConnectorError> {
        self.validate(method, &args)?;
        self.run(method, &args, &ctx.execution_id)
            .await
            .map_err(|e| ConnectorError::Failed(e.to_string()))
    }
}
