//! Access control for the agent's routes (`/agents/<class>/<name>/...`): the Worker entry asks
//! [`AccessControl::check`] before a request reaches the Durable Object, and forwards it only
//! when the answer is [`Decision::Allow`] (or, for the MCP OAuth callback alone,
//! [`Decision::OAuthCallback`]).
//!
//! The settings (read by [`AccessControl::from_settings`]):
//! - `THINK_AUTH_TOKENS`: shared tokens, comma-separated; each reaches every instance;
//! - `THINK_AUTH_JWKS_URL`: RS256/ES256 JWTs signed by a key of this JWKS (cached, see
//!   [`jwks`]);
//! - `THINK_AUTH_JWT_SECRET`: HS256 JWTs with this secret (HS256 is refused without it);
//! - `THINK_AUTH_ISSUER`, `THINK_AUTH_AUDIENCE`: the `iss` and `aud` a JWT must carry;
//! - `THINK_AUTH_ACCESS_TEAM`: Cloudflare Access; the JWKS is the team's certs URL, the
//!   issuer the team domain, and `THINK_AUTH_AUDIENCE` (the application's AUD tag) is
//!   required;
//! - `THINK_AUTH_INSTANCE_CLAIM` (default `sub`): the claim naming the instance a JWT reaches
//!   (exactly, or `<claim>:<anything>`); shared tokens are not scoped;
//! - `THINK_AUTH=none`: open on purpose.
//!
//! With none set, only a request to a loopback host (`npm start`) passes. The credential is
//! read from `Authorization: Bearer`, the `token` query parameter (a browser's WebSocket
//! cannot set headers; [`strip_token`] removes it before the request goes on) and
//! `Cf-Access-Jwt-Assertion`. Shared tokens are compared in constant time.
//!
//! Signatures are checked by WebCrypto in the Worker (`src/wasm/auth.rs`), not by a crate:
//! `jsonwebtoken` 10.4 with its RustCrypto backend measured 202,716 B gzip on its own in
//! wasm32 (release, wasm-opt -Oz), more than twice the budget left; the bare primitives
//! (`rsa` 0.9, `p256` 0.13, `hmac` 0.12) 26,700 B. WebCrypto costs the module only the glue
//! and the JWT and JWK rules written here (`jwt`, `jwks`): with this and the limits
//! (`crate::limits`) the release module went from 911,826 to 932,695 B gzip (+20,869 B;
//! 2,650,598 to 2,710,696 B raw).

pub mod jwks;
pub mod jwt;

#[cfg(test)]
mod tests;

use futures::future::LocalBoxFuture;
use std::rc::Rc;

use serde_json::Value;

use crate::net::{classify_host, AddressClass, Url};
use crate::platform::{Clock, HttpClient};
use jwks::JwksSlot;
use jwt::{ClaimRules, JwtError, Signatures, VerifyKey};

/// The settings that close a deploy, as the refusal of an unconfigured one names them.
pub const SETTINGS_HINT: &str = "set THINK_AUTH_TOKENS (shared tokens), THINK_AUTH_JWKS_URL \
(RS256/ES256 JWTs), THINK_AUTH_JWT_SECRET (HS256 JWTs) or THINK_AUTH_ACCESS_TEAM (Cloudflare \
Access) with `wrangler secret put`, or THINK_AUTH=none to leave it open on purpose";

/// The header the Worker sets on the one kind of unauthenticated request it forwards (the MCP
/// OAuth callback), and removes from every request it is sent.
pub const EXEMPT_HEADER: &str = "x-think-auth-exempt";
/// [`EXEMPT_HEADER`]'s value for the OAuth callback.
pub const EXEMPT_OAUTH_CALLBACK: &str = "oauth-callback";

/// What the checks see of a request to an agent.
#[derive(Debug, Clone)]
pub struct AuthRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The URL as the client sent it (the `token` parameter included).
    pub url: Url,
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// The kebab-case class slug (`think-agent`).
    pub namespace: String,
    /// The instance name, decoded.
    pub instance: String,
    /// What follows the name (`get-messages`, `callback`, ...), without a leading `/`.
    pub rest: String,
}

