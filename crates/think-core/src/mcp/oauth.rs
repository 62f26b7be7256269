//! OAuth 2.1 for MCP servers, as the MCP authorization spec lays it out: a `401` with
//! `WWW-Authenticate` leads to the server's protected-resource metadata (RFC 9728), then to its
//! authorization server's metadata (RFC 8414), a dynamic client registration (RFC 7591), and
//! an authorization URL with PKCE S256, `state` and the `resource` indicator (RFC 8707). The
//! callback's code is exchanged for tokens, which are refreshed before they expire.
//!
//! Everything here is plain data and requests through the `HttpClient` the caller passes (the
//! client's, which applies the address policy to every URL and redirect). The [`AuthRecord`]
//! is what the client persists per server; it never leaves the object.

use crate::net::{self, NetPolicy, Url};
use crate::platform::number::parse_f64;
use crate::platform::{Clock, HttpClient, HttpRequest};
use base64::Engine;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Metadata and token responses larger than this are refused.
const MAX_BODY_BYTES: usize = 256 * 1024;
/// Refresh this long before the access token expires, at most (half its lifetime for short ones).
const REFRESH_MARGIN_MS: f64 = 60_000.0;
/// An authorization left unfinished this long is started afresh on the next connection.
pub(crate) const PENDING_TTL_MS: f64 = 24.0 * 3_600_000.0;

/// Why an authorization step failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OAuthError {
    /// The server needs OAuth but the agent does not know its own public URL for the callback.
    NoCallback,
    /// The metadata documents could not be found or read.
    Discovery(String),
    /// The authorization server lacks something MCP requires (PKCE S256, a registration
    /// endpoint).
    Unsupported(String),
    /// The authorization server refused the client registration.
    Registration(String),
    /// The token endpoint refused a code exchange or a refresh.
    Token {
        /// The HTTP status.
        status: u16,
        /// The OAuth `error` code (`invalid_grant`, ...), or the start of the body.
        error: String,
    },
    /// A callback whose `state` matches no authorization in progress (wrong or replayed).
    UnknownState,
    /// The user or the authorization server refused the authorization at the callback.
    Denied(String),
}

impl std::fmt::Display for OAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OAuthError::NoCallback => f.write_str(
                "the server requires OAuth, and the agent does not know its public URL for the \
                 callback yet (connect over /agents/<class>/<name> first, or pass callbackHost)",
            ),
            OAuthError::Discovery(m) => write!(f, "OAuth discovery failed: {m}"),
            OAuthError::Unsupported(m) => write!(f, "unsupported authorization server: {m}"),
            OAuthError::Registration(m) => write!(f, "client registration failed: {m}"),
            OAuthError::Token { status, error } => {
                write!(f, "the token endpoint refused (HTTP {status}): {error}")
            }
            OAuthError::UnknownState => f.write_str(
                "unknown or already used OAuth state: no authorization is waiting for it",
            ),
            OAuthError::Denied(m) => write!(f, "the authorization was refused: {m}"),
        }
    }
}

impl std::error::Error for OAuthError {}

/// What a `WWW-Authenticate: Bearer ...` challenge says.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Challenge {
    /// Where the protected-resource metadata is (RFC 9728 §5.1).
    pub resource_metadata: Option<String>,
    /// The scopes the resource asks for.
    pub scope: Option<String>,
}

/// Reads the `Bearer` challenge of a `WWW-Authenticate` header; other schemes are ignored.
pub(crate) fn parse_challenge(header: &str) -> Challenge {
    let mut out = Challenge::default();
    let Some(start) = find_ci(header, "bearer") else { return out };
    let mut rest = header[start + 6..].trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim().trim_start_matches(',').trim().to_ascii_lowercase();
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            value = v;
            rest = &quoted[end.min(quoted.len())..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_owned();
            rest = &rest[end..];
        }
        rest = rest.trim_start().trim_start_matches(',').trim_start();
        match key.as_str() {
            "resource_metadata" => out.resource_metadata = Some(value),
            "scope" => out.scope = Some(value),
            _ => {}
        }
    }
    out
}

fn find_ci(haystack: &str, needle: &str) -> Option<usize> {
    haystack.to_ascii_lowercase().find(needle)
}

