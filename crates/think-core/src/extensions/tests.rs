//! Host tests of extensions: manifests, names, the gateway's host matching, the host
//! bridge's permission checks over a real workspace and session, and the runtime (load,
//! persistence, unload, limits) over a scripted sandbox that answers each operation.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use async_trait::async_trait;
use futures::future::LocalBoxFuture;
use serde_json::{json, Value};

use super::bridge::{authorize, HostMethod, HOST_CONNECTOR};
use super::manifest::{valid_tool_name, ContextKeyword, ContextScope, MessagesAccess};
use super::tools::load_needs_approval;
use super::*;
use crate::codemode::{
    CallError, CallRequest, Dispatcher, SandboxError, SandboxOutcome, SandboxRequest,
};
use crate::net::Url;
use crate::session::{BlockKind, ContextBlock, Session};
use crate::store::sqlite::SqliteSql;
use crate::test_support::ManualClock;
use crate::tools::ToolContext;
use crate::workspace::Workspace;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

fn manifest(v: Value) -> Manifest {
    Manifest::from_json(v).expect("valid manifest")
}

fn manifest_error(v: Value) -> String {
    Manifest::from_json(v).expect_err("invalid manifest").to_string()
}

#[test]
fn names_are_sanitized_like_think() {
    assert_eq!(sanitize_name("math").as_deref(), Some("math"));
    assert_eq!(sanitize_name("my-ext.v2").as_deref(), Some("my_ext_v2"));
    assert_eq!(sanitize_name("--a  --b__").as_deref(), Some("a_b"));
    assert_eq!(sanitize_name("Über Tool").as_deref(), Some("ber_Tool"));
    assert_eq!(sanitize_name("!!!"), None);
    assert!(valid_tool_name("math_add"));
    assert!(!valid_tool_name("math add"));
    assert!(!valid_tool_name(&"a".repeat(65)));
}

#[test]
fn manifests_are_validated() {
    let m = manifest(json!({
        "name": "notes", "version": "1.0.0", "description": "Notes",
        "permissions": {"network": ["api.example.com", "*.example.org:8443"], "workspace": "read",
                        "context": {"read": "all", "write": "own"}, "messages": "read"},
        "context": [{"label": "todo", "type": "writable", "maxTokens": 100}],
        "hooks": ["beforeTurn"]
    }));
    assert_eq!(m.permissions.workspace, WorkspaceAccess::Read);
    assert_eq!(m.permissions.messages, MessagesAccess::Read);
    assert_eq!(m.permissions.context.read, Some(ContextScope::Keyword(ContextKeyword::All)));
    assert_eq!(m.context_labels(), ["notes_todo"]);
    assert_eq!(m.context_blocks()[0].kind, BlockKind::Writable);
    assert!(m.grants_more_than_read(), "network hosts are more than read");
    assert!(!manifest(json!({"name": "a", "version": "1", "permissions": {"workspace": "read"}}))
        .grants_more_than_read());
    assert!(manifest(
        json!({"name": "a", "version": "1", "permissions": {"workspace": "read-write"}})
    )
    .grants_more_than_read());

    let cases = [
        (json!({"name": "", "version": "1"}), "must not be empty"),
        (json!({"name": " a", "version": "1"}), "spaces"),
        (json!({"name": "!!", "version": "1"}), "no letter or digit"),
        (json!({"name": "a", "version": ""}), "version must not be empty"),
        (json!({"name": "a", "version": "1", "extra": 1}), "unknown field"),
        (
            json!({"name": "a", "version": "1", "permissions": {"workspace": "all"}}),
            "unknown variant",
        ),
        (
            json!({"name": "a", "version": "1", "permissions": {"network": ["https://x.com/a"]}}),
            "not a URL",
        ),
        (
            json!({"name": "a", "version": "1", "permissions": {"network": ["*.1.2.3.4"]}}),
            "wildcard needs a domain",
        ),
        (json!({"name": "a", "version": "1", "permissions": {"network": ["a.*.com"]}}), "leading"),
        (
            json!({"name": "a", "version": "1", "permissions": {"context": {"read": "own"}}}),
            "context.read takes \"all\"",
        ),
        (
            json!({"name": "a", "version": "1", "context": [{"label": "x y", "type": "writable"}]}),
            "letters, digits",
        ),
        (
            json!({"name": "a", "version": "1", "context": [{"label": "x", "type": "note"}]}),
            "not readonly, writable",
        ),
        (
            json!({"name": "a", "version": "1", "context": [{"label": "x", "type": "readonly"}, {"label": "x", "type": "writable"}]}),
            "declared twice",
        ),
        (json!({"name": "a", "version": "1", "hooks": ["onChunk"]}), "unknown variant"),
    ];
    for (v, want) in cases {
        let e = manifest_error(v.clone());
        assert!(e.contains(want), "{v}: {e}");
        assert!(e.starts_with("Invalid extension manifest: "), "{e}");
    }
}

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

