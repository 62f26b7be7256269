//! Behaviour of the MCP client against fake servers of both transports.

use super::*;
use crate::platform::{Clock, HttpClient};
use crate::store::sqlite::SqliteSql;
use crate::store::Sql;
use crate::test_support::mcp::*;
use crate::tools::{ModelOutput, ToolContext, ToolError, ToolRef};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;

struct Env {
    clock: Rc<ManualClock>,
    http: Rc<FakeHttp>,
    sql: Rc<SqliteSql>,
}

impl Env {
    fn new() -> Env {
        Env { clock: ManualClock::new(), http: FakeHttp::new(), sql: Rc::new(SqliteSql::new()) }
    }

    fn client(&self) -> McpClient {
        self.client_with(McpConfig::default())
    }

    fn client_with(&self, config: McpConfig) -> McpClient {
        let sql: Rc<dyn Sql> = self.sql.clone();
        let http: Rc<dyn HttpClient> = self.http.clone();
        McpClient::new(sql, http, self.clock.clone(), config).unwrap()
    }

    fn server(&self, origin: &str, mode: Mode) -> Rc<FakeServer> {
        let s = FakeServer::new(origin, mode);
        self.http.mount(origin, &s);
        s
    }

    fn run<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        run(&self.clock, f)
    }
}

fn opts(id: &str) -> AddServerOptions {
    AddServerOptions { id: Some(id.into()), ..Default::default() }
}

fn find(tools: &[ToolRef], name: &str) -> ToolRef {
    tools
        .iter()
        .find(|t| t.definition().name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no tool {name}"))
}

fn names(tools: &[ToolRef]) -> Vec<String> {
    tools.iter().map(|t| t.definition().name.clone()).collect()
}

fn call(env: &Env, tool: &ToolRef, input: Value) -> Result<Value, ToolError> {
    env.run(tool.execute(input, &ToolContext::default()))
}

#[test]
fn connects_discovers_and_calls_over_streamable_http_json() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    let added =
        env.run(client.add_mcp_server("Alpha", "https://a.example/mcp", opts("alpha"))).unwrap();
    assert_eq!(
        added,
        AddedServer {
            id: "alpha".into(),
            state: ConnectionState::Ready,
            error: None,
            auth_url: None
        }
    );

    // initialize, then the initialized notification, then listings.
    let methods = server.methods();
    assert_eq!(&methods[..2], &["initialize", "notifications/initialized"]);
    let init = server.received.borrow()[0].clone();
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["params"]["clientInfo"]["name"], "think-rs");
    assert_eq!(init["params"]["capabilities"], json!({}));

    // The session id is absent on initialize and sent on everything after it, with the
    // negotiated protocol version (the fake answers 400 otherwise).
    let posts = env.http.requests("POST");
    assert_eq!(header(&posts[0], "mcp-session-id"), None);
    assert_eq!(header(&posts[0], "accept"), Some("application/json, text/event-stream"));
    assert_eq!(header(&posts[0], "content-type"), Some("application/json"));
    for p in &posts[1..] {
        assert_eq!(header(p, "mcp-session-id"), Some("sess-1"));
        assert_eq!(header(p, "mcp-protocol-version"), Some("2025-11-25"));
    }

    let tools = client.tools();
    assert_eq!(
        names(&tools),
        [
            "tool_alpha_echo",
            "tool_alpha_weather",
            "tool_alpha_fail",
            "tool_alpha_slow",
            "tool_alpha_mutate"
        ]
    );
    let echo = find(&tools, "tool_alpha_echo");
    assert_eq!(echo.definition().description, "Echo text back.");
    assert_eq!(echo.definition().input_schema["required"], json!(["text"]));
    let out = call(&env, &echo, json!({"text": "hi"})).unwrap();
    assert_eq!(out, json!({"content": [{"type": "text", "text": "hi"}]}));
    assert_eq!(echo.model_output(&out), ModelOutput::Text("hi".into()));
    let call_msg = server
        .received
        .borrow()
        .iter()
        .rev()
        .find(|m| m["method"] == "tools/call")
        .cloned()
        .unwrap();
    assert_eq!(call_msg["params"], json!({"name": "echo", "arguments": {"text": "hi"}}));
}

#[test]
fn negotiates_an_older_version_and_refuses_an_unknown_one() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    *server.version.borrow_mut() = Some("2025-06-18".into());
    let client = env.client();
    let added = env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    assert_eq!(added.state, ConnectionState::Ready);
    assert_eq!(client.servers()[0].protocol_version.as_deref(), Some("2025-06-18"));
    let last = env.http.requests("POST").pop().unwrap();
    assert_eq!(header(&last, "mcp-protocol-version"), Some("2025-06-18"));

    let odd = env.server("https://b.example", Mode::Streamable { sse: false });
    *odd.version.borrow_mut() = Some("1999-01-01".into());
    let added = env.run(client.add_mcp_server("B", "https://b.example/mcp", opts("b"))).unwrap();
    assert_eq!(added.state, ConnectionState::Failed);
    assert!(added.error.unwrap().contains("\"1999-01-01\""));
    // The unusable session is released.
    assert_eq!(env.http.requests("DELETE").len(), 1);
}

#[test]
fn paginated_tool_lists_are_followed() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    server.page_size.set(2);
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    assert_eq!(client.tools().len(), 5);
    let cursors: Vec<Value> = server
        .received
        .borrow()
        .iter()
        .filter(|m| m["method"] == "tools/list")
        .map(|m| m["params"]["cursor"].clone())
        .collect();
    assert_eq!(cursors, vec![Value::Null, json!("2"), json!("4")]);
}

#[test]
fn structured_content_and_output_schema_reach_the_model() {
    let env = Env::new();
    env.server("https://a.example", Mode::Streamable { sse: true });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    let weather = find(&client.tools(), "tool_a_weather");
    assert_eq!(
        weather.definition().output_schema.as_ref().unwrap()["properties"]["temp"]["type"],
        "number"
    );
    let out = call(&env, &weather, json!({"city": "Oslo"})).unwrap();
    assert_eq!(weather.model_output(&out), ModelOutput::Json(json!({"temp": 21})));
}