impl AuthRequest {
    /// The first header named `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// An app's own answer (the `authorize` hook).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the request through.
    Allow,
    /// Refuse with 401 and this reason.
    Unauthenticated(String),
    /// Refuse with 403 and this reason.
    Forbidden(String),
    /// No opinion: the `THINK_AUTH_*` rules decide.
    Continue,
}

/// The `authorize` hook: sees the request and its instance, and allows, denies or defers.
pub type Authorize = Rc<dyn Fn(&AuthRequest) -> LocalBoxFuture<'static, Verdict>>;

/// What the checks need from the platform.
pub struct AuthDeps<'a> {
    /// Fetches the JWKS.
    pub http: &'a dyn HttpClient,
    /// The time (token validity, the JWKS cache).
    pub clock: &'a dyn Clock,
    /// Checks signatures.
    pub signatures: &'a dyn Signatures,
    /// Keeps the JWKS cache between requests.
    pub jwks: &'a dyn JwksSlot,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No credential, or none that is valid: 401.
    Unauthenticated {
        /// What was wrong.
        reason: String,
        /// Whether a credential was presented at all.
        presented: bool,
    },
    /// A valid identity for another instance: 403.
    Forbidden(String),
    /// No access setting, and a host that is not loopback: 401 naming the settings.
    Unconfigured,
    /// The settings contradict each other or cannot be read: 500 naming the problem.
    Misconfigured(String),
}

impl Refusal {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Unauthenticated { .. } | Refusal::Unconfigured => 401,
            Refusal::Forbidden(_) => 403,
            Refusal::Misconfigured(_) => 500,
        }
    }

    /// The response body: what is wrong with the credential or the settings, nothing about
    /// the instance.
    pub fn body(&self) -> String {
        match self {
            Refusal::Unauthenticated { reason, .. } => format!("Unauthorized: {reason}"),
            Refusal::Forbidden(reason) => format!("Forbidden: {reason}"),
            Refusal::Unconfigured => format!(
                "Unauthorized: this deploy has no access control configured and the request \
                 is not to a loopback host; {SETTINGS_HINT}"
            ),
            Refusal::Misconfigured(m) => format!("Access control is misconfigured: {m}"),
        }
    }

    /// The `WWW-Authenticate` header of a 401.
    pub fn www_authenticate(&self) -> Option<&'static str> {
        match self {
            Refusal::Unauthenticated { presented: true, .. } => {
                Some("Bearer realm=\"think-rs\", error=\"invalid_token\"")
            }
            Refusal::Unauthenticated { .. } | Refusal::Unconfigured => {
                Some("Bearer realm=\"think-rs\"")
            }
            _ => None,
        }
    }
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward it.
    Allow,
    /// Forward it marked as the MCP OAuth callback, which the object checks by its `state`
    /// and answers nothing else to.
    OAuthCallback,
    /// Answer with the refusal.
    Refuse(Refusal),
}

/// How JWTs are accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JwtSettings {
    jwks_url: Option<String>,
    secret: Option<Vec<u8>>,
    claims: ClaimRules,
    instance_claim: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Rules {
    /// `THINK_AUTH=none`.
    Open,
    /// Nothing set: loopback only.
    Unconfigured,
    /// Credentials required.
    Closed { tokens: Vec<String>, jwt: Option<JwtSettings> },
    /// Refuse everything, saying why.
    Misconfigured(String),
}

/// The access rules of the Worker entry, plus the app's `authorize` hook.
#[derive(Clone)]
pub struct AccessControl {
    rules: Rules,
    authorize: Option<Authorize>,
}

/// What one credential amounts to.
enum Outcome {
    /// It reaches the instance.
    Reaches,
    /// A valid identity, for other instances.
    Elsewhere(String),
    /// Not valid.
    Invalid(String),
}