#[test]
fn host_patterns_match_exact_names_wildcards_and_ports() {
    let exact = HostPattern::parse("API.Example.com").unwrap();
    assert!(exact.matches(&url("https://api.example.com/x")));
    assert!(
        exact.matches(&url("http://api.example.com.:8080/")),
        "a trailing dot is the same host"
    );
    assert!(!exact.matches(&url("https://example.com/")));
    assert!(!exact.matches(&url("https://xapi.example.com/")));
    assert!(!exact.matches(&url("https://api.example.com.evil.net/")));

    let wild = HostPattern::parse("*.example.com").unwrap();
    assert!(wild.matches(&url("https://a.example.com/")));
    assert!(wild.matches(&url("https://a.b.example.com/")));
    assert!(!wild.matches(&url("https://example.com/")), "the apex is not a subdomain");
    assert!(!wild.matches(&url("https://evilexample.com/")));

    let port = HostPattern::parse("127.0.0.1:8080").unwrap();
    assert!(port.matches(&url("http://127.0.0.1:8080/")));
    assert!(port.matches(&url("http://2130706433:8080/")), "every spelling of the address");
    assert!(!port.matches(&url("http://127.0.0.1:8081/")));
    let http80 = HostPattern::parse("a.com:80").unwrap();
    assert!(http80.matches(&url("http://a.com/")));
    assert!(!http80.matches(&url("https://a.com/")), "https is port 443");
    assert!(HostPattern::parse("[::1]").unwrap().matches(&url("http://[0:0::1]:9/")));
    assert!(HostPattern::parse("bücher.de").unwrap().matches(&url("https://xn--bcher-kva.de/")));
}

#[test]
fn the_gateway_allows_listed_hosts_and_refuses_private_addresses_without_opt_in() {
    let grant = |hosts: &[&str], allow_private| NetworkGrant {
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        allow_private,
    };
    let g = grant(&["api.example.com", "*.cdn.net"], false);
    assert_eq!(
        check_request("https://api.example.com/v1?q=1#f", &g).unwrap().as_str(),
        "https://api.example.com/v1?q=1"
    );
    assert!(check_request("https://img.cdn.net/a.png", &g).is_ok());
    let e = check_request("https://other.com/", &g).unwrap_err();
    assert!(matches!(e, GatewayError::NotListed { .. }), "{e:?}");
    assert_eq!(e.to_string(), "network access to other.com is refused: this extension may reach only api.example.com, *.cdn.net");
    let none = check_request("https://api.example.com/", &grant(&[], false)).unwrap_err();
    assert!(none.to_string().contains("no network permission"), "{none}");
    // Listed, but loopback or private: refused unless the app opted in.
    let local = grant(&["127.0.0.1", "10.0.0.5", "localhost"], false);
    for u in ["http://127.0.0.1:9/", "http://10.0.0.5/", "http://localhost:3000/"] {
        let e = check_request(u, &local).unwrap_err();
        assert!(e.to_string().contains("THINK_ALLOW_PRIVATE_NETWORK"), "{u}: {e}");
    }
    let open = grant(&["127.0.0.1"], true);
    assert!(check_request("http://127.0.0.1:9/", &open).is_ok());
    assert!(check_request("http://0x7f.0.0.1:9/", &open).is_ok(), "the same address");
    // Only http(s), never credentials.
    assert!(check_request("ftp://api.example.com/", &g)
        .unwrap_err()
        .to_string()
        .contains("scheme"));
    assert!(check_request("https://u:p@api.example.com/", &g)
        .unwrap_err()
        .to_string()
        .contains("credentials"));
}

#[test]
fn permissions_gate_every_host_method() {
    use HostMethod::*;
    let perms =
        |v: Value| manifest(json!({"name": "e", "version": "1", "permissions": v})).permissions;
    let none = perms(json!({}));
    let read = perms(json!({"workspace": "read"}));
    let rw = perms(json!({"workspace": "read-write"}));
    let no = json!({});
    for m in [ReadFile, ListFiles, Find, Grep] {
        assert!(authorize(&none, &[], m, &no).is_err(), "{m:?}");
        assert!(authorize(&read, &[], m, &no).is_ok(), "{m:?}");
        assert!(authorize(&rw, &[], m, &no).is_ok(), "{m:?}");
    }
    for m in [WriteFile, DeleteFile] {
        assert!(authorize(&none, &[], m, &no).is_err(), "{m:?}");
        let e = authorize(&read, &[], m, &no).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("Permission denied: host.{} needs workspace \"read-write\" permission; this extension has \"read\"", m.as_str())
        );
        assert!(authorize(&rw, &[], m, &no).is_ok(), "{m:?}");
    }
    let own = vec!["e_notes".to_string()];
    let label = |l: &str| json!({"label": l});
    // Own blocks are always readable; others need `read`.
    assert!(authorize(&none, &own, GetContext, &label("e_notes")).is_ok());
    assert!(authorize(&none, &own, GetContext, &label("memory")).is_err());
    assert!(authorize(
        &perms(json!({"context": {"read": "all"}})),
        &own,
        GetContext,
        &label("memory")
    )
    .is_ok());
    let listed = perms(json!({"context": {"read": ["memory"], "write": ["memory"]}}));
    assert!(authorize(&listed, &own, GetContext, &label("memory")).is_ok());
    assert!(authorize(&listed, &own, GetContext, &label("other")).is_err());
    assert!(authorize(&listed, &own, SetContext, &label("memory")).is_ok());
    assert!(authorize(&listed, &own, SetContext, &label("e_notes")).is_err(), "not listed");
    let write_own = perms(json!({"context": {"write": "own"}}));
    assert!(authorize(&write_own, &own, SetContext, &label("e_notes")).is_ok());
    assert!(authorize(&write_own, &own, SetContext, &label("memory")).is_err());
    assert!(authorize(&none, &own, SetContext, &label("e_notes")).is_err(), "writes need a grant");
    assert!(authorize(&none, &[], GetMessages, &no).is_err());
    assert!(authorize(&perms(json!({"messages": "read"})), &[], GetMessages, &no).is_ok());
}