#[test]
fn is_error_results_become_tool_errors_and_unknown_tools_rpc_errors() {
    let env = Env::new();
    env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    let fail = find(&client.tools(), "tool_a_fail");
    assert_eq!(call(&env, &fail, json!({})), Err(ToolError::Failed("it broke".into())));
    let err = env.run(client.call_tool("a", "nope", json!({}))).unwrap_err();
    assert_eq!(err.to_string(), "MCP tool \"nope\" on server \"A\" failed: Unknown tool: nope");
    // A tool error is not a server failure.
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);
}

#[test]
fn server_pings_and_chatter_inside_sse_responses_are_handled() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    server.chatter.set(true);
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    let echo = find(&client.tools(), "tool_a_echo");
    assert_eq!(call(&env, &echo, json!({"text": "x"})).unwrap()["content"][0]["text"], "x");
    let pongs: Vec<Value> =
        server.received.borrow().iter().filter(|m| m["id"] == 900).cloned().collect();
    assert!(!pongs.is_empty());
    assert_eq!(pongs[0], json!({"jsonrpc": "2.0", "id": 900, "result": {}}));
}

#[test]
fn list_changed_refreshes_and_changed_tools_are_held_until_accepted() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    let client = env.client();
    let changes = Rc::new(RefCell::new(0));
    let c = changes.clone();
    client.set_on_change(Rc::new(move || *c.borrow_mut() += 1));
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    let before = client.tools();
    assert!(Rc::ptr_eq(&before[0], &client.tools()[0]), "tools() is cached");
    let lists_before = server.methods().iter().filter(|m| *m == "tools/list").count();

    // A new tool appears alongside a changed description; only the changed one is held back.
    server
        .tools
        .borrow_mut()
        .push(json!({"name": "added", "description": "New.", "inputSchema": {"type": "object"}}));
    let mutate = find(&before, "tool_a_mutate");
    let gen = client.generation();
    call(&env, &mutate, json!({})).unwrap();
    assert_eq!(server.methods().iter().filter(|m| *m == "tools/list").count(), lists_before + 1);
    assert!(client.generation() > gen);
    let after = names(&client.tools());
    assert!(!after.contains(&"tool_a_echo".to_owned()));
    assert!(after.contains(&"tool_a_added".to_owned()));

    let status = &client.servers()[0];
    assert_eq!(status.pending_tool_changes.len(), 1);
    assert_eq!(status.pending_tool_changes[0].tool, "echo");
    assert_eq!(status.pending_tool_changes[0].changes, vec!["description"]);
    let state = client.get_mcp_servers();
    let pending = &state["servers"]["a"]["pendingToolChanges"][0];
    assert_eq!(pending["tool"], "echo");
    assert_eq!(pending["previous"]["description"], "Echo text back.");
    assert!(pending["current"]["description"].as_str().unwrap().contains("evil.example"));
    assert!(state["tools"].as_array().unwrap().iter().all(|t| t["name"] != "echo"));

    // Calls by the old name still go nowhere new: the model never saw the new definition.
    assert_eq!(client.accept_mcp_tool_changes("a").unwrap(), 1);
    let echo = find(&client.tools(), "tool_a_echo");
    assert!(echo.definition().description.contains("evil.example"));
    assert!(client.get_mcp_servers()["servers"]["a"].get("pendingToolChanges").is_none());
    assert_eq!(client.accept_mcp_tool_changes("a").unwrap(), 0);
    assert!(*changes.borrow() > 0);
}

#[test]
fn input_schema_changes_are_held_and_pins_survive_a_restart() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    {
        let client = env.client();
        env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
        assert_eq!(client.tools().len(), 5);
    }
    // While we were away the server changed echo's schema.
    server.tools.borrow_mut()[0]["inputSchema"]["properties"]["cmd"] = json!({"type": "string"});
    let client = env.client();
    assert_eq!(client.servers()[0].state, ConnectionState::Connecting);
    env.run(client.restore());
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);
    assert_eq!(client.tools().len(), 4);
    assert_eq!(client.servers()[0].pending_tool_changes[0].changes, vec!["inputSchema"]);
    client.accept_mcp_tool_changes("a").unwrap();
    drop(client);
    let client = env.client();
    env.run(client.restore());
    assert_eq!(client.tools().len(), 5, "the accepted definition is the new pin");
}

#[test]
fn legacy_sse_discovers_the_endpoint_and_correlates_concurrent_responses() {
    let env = Env::new();
    let server = env.server("https://old.example", Mode::Legacy);
    let client = env.client();
    let added = env
        .run(client.add_mcp_server(
            "Old",
            "https://old.example/sse",
            AddServerOptions {
                transport: Some(TransportKind::Sse),
                id: Some("old".into()),
                ..Default::default()
            },
        ))
        .unwrap();
    assert_eq!(added.state, ConnectionState::Ready, "{:?}", added.error);
    let get = &env.http.requests("GET")[0];
    assert_eq!(header(get, "accept"), Some("text/event-stream"));
    let posts = env.http.requests("POST");
    assert!(posts.iter().all(|p| p.url == "https://old.example/messages?sessionId=legacy-1"));
    assert_eq!(client.servers()[0].connected_via, Some(TransportKind::Sse));

    let tools = client.tools();
    let echo = find(&tools, "tool_old_echo");
    let weather = find(&tools, "tool_old_weather");
    let ctx = ToolContext::default();
    let (a, b, c) = env.run(async {
        futures::join!(
            echo.execute(json!({"text": "one"}), &ctx),
            weather.execute(json!({}), &ctx),
            echo.execute(json!({"text": "two"}), &ctx)
        )
    });
    assert_eq!(a.unwrap()["content"][0]["text"], "one");
    assert_eq!(b.unwrap()["structuredContent"]["temp"], 21);
    assert_eq!(c.unwrap()["content"][0]["text"], "two");
    assert_eq!(server.methods().iter().filter(|m| *m == "tools/call").count(), 3);
}

