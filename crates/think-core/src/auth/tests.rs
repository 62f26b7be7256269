//! The access rules on the host. HS256 signatures are real HMAC-SHA-256 (the `hmac` crate);
//! RS256/ES256 signatures are checked by WebCrypto in the Worker and by the integration tests
//! (tests/auth.test.mjs) with real keys, so here a stand-in scheme (SHA-256 of the key's public
//! material and the input) lets the rules around them (which key a `kid` picks, whether the
//! algorithm fits it, the JWKS cache) be tested without a crypto library.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use async_trait::async_trait;
use base64::Engine as _;
use hmac::Mac;
use serde_json::{json, Value};
use sha2::Digest;

use super::jwks::{Jwk, JwksSlot, JwksState, REFETCH_MS};
use super::jwt::{Alg, Signatures, VerifyKey};
use super::*;
use crate::platform::{HttpError, HttpRequest, HttpResponse};
use crate::test_support::ManualClock;

const SECRET: &str = "a-shared-hs256-secret-of-32-bytes";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The test's signature of `input` under `key` (see the module comment).
fn sign(key: &VerifyKey<'_>, input: &[u8]) -> Vec<u8> {
    match key {
        VerifyKey::Secret(secret) => {
            let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
            mac.update(input);
            mac.finalize().into_bytes().to_vec()
        }
        VerifyKey::Public(jwk) => {
            let material = jwk.n.clone().or_else(|| jwk.x.clone()).unwrap_or_default();
            sha2::Sha256::new().chain_update(material).chain_update(input).finalize().to_vec()
        }
    }
}

struct TestSignatures;

#[async_trait(?Send)]
impl Signatures for TestSignatures {
    async fn verify(
        &self,
        _alg: Alg,
        key: &VerifyKey<'_>,
        input: &[u8],
        signature: &[u8],
    ) -> Result<bool, String> {
        Ok(sign(key, input) == signature)
    }
}

/// A JWT with `header` and `claims`, signed with `key`.
fn token(header: Value, claims: &Value, key: &VerifyKey<'_>) -> String {
    let input =
        format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
    let sig = sign(key, input.as_bytes());
    format!("{input}.{}", b64(&sig))
}

fn hs256(claims: &Value) -> String {
    token(json!({"alg": "HS256", "typ": "JWT"}), claims, &VerifyKey::Secret(SECRET.as_bytes()))
}

fn rsa_key(kid: &str, n: &str) -> Jwk {
    Jwk {
        kty: "RSA".into(),
        kid: Some(kid.into()),
        alg: None,
        use_: None,
        n: Some(n.into()),
        e: Some("AQAB".into()),
        crv: None,
        x: None,
        y: None,
    }
}

fn ec_key(kid: &str, x: &str) -> Jwk {
    Jwk {
        kty: "EC".into(),
        kid: Some(kid.into()),
        crv: Some("P-256".into()),
        x: Some(x.into()),
        y: Some("yy".into()),
        alg: None,
        use_: None,
        n: None,
        e: None,
    }
}

fn signed_with(alg: &str, kid: &str, key: &Jwk, claims: &Value) -> String {
    token(json!({"alg": alg, "kid": kid}), claims, &VerifyKey::Public(key))
}

/// A JWKS server stand-in: serves `keys` (or fails to connect) and counts its hits.
#[derive(Default)]
struct JwksServer {
    keys: RefCell<Option<Vec<Jwk>>>,
    hits: Cell<u32>,
}

#[async_trait(?Send)]
impl HttpClient for JwksServer {
    async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        assert_eq!(req.url, JWKS_URL);
        self.hits.set(self.hits.get() + 1);
        let Some(keys) = self.keys.borrow().clone() else {
            return Err(HttpError::Connect("connection refused".into()));
        };
        let body = json!({ "keys": keys }).to_string().into_bytes();
        Ok(HttpResponse {
            status: 200,
            headers: Vec::new(),
            body: Box::pin(futures::stream::iter([Ok(body)])),
        })
    }
}

