//! The JWKS and its cache. Keys are fetched on first use and kept; a token naming a `kid` the
//! cache lacks makes one refetch, and after it (or after a failed fetch) no fetch happens for
//! [`REFETCH_MS`]: a key added by rotation is found, and a stream of made-up `kid`s cannot
//! make the Worker hammer the JWKS. Keys older than [`MAX_AGE_MS`] are fetched again so a
//! removed key stops working. A JWKS that cannot be reached or read leaves the cached keys in
//! service.
//!
//! The state lives wherever the glue keeps it ([`JwksSlot`]): in the Worker, in JavaScript,
//! so a reset of the wasm instance does not empty it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::platform::{Clock, HttpClient, HttpRequest};

/// How long after a refetch (or a failed fetch) no fetch happens.
pub const REFETCH_MS: f64 = 60_000.0;
/// How long fetched keys are used before they are fetched again.
pub const MAX_AGE_MS: f64 = 3_600_000.0;
/// How long a fetch may take before the cached keys are used instead.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWKS document read.
pub const MAX_JWKS_BYTES: usize = 512 * 1024;

/// One public key of a JWKS, with the members the accepted algorithms need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Jwk {
    /// `RSA` or `EC`.
    pub kty: String,
    /// The key's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// The algorithm the key is for, when the JWKS states one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    /// `sig` or `enc`, when stated.
    #[serde(default, rename = "use", skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
    /// RSA modulus (base64url).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<String>,
    /// RSA exponent (base64url).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e: Option<String>,
    /// EC curve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crv: Option<String>,
    /// EC x coordinate (base64url).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    /// EC y coordinate (base64url).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<String>,
}

impl Jwk {
    /// The public key alone as a JWK object (`kty` with `n`/`e` or `crv`/`x`/`y`), the form a
    /// key import takes: no `alg`, `use` or `key_ops` that could conflict with the import.
    pub fn public_jwk(&self) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("kty".into(), self.kty.clone().into());
        for (name, value) in
            [("n", &self.n), ("e", &self.e), ("crv", &self.crv), ("x", &self.x), ("y", &self.y)]
        {
            if let Some(v) = value {
                out.insert(name.into(), v.clone().into());
            }
        }
        Value::Object(out)
    }
}

/// The cache: the keys last fetched and when fetches happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JwksState {
    /// The JWKS URL these keys came from; another URL starts afresh.
    pub url: String,
    /// The keys of the last good fetch.
    pub keys: Vec<Jwk>,
    /// When the last good fetch happened (ms since the epoch).
    pub fetched_at: Option<f64>,
    /// The earliest time a fetch may start: a first load leaves it at once (a `kid` it lacks
    /// may refetch right away), any other fetch or a failure [`REFETCH_MS`] later.
    pub next_fetch_at: f64,
    /// How many fetches were made, for diagnostics.
    pub fetches: u64,
}

/// Where the cache is kept between requests.
pub trait JwksSlot {
    /// The state last saved.
    fn load(&self) -> Option<JwksState>;
    /// Keeps `state` for the next request.
    fn save(&self, state: &JwksState);
}

/// Why a JWKS fetch brought no keys.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwksError {
    /// No answer, or no answer in time.
    Unreachable(String),
    /// An answer that is not a JWKS.
    Unreadable(String),
}

impl std::fmt::Display for JwksError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JwksError::Unreachable(m) => write!(f, "the JWKS could not be fetched: {m}"),
            JwksError::Unreadable(m) => write!(f, "the JWKS could not be read: {m}"),
        }
    }
}

impl std::error::Error for JwksError {}

/// Reads a JWKS document; keys of other types (OKP, ...) and unreadable entries are skipped.
pub fn parse_jwks(body: &[u8]) -> Result<Vec<Jwk>, JwksError> {
    let doc: Value =
        serde_json::from_slice(body).map_err(|e| JwksError::Unreadable(e.to_string()))?;
    let keys = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| JwksError::Unreadable("no \"keys\" array".into()))?;
    Ok(keys
        .iter()
        .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
        .filter(|k| k.kty == "RSA" || k.kty == "EC")
        .collect())
}

/// What the cache says about a `kid` before any fetch.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup<'a> {
    /// Cached and fresh.
    Found(&'a Jwk),
    /// Not cached (or the cache is stale) and a fetch is allowed now.
    Fetch,
    /// Not cached, and the last fetch was too recent to try again.
    Unknown,
}