#[test]
fn legacy_sse_stream_end_fails_pending_calls_and_next_use_reconnects() {
    let env = Env::new();
    let server = env.server("https://old.example", Mode::Legacy);
    let client = env.client();
    let o = AddServerOptions {
        transport: Some(TransportKind::Sse),
        id: Some("old".into()),
        ..Default::default()
    };
    env.run(client.add_mcp_server("Old", "https://old.example/sse", o)).unwrap();
    let slow = find(&client.tools(), "tool_old_slow");
    let ctx = ToolContext::default();
    let err = env.run(async {
        let call = slow.execute(json!({}), &ctx);
        let crash = async {
            env.clock.sleep(10).await;
            server.close_streams();
        };
        futures::join!(call, crash).0
    });
    let err = err.unwrap_err().to_string();
    assert!(
        err.starts_with("MCP server \"Old\" is unavailable: the server closed the SSE stream"),
        "{err}"
    );
    assert_eq!(client.servers()[0].state, ConnectionState::Failed);
    assert!(client.get_mcp_servers()["servers"]["old"]["error"]
        .as_str()
        .unwrap()
        .contains("closed the SSE stream"));

    // The next call reconnects straight away.
    let echo = find(&client.tools(), "tool_old_echo");
    assert_eq!(call(&env, &echo, json!({"text": "back"})).unwrap()["content"][0]["text"], "back");
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);
    assert_eq!(env.http.requests("GET").len(), 2);
}

#[test]
fn a_restarted_legacy_server_is_reconnected_and_the_call_retried() {
    let env = Env::new();
    let server = env.server("https://old.example", Mode::Legacy);
    let client = env.client();
    let o = AddServerOptions {
        transport: Some(TransportKind::Sse),
        id: Some("old".into()),
        ..Default::default()
    };
    env.run(client.add_mcp_server("Old", "https://old.example/sse", o)).unwrap();
    server.close_streams();
    let echo = find(&client.tools(), "tool_old_echo");
    assert_eq!(
        call(&env, &echo, json!({"text": "retried"})).unwrap()["content"][0]["text"],
        "retried"
    );
    assert_eq!(server.methods().iter().filter(|m| *m == "initialize").count(), 2);
}

#[test]
fn failed_reconnections_cool_down_before_the_next_try() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    server.down.set(true);
    let echo = find(&client.tools(), "tool_a_echo");
    // The broken session fails the call; the immediate reconnection fails too.
    assert!(call(&env, &echo, json!({"text": "x"})).is_err());
    assert!(call(&env, &echo, json!({"text": "x"}))
        .unwrap_err()
        .to_string()
        .contains("connection refused"));
    let requests = env.http.log.borrow().len();
    // Within the cooldown: fails fast, no traffic.
    assert!(call(&env, &echo, json!({"text": "x"})).is_err());
    assert_eq!(env.http.log.borrow().len(), requests);
    server.down.set(false);
    env.run(env.clock.sleep(5_000));
    assert_eq!(call(&env, &echo, json!({"text": "up"})).unwrap()["content"][0]["text"], "up");
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);
}

#[test]
fn auto_falls_back_to_sse_when_streamable_http_is_refused() {
    let env = Env::new();
    env.server("https://old.example", Mode::Legacy);
    let client = env.client();
    let o = AddServerOptions {
        transport: Some(TransportKind::Auto),
        id: Some("old".into()),
        ..Default::default()
    };
    let added = env.run(client.add_mcp_server("Old", "https://old.example/sse", o)).unwrap();
    assert_eq!(added.state, ConnectionState::Ready, "{:?}", added.error);
    assert_eq!(client.servers()[0].connected_via, Some(TransportKind::Sse));
    let first = env.http.log.borrow()[0].clone();
    assert_eq!((first.method.as_str(), first.url.as_str()), ("POST", "https://old.example/sse"));
    assert_eq!(
        call(&env, &find(&client.tools(), "tool_old_echo"), json!({"text": "ok"})).unwrap()
            ["content"][0]["text"],
        "ok"
    );

    // Auto still prefers Streamable HTTP when it works.
    env.server("https://new.example", Mode::Streamable { sse: false });
    let o = AddServerOptions { transport: Some(TransportKind::Auto), ..Default::default() };
    env.run(client.add_mcp_server("New", "https://new.example/mcp", o)).unwrap();
    assert_eq!(client.servers()[1].connected_via, Some(TransportKind::StreamableHttp));
}

#[test]
fn auto_reports_both_errors_and_auth_errors_do_not_fall_back() {
    let env = Env::new();
    env.http.route("https://gone.example", |_| Reply::Now(response(404, &[], "nothing here", 64)));
    let client = env.client();
    let o = AddServerOptions {
        transport: Some(TransportKind::Auto),
        id: Some("gone".into()),
        ..Default::default()
    };
    let added = env.run(client.add_mcp_server("Gone", "https://gone.example/mcp", o)).unwrap();
    assert_eq!(added.state, ConnectionState::Failed);
    assert_eq!(
        added.error.unwrap(),
        "Streamable HTTP: HTTP 404: nothing here; SSE: HTTP 404: nothing here"
    );

    let locked = env.server("https://locked.example", Mode::Streamable { sse: false });
    *locked.bearer.borrow_mut() = Some("secret".into());
    let o = AddServerOptions { transport: Some(TransportKind::Auto), ..Default::default() };
    let added = env.run(client.add_mcp_server("Locked", "https://locked.example/mcp", o)).unwrap();
    assert_eq!(
        added.error.unwrap(),
        "HTTP 401: Unauthorized (the server offers no OAuth metadata)"
    );
    let sse_gets =
        env.http.requests("GET").iter().filter(|r| !r.url.contains("/.well-known/")).count();
    assert_eq!(sse_gets, 1, "only the first server fell back to SSE");
}

#[test]
fn bearer_headers_are_sent_on_every_request_of_both_transports() {
    let env = Env::new();
    let a = env.server("https://a.example", Mode::Streamable { sse: true });
    let b = env.server("https://b.example", Mode::Legacy);
    *a.bearer.borrow_mut() = Some("tok-a".into());
    *b.bearer.borrow_mut() = Some("tok-b".into());
    let client = env.client();
    let with = |token: &str, t: TransportKind| AddServerOptions {
        transport: Some(t),
        headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        ..Default::default()
    };
    let ra = env.run(client.add_mcp_server(
        "A",
        "https://a.example/mcp",
        with("tok-a", TransportKind::StreamableHttp),
    ));
    let rb = env.run(client.add_mcp_server(
        "B",
        "https://b.example/sse",
        with("tok-b", TransportKind::Sse),
    ));
    assert_eq!(ra.unwrap().state, ConnectionState::Ready);
    assert_eq!(rb.unwrap().state, ConnectionState::Ready);
    assert!(env.http.log.borrow().iter().all(|r| header(r, "authorization").is_some()));
}

