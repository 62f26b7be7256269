//! Host tests of the browser layer: the CDP client against a scripted WebSocket peer, and the
//! sessions, tools and connector against a small scripted browser speaking the same frames.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use async_trait::async_trait;
use futures::channel::mpsc;
use futures::future::LocalBoxFuture;
use futures::StreamExt;
use serde_json::{json, Value};

use super::bound::{bound_result, strip_media, Screenshot};
use super::cdp::{CdpClient, WsConnection, WsSender};
use super::connector::{Browser, CdpConnector};
use super::policy::HostPolicy;
use super::session::{run_key, SessionMode, Sessions};
use super::tools::{
    BrowserTools, Quick, QuickAction, WithBrowser, MAX_IMAGES_PER_CALL, MAX_IMAGE_CHARS,
};
use super::{html, BrowserEndpoint, BrowserError, BrowserLauncher, BrowserOptions};
use crate::codemode::connectors::{CallContext, Connector};
use crate::codemode::{CallRequest, CodeMode, Dispatcher, ExecuteOptions, Sandbox, SandboxError};
use crate::codemode::{SandboxOutcome, SandboxRequest};
use crate::model::ModelEvent;
use crate::platform::Clock;
use crate::store::sqlite::SqliteSql;
use crate::store::Sql;
use crate::test_support::{text, ManualClock, ScriptedModel};
use crate::tools::approval::ApprovalPolicy;
use crate::tools::{Tool, ToolContext};

struct Flag(std::sync::atomic::AtomicBool);