impl JwksState {
    /// The cache for `url` (empty when `self` was for another one).
    pub fn for_url(self, url: &str) -> Self {
        if self.url == url {
            self
        } else {
            JwksState { url: url.to_owned(), ..Default::default() }
        }
    }

    fn key(&self, kid: &str) -> Option<&Jwk> {
        self.keys.iter().find(|k| k.kid.as_deref() == Some(kid))
    }

    /// Decides, at `now`, whether `kid` is served from the cache or needs a fetch.
    pub fn lookup(&self, kid: &str, now: f64) -> Lookup<'_> {
        let may_fetch = now >= self.next_fetch_at;
        let stale = self.fetched_at.is_none_or(|at| now - at >= MAX_AGE_MS);
        let cached = self.key(kid);
        if may_fetch && (cached.is_none() || stale) {
            return Lookup::Fetch;
        }
        match cached {
            Some(key) => Lookup::Found(key),
            None => Lookup::Unknown,
        }
    }

    /// Notes a fetch starting at `now`: no other starts until it is over.
    pub fn start_fetch(&mut self, now: f64) {
        self.next_fetch_at = now + REFETCH_MS;
        self.fetches += 1;
    }

    /// Takes the outcome of a fetch that started at `started`: new keys replace the cache
    /// (and after a first load another fetch may follow at once), a failure leaves the cache
    /// as it is.
    pub fn after_fetch(&mut self, result: Result<Vec<Jwk>, JwksError>, started: f64, now: f64) {
        if let Ok(keys) = result {
            if self.fetched_at.is_none() {
                self.next_fetch_at = started;
            }
            self.keys = keys;
            self.fetched_at = Some(now);
        }
    }

    /// The cached key named `kid`, if any.
    pub fn cached(&self, kid: &str) -> Option<Jwk> {
        self.key(kid).cloned()
    }
}

/// Fetches the JWKS at `url`, waiting at most [`FETCH_TIMEOUT`].
pub async fn fetch_jwks(
    url: &str,
    http: &dyn HttpClient,
    clock: &dyn Clock,
) -> Result<Vec<Jwk>, JwksError> {
    use futures::future::{select, Either};
    let req = HttpRequest {
        method: "GET".into(),
        url: url.to_owned(),
        headers: vec![("accept".into(), "application/json".into())],
        ..Default::default()
    };
    let fetch = async {
        let resp = http.fetch(req).await.map_err(|e| JwksError::Unreachable(e.to_string()))?;
        if resp.status != 200 {
            return Err(JwksError::Unreachable(format!("HTTP {}", resp.status)));
        }
        let mut body = resp.body;
        let mut bytes = Vec::new();
        while let Some(chunk) = futures::StreamExt::next(&mut body).await {
            bytes.extend_from_slice(&chunk.map_err(|e| JwksError::Unreachable(e.to_string()))?);
            if bytes.len() > MAX_JWKS_BYTES {
                return Err(JwksError::Unreadable(format!("larger than {MAX_JWKS_BYTES} bytes")));
            }
        }
        parse_jwks(&bytes)
    };
    let timeout = clock.sleep(FETCH_TIMEOUT.as_millis() as u64);
    match select(Box::pin(fetch), Box::pin(timeout)).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => {
            Err(JwksError::Unreachable(format!("no answer in {} s", FETCH_TIMEOUT.as_secs())))
        }
    }
}

/// The key named `kid` from the JWKS at `url`, fetching as the cache rules allow. The slot is
/// updated before a fetch starts, so concurrent requests do not all fetch.
pub async fn key_for(
    kid: &str,
    url: &str,
    slot: &dyn JwksSlot,
    http: &dyn HttpClient,
    clock: &dyn Clock,
) -> Option<Jwk> {
    let mut state = slot.load().unwrap_or_default().for_url(url);
    let now = clock.now_ms();
    match state.lookup(kid, now) {
        Lookup::Found(key) => return Some(key.clone()),
        Lookup::Unknown => return None,
        Lookup::Fetch => {}
    }
    state.start_fetch(now);
    slot.save(&state);
    let result = fetch_jwks(url, http, clock).await;
    if let Err(e) = &result {
        crate::platform::log(&format!("think-rs: {e}; the cached keys stay in use"));
    }
    // Another request may have saved meanwhile; the keys are ours.
    let mut latest = slot.load().unwrap_or_default().for_url(url);
    latest.after_fetch(result, now, clock.now_ms());
    slot.save(&latest);
    latest.cached(kid)
}
