//! The OAuth flow of the MCP client against a fake authorization server and a fake MCP server
//! that asks for its tokens: discovery, registration, PKCE, the callback's state, refresh
//! before expiry and on a 401, and a new authorization when refreshing fails.

use super::oauth::{self, Pkce};
use super::store;
use super::*;
use crate::platform::{HttpClient, HttpRequest, RequestBody};
use crate::store::sqlite::SqliteSql;
use crate::store::Sql;
use crate::test_support::mcp::*;
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

const MCP: &str = "https://mcp.example/mcp";
const CALLBACK: &str = "https://agent.example/agents/think-agent/a/callback";
const PRM: &str = "https://mcp.example/.well-known/oauth-protected-resource/mcp";

/// The authorization server: what it issued and what it was asked.
#[derive(Default)]
struct FakeAs {
    /// code → (code_challenge, redirect_uri)
    codes: RefCell<HashMap<String, (String, String)>>,
    /// Every token request's form.
    grants: RefCell<Vec<HashMap<String, String>>>,
    registrations: RefCell<Vec<Value>>,
    refresh: RefCell<Option<String>>,
    expires_in: Cell<Option<u64>>,
    seq: Cell<u32>,
    /// Offers no registration endpoint.
    no_registration: Cell<bool>,
}

struct World {
    clock: Rc<ManualClock>,
    http: Rc<FakeHttp>,
    sql: Rc<SqliteSql>,
    server: Rc<FakeServer>,
    auth: Rc<FakeAs>,
}

fn form(req: &HttpRequest) -> HashMap<String, String> {
    let body = req.body.as_ref().map(RequestBody::to_vec).unwrap_or_default();
    url::form_urlencoded::parse(&body).into_owned().collect()
}

fn json_reply(status: u16, v: &Value) -> Reply {
    Reply::Now(response(status, &[("content-type", "application/json")], &v.to_string(), 64))
}

fn query(url: &str) -> HashMap<String, String> {
    url::Url::parse(url).unwrap().query_pairs().into_owned().collect()
}