struct Env {
    sql: Rc<SqliteSql>,
    ws: Rc<Workspace>,
    session: Session,
}

fn env() -> Env {
    Env::over(Rc::new(SqliteSql::new()))
}

impl Env {
    /// An instance over the database `sql`.
    fn over(sql: Rc<SqliteSql>) -> Env {
        let clock = ManualClock::new();
        let ws = Rc::new(Workspace::new(sql.clone(), clock));
        let memory = ContextBlock {
            label: "memory".into(),
            description: None,
            kind: BlockKind::Writable,
            max_tokens: None,
            content: Some("remember this".into()),
        };
        let session = Session::open(sql.clone(), vec![memory], None).unwrap();
        Env { sql, ws, session }
    }
}

impl Env {
    /// The same database after a restart: a new session over it.
    fn restarted(&self) -> Env {
        let session =
            Session::open(self.sql.clone(), self.session.blocks()[..1].to_vec(), None).unwrap();
        Env { sql: self.sql.clone(), ws: self.ws.clone(), session }
    }

    fn bridge_env(&self) -> BridgeEnv {
        let sql = self.sql.clone();
        BridgeEnv {
            workspace: self.ws.clone(),
            session: self.session.clone(),
            transcript: Rc::new(move || {
                crate::agent::store::ChatStore::new(sql.as_ref()).messages().unwrap_or_default()
            }),
        }
    }
}

fn host_call(method: &str, args: Value) -> CallRequest {
    CallRequest { connector: HOST_CONNECTOR.into(), method: method.into(), args, site: "?".into() }
}

#[test]
fn the_bridge_does_only_what_is_granted() {
    let env = env();
    block_on(env.ws.write_file("/notes.txt", "hello", "text/plain")).unwrap();
    let perms =
        |v: Value| manifest(json!({"name": "e", "version": "1", "permissions": v})).permissions;
    let reader = HostBridge::new(perms(json!({"workspace": "read"})), vec![], env.bridge_env());
    let read = block_on(reader.call(host_call("readFile", json!({"path": "/notes.txt"})))).unwrap();
    assert_eq!(read, json!("hello"));
    assert_eq!(
        block_on(reader.call(host_call("readFile", json!({"path": "/none"})))).unwrap(),
        Value::Null
    );
    let found = block_on(reader.call(host_call("find", json!({"pattern": "/*.txt"})))).unwrap();
    assert_eq!(found, json!(["/notes.txt"]));
    let listed = block_on(reader.call(host_call("listFiles", json!({"dir": "/"})))).unwrap();
    assert_eq!(listed[0]["path"], "/notes.txt");
    // A write is refused and nothing is written.
    let refused =
        block_on(reader.call(host_call("writeFile", json!({"path": "/x.txt", "content": "x"}))));
    let Err(CallError::Failed(msg)) = refused else { panic!("expected a refusal: {refused:?}") };
    assert!(msg.starts_with("Permission denied: host.writeFile"), "{msg}");
    assert_eq!(block_on(env.ws.read_file("/x.txt")).unwrap(), None);
    assert!(block_on(reader.call(host_call("deleteFile", json!({"path": "/notes.txt"})))).is_err());
    assert!(block_on(env.ws.read_file("/notes.txt")).unwrap().is_some());
    assert!(block_on(reader.call(host_call("getMessages", json!({})))).is_err());
    assert!(block_on(reader.call(host_call("getContext", json!({"label": "memory"})))).is_err());
    assert!(block_on(reader.call(host_call("eval", json!({})))).is_err());

    let writer = HostBridge::new(
        perms(
            json!({"workspace": "read-write", "context": {"read": ["memory"]}, "messages": "read"}),
        ),
        vec![],
        env.bridge_env(),
    );
    block_on(writer.call(host_call("writeFile", json!({"path": "/x.txt", "content": "x"}))))
        .unwrap();
    assert_eq!(block_on(env.ws.read_file("/x.txt")).unwrap().as_deref(), Some("x"));
    block_on(writer.call(host_call("deleteFile", json!({"path": "/x.txt"})))).unwrap();
    assert_eq!(block_on(env.ws.read_file("/x.txt")).unwrap(), None);
    let memory =
        block_on(writer.call(host_call("getContext", json!({"label": "memory"})))).unwrap();
    assert_eq!(memory, json!("remember this"));
    assert!(block_on(
        writer.call(host_call("setContext", json!({"label": "memory", "content": "x"})))
    )
    .is_err());
    assert_eq!(block_on(writer.call(host_call("getMessages", json!({})))).unwrap(), json!([]));
    let missing = block_on(writer.call(host_call("writeFile", json!({"path": "/y"}))));
    assert!(format!("{missing:?}").contains("content must be a string"), "{missing:?}");
}