#[test]
fn a_hung_server_times_out_as_a_tool_error_while_others_keep_working() {
    let env = Env::new();
    env.server("https://a.example", Mode::Streamable { sse: true });
    env.server("https://b.example", Mode::Legacy);
    let client = env.client_with(McpConfig { request_timeout_ms: 2_000, ..Default::default() });
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    let o = AddServerOptions {
        transport: Some(TransportKind::Sse),
        id: Some("b".into()),
        ..Default::default()
    };
    env.run(client.add_mcp_server("B", "https://b.example/sse", o)).unwrap();
    let tools = client.tools();
    let ctx = ToolContext::default();
    let start = env.clock.now();
    let [sa, eb, sb, ea] =
        ["tool_a_slow", "tool_b_echo", "tool_b_slow", "tool_a_echo"].map(|n| find(&tools, n));
    let (slow_a, echo_b, slow_b, echo_a) = env.run(async {
        futures::join!(
            sa.execute(json!({}), &ctx),
            eb.execute(json!({"text": "b"}), &ctx),
            sb.execute(json!({}), &ctx),
            ea.execute(json!({"text": "a"}), &ctx),
        )
    });
    assert_eq!(
        slow_a.unwrap_err().to_string(),
        "MCP server \"A\" is unavailable: no response within 2000 ms"
    );
    assert_eq!(
        slow_b.unwrap_err().to_string(),
        "MCP server \"B\" is unavailable: no response within 2000 ms"
    );
    assert_eq!(echo_a.unwrap()["content"][0]["text"], "a");
    assert_eq!(echo_b.unwrap()["content"][0]["text"], "b");
    assert_eq!(env.clock.now() - start, 2_000.0);
    // A slow tool is not a dead server; the SSE stream also still serves calls.
    assert!(client.servers().iter().all(|s| s.state == ConnectionState::Ready));
    assert_eq!(
        call(&env, &find(&tools, "tool_b_echo"), json!({"text": "again"})).unwrap()["content"][0]
            ["text"],
        "again"
    );
}

#[test]
fn a_server_that_goes_down_fails_with_a_clear_error() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    server.down.set(true);
    let echo = find(&client.tools(), "tool_a_echo");
    let err = call(&env, &echo, json!({"text": "x"})).unwrap_err();
    assert_eq!(err.to_string(), "MCP server \"A\" is unavailable: connection refused");
    assert_eq!(client.servers()[0].state, ConnectionState::Failed);
    // Its tools stay listed so the model keeps getting this explanation.
    assert_eq!(client.tools().len(), 5);
}

#[test]
fn connect_timeout_marks_the_server_failed() {
    let env = Env::new();
    env.http.route("https://hang.example", |_| Reply::Hang);
    let client = env.client_with(McpConfig { connect_timeout_ms: 3_000, ..Default::default() });
    let added = env.run(client.add_mcp_server("H", "https://hang.example/mcp", opts("h"))).unwrap();
    assert_eq!(added.state, ConnectionState::Failed);
    assert_eq!(added.error.unwrap(), "no response within 3000 ms");
}

#[test]
fn stale_session_is_reinitialised_once() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    server.expire_sessions();
    let echo = find(&client.tools(), "tool_a_echo");
    assert_eq!(call(&env, &echo, json!({"text": "again"})).unwrap()["content"][0]["text"], "again");
    assert_eq!(server.methods().iter().filter(|m| *m == "initialize").count(), 2);
    let last = env.http.requests("POST").pop().unwrap();
    assert_eq!(header(&last, "mcp-session-id"), Some("sess-2"));
}

#[test]
fn response_streams_closed_early_are_resumed_with_last_event_id() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    server.drop_next_response.set(true);
    let start = env.clock.now();
    let out = call(&env, &find(&client.tools(), "tool_a_echo"), json!({"text": "late"})).unwrap();
    assert_eq!(out["content"][0]["text"], "late");
    assert_eq!(env.clock.now() - start, 50.0, "waited for the server's retry hint");
    let get = env.http.requests("GET").pop().unwrap();
    assert_eq!(header(&get, "last-event-id"), Some("r-1"));
    assert_eq!(header(&get, "mcp-session-id"), Some("sess-1"));
}

#[test]
fn servers_persist_and_restore_with_their_options() {
    let env = Env::new();
    let a = env.server("https://a.example", Mode::Streamable { sse: false });
    *a.bearer.borrow_mut() = Some("t".into());
    env.server("https://b.example", Mode::Legacy);
    {
        let client = env.client();
        let o = AddServerOptions {
            headers: vec![("Authorization".into(), "Bearer t".into())],
            id: Some("Team Tools!".into()),
            ..Default::default()
        };
        assert_eq!(
            env.run(client.add_mcp_server("A", "https://A.example:443/mcp", o)).unwrap().id,
            "team-tools"
        );
        let o = AddServerOptions { transport: Some(TransportKind::Sse), ..Default::default() };
        env.run(client.add_mcp_server("B", "https://b.example/sse", o)).unwrap();
    }
    let client = env.client();
    let servers = client.servers();
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0].id, "team-tools");
    assert_eq!(servers[0].url, "https://a.example/mcp");
    assert_eq!(servers[1].transport, TransportKind::Sse);
    assert!(servers.iter().all(|s| s.state == ConnectionState::Connecting));
    assert!(client.tools().is_empty());
    env.run(client.restore());
    assert!(client.servers().iter().all(|s| s.state == ConnectionState::Ready));
    let b_id = client.servers()[1].id.clone();
    assert_eq!(b_id.len(), 8);
    assert_eq!(client.tools().len(), 10);
    assert!(names(&client.tools()).contains(&"tool_teamtools_echo".to_owned()));
}