/// Where to look for the protected-resource metadata: the challenge's URL, else the
/// well-known path for the server's path, else the origin's.
pub(crate) fn resource_metadata_urls(server: &Url, challenge: &Challenge) -> Vec<Url> {
    if let Some(u) = challenge.resource_metadata.as_deref().and_then(|u| server.join(u).ok()) {
        return vec![u];
    }
    well_known(server, "oauth-protected-resource")
}

/// `/.well-known/<name><path>` and then `/.well-known/<name>` on the URL's origin.
fn well_known(url: &Url, name: &str) -> Vec<Url> {
    let path = url.path().trim_end_matches('/');
    let mut out = Vec::new();
    let mut push = |p: String| {
        let mut u = url.clone();
        u.set_path(&p);
        u.set_query(None);
        u.set_fragment(None);
        if !out.contains(&u) {
            out.push(u);
        }
    };
    if !path.is_empty() {
        push(format!("/.well-known/{name}{path}"));
    }
    push(format!("/.well-known/{name}"));
    out
}

/// Where an issuer's metadata may be, in the order the MCP spec lists: OAuth, then OpenID
/// Connect with the path inserted, then OpenID Connect with the path appended.
pub(crate) fn auth_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let mut out = well_known(issuer, "oauth-authorization-server");
    out.truncate(1);
    out.extend(well_known(issuer, "openid-configuration").into_iter().take(1));
    let path = issuer.path().trim_end_matches('/');
    if !path.is_empty() {
        let mut u = issuer.clone();
        u.set_path(&format!("{path}/.well-known/openid-configuration"));
        out.push(u);
    }
    out
}

/// Whether metadata's `resource` covers the server URL: same origin, and the server's path at
/// or under the resource's path (RFC 8707 resources may name a prefix).
pub(crate) fn resource_covers(resource: &Url, server: &Url) -> bool {
    if resource.origin() != server.origin() {
        return false;
    }
    let with_slash = |p: &str| if p.ends_with('/') { p.to_owned() } else { format!("{p}/") };
    with_slash(server.path()).starts_with(&with_slash(resource.path()))
}

/// The parts of an authorization server's metadata the client uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AuthServer {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Vec<String>,
}

impl AuthServer {
    /// Reads RFC 8414 metadata and checks what MCP requires: the endpoints are http(s) URLs
    /// the policy allows, and PKCE S256 is offered.
    pub fn parse(v: &Value, policy: &NetPolicy) -> Result<AuthServer, OAuthError> {
        let meta: AuthServer = serde_json::from_value(v.clone()).map_err(|e| {
            OAuthError::Discovery(format!("unreadable authorization server metadata: {e}"))
        })?;
        for endpoint in [
            Some(&meta.authorization_endpoint),
            Some(&meta.token_endpoint),
            meta.registration_endpoint.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            secure_endpoint(endpoint, policy)?;
        }
        if !meta.code_challenge_methods_supported.iter().any(|m| m == "S256") {
            return Err(OAuthError::Unsupported(format!(
                "{} does not offer PKCE with S256 (code_challenge_methods_supported)",
                meta.issuer
            )));
        }
        Ok(meta)
    }
}

/// An endpoint must be https, or http on loopback (local development), and pass the policy.
fn secure_endpoint(endpoint: &str, policy: &NetPolicy) -> Result<Url, OAuthError> {
    let url = net::check_url(endpoint, policy)
        .map_err(|e| OAuthError::Discovery(format!("endpoint {endpoint}: {e}")))?;
    let loopback =
        url.host().is_some_and(|h| net::classify_host(&h) == net::AddressClass::Loopback);
    if url.scheme() != "https" && !loopback {
        return Err(OAuthError::Unsupported(format!("endpoint {endpoint} is not https")));
    }
    Ok(url)
}

/// The client this agent registered (or was given) at the authorization server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Registration {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The redirect URI registered with it; a different callback needs a new registration.
    pub redirect_uri: String,
    /// Given by the app (registered by hand at the authorization server): always used,
    /// never replaced by a dynamic registration.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preset: bool,
}

/// Issued tokens, with times in epoch milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Tokens {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    pub issued_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<f64>,
}