type Responder =
    Rc<dyn Fn(Value, Rc<dyn Dispatcher>) -> LocalBoxFuture<'static, Result<Value, String>>>;

/// Answers each operation as a source would: `describe` with `described`, tools and hooks
/// through `respond`.
struct Scripted {
    passes: Cell<usize>,
    described: RefCell<Value>,
    respond: RefCell<Responder>,
    last: RefCell<Option<(SandboxRequest, Option<NetworkGrant>)>>,
}

impl Scripted {
    fn new(described: Value) -> Rc<Self> {
        Rc::new(Self {
            passes: Cell::new(0),
            described: RefCell::new(described),
            respond: RefCell::new(Rc::new(|op, _| {
                Box::pin(async move {
                    let a = op["args"]["a"].as_i64().unwrap_or(0);
                    let b = op["args"]["b"].as_i64().unwrap_or(0);
                    Ok(json!(a + b))
                })
            })),
            last: RefCell::new(None),
        })
    }

    fn op(request: &SandboxRequest) -> Value {
        assert!(request.body.contains("rt.run(__think_input)"), "{}", request.body);
        request.input.clone()
    }

    async fn answer(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
        network: Option<NetworkGrant>,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.passes.set(self.passes.get() + 1);
        let op = Self::op(&request);
        assert!(request
            .modules
            .iter()
            .any(|m| m.name == isolate::SOURCE_MODULE && m.source.starts_with("export default (")));
        *self.last.borrow_mut() = Some((request, network));
        let result = if op["kind"] == "describe" {
            Ok(self.described.borrow().clone())
        } else {
            let respond = self.respond.borrow().clone();
            respond(op, dispatcher).await
        };
        Ok(SandboxOutcome { result, logs: vec![] })
    }
}

#[async_trait(?Send)]
impl crate::codemode::Sandbox for Scripted {
    async fn run(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.answer(request, dispatcher, None).await
    }

    async fn run_networked(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
        network: &NetworkGrant,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.answer(request, dispatcher, Some(network.clone())).await
    }
}

const MATH: &str = "({ tools: { add: { description: 'Add two numbers', parameters: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'], execute: async ({ a, b }) => a + b } } })";

fn math_description() -> Value {
    json!({"tools": [{"name": "add", "description": "Add two numbers",
        "parameters": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}],
        "hooks": []})
}

fn runtime(env: &Env, sandbox: &Rc<Scripted>, statics: Vec<(Manifest, String)>) -> Rc<Extensions> {
    Rc::new(Extensions::new(
        env.sql.clone(),
        Some(sandbox.clone() as Rc<dyn crate::codemode::Sandbox>),
        env.bridge_env(),
        ExtensionOptions::default(),
        statics,
    ))
}

fn math() -> Manifest {
    manifest(json!({"name": "math", "version": "1.0.0", "description": "Arithmetic",
        "context": [{"label": "notes", "type": "writable", "description": "Math notes"}]}))
}

fn ctx() -> ToolContext {
    ToolContext { tool_call_id: "c1".into(), tool_name: "math_add".into() }
}

#[test]
fn loading_registers_tools_and_blocks_persists_and_unloads() {
    let env = env();
    let sandbox = Scripted::new(math_description());
    let ext = runtime(&env, &sandbox, vec![]);
    let info = block_on(ext.load(math(), MATH.into())).unwrap();
    assert_eq!(info.tools, ["math_add"]);
    assert_eq!(info.context_labels, ["math_notes"]);
    let tools = ext.tools();
    let def = tools[0].definition();
    assert_eq!(
        (def.name.as_str(), def.description.as_str()),
        ("math_add", "[math] Add two numbers")
    );
    assert_eq!(def.input_schema["required"], json!(["a", "b"]));
    assert_eq!(block_on(tools[0].execute(json!({"a": 2, "b": 3}), &ctx())).unwrap(), json!(5));
    // The block is in the session now, not only after a restart.
    assert!(env.session.blocks().iter().any(|b| b.label == "math_notes"));
    env.session.set("math_notes", "pi is 3.14").unwrap();
    assert!(env.session.system_prompt("S").contains("MATH_NOTES (Math notes)"));

    let again = block_on(ext.load(math(), MATH.into())).unwrap_err();
    assert_eq!(again.to_string(), "Extension \"math\" is already loaded. Unload it first.");
    let clash = manifest(json!({"name": "math!", "version": "1"}));
    assert!(block_on(ext.load(clash, MATH.into()))
        .unwrap_err()
        .to_string()
        .contains("prefix \"math\" is taken"));

    // A new instance over the same database has it without running anything.
    let passes = sandbox.passes.get();
    let env = env.restarted();
    let restarted = runtime(&env, &sandbox, vec![]);
    assert_eq!(restarted.list().iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["math"]);
    assert_eq!(sandbox.passes.get(), passes, "restoring ran no isolate");
    let tools = restarted.tools();
    assert_eq!(block_on(tools[0].execute(json!({"a": 40, "b": 2}), &ctx())).unwrap(), json!(42));

    let gone = block_on(restarted.unload("math")).unwrap();
    assert_eq!(gone.tools, ["math_add"]);
    assert!(restarted.tools().is_empty());
    assert!(!env.session.blocks().iter().any(|b| b.label == "math_notes"));
    let stale = block_on(tools[0].execute(json!({"a": 1, "b": 1}), &ctx())).unwrap_err();
    assert!(stale.to_string().contains("has been unloaded"), "{stale}");
    assert!(
        runtime(&env.restarted(), &sandbox, vec![]).list().is_empty(),
        "its stored copy is gone"
    );
    assert_eq!(
        block_on(restarted.unload("math")).unwrap_err().to_string(),
        "Extension \"math\" is not loaded."
    );
}