#[test]
fn wait_for_connections_drives_restored_servers_and_honours_its_timeout() {
    let env = Env::new();
    env.server("https://a.example", Mode::Streamable { sse: false });
    let hang = Rc::new(RefCell::new(false));
    let h = hang.clone();
    let b = FakeServer::new("https://b.example", Mode::Streamable { sse: false });
    let bs = b.clone();
    env.http.route(
        "https://b.example",
        move |req| if *h.borrow() { Reply::Hang } else { bs.handle(req) },
    );
    {
        let client = env.client();
        env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
        env.run(client.add_mcp_server("B", "https://b.example/mcp", opts("b"))).unwrap();
    }
    *hang.borrow_mut() = true;
    let client = env.client();
    let start = env.clock.now();
    env.run(client.wait_for_connections(1_000));
    assert_eq!(env.clock.now() - start, 1_000.0);
    let states: Vec<ConnectionState> = client.servers().iter().map(|s| s.state).collect();
    // B resumes its saved session, so it hangs while listing tools.
    assert_eq!(states, vec![ConnectionState::Ready, ConnectionState::Discovering]);
    assert_eq!(client.tools().len(), 5);
    // Nothing pending: returns at once.
    let other = Env::new();
    let idle = other.client();
    other.run(idle.wait_for_connections(5_000));
    assert_eq!(other.clock.now(), ManualClock::new().now());
}

#[test]
fn state_changes_are_observable_in_order() {
    let env = Env::new();
    env.server("https://a.example", Mode::Streamable { sse: false });
    let client = Rc::new(env.client());
    let seen = Rc::new(RefCell::new(Vec::<String>::new()));
    let (s, weak) = (seen.clone(), Rc::downgrade(&client));
    client.set_on_change(Rc::new(move || {
        if let Some(c) = weak.upgrade() {
            let frame: Value = serde_json::from_str(&c.frame()).unwrap();
            let state = frame["mcp"]["servers"]["a"]["state"].as_str().unwrap_or("gone").to_owned();
            s.borrow_mut().push(state);
        }
    }));
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    assert_eq!(*seen.borrow(), ["connecting", "discovering", "ready"]);
    env.run(client.remove_mcp_server("a")).unwrap();
    assert_eq!(seen.borrow().last().unwrap(), "gone");
}

#[test]
fn the_frame_has_the_reference_shape() {
    let env = Env::new();
    env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    assert_eq!(
        client.frame(),
        r#"{"mcp":{"prompts":[],"resources":[],"servers":{},"tools":[]},"type":"cf_agent_mcp_servers"}"#
    );
    env.server("https://b.example", Mode::Streamable { sse: false }).tools.borrow_mut().truncate(1);
    env.run(client.add_mcp_server("B", "https://b.example/mcp", opts("b-1"))).unwrap();
    let frame: Value = serde_json::from_str(&client.frame()).unwrap();
    assert_eq!(
        frame,
        json!({"mcp": {
            "prompts": [{"name": "greet", "description": "Say hi", "serverId": "b-1"}],
            "resources": [{"uri": "file:///readme", "name": "readme", "serverId": "b-1"}],
            "servers": {"b-1": {
                "auth_url": null,
                "capabilities": {"tools": {"listChanged": true}, "prompts": {}, "resources": {}},
                "error": null,
                "instructions": "Use echo for echoes.",
                "name": "B",
                "server_url": "https://b.example/mcp",
                "state": "ready"
            }},
            "tools": [{"name": "echo", "description": "Echo text back.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}, "serverId": "b-1"}]
        }, "type": "cf_agent_mcp_servers"})
    );
    assert!(client.frame().starts_with(r#"{"mcp":{"prompts":"#));
    assert_eq!(names(&client.tools()), ["tool_b1_echo"]);
}

#[test]
fn remove_ends_the_session_and_forgets_everything() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    let echo = find(&client.tools(), "tool_a_echo");
    env.run(client.remove_mcp_server("a")).unwrap();
    let delete = env.http.requests("DELETE").pop().unwrap();
    assert_eq!(header(&delete, "mcp-session-id"), Some("sess-1"));
    assert!(server.sessions.borrow().is_empty());
    assert!(client.tools().is_empty());
    assert_eq!(client.get_mcp_servers()["servers"], json!({}));
    assert_eq!(
        call(&env, &echo, json!({"text": "x"})).unwrap_err().to_string(),
        "MCP server \"a\" has been removed."
    );
    assert_eq!(env.run(client.remove_mcp_server("a")), Err(McpError::UnknownServer("a".into())));
    assert!(env.client().servers().is_empty());
    assert!(env.sql.exec("SELECT * FROM think_mcp_tool_pins", &[]).unwrap().is_empty());
}

#[test]
fn add_is_idempotent_and_checks_ids_and_urls() {
    let env = Env::new();
    env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    let first =
        env.run(client.add_mcp_server("A", "https://a.example/mcp", Default::default())).unwrap();
    let again =
        env.run(client.add_mcp_server("A", "https://a.example/mcp", Default::default())).unwrap();
    assert_eq!(first, again);
    assert_eq!(client.servers().len(), 1);
    assert_eq!(
        env.http
            .requests("POST")
            .iter()
            .filter(|r| r
                .body
                .as_ref()
                .is_some_and(|b| String::from_utf8_lossy(&b.to_vec()).contains("initialize\"")))
            .count(),
        1
    );

    env.run(client.add_mcp_server("B", "https://a.example/mcp", opts("Fixed"))).unwrap();
    let clash = env.run(client.add_mcp_server("Other", "https://a.example/other", opts("fixed")));
    assert!(
        matches!(clash, Err(McpError::Invalid(m)) if m.contains("already in use by server \"B\""))
    );
    let moved = env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("new-id")));
    assert!(matches!(moved, Err(McpError::Invalid(m)) if m.contains("already registered")));
    let e =
        env.run(client.add_mcp_server("X", "http://10.0.0.5/mcp", Default::default())).unwrap_err();
    assert!(e.to_string().starts_with("Blocked URL: http://10.0.0.5/mcp"));
    assert!(env.run(client.add_mcp_server("X", "not a url", Default::default())).is_err());
    assert!(env
        .run(client.add_mcp_server(" ", "https://a.example/mcp", Default::default()))
        .is_err());
    assert!(env
        .run(client.add_mcp_server("Local", "http://127.0.0.1:9/mcp", opts("local")))
        .is_ok());
}

#[test]
fn new_headers_for_a_known_server_reconnect_it() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    *server.bearer.borrow_mut() = Some("new".into());
    let client = env.client();
    let with = |t: &str| AddServerOptions {
        headers: vec![("Authorization".into(), format!("Bearer {t}"))],
        id: Some("a".into()),
        ..Default::default()
    };
    let old = env.run(client.add_mcp_server("A", "https://a.example/mcp", with("old"))).unwrap();
    assert_eq!(old.state, ConnectionState::Failed);
    let new = env.run(client.add_mcp_server("A", "https://a.example/mcp", with("new"))).unwrap();
    assert_eq!(new.state, ConnectionState::Ready);
    assert_eq!(env.client().servers()[0].id, "a");
}