impl World {
    fn new() -> World {
        let http = FakeHttp::new();
        let server = FakeServer::new("https://mcp.example", Mode::Streamable { sse: false });
        *server.bearer.borrow_mut() = Some("nobody-has-this".into());
        *server.challenge.borrow_mut() =
            Some(format!(r#"Bearer error="invalid_token", resource_metadata="{PRM}""#));
        let auth = Rc::new(FakeAs::default());
        http.route(PRM, |_| {
            json_reply(
                200,
                &json!({"resource": MCP, "authorization_servers": ["https://auth.example/"], "scopes_supported": ["mcp"]}),
            )
        });
        http.mount("https://mcp.example", &server);
        let a = auth.clone();
        http.route("https://auth.example/.well-known/oauth-authorization-server", move |_| {
            let mut meta = json!({
                    "issuer": "https://auth.example/",
                    "authorization_endpoint": "https://auth.example/authorize",
                    "token_endpoint": "https://auth.example/token",
                    "registration_endpoint": "https://auth.example/register",
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
            });
            if a.no_registration.get() {
                meta.as_object_mut().unwrap().remove("registration_endpoint");
            }
            json_reply(200, &meta)
        });
        let a = auth.clone();
        http.route("https://auth.example/register", move |req| {
            let body: Value = serde_json::from_slice(
                &req.body.as_ref().map(RequestBody::to_vec).unwrap_or_default(),
            )
            .unwrap();
            a.registrations.borrow_mut().push(body);
            json_reply(
                201,
                &json!({"client_id": format!("client-{}", a.registrations.borrow().len())}),
            )
        });
        let (a, s) = (auth.clone(), server.clone());
        http.route("https://auth.example/token", move |req| {
            let f = form(req);
            a.grants.borrow_mut().push(f.clone());
            let ok = match f.get("grant_type").map(String::as_str) {
                Some("authorization_code") => {
                    let issued = a.codes.borrow_mut().remove(f.get("code").map_or("", |c| c));
                    issued.is_some_and(|(challenge, redirect)| {
                        Pkce::challenge(f.get("code_verifier").map_or("", |v| v)) == challenge
                            && f.get("redirect_uri") == Some(&redirect)
                    })
                }
                Some("refresh_token") => {
                    a.refresh.borrow().is_some()
                        && f.get("refresh_token") == a.refresh.borrow().as_ref()
                }
                _ => false,
            };
            if !ok {
                return json_reply(400, &json!({"error": "invalid_grant"}));
            }
            a.seq.set(a.seq.get() + 1);
            let (at, rt) = (format!("at-{}", a.seq.get()), format!("rt-{}", a.seq.get()));
            *s.bearer.borrow_mut() = Some(at.clone());
            *a.refresh.borrow_mut() = Some(rt.clone());
            let mut v = json!({"access_token": at, "token_type": "Bearer", "refresh_token": rt});
            if let Some(e) = a.expires_in.get() {
                v["expires_in"] = json!(e);
            }
            json_reply(200, &v)
        });
        World { clock: ManualClock::new(), http, sql: Rc::new(SqliteSql::new()), server, auth }
    }

    fn client(&self) -> McpClient {
        let sql: Rc<dyn Sql> = self.sql.clone();
        let http: Rc<dyn HttpClient> = self.http.clone();
        McpClient::new(sql, http, self.clock.clone(), McpConfig::default()).unwrap()
    }

    fn run<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        run(&self.clock, f)
    }

    fn add(&self, client: &McpClient) -> AddedServer {
        let o = AddServerOptions {
            id: Some("srv".into()),
            callback_url: Some(CALLBACK.into()),
            ..Default::default()
        };
        self.run(client.add_mcp_server("Srv", MCP, o)).unwrap()
    }

    /// What the user's browser does: the authorization server approves and redirects back
    /// with a code bound to the URL's PKCE challenge.
    fn approve(&self, auth_url: &str) -> String {
        let q = query(auth_url);
        let code =
            format!("code-{}", self.auth.codes.borrow().len() + self.auth.grants.borrow().len());
        self.auth
            .codes
            .borrow_mut()
            .insert(code.clone(), (q["code_challenge"].clone(), q["redirect_uri"].clone()));
        format!("code={code}&state={}", q["state"])
    }

    fn record(&self) -> Option<oauth::AuthRecord> {
        store::load_auth(self.sql.as_ref()).unwrap().remove("srv")
    }

    fn grant_types(&self) -> Vec<String> {
        self.auth.grants.borrow().iter().map(|g| g["grant_type"].clone()).collect()
    }

    fn echo(&self, client: &McpClient) -> Result<Value, crate::tools::ToolError> {
        self.run(client.call_tool("srv", "echo", json!({"text": "hi"})))
    }
}

#[test]
fn a_401_leads_through_discovery_and_registration_to_a_pkce_authorization_url() {
    let w = World::new();
    let client = w.client();
    let added = w.add(&client);
    assert_eq!(added.state, ConnectionState::Authenticating);
    let auth_url = added.auth_url.clone().unwrap();
    assert!(auth_url.starts_with("https://auth.example/authorize?"), "{auth_url}");
    let q = query(&auth_url);
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "client-1");
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["code_challenge"].len(), 43);
    assert_eq!(q["redirect_uri"], CALLBACK);
    assert_eq!(q["resource"], MCP);
    assert_eq!(q["scope"], "mcp");
    assert!(q["state"].len() >= 43);
    let reg = &w.auth.registrations.borrow()[0];
    assert_eq!(reg["redirect_uris"], json!([CALLBACK]));
    assert_eq!(reg["token_endpoint_auth_method"], "none");

    let frame: Value = serde_json::from_str(&client.frame()).unwrap();
    let entry = &frame["mcp"]["servers"]["srv"];
    assert_eq!(entry["state"], "authenticating");
    assert_eq!(entry["auth_url"], json!(auth_url));
    let record = w.record().unwrap();
    assert!(!client.frame().contains(&record.pending.as_ref().unwrap().verifier));
    assert!(client.is_callback_path("/agents/think-agent/a/callback"));
    assert!(!client.is_callback_path("/agents/think-agent/b/callback"));

    // Adding it again while it waits keeps the same URL; a tool call is told to wait.
    assert_eq!(w.add(&client).auth_url.as_deref(), Some(auth_url.as_str()));
    let err = w.echo(&client).unwrap_err();
    assert!(err.to_string().contains("authorize"), "{err}");
    assert_eq!(w.auth.registrations.borrow().len(), 1);
}