/// The isolate key of the last pass.
fn last_key(sandbox: &Scripted) -> Option<String> {
    sandbox.last.borrow().as_ref().and_then(|(request, _)| request.reuse.clone())
}

#[test]
fn the_operations_of_one_load_share_an_isolate_and_a_reload_gets_another() {
    let env = env();
    let sandbox = Scripted::new(math_description());
    let ext = runtime(&env, &sandbox, vec![]);
    block_on(ext.load(math(), MATH.into())).unwrap();
    let described = last_key(&sandbox).expect("describe names the load's isolate");
    assert!(described.starts_with("ext:"), "{described}");
    block_on(ext.tools()[0].execute(json!({"a": 1, "b": 2}), &ctx())).unwrap();
    assert_eq!(last_key(&sandbox).as_ref(), Some(&described), "a call enters the same isolate");
    let (request, _) = sandbox.last.borrow().clone().unwrap();
    assert_eq!(request.input["kind"], "tool", "the operation travels as the input");
    assert_eq!(request.input["args"], json!({"a": 1, "b": 2}));

    // The same load after a restart of the object: the same isolate.
    let env = env.restarted();
    let restarted = runtime(&env, &sandbox, vec![]);
    block_on(restarted.tools()[0].execute(json!({"a": 1, "b": 2}), &ctx())).unwrap();
    assert_eq!(last_key(&sandbox).as_ref(), Some(&described));

    // Unloaded and loaded again, the same source gets a fresh isolate; so does another one.
    block_on(restarted.unload("math")).unwrap();
    block_on(restarted.load(math(), MATH.into())).unwrap();
    let reloaded = last_key(&sandbox).unwrap();
    assert_ne!(reloaded, described);
    block_on(restarted.tools()[0].execute(json!({"a": 1, "b": 2}), &ctx())).unwrap();
    assert_eq!(last_key(&sandbox), Some(reloaded.clone()));
    let other = manifest(json!({"name": "other", "version": "1"}));
    block_on(restarted.load(other, MATH.replace("a + b", "b + a"))).unwrap();
    assert!(![&described, &reloaded].contains(&&last_key(&sandbox).unwrap()));

    // A row stored before load tokens gets one, kept from then on.
    let old = Rc::new(SqliteSql::new());
    let store = super::store::ExtensionStore::open(old.clone()).unwrap();
    let described_math = serde_json::from_value(math_description()).unwrap();
    store.put(&math(), MATH, &described_math, None).unwrap();
    let keys: Vec<_> = (0..2)
        .map(|_| {
            let env = Env::over(old.clone());
            let ext = runtime(&env, &sandbox, vec![]);
            block_on(ext.tools()[0].execute(json!({"a": 1, "b": 2}), &ctx())).unwrap();
            last_key(&sandbox).unwrap()
        })
        .collect();
    assert_eq!(keys[0], keys[1]);

    // The app's static extensions share an isolate within an instance, not across instances.
    let statics = || vec![(manifest(json!({"name": "calc", "version": "2"})), MATH.to_string())];
    let first = runtime(&env.restarted(), &sandbox, statics());
    block_on(first.ensure_started());
    let static_key = last_key(&sandbox).unwrap();
    let calc = |ext: &Rc<Extensions>| {
        let tool = ext.tools().into_iter().find(|t| t.definition().name == "calc_add").unwrap();
        block_on(tool.execute(json!({"a": 1, "b": 2}), &ctx())).unwrap();
    };
    calc(&first);
    assert_eq!(last_key(&sandbox), Some(static_key.clone()));
    let second = runtime(&env.restarted(), &sandbox, statics());
    block_on(second.ensure_started());
    calc(&second);
    assert_ne!(last_key(&sandbox), Some(static_key));
}