#[test]
fn listen_over_streamable_http_refreshes_on_list_changed() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    assert_eq!(env.run(client.listen("a")), Ok(ListenEnd::Unsupported));

    server.get_stream.set(true);
    let lists = || server.methods().iter().filter(|m| *m == "tools/list").count();
    let before = lists();
    let end = env.run(async {
        let listen = client.listen("a");
        let drive = async {
            env.clock.sleep(5).await;
            server
                .tools
                .borrow_mut()
                .push(json!({"name": "late", "inputSchema": {"type": "object"}}));
            server
                .push_all(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
            env.clock.sleep(5).await;
            server.close_streams();
        };
        futures::join!(listen, drive).0
    });
    assert_eq!(end, Ok(ListenEnd::Ended));
    assert_eq!(lists(), before + 1);
    assert!(names(&client.tools()).contains(&"tool_a_late".to_owned()));
    let get = env.http.requests("GET").pop().unwrap();
    assert_eq!(header(&get, "accept"), Some("text/event-stream"));
}

#[test]
fn a_second_listen_on_the_same_session_steps_aside() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    server.get_stream.set(true);
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    let (first, second) = env.run(async {
        let first = client.listen("a");
        let second = async {
            env.clock.sleep(5).await;
            let second = client.listen("a").await;
            server.close_streams();
            second
        };
        futures::join!(first, second)
    });
    assert_eq!(second, Ok(ListenEnd::AlreadyListening));
    assert_eq!(first, Ok(ListenEnd::Ended));
    assert_eq!(env.http.requests("GET").len(), 1, "one stream was opened");
    // Once the first has ended, listening again is allowed (here on a new session).
    let again = env.run(async {
        let listen = client.listen("a");
        let stop = async {
            env.clock.sleep(5).await;
            server.close_streams();
        };
        futures::join!(listen, stop).0
    });
    assert_eq!(again, Ok(ListenEnd::Ended));
    assert_eq!(env.http.requests("GET").len(), 2);
}

#[test]
fn listen_over_legacy_sse_pumps_notifications_while_calls_share_the_stream() {
    let env = Env::new();
    let server = env.server("https://old.example", Mode::Legacy);
    let client = env.client();
    let o = AddServerOptions {
        transport: Some(TransportKind::Sse),
        id: Some("old".into()),
        ..Default::default()
    };
    env.run(client.add_mcp_server("Old", "https://old.example/sse", o)).unwrap();
    let echo = find(&client.tools(), "tool_old_echo");
    let ctx = ToolContext::default();
    let (end, out) = env.run(async {
        let listen = client.listen("old");
        let drive = async {
            env.clock.sleep(5).await;
            let out = echo.execute(json!({"text": "during listen"}), &ctx).await;
            server
                .tools
                .borrow_mut()
                .push(json!({"name": "late", "inputSchema": {"type": "object"}}));
            server
                .push_all(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
            env.clock.sleep(5).await;
            server.close_streams();
            out
        };
        futures::join!(listen, drive)
    });
    assert_eq!(out.unwrap()["content"][0]["text"], "during listen");
    assert!(names(&client.tools()).contains(&"tool_old_late".to_owned()));
    assert!(matches!(end, Err(McpError::Transport(_))));
    assert_eq!(client.servers()[0].state, ConnectionState::Failed);
}

#[test]
fn normalizes_ids_like_the_reference() {
    use super::client::normalize_server_id as n;
    assert_eq!(n("My Server"), "my-server");
    assert_eq!(n("--Weird__"), "weird");
    assert_eq!(n("123"), "id-123");
    assert_eq!(n("!!!"), "id");
    assert_eq!(n(&"a".repeat(80)).len(), 64);
}

#[test]
fn a_restarted_client_resumes_the_saved_session_without_initialising() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    {
        let client = env.client();
        env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    }
    let inits = || server.methods().iter().filter(|m| *m == "initialize").count();
    assert_eq!(inits(), 1);
    let client = env.client();
    env.run(client.restore());
    assert_eq!(inits(), 1, "no second handshake");
    let status = &client.servers()[0];
    assert_eq!(status.state, ConnectionState::Ready);
    assert_eq!(status.protocol_version.as_deref(), Some("2025-11-25"));
    let state = client.get_mcp_servers();
    assert_eq!(state["servers"]["a"]["instructions"], "Use echo for echoes.");
    assert_eq!(state["servers"]["a"]["capabilities"]["tools"], json!({"listChanged": true}));
    let list = env.http.requests("POST").pop().unwrap();
    assert_eq!(header(&list, "mcp-session-id"), Some("sess-1"));
    // Request ids continue well past the previous incarnation's.
    let last_id = server.received.borrow().last().unwrap()["id"].as_i64().unwrap();
    assert!(last_id > 1_000, "{last_id}");
    assert_eq!(
        call(&env, &find(&client.tools(), "tool_a_echo"), json!({"text": "r"})).unwrap()["content"]
            [0]["text"],
        "r"
    );
}

#[test]
fn a_forgotten_saved_session_falls_back_to_a_new_one() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    {
        let client = env.client();
        env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    }
    server.expire_sessions();
    let client = env.client();
    env.run(client.restore());
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);
    assert_eq!(server.methods().iter().filter(|m| *m == "initialize").count(), 2);
    // The new session is what gets saved.
    drop(client);
    let client = env.client();
    env.run(client.restore());
    assert_eq!(server.methods().iter().filter(|m| *m == "initialize").count(), 2);
    let last = env.http.requests("POST").pop().unwrap();
    assert_eq!(header(&last, "mcp-session-id"), Some("sess-2"));
}