impl Tokens {
    /// Reads a token endpoint response received at `now`; a refresh that returns no new
    /// refresh token keeps `previous_refresh`.
    pub fn from_response(
        v: &Value,
        now: f64,
        previous_refresh: Option<&str>,
    ) -> Result<Tokens, OAuthError> {
        let bad = |m: &str| OAuthError::Token { status: 200, error: m.to_owned() };
        let access = v["access_token"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("no access_token"))?;
        let kind = v["token_type"].as_str().unwrap_or("bearer");
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(bad(&format!("token_type {kind} is not bearer")));
        }
        let lifetime = v["expires_in"].as_f64().or_else(|| parse_f64(v["expires_in"].as_str()?));
        Ok(Tokens {
            access_token: access.to_owned(),
            refresh_token: v["refresh_token"].as_str().or(previous_refresh).map(str::to_owned),
            issued_at: now,
            expires_at: lifetime.filter(|s| *s > 0.0).map(|s| now + s * 1000.0),
        })
    }

    /// Whether the access token should be refreshed before use at `now`: it expires within a
    /// minute, or within half its lifetime for tokens that live less than two minutes.
    pub fn refresh_due(&self, now: f64) -> bool {
        match (self.expires_at, &self.refresh_token) {
            (Some(at), Some(_)) => {
                let margin = REFRESH_MARGIN_MS.min((at - self.issued_at) / 2.0);
                now >= at - margin
            }
            _ => false,
        }
    }
}

/// An authorization waiting for its callback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub state: String,
    pub verifier: String,
    pub auth_url: String,
    pub created_at: f64,
}

/// Everything kept per OAuth server, persisted as one JSON value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct AuthRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<AuthServer>,
    /// The resource indicator sent with every authorization and token request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Registration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
}

/// A PKCE pair: the verifier kept until the callback, its S256 challenge sent in the URL.
pub(crate) struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Pkce {
    /// A verifier of 32 random bytes (43 characters), as RFC 7636 recommends.
    pub fn new(clock: &dyn Clock) -> Pkce {
        let mut bytes = [0u8; 32];
        clock.random_bytes(&mut bytes);
        let verifier = b64url(&bytes);
        Pkce { challenge: Self::challenge(&verifier), verifier }
    }

    /// `BASE64URL(SHA256(verifier))`.
    pub fn challenge(verifier: &str) -> String {
        b64url(&crate::platform::digest::sha256(verifier.as_bytes()))
    }
}

/// A random `state` of 32 bytes, unguessable so a forged callback cannot match it.
pub(crate) fn new_state(clock: &dyn Clock) -> String {
    let mut bytes = [0u8; 32];
    clock.random_bytes(&mut bytes);
    b64url(&bytes)
}

/// Compares secrets in time independent of where they differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The URL the user opens to authorize the client.
pub(crate) fn authorization_url(
    server: &AuthServer,
    client: &Registration,
    challenge: &str,
    state: &str,
    resource: Option<&str>,
    scope: Option<&str>,
) -> String {
    let mut url =
        Url::parse(&server.authorization_endpoint).expect("checked when the metadata was read");
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("code_challenge", challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("redirect_uri", &client.redirect_uri)
            .append_pair("state", state);
        if let Some(r) = resource {
            q.append_pair("resource", r);
        }
        if let Some(s) = scope.filter(|s| !s.is_empty()) {
            q.append_pair("scope", s);
        }
    }
    url.to_string()
}

/// The `code`, `state` and `error` of a callback URL's query.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CallbackParams {
    pub code: Option<String>,
    pub state: Option<String>,
    pub error: Option<String>,
}

impl CallbackParams {
    /// Reads the query string (without `?`).
    pub fn parse(query: &str) -> CallbackParams {
        let mut out = CallbackParams::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            let v = Some(v.into_owned());
            match k.as_ref() {
                "code" => out.code = v,
                "state" => out.state = v,
                "error" => out.error = v,
                _ => {}
            }
        }
        out
    }
}

/// The requests of the flow, through the caller's (guarded) HTTP client.
pub(crate) struct OAuth<'a> {
    pub http: &'a dyn HttpClient,
    pub clock: &'a dyn Clock,
    pub policy: NetPolicy,
    pub client_name: &'a str,
}