fn setting(get: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// `<team>`, `<team>.cloudflareaccess.com` or `https://<team>.cloudflareaccess.com` as the
/// team's domain.
fn access_domain(team: &str) -> Result<String, String> {
    let team = team.trim_start_matches("https://").trim_end_matches('/');
    let name = team.strip_suffix(".cloudflareaccess.com").unwrap_or(team);
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(format!("THINK_AUTH_ACCESS_TEAM {team:?} is not a team name"));
    }
    Ok(format!("{}.cloudflareaccess.com", name.to_ascii_lowercase()))
}

fn read_rules(get: &impl Fn(&str) -> Option<String>) -> Result<Rules, String> {
    let mode = setting(get, "THINK_AUTH");
    let tokens: Vec<String> = setting(get, "THINK_AUTH_TOKENS")
        .map(|v| v.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    let jwks_url = setting(get, "THINK_AUTH_JWKS_URL");
    let secret = setting(get, "THINK_AUTH_JWT_SECRET");
    let team = setting(get, "THINK_AUTH_ACCESS_TEAM");
    let mut issuer = setting(get, "THINK_AUTH_ISSUER");
    let audience = setting(get, "THINK_AUTH_AUDIENCE");
    let claim = setting(get, "THINK_AUTH_INSTANCE_CLAIM");
    let any_credential =
        !tokens.is_empty() || jwks_url.is_some() || secret.is_some() || team.is_some();
    match mode.as_deref() {
        None => {}
        Some(m) if m.eq_ignore_ascii_case("none") => {
            return if any_credential {
                Err("THINK_AUTH=none leaves the agent open, yet credential settings are set; \
                     remove one or the other"
                    .into())
            } else {
                Ok(Rules::Open)
            };
        }
        Some(other) => {
            return Err(format!("THINK_AUTH is {other:?}; the only value it takes is none"))
        }
    }
    let jwt_source = jwks_url.is_some() || secret.is_some() || team.is_some();
    if !jwt_source {
        for (name, set) in [
            ("THINK_AUTH_ISSUER", issuer.is_some()),
            ("THINK_AUTH_AUDIENCE", audience.is_some()),
            ("THINK_AUTH_INSTANCE_CLAIM", claim.is_some()),
        ] {
            if set {
                return Err(format!(
                    "{name} is set but no JWT is accepted (set THINK_AUTH_JWKS_URL, \
                     THINK_AUTH_JWT_SECRET or THINK_AUTH_ACCESS_TEAM)"
                ));
            }
        }
    }
    if !any_credential {
        return Ok(Rules::Unconfigured);
    }
    let mut jwks = jwks_url;
    if let Some(url) = &jwks {
        match Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            _ => return Err(format!("THINK_AUTH_JWKS_URL {url:?} is not an http(s) URL")),
        }
    }
    if let Some(team) = &team {
        let domain = access_domain(team)?;
        if audience.is_none() {
            return Err("THINK_AUTH_ACCESS_TEAM needs THINK_AUTH_AUDIENCE, the Access \
                        application's AUD tag"
                .into());
        }
        jwks = jwks.or_else(|| Some(format!("https://{domain}/cdn-cgi/access/certs")));
        issuer = issuer.or_else(|| Some(format!("https://{domain}")));
    }
    let jwt = jwt_source.then(|| JwtSettings {
        jwks_url: jwks,
        secret: secret.map(String::into_bytes),
        claims: ClaimRules { issuer, audience },
        instance_claim: claim.unwrap_or_else(|| "sub".into()),
    });
    Ok(Rules::Closed { tokens, jwt })
}

/// Compares a presented token with a configured one in time that depends only on the
/// presented token's length, not on where (or whether) they differ.
pub fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    if expected.is_empty() {
        return false;
    }
    let mut diff = u8::from(presented.len() != expected.len());
    for (i, b) in presented.iter().enumerate() {
        diff |= b ^ expected[i % expected.len()];
    }
    diff == 0
}

/// Whether the URL's host is loopback (`localhost`, 127.0.0.0/8, `[::1]`).
pub fn is_loopback(url: &Url) -> bool {
    url.host().is_some_and(|h| classify_host(&h) == AddressClass::Loopback)
}