#[test]
fn sessions_are_not_saved_for_legacy_sse() {
    let env = Env::new();
    let server = env.server("https://old.example", Mode::Legacy);
    {
        let client = env.client();
        let o = AddServerOptions {
            transport: Some(TransportKind::Sse),
            id: Some("old".into()),
            ..Default::default()
        };
        env.run(client.add_mcp_server("Old", "https://old.example/sse", o)).unwrap();
    }
    let client = env.client();
    env.run(client.restore());
    assert_eq!(client.servers()[0].state, ConnectionState::Ready);
    assert_eq!(server.methods().iter().filter(|m| *m == "initialize").count(), 2);
}

#[test]
fn an_abandoned_refresh_does_not_block_later_ones() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("a"))).unwrap();
    let mutate = find(&client.tools(), "tool_a_mutate");
    let lists = || server.methods().iter().filter(|m| *m == "tools/list").count();
    server.hang_lists.set(true);
    let ctx = ToolContext::default();
    env.run(async {
        let call = std::pin::pin!(mutate.execute(json!({}), &ctx));
        let give_up = std::pin::pin!(env.clock.sleep(100));
        futures::future::select(call, give_up).await;
    });
    let before = lists();
    server.hang_lists.set(false);
    call(&env, &mutate, json!({})).unwrap();
    assert_eq!(lists(), before + 1);
    assert_eq!(client.servers()[0].pending_tool_changes.len(), 1);
}

#[test]
fn oversized_messages_are_refused() {
    let env = Env::new();
    env.http.route("https://big.example", |_| {
        let mut chunks: Vec<Result<Vec<u8>, crate::platform::HttpError>> =
            vec![Ok(b"data: ".to_vec())];
        chunks.extend((0..17).map(|_| Ok(vec![b'a'; 1 << 20])));
        Reply::Now(crate::platform::HttpResponse {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: futures::StreamExt::boxed_local(futures::stream::iter(chunks)),
        })
    });
    let client = env.client();
    let added =
        env.run(client.add_mcp_server("Big", "https://big.example/mcp", opts("big"))).unwrap();
    assert_eq!(added.error.as_deref(), Some("a message from the server exceeded 16 MB"));
}

#[test]
fn private_urls_are_refused_before_anything_is_stored_or_fetched() {
    let env = Env::new();
    let client = env.client();
    for url in [
        "http://2852039166/mcp",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://10.1/",
        "http://[0000::ffff:10.0.0.1]/",
    ] {
        let e = env.run(client.add_mcp_server("X", url, Default::default())).unwrap_err();
        assert!(matches!(e, McpError::Url(crate::net::NetError::Blocked { .. })), "{url}: {e}");
        assert!(e.to_string().starts_with("Blocked URL: http://"), "{e}");
    }
    let e =
        env.run(client.add_mcp_server("X", "http://1.2.3.4.5/", Default::default())).unwrap_err();
    assert!(e.to_string().starts_with("invalid MCP server URL: "), "{e}");
    assert!(client.servers().is_empty());
    assert!(store::load_servers(env.sql.as_ref()).unwrap().is_empty());
    assert!(env.http.log.borrow().is_empty());

    // An app that allows private networks on purpose can add them.
    let open = env.client_with(McpConfig { allow_private_addresses: true, ..Default::default() });
    let added =
        env.run(open.add_mcp_server("LAN", "http://10.1:9/mcp", Default::default())).unwrap();
    assert_eq!(added.state, ConnectionState::Failed);
    assert_eq!(env.http.requests("POST")[0].url, "http://10.0.0.1:9/mcp");
}

#[test]
fn a_stored_private_url_is_not_connected_on_restore() {
    let env = Env::new();
    store::init(env.sql.as_ref()).unwrap();
    let row = store::ServerRow {
        id: "old".into(),
        name: "Old".into(),
        url: "http://2852039166/mcp".into(),
        transport: TransportKind::default(),
        headers: Vec::new(),
        session: None,
        callback_url: None,
    };
    store::save_server(env.sql.as_ref(), &row).unwrap();
    let client = env.client();
    env.run(client.restore());
    let status = &client.servers()[0];
    assert_eq!(status.state, ConnectionState::Failed);
    assert!(status
        .error
        .as_deref()
        .unwrap_or("")
        .starts_with("Blocked URL: http://169.254.169.254/mcp"));
    assert!(env.http.log.borrow().is_empty());
}

#[test]
fn resources_and_prompts_are_read_and_the_model_tools_list_and_read_them() {
    let env = Env::new();
    env.server("https://a.example", Mode::Streamable { sse: false });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("alpha"))).unwrap();
    let read = env.run(client.read_resource("alpha", "file:///readme")).unwrap();
    assert_eq!(read["contents"][0]["text"], "Read me.");
    let mut args = serde_json::Map::new();
    args.insert("name".into(), json!("Ada"));
    let prompt = env.run(client.get_prompt("alpha", "greet", args.clone())).unwrap();
    assert_eq!(prompt["messages"][0]["content"]["text"], "Hi Ada");
    args.insert("age".into(), json!(36));
    assert!(matches!(
        env.run(client.get_prompt("alpha", "greet", args)),
        Err(McpError::Invalid(_))
    ));
    assert_eq!(
        env.run(client.read_resource("nope", "x")),
        Err(McpError::UnknownServer("nope".into()))
    );

    let tools = client.resource_tools();
    assert_eq!(names(&tools), ["mcp_list_resources", "mcp_read_resource"]);
    let listed = call(&env, &tools[0], json!({})).unwrap();
    assert_eq!(
        listed,
        json!({"resources": [{"serverId": "alpha", "uri": "file:///readme", "name": "readme"}]})
    );
    assert_eq!(
        call(&env, &tools[0], json!({"serverId": "other"})).unwrap(),
        json!({"resources": []})
    );
    let out = call(&env, &tools[1], json!({"serverId": "alpha", "uri": "file:///readme"})).unwrap();
    assert_eq!(tools[1].model_output(&out), ModelOutput::Text("Read me.".into()));
    assert!(call(&env, &tools[1], json!({"serverId": "nope", "uri": "x"})).is_err());

    // A server that declares no resources is refused before anything is sent.
    *env.server("https://b.example", Mode::Streamable { sse: false }).capabilities.borrow_mut() =
        json!({"tools": {}});
    env.run(client.add_mcp_server("B", "https://b.example/mcp", opts("beta"))).unwrap();
    assert!(matches!(env.run(client.read_resource("beta", "x")), Err(McpError::Invalid(_))));
}