#[test]
fn static_extensions_come_first_and_stay() {
    let env = env();
    let sandbox = Scripted::new(math_description());
    let ext = runtime(&env, &sandbox, vec![]);
    block_on(ext.load(manifest(json!({"name": "dyn", "version": "1"})), MATH.into())).unwrap();
    let statics = vec![(manifest(json!({"name": "calc", "version": "2"})), MATH.to_string())];
    let env = env.restarted();
    let ext = runtime(&env, &sandbox, statics);
    block_on(ext.ensure_started());
    let names: Vec<_> = ext.list().into_iter().map(|e| (e.name, e.is_static)).collect();
    assert_eq!(names, [("calc".to_string(), true), ("dyn".to_string(), false)]);
    assert_eq!(
        block_on(ext.unload("calc")).unwrap_err().to_string(),
        "Extension \"calc\" is part of the agent's configuration and cannot be unloaded."
    );
    assert!(
        runtime(&env.restarted(), &sandbox, vec![]).list().iter().all(|e| e.name != "calc"),
        "statics are not stored"
    );
}

#[test]
fn bad_sources_and_limits_are_clear_errors() {
    let env = env();
    let sandbox = Scripted::new(
        json!({"tools": [{"name": "bad name", "description": "x", "parameters": {}, "required": []}], "hooks": []}),
    );
    let ext = runtime(&env, &sandbox, vec![]);
    let m = || manifest(json!({"name": "t", "version": "1"}));
    let e = block_on(ext.load(m(), MATH.into())).unwrap_err();
    assert!(e.to_string().contains("full name \"t_bad name\""), "{e}");
    *sandbox.described.borrow_mut() = json!({"tools": [{"name": "x", "description": "x", "parameters": {"a": {"type": 5}}, "required": []}], "hooks": []});
    assert!(block_on(ext.load(m(), MATH.into()))
        .unwrap_err()
        .to_string()
        .contains("does not compile"));
    *sandbox.described.borrow_mut() = json!({"tools": [], "hooks": ["onChunk"]});
    assert!(block_on(ext.load(m(), MATH.into()))
        .unwrap_err()
        .to_string()
        .contains("hooks.onChunk is not a hook"));
    assert!(block_on(ext.load(m(), "  ".into())).unwrap_err().to_string().contains("empty"));
    assert!(block_on(ext.load(m(), "x".repeat(MAX_SOURCE_BYTES + 1)))
        .unwrap_err()
        .to_string()
        .contains("over the limit"));
    assert!(ext.list().is_empty(), "nothing was registered");

    *sandbox.described.borrow_mut() = math_description();
    block_on(ext.load(m(), MATH.into())).unwrap();
    let tool = ext.tools().remove(0);
    let answers: [(Result<Value, String>, &str); 4] = [
        (Err("Execution timed out after 30000 ms".into()), "timed out after 30000 ms"),
        (
            Err("RangeError: The result is 2000002 characters of JSON, over the limit of 1000000"
                .into()),
            "2000002 bytes, over the limit of 1000000",
        ),
        (Ok(json!("x".repeat(MAX_RESULT_BYTES))), "over the limit of 1000000"),
        (Err("TypeError: boom".into()), "TypeError: boom"),
    ];
    for (answer, want) in answers {
        let answer = RefCell::new(Some(answer));
        let once = answer.borrow_mut().take().unwrap();
        *sandbox.respond.borrow_mut() = Rc::new(move |_, _| {
            let once = once.clone();
            Box::pin(async move { once })
        });
        let e = block_on(tool.execute(json!({"a": 1, "b": 2}), &ctx())).unwrap_err();
        assert!(e.to_string().contains(want), "{e} vs {want}");
    }
}

#[test]
fn network_hosts_run_through_the_gateway_and_others_have_none() {
    let env = env();
    let sandbox = Scripted::new(math_description());
    let ext = runtime(&env, &sandbox, vec![]);
    block_on(ext.load(manifest(json!({"name": "off", "version": "1"})), MATH.into())).unwrap();
    assert_eq!(sandbox.last.borrow().as_ref().unwrap().1, None);
    let net = manifest(
        json!({"name": "net", "version": "1", "permissions": {"network": ["api.example.com"]}}),
    );
    block_on(ext.load(net, MATH.into())).unwrap();
    let grant = sandbox.last.borrow().as_ref().unwrap().1.clone();
    assert_eq!(
        grant,
        Some(NetworkGrant { hosts: vec!["api.example.com".into()], allow_private: false })
    );
}

#[test]
fn tools_reach_the_host_only_through_the_bridge() {
    let env = env();
    block_on(env.ws.write_file("/data.txt", "42", "text/plain")).unwrap();
    let sandbox = Scripted::new(
        json!({"tools": [{"name": "go", "description": "d", "parameters": {}, "required": []}], "hooks": []}),
    );
    *sandbox.respond.borrow_mut() = Rc::new(|_, d: Rc<dyn Dispatcher>| {
        Box::pin(async move {
            let read = d
                .call(host_call("readFile", json!({"path": "/data.txt"})))
                .await
                .map_err(|e| e.to_string())?;
            let write =
                d.call(host_call("writeFile", json!({"path": "/out.txt", "content": "x"}))).await;
            Ok(json!({"read": read, "write": write.map_err(|e| e.to_string()).err()}))
        })
    });
    let ext = runtime(&env, &sandbox, vec![]);
    let m =
        manifest(json!({"name": "reader", "version": "1", "permissions": {"workspace": "read"}}));
    block_on(ext.load(m, "({tools:{}})".into())).unwrap();
    let out = block_on(ext.tools()[0].execute(json!({}), &ctx())).unwrap();
    assert_eq!(out["read"], "42");
    assert!(out["write"].as_str().unwrap().contains("needs workspace \"read-write\""), "{out}");
    assert_eq!(block_on(env.ws.read_file("/out.txt")).unwrap(), None);
}