#[test]
fn the_callback_needs_the_pending_state_once_and_then_the_server_is_ready() {
    let w = World::new();
    let client = w.client();
    let auth_url = w.add(&client).auth_url.unwrap();
    let before = w.record();

    let wrong = w.run(client.complete_authorization("code=forged&state=not-the-state"));
    assert_eq!(wrong, Err(McpError::OAuth(OAuthError::UnknownState)));
    let missing = w.run(client.complete_authorization("code=forged"));
    assert_eq!(missing, Err(McpError::OAuth(OAuthError::UnknownState)));
    assert_eq!(w.record(), before, "a wrong state stores nothing");
    assert!(w.auth.grants.borrow().is_empty(), "and exchanges nothing");
    assert_eq!(client.servers()[0].auth_url.as_deref(), Some(auth_url.as_str()));

    let callback = w.approve(&auth_url);
    assert_eq!(w.run(client.complete_authorization(&callback)), Ok("srv".to_owned()));
    let status = &client.servers()[0];
    assert_eq!(status.state, ConnectionState::Ready);
    assert_eq!(status.auth_url, None);
    let grant = &w.auth.grants.borrow()[0];
    assert_eq!(grant["resource"], MCP);
    assert_eq!(grant["client_id"], "client-1");
    assert_eq!(w.echo(&client).unwrap()["content"][0]["text"], "hi");

    // Replaying the same callback is refused and changes nothing.
    let stored = w.record();
    assert_eq!(
        w.run(client.complete_authorization(&callback)),
        Err(McpError::OAuth(OAuthError::UnknownState))
    );
    assert_eq!(w.record(), stored);
    assert_eq!(w.grant_types(), ["authorization_code"]);
    let tokens = stored.unwrap().tokens.unwrap();
    assert_eq!(tokens.access_token, "at-1");
    assert!(!client.frame().contains("at-1") && !client.frame().contains("rt-1"));
    assert_eq!(client.frame().matches("\"auth_url\":null").count(), 1);
}

#[test]
fn tokens_are_refreshed_before_expiry_and_after_a_401() {
    let w = World::new();
    w.auth.expires_in.set(Some(100));
    let client = w.client();
    let auth_url = w.add(&client).auth_url.unwrap();
    w.run(client.complete_authorization(&w.approve(&auth_url))).unwrap();
    w.echo(&client).unwrap();
    assert_eq!(w.grant_types(), ["authorization_code"]);

    // 100 s tokens are refreshed in their second half, before the request.
    w.clock.advance(60_000.0);
    let from = w.http.log.borrow().len();
    w.echo(&client).unwrap();
    assert_eq!(w.grant_types(), ["authorization_code", "refresh_token"]);
    let sent: Vec<Option<String>> = w.http.log.borrow()[from..]
        .iter()
        .filter(|r| r.url == MCP)
        .map(|r| header(r, "authorization").map(str::to_owned))
        .collect();
    assert_eq!(sent, [Some("Bearer at-2".to_owned())], "refreshed first: no request was refused");
    assert_eq!(w.record().unwrap().tokens.unwrap().access_token, "at-2");
    let last_call = w.http.requests("POST").into_iter().rev().find(|r| r.url == MCP).unwrap();
    assert_eq!(header(&last_call, "authorization"), Some("Bearer at-2"));

    // A revoked access token: the 401 is answered by a refresh and the call goes through.
    *w.server.bearer.borrow_mut() = Some("revoked-everything".into());
    assert_eq!(w.echo(&client).unwrap()["content"][0]["text"], "hi");
    assert_eq!(w.grant_types().len(), 3);
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);
}

#[test]
fn a_failed_refresh_goes_back_to_authenticating_with_a_new_url() {
    let w = World::new();
    let client = w.client();
    let first = w.add(&client).auth_url.unwrap();
    w.run(client.complete_authorization(&w.approve(&first))).unwrap();
    *w.server.bearer.borrow_mut() = Some("revoked".into());
    *w.auth.refresh.borrow_mut() = None;
    let err = w.echo(&client).unwrap_err();
    assert!(err.to_string().contains("authorize"), "{err}");
    let status = &client.servers()[0];
    assert_eq!(status.state, ConnectionState::Authenticating);
    let second = status.auth_url.clone().unwrap();
    assert_ne!(second, first);
    assert_eq!(query(&second)["client_id"], "client-1", "the registration is reused");
    assert_eq!(w.record().unwrap().tokens, None, "refused tokens are dropped");
    w.run(client.complete_authorization(&w.approve(&second))).unwrap();
    assert_eq!(w.echo(&client).unwrap()["content"][0]["text"], "hi");
}

