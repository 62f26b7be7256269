//! How the Worker reaches a browser for the browser tools: a WebSocket to the
//! `webSocketDebuggerUrl` a `cdpUrl` Chrome names in `/json/version`, or Browser Run's
//! DevTools socket through the `BROWSER` binding (a session acquired with `/v1/acquire`,
//! messages in the binding's chunked framing). Everything above the socket is
//! `think_core::browser`.

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;
use futures::channel::mpsc;
use futures::StreamExt;
use serde_json::Value;
use worker::{Fetch, Fetcher, Method, Request, RequestInit, WebSocket, WebsocketEvent};

use think_core::browser::chunks::{encode, Dechunker};
use think_core::browser::{BrowserEndpoint, BrowserError, BrowserLauncher, WsConnection, WsSender};

/// The Browser Run binding (`[browser]` in wrangler.toml).
pub const BROWSER_BINDING: &str = "BROWSER";
/// The host Browser Run's binding answers on (any host works; this is the conventional one).
const BINDING_HOST: &str = "https://browser.binding";

/// Opens browser WebSockets from the Worker.
pub struct WorkerBrowser {
    binding: Option<Fetcher>,
    /// The Browser Run session this object uses, once acquired.
    run_session: RefCell<Option<String>>,
}

impl WorkerBrowser {
    /// The launcher of `env` (its `BROWSER` binding, when present).
    pub fn from_env(env: &worker::Env) -> Self {
        Self { binding: env.service(BROWSER_BINDING).ok(), run_session: RefCell::default() }
    }

    async fn acquire(&self, binding: &Fetcher) -> Result<String, BrowserError> {
        if let Some(id) = self.run_session.borrow().clone() {
            return Ok(id);
        }
        let url = format!("{BINDING_HOST}/v1/acquire?keep_alive=600000");
        let mut resp = binding.fetch(url, None).await.map_err(connect)?;
        let body: Value = resp.json().await.map_err(connect)?;
        let id = body["sessionId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| BrowserError::Connect(format!("Browser Run gave no session: {body}")))?;
        *self.run_session.borrow_mut() = Some(id.clone());
        Ok(id)
    }
}

fn connect(e: worker::Error) -> BrowserError {
    BrowserError::Connect(e.to_string())
}

async fn get_json(url: &str) -> Result<Value, BrowserError> {
    let mut resp =
        Fetch::Url(url.parse().map_err(|e| BrowserError::Connect(format!("{url}: {e}")))?)
            .send()
            .await
            .map_err(|e| BrowserError::Connect(format!("{url}: {e}")))?;
    if resp.status_code() != 200 {
        return Err(BrowserError::Connect(format!("{url} answered HTTP {}", resp.status_code())));
    }
    resp.json().await.map_err(|e| BrowserError::Connect(format!("{url}: {e}")))
}

/// A socket whose messages are text frames (a `cdpUrl` Chrome) or binding chunks.
struct Socket {
    ws: WebSocket,
    chunked: bool,
}

impl WsSender for Socket {
    fn send(&self, text: &str) -> Result<(), BrowserError> {
        let sent = if self.chunked {
            encode(text).iter().try_for_each(|c| self.ws.send_with_bytes(c))
        } else {
            self.ws.send_with_str(text)
        };
        sent.map_err(|e| BrowserError::Closed(e.to_string()))
    }

    fn close(&self) {
        let _ = self.ws.close(Some(1000), Some("done"));
    }
}

/// Accepts `ws` and forwards its messages to a stream (a task owns the socket's events).
fn open(ws: WebSocket, chunked: bool) -> Result<WsConnection, BrowserError> {
    ws.accept().map_err(connect)?;
    let (tx, rx) = mpsc::unbounded::<String>();
    let reader = ws.clone();
    super::idle::spawn(async move {
        let Ok(mut events) = reader.events() else { return };
        let mut dechunker = Dechunker::default();
        while let Some(event) = events.next().await {
            let text = match event {
                Ok(WebsocketEvent::Message(m)) => match m.text() {
                    Some(t) => Some(t),
                    None => m.bytes().and_then(|b| dechunker.push(&b)),
                },
                Ok(WebsocketEvent::Close(_)) | Err(_) => break,
            };
            if let Some(t) = text {
                if tx.unbounded_send(t).is_err() {
                    break;
                }
            }
        }
    });
    Ok(WsConnection { sender: Rc::new(Socket { ws, chunked }), incoming: rx.boxed_local() })
}

/// `base` with `path`, without a doubled slash.
fn join(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

#[async_trait(?Send)]
impl BrowserLauncher for WorkerBrowser {
    async fn connect(&self, endpoint: &BrowserEndpoint) -> Result<WsConnection, BrowserError> {
        match endpoint {
            BrowserEndpoint::CdpUrl(base) => {
                let version = get_json(&join(base, "/json/version")).await?;
                let ws_url = version["webSocketDebuggerUrl"].as_str().ok_or_else(|| {
                    BrowserError::Connect(format!(
                        "{base}/json/version names no webSocketDebuggerUrl"
                    ))
                })?;
                // Chrome names itself as it was started; reach it where the setting says.
                let mut url: think_core::net::Url =
                    ws_url.parse().map_err(|e| BrowserError::Connect(format!("{ws_url}: {e}")))?;
                let configured: think_core::net::Url =
                    base.parse().map_err(|e| BrowserError::Connect(format!("{base}: {e}")))?;
                let _ = url.set_host(configured.host_str());
                let _ = url.set_port(configured.port_or_known_default());
                let scheme = if configured.scheme() == "https" { "https" } else { "http" };
                let _ = url.set_scheme(scheme);
                let ws = WebSocket::connect(url).await.map_err(|e| {
                    BrowserError::Connect(format!("the browser WebSocket at {ws_url}: {e}"))
                })?;
                open(ws, false)
            }
            BrowserEndpoint::Binding => {
                let binding = self.binding.as_ref().ok_or_else(|| {
                    BrowserError::Connect("the Worker has no BROWSER binding".into())
                })?;
                let session = self.acquire(binding).await?;
                let url = format!("{BINDING_HOST}/v1/connectDevtools?browser_session={session}");
                let headers = worker::Headers::new();
                headers.set("Upgrade", "websocket").map_err(connect)?;
                let mut init = RequestInit::new();
                init.with_method(Method::Get).with_headers(headers);
                let req = Request::new_with_init(&url, &init).map_err(connect)?;
                let resp = binding.fetch_request(req).await;
                let ws = match resp.ok().and_then(|r| r.websocket()) {
                    Some(ws) => ws,
                    None => {
                        // The session may have ended: acquire a new one next time.
                        self.run_session.borrow_mut().take();
                        return Err(BrowserError::Connect(
                            "Browser Run refused the DevTools connection".into(),
                        ));
                    }
                };
                open(ws, true)
            }
        }
    }

    async fn protocol(&self, endpoint: &BrowserEndpoint) -> Result<Value, BrowserError> {
        match endpoint {
            BrowserEndpoint::CdpUrl(base) => get_json(&join(base, "/json/protocol")).await,
            BrowserEndpoint::Binding => Err(BrowserError::Connect(
                "Browser Run does not serve the protocol description".into(),
            )),
        }
    }
}