#[test]
fn before_turn_hooks_narrow_tools_and_replace_the_prompt_in_order() {
    let env = env();
    let sandbox = Scripted::new(json!({"tools": [], "hooks": ["beforeTurn"]}));
    *sandbox.respond.borrow_mut() = Rc::new(|op, _| {
        Box::pin(async move {
            assert_eq!(op["kind"], "hook");
            let system = op["context"]["system"].as_str().unwrap().to_owned();
            Ok(json!({"system": format!("{system}+"), "activeTools": ["a", "c"]}))
        })
    });
    let ext = runtime(&env, &sandbox, vec![]);
    block_on(ext.load(manifest(json!({"name": "h1", "version": "1"})), "({hooks:{}})".into()))
        .unwrap();
    block_on(ext.load(manifest(json!({"name": "h2", "version": "1"})), "({hooks:{}})".into()))
        .unwrap();
    let body = serde_json::Map::new();
    let out = block_on(ext.before_turn(hooks::TurnSnapshot {
        system: "S",
        tool_names: vec!["a".into(), "b".into()],
        message_count: 1,
        continuation: false,
        body: &body,
    }));
    assert_eq!(out.system.as_deref(), Some("S++"), "the second hook saw the first one's prompt");
    assert_eq!(out.active_tools, Some(vec!["a".to_string()]), "narrowing only: c was never a tool");
    // A hook that fails or times out is skipped.
    *sandbox.respond.borrow_mut() =
        Rc::new(|_, _| Box::pin(async { Err("Execution timed out after 5000 ms".into()) }));
    let (request, _) = sandbox.last.borrow().clone().unwrap();
    assert_eq!(request.timeout_ms, DEFAULT_HOOK_TIMEOUT_MS);
    let out = block_on(ext.before_turn(hooks::TurnSnapshot {
        system: "S",
        tool_names: vec![],
        message_count: 0,
        continuation: false,
        body: &body,
    }));
    assert_eq!(out, hooks::TurnOverride::default());
}