#[test]
fn an_authorization_in_progress_survives_a_restart() {
    let w = World::new();
    let auth_url = w.add(&w.client()).auth_url.unwrap();
    let posts = w.http.requests("POST").len();
    let client = w.client();
    w.run(client.restore());
    assert_eq!(w.http.requests("POST").len(), posts, "a waiting server is not reconnected");
    let status = &client.servers()[0];
    assert_eq!(status.state, ConnectionState::Authenticating);
    assert_eq!(status.auth_url.as_deref(), Some(auth_url.as_str()));
    w.run(client.complete_authorization(&w.approve(&auth_url))).unwrap();
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);

    // And the tokens too: a later start connects with them, with no new authorization.
    let again = w.client();
    w.run(again.restore());
    assert_eq!(again.servers()[0].state, ConnectionState::Ready);
    assert_eq!(w.grant_types(), ["authorization_code"]);
}

#[test]
fn a_refused_authorization_offers_a_new_url() {
    let w = World::new();
    let client = w.client();
    let first = w.add(&client).auth_url.unwrap();
    let state = &query(&first)["state"];
    let refused =
        w.run(client.complete_authorization(&format!("error=access_denied&state={state}")));
    assert_eq!(refused, Err(McpError::OAuth(OAuthError::Denied("access_denied".into()))));
    let status = &client.servers()[0];
    assert_eq!(status.state, ConnectionState::Authenticating);
    assert_ne!(status.auth_url.as_deref(), Some(first.as_str()));
    assert!(status.error.as_deref().unwrap().contains("access_denied"));
}

#[test]
fn a_plain_401_without_oauth_metadata_fails_and_no_callback_says_so() {
    let w = World::new();
    let locked = FakeServer::new("https://locked.example", Mode::Streamable { sse: false });
    *locked.bearer.borrow_mut() = Some("secret".into());
    w.http.mount("https://locked.example", &locked);
    let client = w.client();
    let added = w
        .run(client.add_mcp_server("L", "https://locked.example/mcp", Default::default()))
        .unwrap();
    assert_eq!(added.state, ConnectionState::Failed);
    assert!(added.error.as_deref().unwrap().starts_with("HTTP 401: Unauthorized"), "{added:?}");

    let o = AddServerOptions { id: Some("srv".into()), ..Default::default() };
    let added = w.run(client.add_mcp_server("Srv", MCP, o)).unwrap();
    assert_eq!(added.state, ConnectionState::Failed);
    assert!(added.error.unwrap().contains("callback"));
}