async fn read_json(resp: crate::platform::HttpResponse) -> Result<(u16, Value), String> {
    let status = resp.status;
    let mut body = resp.body;
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        bytes.extend_from_slice(&chunk.map_err(|e| e.to_string())?);
        if bytes.len() > MAX_BODY_BYTES {
            return Err(format!("response larger than {} KB", MAX_BODY_BYTES >> 10));
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    match serde_json::from_str(&text) {
        Ok(v) => Ok((status, v)),
        Err(_) if !(200..300).contains(&status) => {
            Ok((status, json!({"error": text.chars().take(200).collect::<String>()})))
        }
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

impl OAuth<'_> {
    async fn send(&self, req: HttpRequest) -> Result<(u16, Value), String> {
        let resp = self.http.fetch(req).await.map_err(|e| e.to_string())?;
        read_json(resp).await
    }

    async fn get_json(&self, url: &Url) -> Result<(u16, Value), String> {
        self.send(HttpRequest {
            method: "GET".into(),
            url: url.to_string(),
            headers: vec![("accept".into(), "application/json".into())],
            ..Default::default()
        })
        .await
    }

    async fn post(
        &self,
        url: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<(u16, Value), String> {
        self.send(HttpRequest {
            method: "POST".into(),
            url: url.to_owned(),
            headers: vec![
                ("content-type".into(), content_type.into()),
                ("accept".into(), "application/json".into()),
            ],
            body: Some(body.into()),
            ..Default::default()
        })
        .await
    }

    /// The first of `urls` that answers 200 with a JSON object.
    async fn first_found(&self, urls: &[Url], what: &str) -> Result<(Url, Value), OAuthError> {
        let mut tried = Vec::new();
        for url in urls {
            match self.get_json(url).await {
                Ok((200, v)) if v.is_object() => return Ok((url.clone(), v)),
                Ok((status, _)) => tried.push(format!("{url}: HTTP {status}")),
                Err(e) => tried.push(format!("{url}: {e}")),
            }
        }
        Err(OAuthError::Discovery(format!("no {what} found ({})", tried.join("; "))))
    }

    /// Discovers the authorization server for `server_url`, registers a client for `callback`
    /// unless `record` has one for it, and returns the authorization URL with the pending
    /// authorization stored in `record` (which drops any tokens: they were refused).
    pub async fn begin(
        &self,
        server_url: &Url,
        challenge: &Challenge,
        record: &mut AuthRecord,
        callback: Option<&str>,
    ) -> Result<String, OAuthError> {
        let prm = self
            .first_found(
                &resource_metadata_urls(server_url, challenge),
                "protected resource metadata",
            )
            .await;
        let (issuer, resource, scope) = match prm {
            Ok((_, meta)) => {
                let resource = match meta["resource"].as_str() {
                    Some(r) => {
                        let parsed = Url::parse(r).map_err(|e| {
                            OAuthError::Discovery(format!("bad resource {r:?}: {e}"))
                        })?;
                        if !resource_covers(&parsed, server_url) {
                            return Err(OAuthError::Discovery(format!(
                                "the protected resource metadata is for {r}, not {server_url}"
                            )));
                        }
                        r.to_owned()
                    }
                    None => server_url.to_string(),
                };
                let issuer = meta["authorization_servers"]
                    .as_array()
                    .and_then(|a| a.iter().find_map(Value::as_str))
                    .ok_or_else(|| {
                        OAuthError::Discovery(
                            "the protected resource names no authorization server".into(),
                        )
                    })?
                    .to_owned();
                let scope = challenge.scope.clone().or_else(|| {
                    let s: Vec<&str> = meta["scopes_supported"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    (!s.is_empty()).then(|| s.join(" "))
                });
                (issuer, resource, scope)
            }
            // Servers of the 2025-03-26 spec have no resource metadata: their origin is the
            // authorization server.
            Err(_) => (
                server_url.origin().ascii_serialization(),
                server_url.to_string(),
                challenge.scope.clone(),
            ),
        };
        let issuer_url = secure_endpoint(&issuer, &self.policy)?;
        let (_, meta) = self
            .first_found(&auth_server_metadata_urls(&issuer_url), "authorization server metadata")
            .await?;
        let server = AuthServer::parse(&meta, &self.policy)?;
        let callback = callback.ok_or(OAuthError::NoCallback)?;
        let client = match record.client.take() {
            Some(c) if c.preset => Registration { redirect_uri: callback.to_owned(), ..c },
            Some(c) if c.redirect_uri == callback && record.server.as_ref() == Some(&server) => c,
            _ => self.register(&server, callback).await?,
        };
        let pkce = Pkce::new(self.clock);
        let state = new_state(self.clock);
        let auth_url = authorization_url(
            &server,
            &client,
            &pkce.challenge,
            &state,
            Some(&resource),
            scope.as_deref(),
        );
        *record = AuthRecord {
            server: Some(server),
            resource: Some(resource),
            scope,
            client: Some(client),
            tokens: None,
            pending: Some(Pending {
                state,
                verifier: pkce.verifier,
                auth_url: auth_url.clone(),
                created_at: self.clock.now_ms(),
            }),
        };
        Ok(auth_url)
    }

    /// RFC 7591 registration of a public client (no secret) for the authorization code grant.
    async fn register(
        &self,
        server: &AuthServer,
        callback: &str,
    ) -> Result<Registration, OAuthError> {
        let Some(endpoint) = &server.registration_endpoint else {
            return Err(OAuthError::Unsupported(format!(
                "{} offers no dynamic client registration (registration_endpoint): register \
                 the callback URL there and pass clientId to addMcpServer",
                server.issuer
            )));
        };
        let body = json!({
            "client_name": self.client_name,
            "redirect_uris": [callback],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        let (status, v) = self
            .post(endpoint, "application/json", body.to_string().into_bytes())
            .await
            .map_err(OAuthError::Registration)?;
        if !(200..300).contains(&status) {
            return Err(OAuthError::Registration(format!("HTTP {status}: {}", error_text(&v))));
        }
        let client_id = v["client_id"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| OAuthError::Registration("the answer has no client_id".into()))?;
        Ok(Registration {
            client_id: client_id.to_owned(),
            client_secret: v["client_secret"].as_str().map(str::to_owned),
            redirect_uri: callback.to_owned(),
            preset: false,
        })
    }

    /// POSTs a grant to the token endpoint and reads the tokens.
    async fn grant(
        &self,
        record: &AuthRecord,
        params: &[(&str, &str)],
    ) -> Result<Tokens, OAuthError> {
        let (Some(server), Some(client)) = (&record.server, &record.client) else {
            return Err(OAuthError::Token {
                status: 0,
                error: "no authorization server is known".into(),
            });
        };
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.extend_pairs(params.iter().copied());
        form.append_pair("client_id", &client.client_id);
        if let Some(secret) = &client.client_secret {
            form.append_pair("client_secret", secret);
        }
        if let Some(r) = &record.resource {
            form.append_pair("resource", r);
        }
        let (status, v) = self
            .post(
                &server.token_endpoint,
                "application/x-www-form-urlencoded",
                form.finish().into_bytes(),
            )
            .await
            .map_err(|e| OAuthError::Token { status: 0, error: e })?;
        if !(200..300).contains(&status) {
            return Err(OAuthError::Token { status, error: error_text(&v) });
        }
        let previous = record.tokens.as_ref().and_then(|t| t.refresh_token.as_deref());
        Tokens::from_response(&v, self.clock.now_ms(), previous)
    }

    /// Exchanges the callback's code with the pending authorization's verifier.
    pub async fn exchange(
        &self,
        record: &AuthRecord,
        pending: &Pending,
        code: &str,
    ) -> Result<Tokens, OAuthError> {
        let redirect = record.client.as_ref().map(|c| c.redirect_uri.clone()).unwrap_or_default();
        self.grant(
            record,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("code_verifier", &pending.verifier),
                ("redirect_uri", &redirect),
            ],
        )
        .await
    }

    /// Trades the refresh token for new tokens.
    pub async fn refresh(&self, record: &AuthRecord) -> Result<Tokens, OAuthError> {
        let Some(refresh) = record.tokens.as_ref().and_then(|t| t.refresh_token.clone()) else {
            return Err(OAuthError::Token { status: 0, error: "no refresh token".into() });
        };
        self.grant(record, &[("grant_type", "refresh_token"), ("refresh_token", &refresh)]).await
    }
}

/// `error` and `error_description` of an OAuth error response.
fn error_text(v: &Value) -> String {
    let error = v["error"].as_str().unwrap_or("unknown error");
    match v["error_description"].as_str() {
        Some(d) => format!("{error}: {d}"),
        None => error.to_owned(),
    }
}