#[test]
fn load_approval_and_settings() {
    let asks = json!({"network": ["a.com"]});
    assert!(load_needs_approval(LoadApproval::Permissions, &asks));
    assert!(load_needs_approval(
        LoadApproval::Permissions,
        &json!({"workspace_access": "read-write"})
    ));
    assert!(!load_needs_approval(
        LoadApproval::Permissions,
        &json!({"workspace_access": "read", "network": []})
    ));
    assert!(load_needs_approval(LoadApproval::Always, &json!({})));
    assert!(!load_needs_approval(LoadApproval::Never, &asks));

    assert_eq!(ExtensionOptions::from_setting("").unwrap(), ExtensionOptions::default());
    let off = ExtensionOptions::from_setting("false").unwrap();
    assert_eq!(off, ExtensionOptions { enabled: false, ..Default::default() });
    let o = ExtensionOptions::from_setting(
        r#"{"approval":"never","toolTimeout":1000,"hookTimeout":200}"#,
    )
    .unwrap();
    assert_eq!(
        (o.approval, o.tool_timeout_ms, o.hook_timeout_ms),
        (LoadApproval::Never, 1000, 200)
    );
    assert!(ExtensionOptions::from_setting(r#"{"approval":"sometimes"}"#).is_err());
    assert!(ExtensionOptions::from_setting(r#"{"toolTimeout":0}"#).is_err());
    assert!(ExtensionOptions::from_setting(r#"{"colour":1}"#).is_err());

    let setting = json!({"approval": "always", "extensions": [
        {"manifest": {"name": "calc", "version": "1"}, "source": MATH},
        {"manifest": {"name": ""}, "source": MATH}
    ]});
    let (spec, ignored) = crate::agent::settings::read_settings(|k| {
        (k == "THINK_EXTENSIONS").then(|| setting.to_string())
    });
    assert_eq!(spec.extensions.approval, LoadApproval::Always);
    assert_eq!(spec.static_extensions.len(), 1);
    assert_eq!(spec.static_extensions[0].0.name, "calc");
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert!(ignored[0]
        .to_string()
        .starts_with("ignoring THINK_EXTENSIONS: Invalid extension manifest"));
}

/// Returns `Pending` once (waking itself), so other futures of a `join` get polled.
fn yield_now() -> impl std::future::Future<Output = ()> {
    let mut yielded = false;
    futures::future::poll_fn(move |cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
}

#[test]
fn at_most_ten_isolates_are_in_flight() {
    let env = env();
    let sandbox = Scripted::new(math_description());
    let ext = runtime(&env, &sandbox, vec![]);
    block_on(ext.load(math(), MATH.into())).unwrap();
    let live = Rc::new(Cell::new(0usize));
    let max = Rc::new(Cell::new(0usize));
    let gate: Rc<RefCell<Vec<futures::channel::oneshot::Sender<()>>>> = Rc::default();
    let (l, m, g) = (live.clone(), max.clone(), gate.clone());
    *sandbox.respond.borrow_mut() = Rc::new(move |_, _| {
        let (l, m, g) = (l.clone(), m.clone(), g.clone());
        Box::pin(async move {
            l.set(l.get() + 1);
            m.set(m.get().max(l.get()));
            let (tx, rx) = futures::channel::oneshot::channel();
            g.borrow_mut().push(tx);
            let _ = rx.await;
            l.set(l.get() - 1);
            Ok(json!(1))
        })
    });
    let tool = ext.tools().remove(0);
    let call_ctx = ctx();
    let calls = futures::future::join_all((0..12).map(|_| tool.execute(json!({}), &call_ctx)));
    let done = Cell::new(false);
    let release = async {
        while !done.get() {
            yield_now().await;
            for tx in gate.borrow_mut().drain(..) {
                let _ = tx.send(());
            }
        }
    };
    let (results, ()) = block_on(futures::future::join(
        async {
            let r = calls.await;
            done.set(true);
            r
        },
        release,
    ));
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(max.get(), MAX_ISOLATES_IN_FLIGHT);
}

#[test]
fn model_tools_off_removes_only_load_and_list() {
    let names = |options: ExtensionOptions| {
        let env = env();
        let sandbox = Scripted::new(math_description());
        let ext = Rc::new(Extensions::new(
            env.sql.clone(),
            Some(sandbox as Rc<dyn crate::codemode::Sandbox>),
            env.bridge_env(),
            options,
            vec![],
        ));
        block_on(ext.load(math(), MATH.into())).unwrap();
        tools::turn_tools(&ext).iter().map(|t| t.definition().name.clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        names(ExtensionOptions::default()),
        ["math_add", "load_extension", "list_extensions"]
    );
    let off = ExtensionOptions { model_tools: false, ..Default::default() };
    assert_eq!(names(off), ["math_add"]);
}

/// A hook whose run never ends because the process died in it (locally: its code exhausted
/// memory and the runtime was restarted) is off after the restart, so it cannot stop the
/// runtime again on every turn; the extension's tools still work, `list` says which hook is
/// off, and loading the extension again turns it back on.
#[test]
fn a_hook_run_that_ended_with_the_process_is_off_until_a_reload() {
    use futures::FutureExt;
    let env = env();
    let sandbox = Scripted::new(json!({"tools": [], "hooks": ["beforeTurn", "afterToolCall"]}));
    *sandbox.respond.borrow_mut() = Rc::new(|_, _| Box::pin(futures::future::pending()));
    let ext = runtime(&env, &sandbox, vec![]);
    let bomb = manifest(json!({"name": "bomb", "version": "1"}));
    block_on(ext.load(bomb.clone(), "({hooks:{}})".into())).unwrap();
    let body = serde_json::Map::new();
    let snapshot = || hooks::TurnSnapshot {
        system: "S",
        tool_names: vec![],
        message_count: 1,
        continuation: false,
        body: &body,
    };
    // The process dies during the hook: its future is dropped where it stood.
    assert!(ext.before_turn(snapshot()).now_or_never().is_none());
    assert_eq!(ext.subscribers(HookName::BeforeTurn).len(), 1, "this process does not know");

    let env = env.restarted();
    let restarted = runtime(&env, &sandbox, vec![]);
    *sandbox.respond.borrow_mut() =
        Rc::new(|_, _| Box::pin(async { Ok(json!({"system": "the hook ran"})) }));
    let passes = sandbox.passes.get();
    assert_eq!(block_on(restarted.before_turn(snapshot())), hooks::TurnOverride::default());
    assert_eq!(sandbox.passes.get(), passes, "the stopped hook did not run");
    assert!(restarted.subscribers(HookName::BeforeTurn).is_empty());
    assert_eq!(restarted.subscribers(HookName::AfterToolCall).len(), 1, "other hooks still run");
    let info = &restarted.list()[0];
    assert_eq!(info.stopped_hooks, [HookName::BeforeTurn]);
    assert_eq!(serde_json::to_value(info).unwrap()["stoppedHooks"], json!(["beforeTurn"]));

    // Still off after another restart; a hook that ends (here with an error) leaves no mark.
    *sandbox.respond.borrow_mut() = Rc::new(|_, _| Box::pin(async { Err("boom".into()) }));
    block_on(restarted.observe(HookName::AfterToolCall, json!({})));
    let env = env.restarted();
    let again = runtime(&env, &sandbox, vec![]);
    assert_eq!(again.list()[0].stopped_hooks, [HookName::BeforeTurn]);

    // Loading it again (after an unload) turns the hook back on.
    block_on(again.unload("bomb")).unwrap();
    block_on(again.load(bomb, "({hooks:{}})".into())).unwrap();
    assert!(again.list()[0].stopped_hooks.is_empty());
    assert_eq!(again.subscribers(HookName::BeforeTurn).len(), 1);
    let env = env.restarted();
    assert_eq!(runtime(&env, &sandbox, vec![]).subscribers(HookName::BeforeTurn).len(), 1);
}
