//! Platform seams other than storage: time, randomness, outbound HTTP and the set of
//! connected WebSockets. The Workers glue implements them with `Date.now`, `setTimeout`,
//! `crypto.getRandomValues`, `fetch` and the hibernation WebSocket API.

use async_trait::async_trait;
use futures::stream::LocalBoxStream;

pub mod case;
pub mod digest;
pub mod natives;
pub mod number;
pub mod sort;
pub mod sse;

/// Time and randomness, so turn logic (timeouts, debouncing, ids) runs the same on the host.
#[async_trait(?Send)]
pub trait Clock {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> f64;
    /// Resolves after `ms` milliseconds.
    async fn sleep(&self, ms: u64);
    /// Fills `buf` with cryptographically random bytes.
    fn random_bytes(&self, buf: &mut [u8]);
}

/// A random identifier drawn from `clock`, in the nanoid alphabet the `agents` client uses.
pub fn random_id(clock: &dyn Clock, len: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-";
    let mut bytes = vec![0u8; len];
    clock.random_bytes(&mut bytes);
    bytes.iter().map(|b| ALPHABET[(*b & 63) as usize] as char).collect()
}

/// A random RFC 4122 version-4 UUID string.
pub fn random_uuid(clock: &dyn Clock) -> String {
    let mut b = [0u8; 16];
    clock.random_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// `ms` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC), for refusal messages.
pub(crate) fn iso8601_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// An outbound HTTP request.
#[derive(Debug, Clone, Default)]
pub struct HttpRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<RequestBody>,
    /// Whether the runtime follows redirects (`fetch`'s default) or hands them back, so that
    /// a caller such as [`crate::net::GuardedHttp`] can check each hop.
    pub redirect: Redirect,
}

/// A request body as pieces of at most [`RequestBody::PIECE_BYTES`] (or one buffer as it
/// was given): a model request carries the whole history, a large tool argument included,
/// and written in pieces it never needs one block of wasm memory of its size; the runtime
/// joins the pieces into the one buffer it sends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestBody {
    pieces: Vec<Vec<u8>>,
}

impl RequestBody {
    /// The size of the pieces a [`RequestBody::writer`] fills.
    pub const PIECE_BYTES: usize = 64 * 1024;

    /// A writer that appends to the body in pieces.
    pub fn writer(&mut self) -> impl std::io::Write + '_ {
        PieceWriter(&mut self.pieces)
    }

    /// The body's size in bytes.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(Vec::len).sum()
    }

    /// Whether the body has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pieces, in order, handed over one by one (each freed once copied out).
    pub fn into_pieces(self) -> Vec<Vec<u8>> {
        self.pieces
    }

    /// The body in one buffer (for clients that need one, and for tests).
    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces.concat()
    }
}

impl From<Vec<u8>> for RequestBody {
    fn from(bytes: Vec<u8>) -> Self {
        Self { pieces: vec![bytes] }
    }
}

/// Appends to a body's pieces, opening a new one when the last is full.
struct PieceWriter<'a>(&'a mut Vec<Vec<u8>>);

impl std::io::Write for PieceWriter<'_> {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let written = buf.len();
        while !buf.is_empty() {
            let last = match self.0.last_mut() {
                Some(last) if last.len() < RequestBody::PIECE_BYTES => last,
                _ => {
                    self.0.push(Vec::with_capacity(RequestBody::PIECE_BYTES));
                    self.0.last_mut().expect("just pushed")
                }
            };
            let take = (RequestBody::PIECE_BYTES - last.len()).min(buf.len());
            last.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `fetch`'s `redirect` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Redirect {
    /// Follow redirects inside the runtime.
    #[default]
    Follow,
    /// Return a 3xx response as it is, `Location` header included.
    Manual,
}

/// A response whose body arrives as a stream of byte chunks, so SSE can be read as it comes.
pub struct HttpResponse {
    /// The HTTP status code.
    pub status: u16,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body, as it arrives.
    pub body: LocalBoxStream<'static, Result<Vec<u8>, HttpError>>,
}

impl HttpResponse {
    /// The first header named `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Reads the whole body.
    pub async fn bytes(self) -> Result<Vec<u8>, HttpError> {
        use futures::StreamExt;
        let mut body = self.body;
        let mut out = Vec::new();
        while let Some(chunk) = body.next().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(out)
    }
}

/// Why an outbound request got no usable response, as opposed to an HTTP error status (which
/// is a response). Callers match on the kind; the text is the runtime's own.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpError {
    /// The runtime would not build the request (an invalid header name or URL).
    Request(String),
    /// No response arrived: DNS, a refused or reset connection, an unreachable network.
    Connect(String),
    /// The response body broke off while it was being read.
    Body(String),
    /// The address policy refused the URL or one of its redirects; nothing was sent there.
    Refused(String),
    /// More redirects than a browser would follow, or one without a usable `Location`.
    Redirect(String),
}

impl HttpError {
    /// The runtime's description of the failure.
    pub fn message(&self) -> &str {
        match self {
            HttpError::Request(m)
            | HttpError::Connect(m)
            | HttpError::Body(m)
            | HttpError::Refused(m)
            | HttpError::Redirect(m) => m,
        }
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for HttpError {}

/// Outbound HTTP: the model provider and the MCP client both speak through this.
#[async_trait(?Send)]
pub trait HttpClient {
    /// Sends `req`; any status is a response, only a missing response is an error.
    async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, HttpError>;
}

/// Runs background work that outlives the event that started it (MCP listeners, restoring
/// connections after a start). The Workers glue uses `spawn_local`.
pub trait Tasks {
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: futures::future::LocalBoxFuture<'static, ()>);
}

/// The object's single alarm, which wakes it after a restart (to recover an interrupted turn)
/// and for periodic cleanup. Setting it replaces any earlier time.
pub trait Alarm {
    /// Wakes the object at `at_ms` (ms since the Unix epoch).
    fn set(&self, at_ms: f64);
    /// Wakes the object at `at_ms` unless the alarm is already set earlier: work that can
    /// wait (indexing) shares the alarm without pushing back a heartbeat or a sweep.
    fn set_no_later(&self, at_ms: f64);
}

/// The connected WebSockets of one agent instance.
pub trait Sockets {
    /// Ids of every open connection.
    fn ids(&self) -> Vec<String>;
    /// Sends one text frame; a closed socket is silently skipped.
    fn send(&self, id: &str, text: &str);
    /// Sends one text frame to every open connection whose id `to` accepts. The Worker's
    /// sockets make the frame's JavaScript string once and go over the sockets once, where a
    /// [`Sockets::send`] per connection made a string per tab and looked each one up.
    fn broadcast(&self, text: &str, to: &dyn Fn(&str) -> bool) {
        for id in self.ids() {
            if to(&id) {
                self.send(&id, text);
            }
        }
    }
}

thread_local! {
    static LOGGER: std::cell::Cell<fn(&str)> = const { std::cell::Cell::new(default_log) };
}

fn default_log(msg: &str) {
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{msg}");
    #[cfg(target_arch = "wasm32")]
    let _ = msg;
}

/// Routes diagnostics to the platform's console (the glue installs `console.log`).
pub fn set_logger(f: fn(&str)) {
    LOGGER.with(|l| l.set(f));
}

/// Logs a diagnostic line: failures the user cannot see in a frame, such as a storage error.
pub fn log(msg: &str) {
    LOGGER.with(|l| (l.get())(msg));
}