/// Removes every `token` query parameter from `url`; true when there was one.
pub fn strip_token(url: &mut Url) -> bool {
    if !url.query_pairs().any(|(k, _)| k == "token") {
        return false;
    }
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != "token")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    true
}

/// The credentials a request carries, in the order they are tried.
pub fn credentials(req: &AuthRequest) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |c: &str| {
        let c = c.trim();
        if !c.is_empty() && !out.iter().any(|o| o == c) {
            out.push(c.to_owned());
        }
    };
    if let Some(auth) = req.header("authorization") {
        if let Some((scheme, value)) = auth.trim().split_once(' ') {
            if scheme.eq_ignore_ascii_case("bearer") {
                add(value);
            }
        }
    }
    for (k, v) in req.url.query_pairs() {
        if k == "token" {
            add(&v);
        }
    }
    if let Some(assertion) = req.header("cf-access-jwt-assertion") {
        add(assertion);
    }
    out
}

/// The MCP OAuth callback: `GET /agents/<class>/<name>/callback?state=…`, which the object
/// checks by its `state` (32 random bytes only the authorization server was given).
fn is_oauth_callback(req: &AuthRequest) -> bool {
    req.method.eq_ignore_ascii_case("GET")
        && req.rest == "callback"
        && req.url.query_pairs().any(|(k, v)| k == "state" && !v.is_empty())
}

impl AccessControl {
    /// The rules the `THINK_AUTH_*` settings describe, read through `get` (the Worker's vars
    /// and secrets). Settings that cannot be read or contradict each other close the
    /// deploy with a message naming them.
    pub fn from_settings(get: impl Fn(&str) -> Option<String>) -> Self {
        let rules = read_rules(&get).unwrap_or_else(Rules::Misconfigured);
        Self { rules, authorize: None }
    }

    /// Adds the app's own check, asked first for every request: its [`Verdict`] allows,
    /// refuses (except the OAuth callback), or ([`Verdict::Continue`]) leaves it to the
    /// settings.
    pub fn authorize(
        mut self,
        hook: impl Fn(&AuthRequest) -> LocalBoxFuture<'static, Verdict> + 'static,
    ) -> Self {
        self.authorize = Some(Rc::new(hook));
        self
    }