#[test]
fn challenges_and_metadata_urls() {
    let c = oauth::parse_challenge(
        r#"Bearer realm="x", error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="read write""#,
    );
    assert_eq!(
        c.resource_metadata.as_deref(),
        Some("https://a.example/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!(c.scope.as_deref(), Some("read write"));
    assert_eq!(oauth::parse_challenge("Basic realm=x"), oauth::Challenge::default());
    let server = url::Url::parse("https://a.example/v1/mcp").unwrap();
    let urls: Vec<String> = oauth::resource_metadata_urls(&server, &oauth::Challenge::default())
        .iter()
        .map(|u| u.to_string())
        .collect();
    assert_eq!(
        urls,
        [
            "https://a.example/.well-known/oauth-protected-resource/v1/mcp",
            "https://a.example/.well-known/oauth-protected-resource"
        ]
    );
    let issuer = url::Url::parse("https://auth.example/tenant").unwrap();
    let urls: Vec<String> =
        oauth::auth_server_metadata_urls(&issuer).iter().map(|u| u.to_string()).collect();
    assert_eq!(
        urls,
        [
            "https://auth.example/.well-known/oauth-authorization-server/tenant",
            "https://auth.example/.well-known/openid-configuration/tenant",
            "https://auth.example/tenant/.well-known/openid-configuration"
        ]
    );
    let r = |s: &str| url::Url::parse(s).unwrap();
    assert!(oauth::resource_covers(&r("https://a.example/v1"), &server));
    assert!(oauth::resource_covers(&r("https://a.example/v1/mcp"), &server));
    assert!(!oauth::resource_covers(&r("https://a.example/v2"), &server));
    assert!(!oauth::resource_covers(&r("https://b.example/v1/mcp"), &server));
    assert!(!oauth::resource_covers(&r("https://a.example/v1/mc"), &server));
}

#[test]
fn pkce_s256_matches_rfc_7636_and_metadata_without_s256_is_refused() {
    // Computed with Python: urlsafe_b64encode(sha256(verifier).digest()).rstrip(b"=").
    assert_eq!(
        Pkce::challenge("dBjftJeZ4CVP-mJ92K3nqa2-Z8vgXa7-pRmKqNvmLps"),
        "cYmsEadOh1ETWe1nB3r6CAdlyyB90fHYQFfdCmJhg20"
    );
    let clock = ManualClock::new();
    let a = Pkce::new(clock.as_ref());
    assert_eq!(a.verifier.len(), 43);
    assert_ne!(a.verifier, Pkce::new(clock.as_ref()).verifier);
    let policy = crate::net::NetPolicy::default();
    let meta = json!({"issuer": "https://a/", "authorization_endpoint": "https://a/authorize", "token_endpoint": "https://a/token"});
    assert!(matches!(oauth::AuthServer::parse(&meta, &policy), Err(OAuthError::Unsupported(_))));
    let mut plain = meta.clone();
    plain["code_challenge_methods_supported"] = json!(["S256"]);
    plain["token_endpoint"] = json!("http://a.example/token");
    assert!(
        matches!(oauth::AuthServer::parse(&plain, &policy), Err(OAuthError::Unsupported(_))),
        "http off loopback"
    );
    plain["token_endpoint"] = json!("http://127.0.0.1:9/token");
    assert!(
        oauth::AuthServer::parse(&plain, &policy).is_ok(),
        "loopback http is for local development"
    );
    plain["token_endpoint"] = json!("https://10.0.0.1/token");
    assert!(oauth::AuthServer::parse(&plain, &policy).is_err(), "private addresses stay refused");
}

#[test]
fn refresh_is_due_in_the_last_minute_or_the_second_half_of_short_lives() {
    let t = |lifetime_s: f64, refresh: bool| {
        oauth::Tokens::from_response(
            &json!({"access_token": "a", "token_type": "bearer", "expires_in": lifetime_s, "refresh_token": if refresh { json!("r") } else { Value::Null }}),
            1_000.0,
            None,
        )
        .unwrap()
    };
    let long = t(3600.0, true);
    assert!(!long.refresh_due(1_000.0 + 3_539_000.0));
    assert!(long.refresh_due(1_000.0 + 3_541_000.0));
    let short = t(10.0, true);
    assert!(!short.refresh_due(1_000.0 + 4_000.0));
    assert!(short.refresh_due(1_000.0 + 5_000.0));
    assert!(!t(10.0, false).refresh_due(1e12), "nothing to refresh with");
    let kept =
        oauth::Tokens::from_response(&json!({"access_token": "b"}), 0.0, Some("old")).unwrap();
    assert_eq!(kept.refresh_token.as_deref(), Some("old"));
    assert!(oauth::Tokens::from_response(
        &json!({"access_token": "b", "token_type": "mac"}),
        0.0,
        None
    )
    .is_err());
}

#[test]
fn a_client_registered_by_hand_serves_servers_without_dynamic_registration() {
    let w = World::new();
    w.auth.no_registration.set(true);
    let client = w.client();
    let failed = w.add(&client);
    assert_eq!(failed.state, ConnectionState::Failed);
    assert!(failed.error.as_deref().unwrap().contains("clientId"), "{failed:?}");
    let o = AddServerOptions {
        id: Some("srv".into()),
        callback_url: Some(CALLBACK.into()),
        oauth_client: Some(("by-hand".into(), Some("s3cret".into()))),
        ..Default::default()
    };
    let added = w.run(client.add_mcp_server("Srv", MCP, o)).unwrap();
    let auth_url = added.auth_url.expect("authenticating");
    assert_eq!(query(&auth_url)["client_id"], "by-hand");
    assert_eq!(query(&auth_url)["redirect_uri"], CALLBACK);
    assert!(w.auth.registrations.borrow().is_empty());
    w.run(client.complete_authorization(&w.approve(&auth_url))).unwrap();
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);
    let grant = &w.auth.grants.borrow()[0];
    assert_eq!(
        (grant["client_id"].as_str(), grant["client_secret"].as_str()),
        ("by-hand", "s3cret")
    );
}