impl futures::task::ArcWake for Flag {
    fn wake_by_ref(arc: &std::sync::Arc<Self>) {
        arc.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Runs `f` to its end, jumping the manual clock to its next timer whenever nothing else can
/// move (what an event loop does while every task waits on time).
fn run<T>(clock: &Rc<ManualClock>, f: impl std::future::Future<Output = T>) -> T {
    let flag = std::sync::Arc::new(Flag(std::sync::atomic::AtomicBool::new(false)));
    let waker = futures::task::waker(flag.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        flag.0.store(false, std::sync::atomic::Ordering::SeqCst);
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        if !flag.0.load(std::sync::atomic::Ordering::SeqCst) {
            assert!(clock.advance_to_next_timer(), "the future is stuck with no timer pending");
        }
    }
}

type OnSend = Box<dyn Fn(&Peer, &Value)>;
type ProgramFn = dyn Fn(Rc<dyn Dispatcher>) -> LocalBoxFuture<'static, Result<Value, String>>;

/// The peer's side of a scripted socket: what the client sent, and a way to answer.
struct Peer {
    sent: RefCell<Vec<Value>>,
    tx: RefCell<Option<mpsc::UnboundedSender<String>>>,
    /// Called with every command; may answer through `reply`/`event`.
    on_send: RefCell<Option<OnSend>>,
    closed: Cell<bool>,
}

impl Peer {
    fn reply(&self, id: &Value, result: Value) {
        self.push(json!({"id": id, "result": result}));
    }

    fn push(&self, frame: Value) {
        if let Some(tx) = self.tx.borrow().as_ref() {
            let _ = tx.unbounded_send(frame.to_string());
        }
    }

    fn hang_up(&self) {
        self.tx.borrow_mut().take();
    }
}

struct PeerSender(Rc<Peer>);

impl WsSender for PeerSender {
    fn send(&self, text: &str) -> Result<(), BrowserError> {
        if self.0.closed.get() || self.0.tx.borrow().is_none() {
            return Err(BrowserError::Closed("the socket is closed".into()));
        }
        let v: Value = serde_json::from_str(text).unwrap();
        self.0.sent.borrow_mut().push(v.clone());
        if let Some(f) = self.0.on_send.borrow().as_ref() {
            f(&self.0, &v);
        }
        Ok(())
    }

    fn close(&self) {
        self.0.closed.set(true);
        self.0.tx.borrow_mut().take();
    }
}

fn socket() -> (Rc<Peer>, WsConnection) {
    let (tx, rx) = mpsc::unbounded();
    let peer = Rc::new(Peer {
        sent: RefCell::default(),
        tx: RefCell::new(Some(tx)),
        on_send: RefCell::default(),
        closed: Cell::new(false),
    });
    let conn =
        WsConnection { sender: Rc::new(PeerSender(peer.clone())), incoming: rx.boxed_local() };
    (peer, conn)
}

#[test]
fn commands_are_framed_with_increasing_ids_and_session_ids() {
    let clock = ManualClock::new();
    let (peer, conn) = socket();
    *peer.on_send.borrow_mut() =
        Some(Box::new(|p, v| p.reply(&v["id"], json!({"echo": v["method"]}))));
    let client = CdpClient::new(conn, clock.clone());
    let a = run(&clock, client.send("Target.getTargets", None, None, 1000)).unwrap();
    let b = run(&clock, client.send("Page.navigate", Some(&json!({"url": "x"})), Some("S1"), 1000))
        .unwrap();
    assert_eq!(a, json!({"echo": "Target.getTargets"}));
    assert_eq!(b, json!({"echo": "Page.navigate"}));
    let sent = peer.sent.borrow();
    assert_eq!(sent[0], json!({"id": 1, "method": "Target.getTargets"}));
    assert_eq!(
        sent[1],
        json!({"id": 2, "method": "Page.navigate", "params": {"url": "x"}, "sessionId": "S1"})
    );
}

#[test]
fn replies_reach_their_callers_in_any_order_and_events_are_buffered() {
    let clock = ManualClock::new();
    let (peer, conn) = socket();
    let client = Rc::new(CdpClient::new(conn, clock.clone()));
    // The peer answers only once both commands are in, the second first, with an event
    // between them.
    *peer.on_send.borrow_mut() = Some(Box::new(|p, _| {
        let sent = p.sent.borrow().clone();
        if sent.len() == 2 {
            p.reply(&sent[1]["id"], json!("second"));
            p.push(json!({"method": "Page.loadEventFired", "params": {"timestamp": 1}, "sessionId": "S"}));
            p.reply(&sent[0]["id"], json!("first"));
        }
    }));
    let (a, b) = run(&clock, async {
        futures::join!(
            client.send("A.one", None, None, 1000),
            client.send("A.two", None, None, 1000)
        )
    });
    assert_eq!((a.unwrap(), b.unwrap()), (json!("first"), json!("second")));
    let e = run(&clock, client.wait_event("Page.loadEventFired", Some("S"), 1000)).unwrap();
    assert_eq!(e.params, json!({"timestamp": 1}));
    // Consumed: a second wait times out.
    let again = run(&clock, client.wait_event("Page.loadEventFired", Some("S"), 500));
    assert_eq!(again, Err(BrowserError::Timeout { method: "Page.loadEventFired".into(), ms: 500 }));
    let log = client.debug_log(10);
    assert!(log.iter().any(|d| d.kind == "event" && d.method == "Page.loadEventFired"), "{log:?}");
    assert_eq!(log.iter().filter(|d| d.kind == "command").count(), 2);
}

#[test]
fn a_command_times_out_and_its_late_reply_is_dropped() {
    let clock = ManualClock::new();
    let (peer, conn) = socket();
    let client = CdpClient::new(conn, clock.clone());
    let r = run(&clock, client.send("Page.hang", None, None, 10_000));
    assert_eq!(r, Err(BrowserError::Timeout { method: "Page.hang".into(), ms: 10_000 }));
    assert_eq!(r.unwrap_err().to_string(), "CDP Page.hang got no answer within 10000 ms");
    // The late reply to id 1 arrives with the answer to the next command; only the latter
    // is taken.
    *peer.on_send.borrow_mut() = Some(Box::new(|p, v| {
        p.reply(&json!(1), json!("late"));
        p.reply(&v["id"], json!("fresh"));
    }));
    assert_eq!(run(&clock, client.send("Page.next", None, None, 1000)).unwrap(), json!("fresh"));
}

#[test]
fn protocol_errors_carry_code_and_message() {
    let clock = ManualClock::new();
    let (peer, conn) = socket();
    *peer.on_send.borrow_mut() = Some(Box::new(|p, v| {
        p.push(json!({"id": v["id"], "error": {"code": -32601, "message": "'Page.nope' wasn't found"}}))
    }));
    let client = CdpClient::new(conn, clock.clone());
    let e = run(&clock, client.send("Page.nope", None, None, 1000)).unwrap_err();
    assert_eq!(e.to_string(), "CDP Page.nope failed: 'Page.nope' wasn't found (code -32601)");
}

#[test]
fn a_browser_that_goes_away_fails_waiting_and_later_commands() {
    let clock = ManualClock::new();
    let (peer, conn) = socket();
    let p = peer.clone();
    *peer.on_send.borrow_mut() = Some(Box::new(move |_, _| p.hang_up()));
    let client = CdpClient::new(conn, clock.clone());
    let e = run(&clock, client.send("Page.navigate", None, None, 10_000)).unwrap_err();
    assert!(matches!(e, BrowserError::Closed(_)), "{e:?}");
    assert!(e.to_string().contains("the browser closed the connection"), "{e}");
    let again = run(&clock, client.send("Page.navigate", None, None, 10_000)).unwrap_err();
    assert!(matches!(again, BrowserError::Closed(_)));
}

#[test]
fn results_are_bounded_by_max_chars() {
    let long = "x".repeat(120);
    assert_eq!(
        bound_result(json!(long), 100),
        json!(format!("{}\n\n[truncated 20 characters]", "x".repeat(100)))
    );
    assert_eq!(bound_result(json!("short"), 100), json!("short"));
    let items: Vec<Value> = (0..50).map(|i| json!(format!("https://e.com/{i}"))).collect();
    let trimmed = bound_result(Value::Array(items.clone()), 200);
    let n = trimmed.as_array().unwrap().len();
    assert!(n > 0 && n < 50, "{n}");
    assert!(trimmed.to_string().len() <= 200);
    // One more would not have fit.
    assert!(Value::Array(items[..n + 1].to_vec()).to_string().len() > 200);
    let obj = bound_result(json!({"a": "y".repeat(300)}), 100);
    assert_eq!(obj["truncated"], json!(true));
    assert_eq!(obj["preview"].as_str().unwrap().chars().count(), 100);
    assert!(obj["note"].as_str().unwrap().contains("maxChars"));
}

#[test]
fn screenshots_and_long_base64_leave_the_result() {
    // A 3×2 PNG header, then padding.
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(&3u32.to_be_bytes());
    png.extend_from_slice(&2u32.to_be_bytes());
    png.extend_from_slice(&[0; 8]);
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    let mut v = json!({"shot": {"type": "browser_screenshot", "mediaType": "image/png", "data": data}, "blob": "QUJD".repeat(2000)});
    let mut shots = Vec::new();
    strip_media(&mut v, &mut shots);
    assert_eq!(shots, vec![Screenshot { media_type: "image/png".into(), data }]);
    assert_eq!(v["shot"]["width"], json!(3));
    assert_eq!(v["shot"]["height"], json!(2));
    assert!(v["shot"].get("data").is_none());
    assert!(v["blob"].as_str().unwrap().starts_with("[base64 data of 8000 characters removed"));
}

#[test]
fn html_becomes_markdown_with_absolute_links() {
    let page = r#"<html><head><title>T</title><style>p{}</style></head><body>
      <h1>Hello &amp; welcome</h1><p>Some <b>bold</b> and <em>soft</em> text
      with a <a href="/docs?a=1">link</a>.</p><script>var x = "<p>no</p>";</script>
      <ul><li>one</li><li>two <code>x()</code></li></ul><img src="i.png" alt="pic">
      <blockquote><p>quoted</p></blockquote><pre>let a = 1;
  b</pre><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table></body></html>"#;
    let md = html::to_markdown(page, Some("https://example.com/dir/page"));
    let expected = "# Hello & welcome\n\nSome **bold** and _soft_ text with a [link](https://example.com/docs?a=1).\n\n- one\n- two `x()`\n\n![pic](https://example.com/dir/i.png)\n\n> quoted\n\n```\nlet a = 1;\n  b\n```\n\n| k | v |\n| --- | --- |\n| a | 1 |";
    assert_eq!(md, expected);
    assert_eq!(html::title(page).as_deref(), Some("T"));
}

#[test]
fn links_are_absolute_deduplicated_and_skip_fragments_and_scripts() {
    let page = r##"<base href="https://b.example/x/"><a href="a">A</a><a href='https://o.example/'>O</a>
      <a href="#top">top</a><a href="javascript:void 0">js</a><a href="a">again</a><area href="/m">"##;
    assert_eq!(
        html::links(page, Some("https://page.example/")),
        vec!["https://b.example/x/a", "https://o.example/", "https://b.example/m"]
    );
    // Inline HTML with no URL keeps only links that are absolute already.
    assert_eq!(
        html::links(r#"<a href="/rel">r</a><a href="http://h.example/">h</a>"#, None),
        vec!["http://h.example/"]
    );
}

#[test]
fn the_allow_list_refuses_private_hosts_unless_listed() {
    let open = HostPolicy::new(&[]);
    assert!(open.check("https://example.com/").is_ok());
    let e = open.check("http://127.0.0.1:8080/").unwrap_err();
    assert!(matches!(e, BrowserError::Refused(_)));
    assert!(
        e.to_string().contains("loopback") && e.to_string().contains("THINK_BROWSER_ALLOW"),
        "{e}"
    );
    assert!(open.check("http://10.0.0.1/").is_err());
    assert!(matches!(open.check("file:///etc/passwd"), Err(BrowserError::InvalidInput(_))));
    assert!(matches!(open.check("not a url"), Err(BrowserError::InvalidInput(_))));
    assert!(open.check("about:blank").is_ok());
    let listed = HostPolicy::new(&HostPolicy::parse_list("127.0.0.1, *.example.com"));
    assert!(listed.check("http://127.0.0.1:9/").is_ok());
    assert!(listed.check("https://docs.example.com/").is_ok());
    let e = listed.check("https://other.org/").unwrap_err();
    assert!(e.to_string().contains("not in the browser allow-list"), "{e}");
}

/// A small scripted browser: contexts, pages, sessions, navigation with load events, and
/// `Runtime.evaluate` answered from the page's HTML.
#[derive(Default)]
struct FakeChrome {
    contexts: RefCell<Vec<String>>,
    /// target id → (context, url, html)
    targets: RefCell<HashMap<String, (String, String, String)>>,
    sessions: RefCell<HashMap<String, String>>,
    pages: RefCell<HashMap<String, String>>,
    next: Cell<u32>,
    connects: Cell<usize>,
    /// The answers the client gave to `Fetch.requestPaused`: (method, request id).
    fetch_answers: RefCell<Vec<(String, String)>>,
    peer: RefCell<Option<Rc<Peer>>>,
}

impl FakeChrome {
    fn id(&self, prefix: &str) -> String {
        self.next.set(self.next.get() + 1);
        format!("{prefix}{}", self.next.get())
    }

    fn handle(&self, p: &Peer, v: &Value) {
        let id = &v["id"];
        let params = &v["params"];
        let session = v["sessionId"].as_str();
        let target = session.and_then(|s| self.sessions.borrow().get(s).cloned());
        let err = |msg: &str| p.push(json!({"id": id, "error": {"code": -32601, "message": msg}}));
        let method = v["method"].as_str().unwrap_or_default();
        if session.is_none() && !method.starts_with("Target.") {
            return err(&format!("'{method}' wasn't found"));
        }
        match method {
            "Target.createBrowserContext" => {
                let c = self.id("CTX");
                self.contexts.borrow_mut().push(c.clone());
                p.reply(id, json!({"browserContextId": c}));
            }
            "Target.disposeBrowserContext" => {
                let c = params["browserContextId"].as_str().unwrap_or_default().to_owned();
                self.contexts.borrow_mut().retain(|x| *x != c);
                self.targets.borrow_mut().retain(|_, t| t.0 != c);
                p.reply(id, json!({}));
            }
            "Target.createTarget" => {
                let t = self.id("T");
                let ctx = params["browserContextId"].as_str().unwrap_or("default").to_owned();
                self.targets
                    .borrow_mut()
                    .insert(t.clone(), (ctx, "about:blank".into(), String::new()));
                p.reply(id, json!({"targetId": t}));
            }
            "Target.attachToTarget" => {
                let t = params["targetId"].as_str().unwrap_or_default().to_owned();
                if !self.targets.borrow().contains_key(&t) {
                    return p.push(json!({"id": id, "error": {"code": -32602, "message": "No target with given id found"}}));
                }
                let s = self.id("S");
                self.sessions.borrow_mut().insert(s.clone(), t);
                p.reply(id, json!({"sessionId": s}));
            }
            "Target.getTargets" => {
                let infos: Vec<Value> = self
                    .targets
                    .borrow()
                    .iter()
                    .map(|(t, (c, u, _))| json!({"targetId": t, "browserContextId": c, "url": u, "type": "page", "title": ""}))
                    .collect();
                p.reply(id, json!({"targetInfos": infos}));
            }
            "Page.enable" | "Runtime.enable" | "Fetch.enable" => p.reply(id, json!({})),
            "Fetch.continueRequest" | "Fetch.failRequest" => {
                let rid = params["requestId"].as_str().unwrap_or_default().to_owned();
                self.fetch_answers.borrow_mut().push((method.to_owned(), rid));
                p.reply(id, json!({}));
            }
            "Page.navigate" => {
                let url = params["url"].as_str().unwrap_or_default().to_owned();
                // The document request, held for the client's verdict; `/redirect` goes on to
                // a private address.
                p.push(json!({"method": "Fetch.requestPaused", "params": {"requestId": "R1", "request": {"url": url}}, "sessionId": session}));
                if url.ends_with("/redirect") {
                    p.push(json!({"method": "Fetch.requestPaused", "params": {"requestId": "R2", "request": {"url": "http://10.9.9.9/"}}, "sessionId": session}));
                }
                let html = self.pages.borrow().get(&url).cloned();
                let Some(html) = html else {
                    return p.reply(
                        id,
                        json!({"frameId": "F", "errorText": "net::ERR_CONNECTION_REFUSED"}),
                    );
                };
                if let Some(t) = target {
                    let mut ts = self.targets.borrow_mut();
                    let entry = ts.get_mut(&t).unwrap();
                    (entry.1, entry.2) = (url, html);
                }
                p.reply(id, json!({"frameId": "F", "loaderId": "L"}));
                p.push(json!({"method": "Page.loadEventFired", "params": {"timestamp": 2}, "sessionId": session}));
            }
            "Page.getFrameTree" => p.reply(id, json!({"frameTree": {"frame": {"id": "F"}}})),
            "Page.setDocumentContent" => {
                if let Some(t) = target {
                    let mut ts = self.targets.borrow_mut();
                    let entry = ts.get_mut(&t).unwrap();
                    entry.2 = params["html"].as_str().unwrap_or_default().to_owned();
                }
                p.reply(id, json!({}));
            }
            "Runtime.evaluate" => {
                let expr = params["expression"].as_str().unwrap_or_default();
                let (_, url, html) =
                    target.and_then(|t| self.targets.borrow().get(&t).cloned()).unwrap_or_default();
                let value = if expr.contains("outerHTML") {
                    json!({"html": html, "url": url})
                } else if expr == "document.title" {
                    json!(html::title(&html).unwrap_or_default())
                } else if expr.contains("querySelectorAll") {
                    json!([{"selector": "h1", "results": [{"html": "Hi", "text": "Hi", "width": 10, "height": 5, "top": 0, "left": 0, "attributes": {}}]}])
                } else if expr == "throw" {
                    return p.reply(id, json!({"result": {}, "exceptionDetails": {"text": "Uncaught", "exception": {"description": "Error: boom"}}}));
                } else {
                    json!(null)
                };
                p.reply(id, json!({"result": {"type": "object", "value": value}}));
            }
            other => err(&format!("'{other}' wasn't found")),
        }
    }
}

struct FakeLauncher(Rc<FakeChrome>);

#[async_trait(?Send)]
impl BrowserLauncher for FakeLauncher {
    async fn connect(&self, _: &BrowserEndpoint) -> Result<WsConnection, BrowserError> {
        let (peer, conn) = socket();
        let chrome = self.0.clone();
        self.0.connects.set(self.0.connects.get() + 1);
        *peer.on_send.borrow_mut() = Some(Box::new(move |p, v| chrome.handle(p, v)));
        *self.0.peer.borrow_mut() = Some(peer);
        Ok(conn)
    }

    async fn protocol(&self, _: &BrowserEndpoint) -> Result<Value, BrowserError> {
        Ok(
            json!({"domains": [{"domain": "Page", "commands": [{"name": "navigate", "description": "Navigates.", "parameters": [{"name": "url", "type": "string"}]}], "events": [{"name": "loadEventFired"}]}]}),
        )
    }
}

struct Fixture {
    clock: Rc<ManualClock>,
    chrome: Rc<FakeChrome>,
    sql: Rc<dyn Sql>,
    browser: Rc<Browser>,
}

fn fixture(mode: SessionMode) -> Fixture {
    let clock = ManualClock::new();
    let chrome = Rc::new(FakeChrome::default());
    chrome.pages.borrow_mut().insert(
        "http://127.0.0.1:8000/".into(),
        r#"<html><head><title>Home</title></head><body><h1>Hi</h1><p>Read <a href="/docs">the docs</a>.</p></body></html>"#.into(),
    );
    chrome
        .pages
        .borrow_mut()
        .insert("http://127.0.0.1:8000/redirect".into(), "<p>moved</p>".into());
    let sql: Rc<dyn Sql> = Rc::new(SqliteSql::new());
    let mut options = BrowserOptions::new(BrowserEndpoint::CdpUrl("http://127.0.0.1:9222".into()));
    options.session_mode = mode;
    options.allowed_hosts = vec!["127.0.0.1".into()];
    let browser =
        Browser::new(options, Rc::new(FakeLauncher(chrome.clone())), sql.clone(), clock.clone())
            .unwrap();
    Fixture { clock, chrome, sql, browser }
}

fn ctx(exec: &str) -> CallContext {
    CallContext { execution_id: exec.into(), seq: 0 }
}

impl Fixture {
    fn cdp(&self) -> CdpConnector {
        CdpConnector::new(self.browser.clone(), ApprovalPolicy::new())
    }

    fn call(
        &self,
        c: &CdpConnector,
        exec: &str,
        method: &str,
        args: Value,
    ) -> Result<Value, String> {
        run(&self.clock, c.call(method, args, &ctx(exec))).map_err(|e| e.to_string())
    }

    fn title(&self, c: &CdpConnector, exec: &str, session: &Value) -> Value {
        self.call(c, exec, "send", json!({"method": "Runtime.evaluate", "params": {"expression": "document.title", "returnByValue": true}, "sessionId": session}))
            .unwrap()["result"]["value"]
            .clone()
    }
}

#[test]
fn one_shot_runs_get_a_fresh_context_that_closes_at_the_end() {
    let f = fixture(SessionMode::OneShot);
    let c = f.cdp();
    let page = f.call(&c, "e1", "openPage", json!({"url": "http://127.0.0.1:8000/"})).unwrap();
    assert_eq!(page["url"], json!("http://127.0.0.1:8000/"));
    assert_eq!(f.title(&c, "e1", &page["sessionId"]), json!("Home"));
    assert_eq!(f.chrome.contexts.borrow().len(), 1);
    let row = Sessions::new(f.sql.as_ref()).get(&run_key("e1")).unwrap().unwrap();
    assert_eq!(row.context_id, f.chrome.contexts.borrow()[0]);
    run(&f.clock, f.browser.finish_run("e1", false));
    assert!(f.chrome.contexts.borrow().is_empty());
    assert!(f.chrome.targets.borrow().is_empty(), "no target is left behind");
    assert!(Sessions::new(f.sql.as_ref()).get(&run_key("e1")).unwrap().is_none());
}

#[test]
fn reuse_shares_one_context_and_its_pages_across_runs() {
    let f = fixture(SessionMode::Reuse);
    let c = f.cdp();
    let page = f.call(&c, "e1", "openPage", json!({"url": "http://127.0.0.1:8000/"})).unwrap();
    run(&f.clock, f.browser.finish_run("e1", false));
    let info = f.call(&c, "e2", "sessionInfo", json!({})).unwrap();
    assert_eq!(info["shared"], json!(true));
    assert_eq!(info["mode"], json!("reuse"));
    assert_eq!(info["pages"][0]["targetId"], page["targetId"]);
    // The page handle of run 1 still works in run 2, even over a new connection.
    f.browser.end();
    let handle = f.call(&c, "e2", "attachToTarget", json!({"targetId": page["targetId"]})).unwrap();
    assert_eq!(handle["sessionId"], page["sessionId"]);
    assert_eq!(f.title(&c, "e2", &page["sessionId"]), json!("Home"));
    assert_eq!(f.chrome.contexts.borrow().len(), 1);
    assert!(f.chrome.connects.get() >= 2);
}

#[test]
fn dynamic_runs_are_private_until_promoted() {
    let f = fixture(SessionMode::Dynamic);
    let c = f.cdp();
    f.call(&c, "e1", "openPage", json!({})).unwrap();
    run(&f.clock, f.browser.finish_run("e1", false));
    assert!(f.chrome.contexts.borrow().is_empty());
    let page = f.call(&c, "e2", "openPage", json!({})).unwrap();
    let promoted = f.call(&c, "e2", "startSession", json!({})).unwrap();
    assert_eq!(promoted["shared"], json!(true));
    run(&f.clock, f.browser.finish_run("e2", false));
    assert_eq!(f.chrome.contexts.borrow().len(), 1, "the promoted context stays open");
    assert!(f.chrome.targets.borrow().contains_key(page["targetId"].as_str().unwrap()));
}

#[test]
fn the_sweep_closes_idle_runs_and_a_later_resume_fails_loudly() {
    let f = fixture(SessionMode::OneShot);
    let c = f.cdp();
    f.call(&c, "e1", "openPage", json!({})).unwrap();
    run(&f.clock, f.browser.finish_run("e1", true));
    assert_eq!(f.chrome.contexts.borrow().len(), 1, "a paused run keeps its session");
    let next = run(&f.clock, f.browser.sweep()).unwrap().unwrap();
    assert_eq!(f.chrome.contexts.borrow().len(), 1, "not idle yet");
    assert!(next > f.clock.now());
    f.clock.advance(10.0 * 60_000.0 + 1.0);
    assert_eq!(run(&f.clock, f.browser.sweep()).unwrap(), None);
    assert!(f.chrome.contexts.borrow().is_empty());
    let e = f.call(&c, "e1", "sessionInfo", json!({})).unwrap_err();
    assert!(e.contains("closed by the sweep after 600 s idle") && e.contains("Start a new"), "{e}");
}

#[test]
fn the_sweep_leaves_runs_on_the_shared_session_alone() {
    let f = fixture(SessionMode::Reuse);
    let c = f.cdp();
    f.call(&c, "e1", "openPage", json!({})).unwrap();
    run(&f.clock, f.browser.finish_run("e1", true));
    f.clock.advance(10.0 * 60_000.0 + 1.0);
    assert_eq!(run(&f.clock, f.browser.sweep()).unwrap(), None, "nothing of its own to sweep");
    assert_eq!(f.chrome.contexts.borrow().len(), 1);
    let info = f.call(&c, "e1", "sessionInfo", json!({})).unwrap();
    assert_eq!(info["pages"].as_array().unwrap().len(), 1, "the paused run resumes its page");
}

#[test]
fn document_requests_are_held_until_the_allow_list_passes_them() {
    let f = fixture(SessionMode::OneShot);
    let c = f.cdp();
    f.call(&c, "e1", "openPage", json!({"url": "http://127.0.0.1:8000/redirect"})).unwrap();
    assert_eq!(
        *f.chrome.fetch_answers.borrow(),
        [
            ("Fetch.continueRequest".to_owned(), "R1".to_owned()),
            ("Fetch.failRequest".to_owned(), "R2".to_owned())
        ]
    );
    let e =
        f.call(&c, "e1", "send", json!({"method": "Fetch.disable", "sessionId": "x"})).unwrap_err();
    assert!(e.contains("reserved"), "{e}");
}

#[test]
fn errors_teach_the_fix() {
    let f = fixture(SessionMode::OneShot);
    let c = f.cdp();
    let e = f.call(&c, "e1", "send", json!({"method": "Page.loadEventFired"})).unwrap_err();
    assert!(e.contains("Page.loadEventFired is an event, not a command"), "{e}");
    let e = f
        .call(
            &c,
            "e1",
            "send",
            json!({"method": "Page.navigate", "params": {"url": "http://127.0.0.1:8000/"}}),
        )
        .unwrap_err();
    assert!(e.contains("Page.navigate needs a sessionId"), "{e}");
    let e = f.call(&c, "e1", "send", json!({"method": "navigate"})).unwrap_err();
    assert!(e.contains("is not a CDP method"), "{e}");
    let e = f.call(&c, "e1", "send", json!({"method": "Page.navigate", "params": {"url": "http://10.1.2.3/"}, "sessionId": "x"})).unwrap_err();
    assert!(e.contains("private"), "{e}");
    let e = f.call(&c, "e1", "send", json!({"methd": "Page.navigate"})).unwrap_err();
    assert!(e.contains("Invalid input for cdp.send"), "{e}");
    let spec = f.call(&c, "e1", "spec", json!({"domain": "Page"})).unwrap();
    assert_eq!(spec["commands"][0]["name"], json!("navigate"));
    let log = f.call(&c, "e1", "getDebugLog", json!({"limit": 3})).unwrap();
    assert!(log.as_array().unwrap().len() <= 3);
}

#[test]
fn cdp_send_can_wait_for_approval_by_method() {
    let f = fixture(SessionMode::OneShot);
    let policy = ApprovalPolicy::new().require("cdp.Page.navigate").unwrap();
    let c = CdpConnector::new(f.browser.clone(), policy);
    assert!(c.needs_approval("send", &json!({"method": "Page.navigate", "params": {"url": "x"}})));
    assert!(!c.needs_approval("send", &json!({"method": "Runtime.evaluate"})));
    assert!(c.may_need_approval("send"));
}

fn quick(
    f: &Fixture,
    kind: Quick,
    model: Option<Rc<ScriptedModel>>,
    input: Value,
) -> Result<Value, String> {
    let tool =
        QuickAction::new(kind, f.browser.clone(), model.map(|m| m as Rc<dyn crate::model::Model>));
    run(&f.clock, tool.execute(input, &ToolContext::default())).map_err(|e| e.to_string())
}

#[test]
fn quick_actions_read_a_page_and_close_it() {
    let f = fixture(SessionMode::OneShot);
    let url = json!({"url": "http://127.0.0.1:8000/"});
    let md = quick(&f, Quick::Markdown, None, url.clone()).unwrap();
    assert_eq!(md, json!("# Hi\n\nRead [the docs](http://127.0.0.1:8000/docs)."));
    let links = quick(&f, Quick::Links, None, url.clone()).unwrap();
    assert_eq!(links, json!(["http://127.0.0.1:8000/docs"]));
    let scraped = quick(
        &f,
        Quick::Scrape,
        None,
        json!({"url": "http://127.0.0.1:8000/", "selectors": ["h1"]}),
    )
    .unwrap();
    assert_eq!(scraped[0]["results"][0]["text"], json!("Hi"));
    let inline =
        quick(&f, Quick::Markdown, None, json!({"html": "<p>inline <i>page</i></p>"})).unwrap();
    assert_eq!(inline, json!("inline _page_"));
    assert!(f.chrome.contexts.borrow().is_empty() && f.chrome.targets.borrow().is_empty());
    // Bad input and refused or failing URLs are clear tool errors.
    let e = quick(&f, Quick::Markdown, None, json!({"url": "http://127.0.0.1:8000/", "html": "x"}))
        .unwrap_err();
    assert!(e.contains("exactly one of url or html"), "{e}");
    let e = quick(&f, Quick::Links, None, json!({"url": "http://192.168.1.1/"})).unwrap_err();
    assert!(e.contains("THINK_BROWSER_ALLOW"), "{e}");
    let e = quick(&f, Quick::Markdown, None, json!({"url": "http://127.0.0.1:8000/missing"}))
        .unwrap_err();
    assert!(e.contains("net::ERR_CONNECTION_REFUSED"), "{e}");
    assert!(f.chrome.contexts.borrow().is_empty(), "a failed page is closed too");
}

#[test]
fn content_returns_the_rendered_html_and_page_errors_are_tool_errors() {
    let f = fixture(SessionMode::OneShot);
    let html = quick(&f, Quick::Content, None, json!({"url": "http://127.0.0.1:8000/"})).unwrap();
    assert!(html.as_str().unwrap().contains("<h1>Hi</h1>"), "{html}");
    let page = run(&f.clock, f.browser.open_page(None, Some("<p>x</p>"))).unwrap();
    let e = run(&f.clock, f.browser.evaluate(&page.session_id, "throw")).unwrap_err();
    assert_eq!(e.to_string(), "The page script failed: Error: boom");
    run(&f.clock, f.browser.close_page(page));
    assert!(f.chrome.contexts.borrow().is_empty());
}

#[test]
fn extract_asks_the_model_and_validates_against_the_schema() {
    let f = fixture(SessionMode::OneShot);
    let model = ScriptedModel::new(vec![
        text("```json\n{\"heading\": \"Hi\"}\n```"),
        text("{\"heading\": 5}"),
    ]);
    let schema = json!({"type": "object", "properties": {"heading": {"type": "string"}}, "required": ["heading"]});
    let input = json!({"url": "http://127.0.0.1:8000/", "prompt": "the heading", "schema": schema});
    let out = quick(&f, Quick::Extract, Some(model.clone()), input.clone()).unwrap();
    assert_eq!(out, json!({"heading": "Hi"}));
    let seen = model.seen();
    let crate::model::ModelMessage::User { content } = &seen[0].messages[0] else { panic!() };
    assert!(
        content.contains("# Hi")
            && content.contains("Task: the heading")
            && content.contains("\"heading\""),
        "{content}"
    );
    let format = seen[0].response_format.as_ref().expect("the schema is the response format");
    assert_eq!((format.name.as_str(), &format.schema), ("browser_extract", &schema));
    drop(seen);
    let e = quick(&f, Quick::Extract, Some(model.clone()), input.clone()).unwrap_err();
    assert!(e.contains("does not match the schema"), "{e}");
    // A forced answer tool (Anthropic) answers with the call's input instead of text.
    model.push([vec![
        ModelEvent::ToolCallStart { index: 0, id: "t".into(), name: "browser_extract".into() },
        ModelEvent::ToolCallDelta { index: 0, arguments: "{\"heading\": \"Tool\"}".into() },
    ]]);
    let out = quick(&f, Quick::Extract, Some(model.clone()), input).unwrap();
    assert_eq!(out, json!({"heading": "Tool"}));
    model.push([text("[1]")]);
    let list = json!({"url": "http://127.0.0.1:8000/", "schema": {"type": "array"}});
    assert_eq!(quick(&f, Quick::Extract, Some(model.clone()), list).unwrap(), json!([1]));
    assert!(model.seen()[3].response_format.is_none(), "only an object schema is a format");
    let e = quick(&f, Quick::Extract, None, json!({"html": "<p>x</p>"})).unwrap_err();
    assert!(e.contains("a prompt, a schema, or both"), "{e}");
}

#[test]
fn max_chars_bounds_quick_results() {
    let mut f = fixture(SessionMode::OneShot);
    let mut options = f.browser.options().clone();
    options.max_chars = 10;
    f.browser = Browser::new(
        options,
        Rc::new(FakeLauncher(f.chrome.clone())),
        f.sql.clone(),
        f.clock.clone(),
    )
    .unwrap();
    let md = quick(&f, Quick::Markdown, None, json!({"html": "<p>0123456789abcdef</p>"})).unwrap();
    assert_eq!(md, json!("0123456789\n\n[truncated 6 characters]"));
}

/// A sandbox that runs a scripted program: the "code" names it.
struct Program(Rc<ProgramFn>);

#[async_trait(?Send)]
impl Sandbox for Program {
    async fn run(
        &self,
        _: SandboxRequest,
        d: Rc<dyn Dispatcher>,
    ) -> Result<SandboxOutcome, SandboxError> {
        Ok(SandboxOutcome { result: (self.0)(d).await, logs: vec![] })
    }
}

fn call(connector: &str, method: &str, args: Value, site: &str) -> CallRequest {
    CallRequest { connector: connector.into(), method: method.into(), args, site: site.into() }
}

#[test]
fn browser_execute_runs_on_the_journal_and_strips_screenshots() {
    let f = fixture(SessionMode::OneShot);
    let program = Program(Rc::new(|d: Rc<dyn Dispatcher>| {
        Box::pin(async move {
            let page = d
                .call(call("cdp", "openPage", json!({"url": "http://127.0.0.1:8000/"}), "1:1"))
                .await
                .map_err(|e| e.to_string())?;
            let title = d
                .call(call("cdp", "send", json!({"method": "Runtime.evaluate", "params": {"expression": "document.title"}, "sessionId": page["sessionId"]}), "2:1"))
                .await
                .map_err(|e| e.to_string())?;
            Ok(
                json!({"title": title["result"]["value"], "shot": {"type": "browser_screenshot", "mediaType": "image/png", "data": "QUJD".repeat(5000)}}),
            )
        })
    }));
    let clock: Rc<dyn Clock> = f.clock.clone();
    let runtime =
        CodeMode::new(f.sql.clone(), clock, Rc::new(program), ExecuteOptions::default()).unwrap();
    let tools = BrowserTools {
        browser: f.browser.clone(),
        runtime: Some(runtime.clone()),
        connector: Rc::new(f.cdp()),
        model: None,
        vision: true,
    }
    .tools();
    let names: Vec<&str> = tools.iter().map(|t| t.definition().name.as_str()).collect();
    assert_eq!(names, ["browser_execute", "browser_markdown", "browser_links", "browser_scrape"]);
    let ctx = ToolContext { tool_call_id: "call_1".into(), tool_name: "browser_execute".into() };
    let out = run(&f.clock, tools[0].execute(json!({"code": "x"}), &ctx)).unwrap();
    assert_eq!(out["status"], json!("completed"), "{out}");
    assert_eq!(out["result"]["title"], json!("Home"));
    assert_eq!(out["result"]["shot"]["bytes"], json!(15000));
    assert!(out["result"]["shot"].get("data").is_none());
    let shot = Screenshot { media_type: "image/png".into(), data: "QUJD".repeat(5000) };
    assert_eq!(tools[0].take_images("call_1"), vec![shot], "a vision model gets the pixels");
    assert!(tools[0].take_images("call_1").is_empty(), "handed over once");
    assert!(f.chrome.contexts.borrow().is_empty(), "one-shot closed its session");
    let log = runtime.executions(Some(1)).unwrap();
    let calls: Vec<&str> =
        log[0]["calls"].as_array().unwrap().iter().map(|c| c["method"].as_str().unwrap()).collect();
    assert_eq!(calls, ["openPage", "send"]);
}

#[test]
fn browser_run_chunks_round_trip() {
    use super::chunks::{encode, Dechunker, MAX_CHUNK};
    let small = encode("{\"id\":1}");
    assert_eq!(
        small,
        vec![[8u8, 0, 0, 0].iter().chain(b"{\"id\":1}").copied().collect::<Vec<u8>>()]
    );
    let big = "é".repeat(MAX_CHUNK); // 2 MiB of UTF-8
    let chunks = encode(&big);
    assert_eq!(chunks.len(), 3);
    assert!(chunks.iter().all(|c| c.len() <= MAX_CHUNK));
    let mut d = Dechunker::default();
    assert_eq!(d.push(&chunks[0]), None);
    assert_eq!(d.push(&chunks[1]), None);
    assert_eq!(d.push(&chunks[2]).as_deref(), Some(big.as_str()));
    assert_eq!(d.push(&small[0]).as_deref(), Some("{\"id\":1}"));
}

#[test]
fn settings_configure_the_browser_or_leave_it_off() {
    use crate::agent::settings::browser_options;
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    };
    assert_eq!(browser_options(&env(&[]), false).unwrap(), None, "no browser, no tools");
    let binding = browser_options(&env(&[]), true).unwrap().unwrap();
    assert_eq!(binding.endpoint, BrowserEndpoint::Binding);
    assert_eq!(binding.session_mode, SessionMode::OneShot);
    let o = browser_options(
        &env(&[
            ("THINK_BROWSER_CDP_URL", "http://127.0.0.1:9222"),
            ("THINK_BROWSER_ALLOW", "127.0.0.1, *.example.com"),
            ("THINK_BROWSER_SESSION", "reuse"),
            ("THINK_BROWSER", r#"{"maxChars": 100, "idleMs": 5000, "content": true}"#),
        ]),
        true,
    )
    .unwrap()
    .unwrap();
    assert_eq!(o.endpoint, BrowserEndpoint::CdpUrl("http://127.0.0.1:9222".into()));
    assert_eq!(o.allowed_hosts, ["127.0.0.1", "*.example.com"]);
    assert_eq!(
        (o.session_mode, o.max_chars, o.idle_ms, o.content_action),
        (SessionMode::Reuse, 100, 5000.0, true)
    );
    let off =
        env(&[("THINK_BROWSER_CDP_URL", "http://127.0.0.1:9222"), ("THINK_BROWSER", "false")]);
    assert_eq!(browser_options(&off, true).unwrap(), None);
    // `npm start`: the binding is declared but reaches no Browser Run; only a CDP URL counts.
    let local = env(&[("THINK_BROWSER_BINDING", "false")]);
    assert_eq!(browser_options(&local, true).unwrap(), None, "an unusable binding, no tools");
    let local = env(&[
        ("THINK_BROWSER_BINDING", "false"),
        ("THINK_BROWSER_CDP_URL", "http://127.0.0.1:9222"),
    ]);
    let o = browser_options(&local, true).unwrap().unwrap();
    assert_eq!(o.endpoint, BrowserEndpoint::CdpUrl("http://127.0.0.1:9222".into()));
    let on = env(&[("THINK_BROWSER_BINDING", "true")]);
    assert_eq!(browser_options(&on, true).unwrap().unwrap().endpoint, BrowserEndpoint::Binding);
    let bad = browser_options(&env(&[("THINK_BROWSER_BINDING", "maybe")]), true);
    assert!(bad.unwrap_err().to_string().contains("THINK_BROWSER_BINDING"));
    let bad = browser_options(
        &env(&[("THINK_BROWSER_CDP_URL", "x"), ("THINK_BROWSER_SESSION", "sometimes")]),
        false,
    );
    assert!(bad.unwrap_err().to_string().contains("THINK_BROWSER_CDP_URL"));
    let bad = browser_options(
        &env(&[("THINK_BROWSER_CDP_URL", "http://h:1"), ("THINK_BROWSER", r#"{"max": 1}"#)]),
        false,
    );
    assert!(bad.unwrap_err().to_string().contains("unknown key \"max\""));
}

#[test]
fn execute_with_browser_settles_its_output_and_hands_screenshots_to_vision_models_only() {
    let f = fixture(SessionMode::OneShot);
    let shot = json!({"type": "browser_screenshot", "mediaType": "image/png", "data": "QUJD".repeat(2000)});
    let output = json!({"status": "completed", "executionId": "exec_1", "result": {"shot": shot}});
    let inner = move || -> crate::tools::ToolRef {
        let output = output.clone();
        Rc::new(crate::tools::DynamicTool::new(
            "execute",
            "",
            json!({"type": "object"}),
            move |_, _| {
                let output = output.clone();
                async move { Ok(output) }
            },
        ))
    };
    let ctx = ToolContext { tool_call_id: "call_x".into(), tool_name: "execute".into() };
    for vision in [true, false] {
        let tool = WithBrowser::wrap(inner(), f.browser.clone(), vision);
        assert_eq!(tool.definition().name, "execute");
        let out = run(&f.clock, tool.execute(json!({}), &ctx)).unwrap();
        assert_eq!(out["result"]["shot"]["bytes"], json!(6000), "{out}");
        assert!(out["result"]["shot"].get("data").is_none(), "no pixels in the output");
        let images = tool.take_images("call_x");
        assert_eq!(images.len(), usize::from(vision), "vision {vision}: {images:?}");
    }
    // Bounds: at most MAX_IMAGES_PER_CALL per call, none over MAX_IMAGE_CHARS.
    let small = json!({"type": "browser_screenshot", "data": "QUJD".repeat(10)});
    let huge = json!({"type": "browser_screenshot", "data": "A".repeat(MAX_IMAGE_CHARS + 4)});
    let mut shots = vec![huge];
    shots.extend(std::iter::repeat_n(small, MAX_IMAGES_PER_CALL + 2));
    let output = json!({"status": "completed", "executionId": "exec_2", "result": shots});
    let tool = WithBrowser::wrap(
        Rc::new(crate::tools::DynamicTool::new("execute", "", json!({}), move |_, _| {
            let output = output.clone();
            async move { Ok(output) }
        })),
        f.browser.clone(),
        true,
    );
    run(&f.clock, tool.execute(json!({}), &ctx)).unwrap();
    let images = tool.take_images("call_x");
    assert_eq!(images.len(), MAX_IMAGES_PER_CALL);
    assert!(images.iter().all(|i| i.data.len() == 40));
}