#[derive(Default)]
struct Slot(RefCell<Option<JwksState>>);

impl JwksSlot for Slot {
    fn load(&self) -> Option<JwksState> {
        self.0.borrow().clone()
    }
    fn save(&self, state: &JwksState) {
        *self.0.borrow_mut() = Some(state.clone());
    }
}

const JWKS_URL: &str = "http://127.0.0.1:9/jwks.json";

struct World {
    clock: Rc<ManualClock>,
    server: JwksServer,
    slot: Slot,
}

impl World {
    fn new() -> Self {
        Self { clock: ManualClock::new(), server: JwksServer::default(), slot: Slot::default() }
    }

    fn serve(&self, keys: Vec<Jwk>) {
        *self.server.keys.borrow_mut() = Some(keys);
    }

    fn check(&self, access: &AccessControl, req: &AuthRequest) -> Decision {
        let deps = AuthDeps {
            http: &self.server,
            clock: self.clock.as_ref(),
            signatures: &TestSignatures,
            jwks: &self.slot,
        };
        futures::executor::block_on(access.check(req, &deps))
    }

    /// The decision for `GET <host>/agents/think-agent/<instance>/get-messages` with
    /// `Authorization: Bearer <credential>`.
    fn bearer(&self, access: &AccessControl, instance: &str, credential: &str) -> Decision {
        let req = request("127.0.0.1:8787", instance, "get-messages", "")
            .with_header("authorization", &format!("Bearer {credential}"));
        self.check(access, &req)
    }

    fn now_s(&self) -> f64 {
        self.clock.now() / 1000.0
    }
}

fn request(host: &str, instance: &str, rest: &str, query: &str) -> AuthRequest {
    let url = format!("http://{host}/agents/think-agent/{instance}/{rest}{query}");
    AuthRequest {
        method: "GET".into(),
        url: Url::parse(&url).unwrap(),
        headers: Vec::new(),
        namespace: "think-agent".into(),
        instance: instance.into(),
        rest: rest.into(),
    }
}