    /// Decides about one request. A request that would be refused but is the MCP OAuth
    /// callback goes on as [`Decision::OAuthCallback`].
    ///
    /// Boxed here and never inlined, so the Workers glue (another crate) polls the one copy of
    /// the state machine compiled in this crate: an `async fn` body is compiled again in each
    /// crate that awaits it (34 KB of the wasm's gzip once the glue was a crate of its own).
    #[inline(never)]
    pub fn check<'a>(
        &'a self,
        req: &'a AuthRequest,
        deps: &'a AuthDeps<'_>,
    ) -> LocalBoxFuture<'a, Decision> {
        Box::pin(self.check_inner(req, deps))
    }

    /// The body of [`Self::check`].
    async fn check_inner(&self, req: &AuthRequest, deps: &AuthDeps<'_>) -> Decision {
        match self.decide(req, deps).await {
            Decision::Refuse(_) if is_oauth_callback(req) => Decision::OAuthCallback,
            decision => decision,
        }
    }

    async fn decide(&self, req: &AuthRequest, deps: &AuthDeps<'_>) -> Decision {
        if let Some(hook) = &self.authorize {
            match hook(req).await {
                Verdict::Allow => return Decision::Allow,
                Verdict::Unauthenticated(reason) => {
                    let presented = !credentials(req).is_empty();
                    return Decision::Refuse(Refusal::Unauthenticated { reason, presented });
                }
                Verdict::Forbidden(reason) => return Decision::Refuse(Refusal::Forbidden(reason)),
                Verdict::Continue => {}
            }
        }
        let (tokens, jwt) = match &self.rules {
            Rules::Open => return Decision::Allow,
            Rules::Misconfigured(m) => return Decision::Refuse(Refusal::Misconfigured(m.clone())),
            Rules::Unconfigured if is_loopback(&req.url) => return Decision::Allow,
            Rules::Unconfigured => return Decision::Refuse(Refusal::Unconfigured),
            Rules::Closed { tokens, jwt } => (tokens, jwt),
        };
        let presented = credentials(req);
        if presented.is_empty() {
            return Decision::Refuse(Refusal::Unauthenticated {
                reason: "no credential (send Authorization: Bearer <token>, or ?token= on a \
                         WebSocket)"
                    .into(),
                presented: false,
            });
        }
        let mut forbidden = None;
        let mut invalid = None;
        for credential in &presented {
            match self.judge(credential, tokens, jwt.as_ref(), &req.instance, deps).await {
                Outcome::Reaches => return Decision::Allow,
                Outcome::Elsewhere(r) => forbidden = forbidden.or(Some(r)),
                Outcome::Invalid(r) => invalid = invalid.or(Some(r)),
            }
        }
        match (forbidden, invalid) {
            (Some(reason), _) => Decision::Refuse(Refusal::Forbidden(reason)),
            (None, reason) => Decision::Refuse(Refusal::Unauthenticated {
                reason: reason.unwrap_or_default(),
                presented: true,
            }),
        }
    }

    async fn judge(
        &self,
        credential: &str,
        tokens: &[String],
        jwt: Option<&JwtSettings>,
        instance: &str,
        deps: &AuthDeps<'_>,
    ) -> Outcome {
        // Every configured token is compared, so the time does not tell which one matched.
        let matched = tokens
            .iter()
            .fold(false, |hit, t| constant_time_eq(credential.as_bytes(), t.as_bytes()) | hit);
        if matched {
            return Outcome::Reaches;
        }
        match jwt {
            Some(settings) if jwt::looks_like_jwt(credential) => {
                match validate_jwt(credential, settings, deps).await {
                    Ok(claims) => scope(&claims, &settings.instance_claim, instance),
                    Err(e) => Outcome::Invalid(e.to_string()),
                }
            }
            Some(_) if tokens.is_empty() => Outcome::Invalid("the credential is not a JWT".into()),
            _ => Outcome::Invalid("the token is not accepted".into()),
        }
    }
}

/// Whether a JWT's identity reaches `instance`.
fn scope(claims: &serde_json::Map<String, Value>, claim: &str, instance: &str) -> Outcome {
    let identity = match claims.get(claim) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            return Outcome::Elsewhere(format!("the JWT has no {claim:?} claim naming an instance"))
        }
    };
    if jwt::claim_reaches(&identity, instance) {
        Outcome::Reaches
    } else {
        Outcome::Elsewhere(format!(
            "this credential reaches only instances named by its {claim:?} claim"
        ))
    }
}

/// Parses, verifies and checks a JWT; its claims when it is valid.
async fn validate_jwt(
    token: &str,
    settings: &JwtSettings,
    deps: &AuthDeps<'_>,
) -> Result<serde_json::Map<String, Value>, JwtError> {
    let parsed = jwt::parse(token)?;
    match parsed.alg {
        jwt::Alg::Hs256 => {
            let secret = settings.secret.as_deref().ok_or(JwtError::AlgNotEnabled(parsed.alg))?;
            jwt::verify(&parsed, &VerifyKey::Secret(secret), deps.signatures).await?;
        }
        alg => {
            let url = settings.jwks_url.as_deref().ok_or(JwtError::AlgNotEnabled(alg))?;
            let kid = parsed.kid.as_deref().ok_or(JwtError::NoKid)?;
            let key = jwks::key_for(kid, url, deps.jwks, deps.http, deps.clock)
                .await
                .ok_or_else(|| JwtError::UnknownKid(kid.to_owned()))?;
            if !jwt::key_fits(alg, &key) {
                return Err(JwtError::AlgDoesNotFitKey { alg, kid: kid.to_owned() });
            }
            jwt::verify(&parsed, &VerifyKey::Public(&key), deps.signatures).await?;
        }
    }
    jwt::check_claims(&parsed.claims, &settings.claims, deps.clock.now_ms())?;
    Ok(parsed.claims)
}