/// The last answer the client posted to the fake server's `elicitation/create` (id "e1").
fn elicit_reply(server: &FakeServer) -> Option<Value> {
    let received = server.received.borrow();
    received
        .iter()
        .rev()
        .find(|m| m["id"] == "e1" && m.get("method").is_none())
        .map(|m| m["result"].clone())
}

#[test]
fn elicitation_waits_for_a_valid_answer_and_times_out_as_cancel() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    let client = env.client_with(McpConfig {
        request_timeout_ms: 500,
        elicitation_timeout_ms: 2_000,
        ..Default::default()
    });
    let frames = Rc::new(RefCell::new(Vec::<Value>::new()));
    let sink = frames.clone();
    client.set_on_elicitation(Rc::new(move |f: &str| {
        sink.borrow_mut().push(serde_json::from_str(f).unwrap())
    }));
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("alpha"))).unwrap();
    let init = server.received.borrow()[0].clone();
    assert_eq!(init["params"]["capabilities"], json!({"elicitation": {"form": {}}}));

    // Answered: a bad answer is refused and the input stays; a good one goes to the server.
    let answered = env.run(async {
        let call = client.call_tool("alpha", "ask", json!({}));
        let answer = async {
            while frames.borrow().is_empty() {
                env.clock.sleep(100).await;
            }
            let asked = frames.borrow()[0].clone();
            assert_eq!(asked["type"], "cf_agent_mcp_elicitation");
            assert_eq!(asked["serverId"], "alpha");
            assert_eq!(asked["message"], "Your name?");
            assert_eq!(asked["requestedSchema"]["required"], json!(["name"]));
            assert_eq!(client.elicitation_frames().len(), 1, "a tab connecting now sees it");
            let id = asked["id"].as_str().unwrap().to_owned();
            let bad = client.answer_elicitation(&id, "accept", Some(&json!({"name": ""}))).await;
            assert!(matches!(bad, Err(McpError::Invalid(_))), "{bad:?}");
            // Longer than the request timeout: the call keeps waiting while a person answers.
            env.clock.sleep(1_000).await;
            client.answer_elicitation(&id, "accept", Some(&json!({"name": "Ada"}))).await.unwrap();
            assert!(
                client.answer_elicitation(&id, "decline", None).await.is_err(),
                "answered once"
            );
        };
        futures::join!(call, answer).0
    });
    assert_eq!(answered.unwrap()["content"][0]["text"], "asked");
    assert_eq!(
        elicit_reply(&server),
        Some(json!({"action": "accept", "content": {"name": "Ada"}}))
    );
    assert_eq!(frames.borrow().last().unwrap()["type"], "cf_agent_mcp_elicitation_resolved");
    assert!(client.elicitation_frames().is_empty());

    // Unanswered: after the elicitation timeout the server is told `cancel`.
    frames.borrow_mut().clear();
    env.run(client.call_tool("alpha", "ask", json!({}))).unwrap();
    assert_eq!(elicit_reply(&server), Some(json!({"action": "cancel"})));
    assert_eq!(
        frames.borrow().last().unwrap(),
        &json!({"type": "cf_agent_mcp_elicitation_resolved", "id": frames.borrow()[0]["id"], "action": "cancel"})
    );
}

#[test]
fn without_an_elicitation_handler_the_capability_is_not_declared_and_requests_are_refused() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: true });
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("alpha"))).unwrap();
    assert_eq!(server.received.borrow()[0]["params"]["capabilities"], json!({}));
    env.run(client.call_tool("alpha", "ask", json!({}))).unwrap();
    let reply = server.received.borrow().iter().find(|m| m["id"] == "e1").cloned().unwrap();
    assert_eq!(reply["error"]["code"], -32601);
}

#[test]
fn destructive_tools_need_approval_unless_the_gate_exempts_them() {
    let env = Env::new();
    let server = env.server("https://a.example", Mode::Streamable { sse: false });
    server.tools.borrow_mut().extend([
        json!({"name": "wipe", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true}}),
        json!({"name": "peek", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true, "readOnlyHint": true}}),
    ]);
    let client = env.client();
    env.run(client.add_mcp_server("A", "https://a.example/mcp", opts("alpha"))).unwrap();
    let needs = |name: &str| find(&client.tools(), name).needs_approval(&json!({}));
    assert!(needs("tool_alpha_wipe"));
    assert!(!needs("tool_alpha_peek"), "readOnlyHint wins");
    assert!(!needs("tool_alpha_echo"), "unannotated tools do not");
    client.set_destructive_gate(Rc::new(|name: &str| name != "tool_alpha_wipe"));
    assert!(!needs("tool_alpha_wipe"), "exempted");
}

#[test]
fn a_storage_failure_keeps_the_store_error_and_its_text() {
    use crate::store::{Row, SqlValue, StoreError};
    /// SQL that refuses every statement, as a database that went away does.
    struct Down;
    impl Sql for Down {
        fn exec(&self, _: &str, _: &[SqlValue]) -> Result<Vec<Row>, StoreError> {
            Err(StoreError::Sql("disk I/O error".into()))
        }
        fn exec_changed(&self, _: &str, _: &[SqlValue]) -> Result<bool, StoreError> {
            Err(StoreError::Sql("disk I/O error".into()))
        }
        fn transaction(
            &self,
            _: &mut dyn FnMut() -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            Err(StoreError::Sql("disk I/O error".into()))
        }
    }
    let env = Env::new();
    let http: Rc<dyn HttpClient> = env.http.clone();
    let Err(e) = McpClient::new(Rc::new(Down), http, env.clock.clone(), McpConfig::default())
    else {
        panic!("a client opened over a database that refuses every statement");
    };
    assert_eq!(e, McpError::Store(StoreError::Sql("disk I/O error".into())));
    assert_eq!(e.to_string(), "storage error: disk I/O error");
    let source = std::error::Error::source(&e).map(ToString::to_string);
    assert_eq!(source.as_deref(), Some("disk I/O error"));
}