impl AuthRequest {
    fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

fn access(settings: &[(&str, &str)]) -> AccessControl {
    let map: BTreeMap<String, String> =
        settings.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    AccessControl::from_settings(move |k| map.get(k).cloned())
}

fn unauthenticated(d: &Decision) -> &str {
    match d {
        Decision::Refuse(Refusal::Unauthenticated { reason, .. }) => reason,
        other => panic!("expected a 401, got {other:?}"),
    }
}

fn jwt_access() -> AccessControl {
    access(&[("THINK_AUTH_JWT_SECRET", SECRET), ("THINK_AUTH_JWKS_URL", JWKS_URL)])
}

#[test]
fn an_unconfigured_deploy_serves_loopback_only_and_names_the_settings() {
    let w = World::new();
    let open = access(&[]);
    for host in ["127.0.0.1:8787", "localhost:8787", "[::1]:8787", "127.9.9.9"] {
        assert_eq!(
            w.check(&open, &request(host, "a", "get-messages", "")),
            Decision::Allow,
            "{host}"
        );
    }
    let refused = w.check(&open, &request("think-rs.example.workers.dev", "a", "get-messages", ""));
    let Decision::Refuse(r) = refused else { panic!("refused expected") };
    assert_eq!((r.status(), r.www_authenticate()), (401, Some("Bearer realm=\"think-rs\"")));
    for name in [
        "THINK_AUTH_TOKENS",
        "THINK_AUTH_JWKS_URL",
        "THINK_AUTH_JWT_SECRET",
        "THINK_AUTH_ACCESS_TEAM",
        "THINK_AUTH=none",
    ] {
        assert!(r.body().contains(name), "{name} in {}", r.body());
    }
    // A configured deploy refuses loopback without a credential too.
    let closed = access(&[("THINK_AUTH_TOKENS", "t")]);
    assert!(matches!(
        w.check(&closed, &request("127.0.0.1", "a", "", "")),
        Decision::Refuse(Refusal::Unauthenticated { presented: false, .. })
    ));
}

#[test]
fn none_opens_on_purpose_and_contradictions_close() {
    let w = World::new();
    let far = request("agent.example.com", "a", "get-messages", "");
    assert_eq!(w.check(&access(&[("THINK_AUTH", "none")]), &far), Decision::Allow);
    for settings in [
        &[("THINK_AUTH", "none"), ("THINK_AUTH_TOKENS", "t")][..],
        &[("THINK_AUTH", "off")][..],
        &[("THINK_AUTH_ACCESS_TEAM", "acme")][..],
        &[("THINK_AUTH_TOKENS", "t"), ("THINK_AUTH_AUDIENCE", "x")][..],
        &[("THINK_AUTH_JWKS_URL", "file:///etc/keys")][..],
        &[("THINK_AUTH_ACCESS_TEAM", "ac/me"), ("THINK_AUTH_AUDIENCE", "aud")][..],
    ] {
        let d = w.check(&access(settings), &far);
        let Decision::Refuse(r @ Refusal::Misconfigured(_)) = &d else {
            panic!("{settings:?}: {d:?}")
        };
        assert_eq!(r.status(), 500);
        assert!(r.body().contains("THINK_AUTH"), "{}", r.body());
    }
}

#[test]
fn the_access_team_names_its_certs_issuer_and_requires_the_audience() {
    let rules = read_rules(&|k: &str| match k {
        "THINK_AUTH_ACCESS_TEAM" => Some("Acme".into()),
        "THINK_AUTH_AUDIENCE" => Some("aud-tag".into()),
        _ => None,
    })
    .unwrap();
    let Rules::Closed { jwt: Some(jwt), tokens } = rules else { panic!("{rules:?}") };
    assert!(tokens.is_empty());
    assert_eq!(
        jwt.jwks_url.as_deref(),
        Some("https://acme.cloudflareaccess.com/cdn-cgi/access/certs")
    );
    assert_eq!(jwt.claims.issuer.as_deref(), Some("https://acme.cloudflareaccess.com"));
    assert_eq!(jwt.claims.audience.as_deref(), Some("aud-tag"));
    assert_eq!(jwt.secret, None, "no HS256 unless the secret is set");
    // THINK_AUTH_JWKS_URL replaces the certs URL (the integration tests' local stand-in).
    let rules = read_rules(&|k: &str| match k {
        "THINK_AUTH_ACCESS_TEAM" => Some("acme.cloudflareaccess.com".into()),
        "THINK_AUTH_AUDIENCE" => Some("aud-tag".into()),
        "THINK_AUTH_JWKS_URL" => Some(JWKS_URL.into()),
        _ => None,
    })
    .unwrap();
    let Rules::Closed { jwt: Some(jwt), .. } = rules else { panic!() };
    assert_eq!(jwt.jwks_url.as_deref(), Some(JWKS_URL));
    assert_eq!(jwt.claims.issuer.as_deref(), Some("https://acme.cloudflareaccess.com"));
}

#[test]
fn shared_tokens_reach_every_instance_from_each_place_they_travel() {
    let w = World::new();
    let a = access(&[("THINK_AUTH_TOKENS", " first , second ")]);
    for instance in ["alice", "bob:x"] {
        assert_eq!(w.bearer(&a, instance, "first"), Decision::Allow);
        assert_eq!(w.bearer(&a, instance, "second"), Decision::Allow);
    }
    let query = request("agent.example.com", "bob", "", "?_pk=abc&token=second");
    assert_eq!(w.check(&a, &query), Decision::Allow);
    let header =
        request("agent.example.com", "bob", "", "").with_header("Cf-Access-Jwt-Assertion", "first");
    assert_eq!(w.check(&a, &header), Decision::Allow);
    // A wrong one, one that is a prefix, and one with the right prefix are all refused.
    for wrong in ["firs", "first2", "third", "first,second"] {
        let d = w.bearer(&a, "alice", wrong);
        assert_eq!(unauthenticated(&d), "the token is not accepted");
        let Decision::Refuse(r) = d else { unreachable!() };
        assert_eq!(
            r.www_authenticate(),
            Some("Bearer realm=\"think-rs\", error=\"invalid_token\"")
        );
    }
    // A wrong credential beside a right one does not spoil it.
    let both = request("h", "a", "", "?token=nope").with_header("authorization", "Bearer first");
    assert_eq!(w.check(&a, &both), Decision::Allow);
    assert!(constant_time_eq(b"abc", b"abc"));
    assert!(
        !constant_time_eq(b"", b"abc")
            && !constant_time_eq(b"abc", b"")
            && !constant_time_eq(b"abcabc", b"abc")
    );
}

#[test]
fn the_token_parameter_is_stripped_and_nothing_else() {
    let mut url =
        Url::parse("https://h/agents/think-agent/a?_pk=x&token=secret&token=again&b=1%202")
            .unwrap();
    assert!(strip_token(&mut url));
    assert_eq!(url.as_str(), "https://h/agents/think-agent/a?_pk=x&b=1+2");
    let mut url = Url::parse("https://h/agents/think-agent/a/get-messages?token=s").unwrap();
    assert!(strip_token(&mut url));
    assert_eq!(url.as_str(), "https://h/agents/think-agent/a/get-messages");
    let mut url = Url::parse("https://h/a?tokens=1").unwrap();
    assert!(!strip_token(&mut url));
    assert_eq!(url.as_str(), "https://h/a?tokens=1");
}

#[test]
fn a_jwt_reaches_the_instance_its_claim_names_and_those_under_it() {
    let w = World::new();
    let a = jwt_access();
    let t = hs256(&json!({"sub": "alice", "exp": w.now_s() + 600.0}));
    assert_eq!(w.bearer(&a, "alice", &t), Decision::Allow);
    assert_eq!(w.bearer(&a, "alice:project-1", &t), Decision::Allow);
    for other in ["alice2", "bob", "alic", "xalice", "alice-1"] {
        let d = w.bearer(&a, other, &t);
        assert!(
            matches!(&d, Decision::Refuse(r @ Refusal::Forbidden(_)) if r.status() == 403),
            "{other}: {d:?}"
        );
    }
    // Another claim names the instance when configured.
    let by_email =
        access(&[("THINK_AUTH_JWT_SECRET", SECRET), ("THINK_AUTH_INSTANCE_CLAIM", "email")]);
    let t = hs256(&json!({"sub": "u1", "email": "a@example.com", "exp": w.now_s() + 60.0}));
    assert_eq!(w.bearer(&by_email, "a@example.com:notes", &t), Decision::Allow);
    assert!(matches!(w.bearer(&by_email, "u1", &t), Decision::Refuse(Refusal::Forbidden(_))));
    let no_claim = hs256(&json!({"exp": w.now_s() + 60.0}));
    assert!(matches!(w.bearer(&a, "alice", &no_claim), Decision::Refuse(Refusal::Forbidden(_))));
}

#[test]
fn validity_needs_exp_and_honours_nbf_with_a_minute_of_leeway() {
    let w = World::new();
    let a = jwt_access();
    let now = w.now_s();
    let at = |claims: Value| w.bearer(&a, "alice", &hs256(&claims));
    assert_eq!(at(json!({"sub": "alice", "exp": now - 59.0})), Decision::Allow);
    assert_eq!(
        unauthenticated(&at(json!({"sub": "alice", "exp": now - 61.0}))),
        "the JWT has expired"
    );
    assert_eq!(unauthenticated(&at(json!({"sub": "alice"}))), "the JWT has no expiry (exp)");
    assert_eq!(
        unauthenticated(&at(json!({"sub": "alice", "exp": "soon"}))),
        "the JWT has no expiry (exp)"
    );
    assert_eq!(at(json!({"sub": "alice", "exp": now + 600.0, "nbf": now + 59.0})), Decision::Allow);
    assert_eq!(
        unauthenticated(&at(json!({"sub": "alice", "exp": now + 600.0, "nbf": now + 61.0}))),
        "the JWT is not valid yet (nbf)"
    );
}

#[test]
fn issuer_and_audience_are_checked_when_set() {
    let w = World::new();
    let a = access(&[
        ("THINK_AUTH_JWT_SECRET", SECRET),
        ("THINK_AUTH_ISSUER", "https://issuer.example"),
        ("THINK_AUTH_AUDIENCE", "think"),
    ]);
    let exp = w.now_s() + 60.0;
    let at = |claims: Value| w.bearer(&a, "alice", &hs256(&claims));
    let good = json!({"sub": "alice", "exp": exp, "iss": "https://issuer.example", "aud": "think"});
    assert_eq!(at(good.clone()), Decision::Allow);
    let mut listed = good.clone();
    listed["aud"] = json!(["other", "think"]);
    assert_eq!(at(listed), Decision::Allow);
    let mut wrong_aud = good.clone();
    wrong_aud["aud"] = json!(["other"]);
    assert_eq!(unauthenticated(&at(wrong_aud)), "the JWT's audience is not accepted");
    let mut no_aud = good.clone();
    no_aud.as_object_mut().unwrap().remove("aud");
    assert_eq!(unauthenticated(&at(no_aud)), "the JWT's audience is not accepted");
    let mut wrong_iss = good;
    wrong_iss["iss"] = json!("https://evil.example");
    assert_eq!(unauthenticated(&at(wrong_iss)), "the JWT's issuer is not accepted");
}

#[test]
fn forged_and_unfit_tokens_are_refused() {
    let w = World::new();
    let rsa = rsa_key("r1", "rsa-modulus-1");
    w.serve(vec![rsa.clone()]);
    let claims = json!({"sub": "alice", "exp": w.now_s() + 60.0});
    let a = jwt_access();
    // alg none, with or without a signature.
    let body = format!("{}.{}", b64(br#"{"alg":"none"}"#), b64(claims.to_string().as_bytes()));
    for t in [format!("{body}."), format!("{body}.{}", b64(b"x"))] {
        assert_eq!(
            unauthenticated(&w.bearer(&a, "alice", &t)),
            "JWT algorithm \"none\" is refused"
        );
    }
    // HS256 "signed" with the RSA public key: only the configured secret is an HS256 key.
    let confused = token(
        json!({"alg": "HS256", "kid": "r1"}),
        &claims,
        &VerifyKey::Secret(rsa.n.as_deref().unwrap().as_bytes()),
    );
    assert_eq!(
        unauthenticated(&w.bearer(&a, "alice", &confused)),
        "the JWT's signature does not verify"
    );
    let no_secret = access(&[("THINK_AUTH_JWKS_URL", JWKS_URL)]);
    assert_eq!(
        unauthenticated(&w.bearer(&no_secret, "alice", &confused)),
        "HS256 JWTs are not accepted (THINK_AUTH_JWT_SECRET is not set)"
    );
    // A payload changed after signing.
    let good = hs256(&claims);
    let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
    parts[1] = b64(json!({"sub": "bob", "exp": w.now_s() + 60.0}).to_string().as_bytes());
    assert_eq!(
        unauthenticated(&w.bearer(&a, "bob", &parts.join("."))),
        "the JWT's signature does not verify"
    );
    // Another key under a known kid.
    let impostor = rsa_key("r1", "someone-elses-modulus");
    let t = signed_with("RS256", "r1", &impostor, &claims);
    assert_eq!(unauthenticated(&w.bearer(&a, "alice", &t)), "the JWT's signature does not verify");
    // The right key, but an algorithm of another type.
    let t = signed_with("ES256", "r1", &rsa, &claims);
    assert_eq!(
        unauthenticated(&w.bearer(&a, "alice", &t)),
        "the JWT's algorithm ES256 does not fit key \"r1\""
    );
    // A key whose JWKS entry names another algorithm or use.
    let mut for_ps = rsa_key("r2", "m2");
    for_ps.alg = Some("PS256".into());
    let mut for_enc = rsa_key("r3", "m3");
    for_enc.use_ = Some("enc".into());
    w.serve(vec![rsa.clone(), for_ps.clone(), for_enc.clone()]);
    w.clock.advance(REFETCH_MS);
    for key in [&for_ps, &for_enc] {
        let kid = key.kid.clone().unwrap();
        let t = signed_with("RS256", &kid, key, &claims);
        assert!(unauthenticated(&w.bearer(&a, "alice", &t)).contains("does not fit"));
    }
    // Algorithms outside the three, no kid, and garbage.
    let t = token(json!({"alg": "RS512", "kid": "r1"}), &claims, &VerifyKey::Public(&rsa));
    assert!(unauthenticated(&w.bearer(&a, "alice", &t)).contains("RS512"));
    let t = token(json!({"alg": "RS256"}), &claims, &VerifyKey::Public(&rsa));
    assert_eq!(unauthenticated(&w.bearer(&a, "alice", &t)), "the JWT names no key (kid)");
    let t = token(
        json!({"alg": "HS256", "crit": ["b64"]}),
        &claims,
        &VerifyKey::Secret(SECRET.as_bytes()),
    );
    assert_eq!(
        unauthenticated(&w.bearer(&a, "alice", &t)),
        "the JWT has critical header parameters"
    );
    assert!(unauthenticated(&w.bearer(&a, "alice", "a.b.c")).starts_with("malformed JWT"));
    assert_eq!(unauthenticated(&w.bearer(&a, "alice", "plain")), "the credential is not a JWT");
}

#[test]
fn jwks_keys_are_cached_refetched_for_new_kids_once_a_minute_and_kept_when_unreachable() {
    let w = World::new();
    let a = jwt_access();
    let r1 = rsa_key("r1", "m1");
    let e1 = ec_key("e1", "x1");
    w.serve(vec![r1.clone(), e1.clone()]);
    let claims = json!({"sub": "alice", "exp": w.now_s() + 86_400.0});
    let t1 = signed_with("RS256", "r1", &r1, &claims);
    let te = signed_with("ES256", "e1", &e1, &claims);
    for _ in 0..3 {
        assert_eq!(w.bearer(&a, "alice", &t1), Decision::Allow);
        assert_eq!(w.bearer(&a, "alice", &te), Decision::Allow);
    }
    assert_eq!(w.server.hits.get(), 1, "one fetch serves every later request");

    // Rotation: a key added after the first fetch is found by one refetch, at once...
    let r2 = rsa_key("r2", "m2");
    w.serve(vec![r1.clone(), e1.clone(), r2.clone()]);
    let t2 = signed_with("RS256", "r2", &r2, &claims);
    w.clock.advance(1000.0);
    assert_eq!(w.bearer(&a, "alice", &t2), Decision::Allow);
    assert_eq!(w.server.hits.get(), 2);

    // ...after which unknown kids fetch nothing for a minute,
    let t3 = signed_with("RS256", "r3", &rsa_key("r3", "m3"), &claims);
    for _ in 0..5 {
        w.clock.advance(1000.0);
        assert!(unauthenticated(&w.bearer(&a, "alice", &t3)).contains("\"r3\" is not in the JWKS"));
    }
    assert_eq!(w.server.hits.get(), 2, "no refetch within the minute");
    // then one refetch, and again a minute of none.
    w.clock.advance(REFETCH_MS);
    assert!(matches!(w.bearer(&a, "alice", &t3), Decision::Refuse(_)));
    assert_eq!(w.server.hits.get(), 3);
    w.clock.advance(REFETCH_MS - 1.0);
    assert!(matches!(w.bearer(&a, "alice", &t3), Decision::Refuse(_)));
    assert_eq!(w.server.hits.get(), 3);
    w.clock.advance(1.0);
    assert!(matches!(w.bearer(&a, "alice", &t3), Decision::Refuse(_)));
    assert_eq!(w.server.hits.get(), 4);

    // An unreachable JWKS leaves the cached keys in service, even when they are stale, and
    // is not asked again for a minute.
    *w.server.keys.borrow_mut() = None;
    w.clock.advance(jwks::MAX_AGE_MS);
    assert_eq!(w.bearer(&a, "alice", &t1), Decision::Allow);
    assert_eq!(w.server.hits.get(), 5, "the stale cache tried a refetch");
    assert_eq!(w.bearer(&a, "alice", &t2), Decision::Allow);
    assert!(matches!(w.bearer(&a, "alice", &t3), Decision::Refuse(_)));
    assert_eq!(w.server.hits.get(), 5);

    // A key removed from the JWKS stops working once the cache is refreshed.
    w.serve(vec![r2.clone()]);
    w.clock.advance(jwks::MAX_AGE_MS);
    assert_eq!(w.bearer(&a, "alice", &t2), Decision::Allow);
    assert!(unauthenticated(&w.bearer(&a, "alice", &t1)).contains("not in the JWKS"));
    assert_eq!(w.slot.load().unwrap().keys, vec![r2]);
}

#[test]
fn the_oauth_callback_alone_passes_unauthenticated() {
    let w = World::new();
    let a = access(&[("THINK_AUTH_TOKENS", "t")]);
    let cb = request("agent.example.com", "alice", "callback", "?code=c&state=s");
    assert_eq!(w.check(&a, &cb), Decision::OAuthCallback);
    // With a credential, or where everything passes, it goes on as any request.
    assert_eq!(w.check(&a, &cb.clone().with_header("authorization", "Bearer t")), Decision::Allow);
    let local = request("127.0.0.1:8787", "alice", "callback", "?code=c&state=s");
    assert_eq!(w.check(&access(&[]), &local), Decision::Allow);
    for (method, rest, query) in [
        ("POST", "callback", "?state=s"),
        ("GET", "callback", ""),
        ("GET", "callback", "?state="),
        ("GET", "callback/x", "?state=s"),
        ("GET", "get-messages", "?state=s"),
    ] {
        let mut req = request("agent.example.com", "alice", rest, query);
        req.method = method.into();
        assert!(matches!(w.check(&a, &req), Decision::Refuse(_)), "{method} {rest}{query}");
    }
}

#[test]
fn the_authorize_hook_decides_first_and_may_defer() {
    let w = World::new();
    let a = access(&[("THINK_AUTH_TOKENS", "t")]).authorize(|req| {
        let verdict = match req.header("x-app-session") {
            Some("admin") => Verdict::Allow,
            Some("guest") if req.instance != "public" => {
                Verdict::Forbidden("guests read public only".into())
            }
            Some("expired") => Verdict::Unauthenticated("session expired".into()),
            _ => Verdict::Continue,
        };
        Box::pin(async move { verdict })
    });
    let with = |session: &str, instance: &str| {
        w.check(
            &a,
            &request("agent.example.com", instance, "", "").with_header("x-app-session", session),
        )
    };
    assert_eq!(with("admin", "alice"), Decision::Allow);
    assert_eq!(
        with("guest", "alice"),
        Decision::Refuse(Refusal::Forbidden("guests read public only".into()))
    );
    assert_eq!(unauthenticated(&with("expired", "alice")), "session expired");
    // Deferred: the settings decide.
    assert!(matches!(with("guest", "public"), Decision::Refuse(Refusal::Unauthenticated { .. })));
    assert_eq!(w.bearer(&a, "alice", "t"), Decision::Allow);
}

#[test]
fn a_jwks_down_at_first_use_is_retried_once_a_minute() {
    let w = World::new();
    let a = jwt_access();
    let r1 = rsa_key("r1", "m1");
    let t1 = signed_with("RS256", "r1", &r1, &json!({"sub": "alice", "exp": w.now_s() + 600.0}));
    for _ in 0..3 {
        assert!(unauthenticated(&w.bearer(&a, "alice", &t1)).contains("not in the JWKS"));
    }
    assert_eq!(w.server.hits.get(), 1);
    w.serve(vec![r1]);
    w.clock.advance(REFETCH_MS);
    assert_eq!(w.bearer(&a, "alice", &t1), Decision::Allow);
    assert_eq!(w.server.hits.get(), 2);
}
