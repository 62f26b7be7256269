//! Host tests of Code Mode: normalization, the journal state machine (pause, approve, replay,
//! divergence, `Promise.all`, caps, retention, expiry), type generation and search. A scripted
//! sandbox stands in for the isolate: each "program" is Rust that makes the connector calls
//! the JavaScript would make, through the real dispatcher, journal, workspace and SQLite.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use async_trait::async_trait;
use futures::future::LocalBoxFuture;
use serde_json::{json, Value};

use super::connectors::{Connector, StateConnector, ToolsConnector};
use super::normalize::{normalize_code, strip_fence, CodeShape};
use super::runtime::{stable_stringify, INTERRUPTED_CALL};
use super::*;
use crate::platform::Clock;
use crate::store::sqlite::SqliteSql;
use crate::store::Sql;
use crate::tools::approval::ApprovalPolicy;
use crate::tools::{DynamicTool, Layer, ToolRef, ToolSet};
use crate::workspace::Workspace;

/// Distinct random bytes per call; sleeps of a second or more never end (so the host's
/// timeout only fires where a test wants it), shorter ones end at once.
struct Clock2 {
    t: Cell<f64>,
    n: Cell<u64>,
    hang_long: bool,
}

#[async_trait(?Send)]
impl Clock for Clock2 {
    fn now_ms(&self) -> f64 {
        self.t.set(self.t.get() + 1.0);
        self.t.get()
    }
    async fn sleep(&self, ms: u64) {
        if ms >= 1000 && self.hang_long {
            futures::future::pending::<()>().await;
        }
    }
    fn random_bytes(&self, buf: &mut [u8]) {
        for b in buf.iter_mut() {
            // xorshift64: no repeats within a test.
            let mut x = self.n.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.n.set(x);
            *b = (x >> 24) as u8;
        }
    }
}

type Program = Rc<dyn Fn(Rc<dyn Dispatcher>) -> LocalBoxFuture<'static, Result<Value, String>>>;

/// Runs the program registered for the code's first line (`// name`).
#[derive(Default)]
struct Scripted {
    programs: RefCell<Vec<(String, Program)>>,
    passes: Cell<usize>,
    live: Cell<usize>,
    max_live: Cell<usize>,
    last_request: RefCell<Option<SandboxRequest>>,
}

impl Scripted {
    fn program<F>(&self, name: &str, f: F)
    where
        F: Fn(Rc<dyn Dispatcher>) -> LocalBoxFuture<'static, Result<Value, String>> + 'static,
    {
        self.programs.borrow_mut().push((name.to_owned(), Rc::new(f)));
    }
}

#[async_trait(?Send)]
impl Sandbox for Scripted {
    async fn run(
        &self,
        request: SandboxRequest,
        dispatcher: Rc<dyn Dispatcher>,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.passes.set(self.passes.get() + 1);
        *self.last_request.borrow_mut() = Some(request.clone());
        if request.body.contains("SYNTAX") {
            return Err(SandboxError::Syntax(
                "Failed to start Worker:\nUncaught SyntaxError: Unexpected token ';'\n  at user.js:3:12".into(),
            ));
        }
        let program = self
            .programs
            .borrow()
            .iter()
            .find(|(n, _)| request.body.lines().any(|l| l.trim() == format!("// {n}")))
            .map(|(_, p)| p.clone());
        let Some(program) = program else {
            return Ok(SandboxOutcome { result: Ok(Value::Null), logs: vec![] });
        };
        self.live.set(self.live.get() + 1);
        self.max_live.set(self.max_live.get().max(self.live.get()));
        let result = program(dispatcher).await;
        self.live.set(self.live.get() - 1);
        Ok(SandboxOutcome { result, logs: vec!["ran".into()] })
    }
}

struct Fixture {
    sql: Rc<SqliteSql>,
    ws: Rc<Workspace>,
    sandbox: Rc<Scripted>,
    rt: Rc<CodeMode>,
    connectors: Vec<Rc<dyn Connector>>,
    charges: Rc<Cell<usize>>,
}

fn fixture_with(options: ExecuteOptions, hang_long: bool) -> Fixture {
    let sql = Rc::new(SqliteSql::new());
    let clock: Rc<dyn Clock> = Rc::new(Clock2 {
        t: Cell::new(1_700_000_000_000.0),
        n: Cell::new(0x9e37_79b9_7f4a_7c15),
        hang_long,
    });
    let ws = Rc::new(Workspace::new(sql.clone(), clock.clone()));
    crate::agent::ledger::Ledger::create_table(sql.as_ref()).unwrap();
    let charges = Rc::new(Cell::new(0));
    let counter = charges.clone();
    let charge: ToolRef = Rc::new(DynamicTool::new(
        "charge",
        "Charge a card",
        json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}),
        move |input, _| {
            counter.set(counter.get() + 1);
            async move { Ok(json!({"charged": input["cents"]})) }
        },
    ));
    let now: Rc<dyn Fn() -> f64> = Rc::new(|| 1.0);
    let mut set = ToolSet::new();
    set.add_layer(
        Layer::Agent,
        [crate::agent::ledger::LedgeredTool::wrap(charge, sql.clone(), now)],
    );
    let policy =
        ApprovalPolicy::new().require_when("charge", |i| i["cents"].as_i64() > Some(100)).unwrap();
    let connectors: Vec<Rc<dyn Connector>> = vec![
        Rc::new(ToolsConnector::new(&set, policy, &["execute"])),
        Rc::new(StateConnector::new(ws.clone()).with_undo(sql.clone())),
    ];
    let sandbox = Rc::new(Scripted::default());
    let sql_dyn: Rc<dyn Sql> = sql.clone();
    let rt = CodeMode::new(sql_dyn, clock, sandbox.clone(), options).unwrap();
    Fixture { sql, ws, sandbox, rt, connectors, charges }
}

fn fixture() -> Fixture {
    fixture_with(ExecuteOptions::default(), true)
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

async fn call(
    d: &Rc<dyn Dispatcher>,
    c: &str,
    m: &str,
    args: Value,
    site: &str,
) -> Result<Value, String> {
    d.call(CallRequest { connector: c.into(), method: m.into(), args, site: site.into() })
        .await
        .map_err(|e| e.to_string())
}

fn read(f: &Fixture, path: &str) -> Option<String> {
    block_on(f.ws.read_file(path)).unwrap()
}

// --- normalization ---

#[test]
fn normalization_accepts_what_models_send() {
    let arrow = normalize_code("async () => {\n  return 1;\n}");
    assert_eq!(arrow.shape, CodeShape::Function);
    assert!(arrow.body.starts_with("return await ("), "{}", arrow.body);
    let fenced = normalize_code("```js\nasync () => { return 2 }\n```\n");
    assert_eq!(fenced.shape, CodeShape::Function);
    assert!(!fenced.body.contains("```"));
    assert_eq!(strip_fence("Here:\n```javascript\nreturn 1\n```\nDone"), "return 1\n");
    assert_eq!(normalize_code("(async () => { return 3 })").shape, CodeShape::Function);
    assert_eq!(normalize_code("async function main() { return 4 }").shape, CodeShape::Function);

    let last_expr = normalize_code("const x = await state.readFile({ path: '/a' });\nx.length");
    assert_eq!(last_expr.shape, CodeShape::Statements);
    assert!(last_expr.body.ends_with("return (\nx.length\n);"), "{}", last_expr.body);
    // A statement spread over lines (chained calls) is one statement.
    let chained = normalize_code("const a = 1\n[1, 2]\n  .map((v) => v + a)\n  .filter(Boolean)");
    assert!(chained.body.contains("return (\n[1, 2]\n  .map"), "{}", chained.body);
    // Semicolons and braces inside strings, templates, regexes and comments do not split.
    let tricky = normalize_code(
        "const s = \"a;b}\"; const t = `x${ {a: 1}.a };y`; // c; d\nconst r = /;}/g\ns + t",
    );
    assert!(tricky.body.ends_with("return (\ns + t\n);"), "{}", tricky.body);
    // Code that ends with a block or a return is left alone.
    let block = normalize_code("if (1) {\n  console.log(1)\n}");
    assert_eq!(block.body, "if (1) {\n  console.log(1)\n}");
    assert_eq!(normalize_code("return 5;").body, "return 5;");
    // An immediately called arrow is an expression statement whose value is awaited.
    let iife = normalize_code("(async () => { return 6 })()");
    assert_eq!(iife.shape, CodeShape::Statements);
    assert!(iife.body.starts_with("\nreturn (\n(async"), "{}", iife.body);
    // An arrow followed by more code is statements, not one function.
    assert_eq!(normalize_code("async () => 1; 2").shape, CodeShape::Statements);
}

#[test]
fn loops_get_a_deadline_guard() {
    use super::normalize::guard_loops;
    assert_eq!(guard_loops("while (true) {}"), "while ((await __cm_tick()) && (true)) {}");
    assert_eq!(guard_loops("for (;;) x++"), "for (; (await __cm_tick());) x++");
    assert_eq!(
        guard_loops("for (let i = 0; i < n; i++) {}"),
        "for (let i = 0; (await __cm_tick()) && ( i < n); i++) {}"
    );
    assert_eq!(
        guard_loops("for (const x of xs) { f(x) }"),
        "for (const x of xs) { (await __cm_tick()); f(x) }"
    );
    assert_eq!(
        guard_loops("do { x++ } while (x < 3)"),
        "do { x++ } while ((await __cm_tick()) && (x < 3))"
    );
    // A body that is not a block is left as it is (an object literal there is not a body).
    assert_eq!(guard_loops("for (const x of xs) o = { x }"), "for (const x of xs) o = { x }");
    // Inside an async function it can, so the object keeps serving there too.
    assert_eq!(
        guard_loops("await Promise.all(xs.map(async (x) => { while (x) x-- }))"),
        "await Promise.all(xs.map(async (x) => { while ((await __cm_tick()) && (x)) x-- }))"
    );
    assert_eq!(
        guard_loops("xs.map(async x => { for (;;) {} })"),
        "xs.map(async x => { for (; (await __cm_tick());) {} })"
    );
    assert_eq!(
        guard_loops("async function f() { while (1) {} } const o = { async m() { for (;;) {} } }"),
        "async function f() { while ((await __cm_tick()) && (1)) {} } const o = { async m() { for (; (await __cm_tick());) {} } }"
    );
    // Inside a nested synchronous function the guard cannot await.
    assert_eq!(
        guard_loops("xs.map((x) => { while (x) x-- })"),
        "xs.map((x) => { while (__cm_guard() && (x)) x-- })"
    );
    assert_eq!(
        guard_loops("function f(a) { for (;;) {} }\nif (a) { while (b) {} }"),
        "function f(a) { for (; __cm_guard();) {} }\nif (a) { while ((await __cm_tick()) && (b)) {} }"
    );
    // Loops in strings, comments, templates and property names are not loops.
    let quiet = "const s = 'while (1) {}'; // for (;;)\nconst t = `${a.while}`; obj.for(1)";
    assert_eq!(guard_loops(quiet), quiet);
    // A `for` in a template expression is still guarded.
    assert_eq!(
        guard_loops("`${(() => { for (;;) {} })()}`"),
        "`${(() => { for (; __cm_guard();) {} })()}`"
    );
}

#[test]
fn normalization_never_panics_on_garbage() {
    // The release build aborts on a panic, so malformed code must never make the lexer panic.
    let alphabet: Vec<&str> = vec![
        "a", " ", ";", "{", "}", "(", ")", "[", "]", "`", "'", "\"", "/", "\\", "*", "\n", "${",
        "=>", ".", ",", "+", "é", "😀", "while", "for", "async", "function", "of", "do", "if",
        "return", "x", "=", "//", "/*", "*/",
    ];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..5000 {
        let mut code = String::new();
        for _ in 0..(x % 60) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            code.push_str(alphabet[(x % alphabet.len() as u64) as usize]);
        }
        let n = normalize_code(&code);
        let _ = super::normalize::guard_loops(&n.body);
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    }
}

// --- the journal state machine ---

#[test]
fn a_completed_run_logs_every_call_and_returns_its_result() {
    let f = fixture();
    f.sandbox.program("writes", |d| {
        Box::pin(async move {
            call(&d, "state", "writeFile", json!({"path": "/a.txt", "content": "hi"}), "2:1")
                .await?;
            let text = call(&d, "state", "readFile", json!({"path": "/a.txt"}), "3:1").await?;
            let charged = call(&d, "tools", "charge", json!({"cents": 5}), "4:1").await?;
            Ok(json!({"text": text, "charged": charged}))
        })
    });
    let out = block_on(f.rt.execute("// writes\n", Some("call_1"), &f.connectors));
    assert_eq!(out["status"], "completed", "{out}");
    assert_eq!(out["result"], json!({"text": "hi", "charged": {"charged": 5}}));
    assert_eq!(out["logs"], json!(["ran"]));
    assert_eq!(out["calls"]["count"], 3);
    // The summary keeps the method names and the argument text as the code wrote them.
    assert_eq!(
        out["calls"]["last"],
        json!([
            r#"state.writeFile({"path":"/a.txt","content":"hi"}) applied"#,
            r#"state.readFile({"path":"/a.txt"}) applied"#,
            r#"tools.charge({"cents":5}) applied"#,
        ])
    );
    assert_eq!(read(&f, "/a.txt").as_deref(), Some("hi"));
    let id = out["executionId"].as_str().unwrap();
    let journal = journal::Journal::new(f.sql.as_ref());
    let log = journal.log(id).unwrap();
    let states: Vec<_> = log.iter().map(|e| (e.method.as_str(), e.state, e.ephemeral)).collect();
    assert_eq!(
        states,
        [
            ("writeFile", journal::CallState::Applied, false),
            ("readFile", journal::CallState::Applied, true),
            ("charge", journal::CallState::Applied, false),
        ]
    );
    // The tool call went through the ledger with an id derived from the execution and step.
    let ledger = crate::agent::ledger::Ledger::new(f.sql.as_ref());
    assert!(ledger.get(&format!("cm_{id}_2")).unwrap().is_some());
    let row = journal.execution(id).unwrap().unwrap();
    assert_eq!(
        (row.status, row.tool_call_id.as_deref()),
        (journal::ExecStatus::Completed, Some("call_1"))
    );
}

#[test]
fn errors_are_results_not_throws() {
    let f = fixture();
    f.sandbox.program("throws", |_| {
        Box::pin(async { Err("TypeError: x is not a function".to_owned()) })
    });
    let out = block_on(f.rt.execute("// throws\n", None, &f.connectors));
    assert_eq!(out["status"], "error");
    assert_eq!(out["error"], "TypeError: x is not a function");
    let syntax = block_on(f.rt.execute("return (1 + ; // SYNTAX", None, &f.connectors));
    assert_eq!(syntax["status"], "error");
    assert_eq!(syntax["error"], "SyntaxError: Unexpected token ';' (at line 2, column 12)");
    // Input validation happens on the host, with the method named.
    f.sandbox.program("bad", |d| {
        Box::pin(async move { call(&d, "state", "readFile", json!({"file": "/a"}), "1:1").await })
    });
    let bad = block_on(f.rt.execute("// bad\n", None, &f.connectors));
    assert!(
        bad["error"].as_str().unwrap().starts_with("Invalid input for state.readFile"),
        "{bad}"
    );
}

fn approval_program(f: &Fixture) {
    // Two appends, then a charge that needs approval (over 100 cents), then a write.
    f.sandbox.program("approve", |d| {
        Box::pin(async move {
            call(&d, "state", "appendFile", json!({"path": "/log", "content": "a"}), "2:1").await?;
            call(&d, "state", "appendFile", json!({"path": "/log", "content": "b"}), "3:1").await?;
            let r = call(&d, "tools", "charge", json!({"cents": 500}), "4:1").await?;
            call(&d, "state", "writeFile", json!({"path": "/done", "content": "yes"}), "5:1")
                .await?;
            Ok(r)
        })
    });
}

#[test]
fn approval_pauses_then_replays_without_repeating_earlier_calls() {
    let f = fixture();
    approval_program(&f);
    let out = block_on(f.rt.execute("// approve\n", Some("call_x"), &f.connectors));
    assert_eq!(out["status"], "paused", "{out}");
    let id = out["executionId"].as_str().unwrap().to_owned();
    assert_eq!(
        out["pending"],
        json!([{"executionId": id, "seq": 2, "connector": "tools", "method": "charge", "args": {"cents": 500}}])
    );
    assert_eq!(f.charges.get(), 0, "the charge waits for approval");
    assert_eq!(read(&f, "/log").as_deref(), Some("ab"));
    assert_eq!(read(&f, "/done"), None);
    assert_eq!(f.rt.pending(None).unwrap().as_array().unwrap().len(), 1);

    let approved = block_on(f.rt.approve(&id, &f.connectors)).unwrap();
    assert_eq!(approved["status"], "completed", "{approved}");
    assert_eq!(approved["result"], json!({"charged": 500}));
    assert_eq!(f.charges.get(), 1, "the approved call ran once");
    assert_eq!(read(&f, "/log").as_deref(), Some("ab"), "the appends were served from the journal");
    assert_eq!(read(&f, "/done").as_deref(), Some("yes"));
    // Approving again is an error, not a second charge.
    let again = block_on(f.rt.approve(&id, &f.connectors)).unwrap_err();
    assert_eq!(again.to_string(), format!("Execution {id} is not paused (it is completed)"));
    assert_eq!(f.charges.get(), 1);
}

#[test]
fn pending_args_are_cut_in_the_transcript_but_kept_in_full() {
    let f = fixture();
    f.sandbox.program("bigpending", |d| {
        Box::pin(async move {
            call(&d, "tools", "charge", json!({"cents": 900, "note": "n".repeat(5000)}), "1:1")
                .await
        })
    });
    let out = block_on(f.rt.execute("// bigpending\n", None, &f.connectors));
    let shown = out["pending"][0]["args"].as_str().unwrap();
    assert!(shown.contains("[truncated: 5023 characters in all]"), "{shown}");
    let full = f.rt.pending(None).unwrap();
    assert_eq!(full[0]["args"]["note"].as_str().unwrap().len(), 5000);
}

#[test]
fn reject_settles_the_run_and_nothing_runs() {
    let f = fixture();
    approval_program(&f);
    let out = block_on(f.rt.execute("// approve\n", None, &f.connectors));
    let id = out["executionId"].as_str().unwrap();
    let rejected = f.rt.reject(id, Some("too expensive")).unwrap();
    assert_eq!(
        rejected,
        json!({"status": "rejected", "executionId": id, "reason": "too expensive"})
    );
    assert_eq!(f.charges.get(), 0);
    assert!(f.rt.pending(Some(id)).unwrap().as_array().unwrap().is_empty());
    assert!(f.rt.reject(id, None).is_err());
}

#[test]
fn promise_all_replays_by_call_site_and_arguments() {
    let f = fixture();
    // Three calls started together; the middle one needs approval. In the replay the other
    // two arrive in the opposite order, as they may when results are served from the log.
    let pass = Rc::new(Cell::new(0));
    let p = pass.clone();
    f.sandbox.program("parallel", move |d| {
        p.set(p.get() + 1);
        let first = p.get() == 1;
        Box::pin(async move {
            let a = call(&d, "state", "appendFile", json!({"path": "/p", "content": "A"}), "2:10");
            let b = call(&d, "tools", "charge", json!({"cents": 999}), "2:40");
            let c = call(&d, "state", "appendFile", json!({"path": "/p", "content": "C"}), "2:70");
            let results = if first {
                let (a, b, c) = futures::join!(a, b, c);
                vec![a, b, c]
            } else {
                let (c, b, a) = futures::join!(c, b, a);
                vec![a, b, c]
            };
            let values: Result<Vec<Value>, String> = results.into_iter().collect();
            Ok(Value::Array(values?))
        })
    });
    let out = block_on(f.rt.execute("// parallel\n", None, &f.connectors));
    assert_eq!(out["status"], "paused", "{out}");
    let id = out["executionId"].as_str().unwrap().to_owned();
    // A ran before the pause; C arrived after it and waits for the replay.
    assert_eq!(read(&f, "/p").as_deref(), Some("A"));
    let done = block_on(f.rt.approve(&id, &f.connectors)).unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(read(&f, "/p").as_deref(), Some("AC"), "A once, C once");
    assert_eq!(f.charges.get(), 1);
    assert_eq!(done["result"][1], json!({"charged": 999}));
}

#[test]
fn a_changed_call_at_a_journaled_site_is_a_divergence_naming_the_step() {
    let f = fixture();
    let pass = Rc::new(Cell::new(0));
    let p = pass.clone();
    f.sandbox.program("diverge", move |d| {
        p.set(p.get() + 1);
        let content = if p.get() == 1 { "one" } else { "two" };
        Box::pin(async move {
            call(&d, "state", "writeFile", json!({"path": "/d", "content": content}), "2:1")
                .await?;
            call(&d, "tools", "charge", json!({"cents": 101}), "3:1").await
        })
    });
    let out = block_on(f.rt.execute("// diverge\n", None, &f.connectors));
    let id = out["executionId"].as_str().unwrap().to_owned();
    let replay = block_on(f.rt.approve(&id, &f.connectors)).unwrap();
    assert_eq!(replay["status"], "error");
    let error = replay["error"].as_str().unwrap();
    assert!(error.starts_with("Codemode replay divergence at step 0"), "{error}");
    assert!(error.contains("state.writeFile"), "{error}");
    assert_eq!(f.charges.get(), 0, "nothing after the divergence ran");
    assert_eq!(read(&f, "/d").as_deref(), Some("one"));
}

#[test]
fn a_call_interrupted_by_a_crash_is_never_run_again() {
    let f = fixture();
    approval_program(&f);
    let out = block_on(f.rt.execute("// approve\n", None, &f.connectors));
    let id = out["executionId"].as_str().unwrap().to_owned();
    // As if the process died during the second append of an earlier pass.
    let journal = journal::Journal::new(f.sql.as_ref());
    journal.update_call(&id, 1, journal::CallState::Executing, None).unwrap();
    let replay = block_on(f.rt.approve(&id, &f.connectors)).unwrap();
    assert_eq!(replay["status"], "error");
    assert_eq!(replay["error"], INTERRUPTED_CALL);
    assert_eq!(read(&f, "/log").as_deref(), Some("ab"));
    assert_eq!(f.charges.get(), 0);

    // An execution left running by a dead process is settled as an error at start.
    journal.start("exec_dead", "// x", None, 5.0).unwrap();
    f.rt.recover().unwrap();
    let row = journal.execution("exec_dead").unwrap().unwrap();
    assert_eq!(row.status, journal::ExecStatus::Error);
}

#[test]
fn steps_run_once_and_replay_their_value() {
    let f = fixture();
    let runs = Rc::new(Cell::new(0));
    let r = runs.clone();
    f.sandbox.program("step", move |d| {
        let r = r.clone();
        Box::pin(async move {
            let begin = call(&d, "codemode", "step", json!({"name": "token"}), "2:1").await?;
            let value = if begin["replayed"] == true {
                begin["value"].clone()
            } else {
                r.set(r.get() + 1);
                let v = json!(format!("tok-{}", r.get()));
                call(&d, "codemode", "stepDone", json!({"seq": begin["seq"], "value": v}), "2:1")
                    .await?;
                v
            };
            call(&d, "tools", "charge", json!({"cents": 700}), "3:1").await?;
            Ok(value)
        })
    });
    let out = block_on(f.rt.execute("// step\n", None, &f.connectors));
    assert_eq!(out["status"], "paused");
    let id = out["executionId"].as_str().unwrap().to_owned();
    let done = block_on(f.rt.approve(&id, &f.connectors)).unwrap();
    assert_eq!(done["result"], "tok-1", "{done}");
    assert_eq!(runs.get(), 1);
}

#[test]
fn caps_refuse_large_code_and_values_and_cut_large_results() {
    let f = fixture();
    let big = "x".repeat(MAX_CODE_BYTES + 1);
    let out = block_on(f.rt.execute(&big, None, &f.connectors));
    assert_eq!(out["status"], "error");
    assert!(out["error"].as_str().unwrap().contains("over the 1 MB limit; nothing ran"));
    assert_eq!(f.sandbox.passes.get(), 0);

    f.sandbox.program("bigarg", |d| {
        Box::pin(async move {
            let content = "y".repeat(MAX_DURABLE_VALUE_BYTES + 10);
            call(&d, "state", "writeFile", json!({"path": "/big", "content": content}), "1:1").await
        })
    });
    let out = block_on(f.rt.execute("// bigarg\n", None, &f.connectors));
    assert_eq!(out["status"], "error");
    assert!(out["error"].as_str().unwrap().contains("pass its path instead"), "{out}");
    assert_eq!(read(&f, "/big"), None);

    f.sandbox.program("bigresult", |_| Box::pin(async { Ok(json!("z".repeat(30_000))) }));
    let out = block_on(f.rt.execute("// bigresult\n", None, &f.connectors));
    assert_eq!(out["status"], "completed");
    let shown = out["result"].as_str().unwrap();
    assert!(
        shown.chars().count() < 24_100 && shown.contains("[truncated: 30002 characters in all]"),
        "{}",
        shown.len()
    );
}

#[test]
fn retention_keeps_fifty_terminal_runs_and_every_paused_one() {
    let f = fixture();
    approval_program(&f);
    let paused = block_on(f.rt.execute("// approve\n", None, &f.connectors));
    for _ in 0..55 {
        block_on(f.rt.execute("return 1", None, &f.connectors));
    }
    let journal = journal::Journal::new(f.sql.as_ref());
    let all = journal.executions(1000).unwrap();
    assert_eq!(all.len(), 51);
    assert!(all.iter().any(|r| r.id == paused["executionId"].as_str().unwrap()));
    assert_eq!(f.rt.executions(Some(3)).unwrap().as_array().unwrap().len(), 3);
}

#[test]
fn the_sweep_expires_old_paused_runs() {
    let options = ExecuteOptions { paused_max_age_ms: 0.5, ..ExecuteOptions::default() };
    let f = fixture_with(options, true);
    approval_program(&f);
    let out = block_on(f.rt.execute("// approve\n", None, &f.connectors));
    let id = out["executionId"].as_str().unwrap();
    let row = f.rt.execution(id).unwrap().unwrap();
    assert_eq!(f.rt.next_expiry().unwrap(), Some(row.updated_at as f64 + 1.5));
    let expired = f.rt.sweep().unwrap();
    let output = json!({"status": "rejected", "executionId": id, "reason": runtime::EXPIRED});
    assert_eq!(expired, [(id.to_owned(), output)]);
    assert_eq!(f.rt.next_expiry().unwrap(), None);
    let row = f.rt.execution(id).unwrap().unwrap();
    assert_eq!(row.status, journal::ExecStatus::Rejected);
    assert_eq!(row.error.as_deref(), Some("Expired while waiting for approval."));
}

#[test]
fn the_host_timeout_ends_a_pass_that_never_returns() {
    let f = fixture_with(ExecuteOptions { timeout_ms: 10, ..ExecuteOptions::default() }, false);
    f.sandbox.program("hang", |_| Box::pin(futures::future::pending()));
    let out = block_on(f.rt.execute("// hang\n", None, &f.connectors));
    assert_eq!(out["status"], "error");
    assert_eq!(out["error"], "Execution timed out after 10 ms");
}

#[test]
fn at_most_max_in_flight_passes_run_at_once() {
    let f = Rc::new(fixture_with(
        ExecuteOptions { max_in_flight: 3, ..ExecuteOptions::default() },
        true,
    ));
    let gate = Rc::new(RefCell::new(Vec::<futures::channel::oneshot::Sender<()>>::new()));
    let g = gate.clone();
    f.sandbox.program("wait", move |_| {
        let (tx, rx) = futures::channel::oneshot::channel();
        g.borrow_mut().push(tx);
        Box::pin(async move {
            let _ = rx.await;
            Ok(json!(1))
        })
    });
    let mut pool = futures::executor::LocalPool::new();
    let done = Rc::new(Cell::new(0));
    for _ in 0..7 {
        let (f, done) = (f.clone(), done.clone());
        futures::task::LocalSpawnExt::spawn_local(&pool.spawner(), async move {
            let out = f.rt.execute("// wait\n", None, &f.connectors).await;
            assert_eq!(out["status"], "completed");
            done.set(done.get() + 1);
        })
        .unwrap();
    }
    pool.run_until_stalled();
    assert_eq!(f.sandbox.live.get(), 3, "three run, four wait");
    while done.get() < 7 {
        for tx in gate.borrow_mut().drain(..) {
            let _ = tx.send(());
        }
        pool.run_until_stalled();
    }
    assert_eq!(f.sandbox.max_live.get(), 3);
}

#[test]
fn sandbox_slots_queue_in_order_give_up_on_time_and_never_lose_a_slot() {
    use futures::FutureExt;
    let slots = sandbox::Slots::new(1);
    let held = slots.acquire().now_or_never().expect("a free slot is taken at once");
    // A waiter whose time is up gets nothing and leaves the count as it was.
    assert!(block_on(slots.acquire_within(async {})).is_none());
    // A waiter handed the slot but dropped before it took it passes the slot on.
    let mut late = Box::pin(slots.acquire());
    assert!(late.as_mut().now_or_never().is_none());
    let mut next = Box::pin(slots.acquire());
    assert!(next.as_mut().now_or_never().is_none());
    drop(held);
    drop(late);
    let got = next.as_mut().now_or_never().expect("the slot moved on to the next waiter");
    drop(got);
    assert!(slots.acquire().now_or_never().is_some());
}

#[test]
fn snippets_are_saved_listed_deleted_and_sent_to_the_sandbox() {
    let f = fixture();
    let out = block_on(f.rt.execute("return input.n * 2", None, &f.connectors));
    let id = out["executionId"].as_str().unwrap();
    let saved =
        f.rt.save_snippet("double", &json!({"executionId": id, "description": "Doubles n"}))
            .unwrap();
    assert_eq!(saved["code"], "return input.n * 2");
    assert_eq!(f.rt.snippets().unwrap()[0]["name"], "double");
    block_on(f.rt.execute("return 1", None, &f.connectors));
    let request = f.sandbox.last_request.borrow().clone().unwrap();
    assert_eq!(request.snippets[0].name, "double");
    assert_eq!(request.snippets[0].body, "return input.n * 2");
    assert!(f.rt.save_snippet("bad name", &json!({"executionId": id})).is_err());
    // codemode.run checks the input against the snippet's inputSchema on the host.
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]});
    f.rt.save_snippet("typed", &json!({"executionId": id, "inputSchema": schema})).unwrap();
    f.sandbox.program("check", |d| {
        Box::pin(async move {
            let ok = call(
                &d,
                "codemode",
                "checkSnippetInput",
                json!({"name": "typed", "input": {"n": 1}}),
                "1:1",
            )
            .await?;
            let bad = call(
                &d,
                "codemode",
                "checkSnippetInput",
                json!({"name": "typed", "input": {}}),
                "2:1",
            )
            .await;
            Ok(json!([ok, bad.unwrap_err()]))
        })
    });
    let out = block_on(f.rt.execute("// check\n", None, &f.connectors));
    assert_eq!(out["result"][0], Value::Null, "{out}");
    assert!(
        out["result"][1].as_str().unwrap().starts_with("codemode.run(\"typed\"): invalid input"),
        "{out}"
    );
    f.rt.delete_snippet("typed").unwrap();
    assert_eq!(f.rt.delete_snippet("double").unwrap(), json!(true));
    assert_eq!(f.rt.delete_snippet("double").unwrap(), json!(false));
}

#[test]
fn state_methods_reach_the_workspace() {
    let f = fixture();
    f.sandbox.program("state", |d| {
        Box::pin(async move {
            let c = |m: &'static str, a: Value| {
                let d = d.clone();
                async move { call(&d, "state", m, a, m).await }
            };
            c("writeFile", json!({"path": "/s/a.txt", "content": "one two one"})).await?;
            c("writeJson", json!({"path": "/s/c.json", "value": {"a": [1, {"b": "x"}]}})).await?;
            c("writeFileBytes", json!({"path": "/s/bin", "base64": "AAEC"})).await?;
            c("mkdir", json!({"path": "/s/d/e", "recursive": true})).await?;
            c("symlink", json!({"target": "/s/a.txt", "linkPath": "/s/link"})).await?;
            Ok(json!({
                "read": c("readFile", json!({"path": "/s/a.txt"})).await?,
                "json": c("readJson", json!({"path": "/s/c.json"})).await?,
                "jsonText": ({
                    c("writeJson", json!({"path": "/s/k.json", "value": {"k": 1}, "options": {"spaces": 0}})).await?;
                    c("readFile", json!({"path": "/s/k.json"})).await?
                }),
                "query": c("queryJson", json!({"path": "/s/c.json", "query": "a[1].b"})).await?,
                "bytes": c("readFileBytes", json!({"path": "/s/bin"})).await?,
                "dir": c("readdir", json!({"path": "/s"})).await?,
                "glob": c("glob", json!({"pattern": "/s/*.txt"})).await?,
                "search": c("searchText", json!({"path": "/s/a.txt", "query": "two"})).await?,
                "replace": c("replaceInFile", json!({"path": "/s/a.txt", "search": "one", "replacement": "1"})).await?,
                "after": c("readFile", json!({"path": "/s/a.txt"})).await?,
                "real": c("realpath", json!({"path": "/s/link"})).await?,
                "resolve": c("resolvePath", json!({"base": "/s/d", "path": "../x/./y"})).await?,
                "detect": c("detectFile", json!({"path": "/s/bin"})).await?["text"],
                "tree": c("walkTree", json!({"path": "/s/d"})).await?,
                "missing": c("readFile", json!({"path": "/nope"})).await.unwrap_err(),
                "hash": c("hashFile", json!({"path": "/s/a.txt"})).await?,
                "update": c("updateJson", json!({"path": "/s/c.json", "operations": [
                    {"op": "set", "path": "a[1].b", "value": "y"},
                    {"op": "set", "path": "n.m", "value": 1},
                    {"op": "delete", "path": "a[0]"},
                ]})).await?["value"],
            }))
        })
    });
    let out = block_on(f.rt.execute("// state\n", None, &f.connectors));
    assert_eq!(out["status"], "completed", "{out}");
    let r = &out["result"];
    assert_eq!(r["read"], "one two one");
    assert_eq!(r["json"], json!({"a": [1, {"b": "x"}]}));
    assert_eq!(r["jsonText"], "{\"k\":1}\n");
    assert_eq!(r["query"], "x");
    assert_eq!(r["bytes"], "AAEC");
    assert_eq!(r["dir"], json!(["d", "a.txt", "bin", "c.json", "k.json", "link"]));
    assert_eq!(r["glob"], json!(["/s/a.txt"]));
    assert_eq!(
        r["search"],
        json!([{"line": 1, "column": 5, "match": "two", "lineText": "one two one"}])
    );
    assert_eq!(r["replace"], json!({"path": "/s/a.txt", "replacements": 2}));
    assert_eq!(r["after"], "1 two 1");
    assert_eq!(r["real"], "/s/a.txt");
    assert_eq!(r["resolve"], "/s/x/y");
    assert_eq!(r["detect"], false);
    let dir =
        json!({"path": "/s/d/e", "name": "e", "type": "directory", "size": 0, "children": []});
    assert_eq!(
        r["tree"],
        json!({"path": "/s/d", "name": "d", "type": "directory", "size": 0, "children": [dir]})
    );
    assert_eq!(r["missing"], "ENOENT: no such file or directory, open '/nope'");
    assert_eq!(
        r["hash"],
        crate::platform::digest::hex(crate::platform::digest::Algorithm::Sha256, b"1 two 1")
    );
    assert_eq!(r["update"], json!({"a": [{"b": "y"}], "n": {"m": 1}}));
}

#[test]
fn walk_and_summarize_tree_take_max_depth_and_have_thinks_shapes() {
    let f = fixture();
    block_on(async {
        f.ws.write_file("/t/b/d/e.txt", "1", "text/plain").await.unwrap();
        f.ws.write_file("/t/b/c.txt", "22", "text/plain").await.unwrap();
        f.ws.write_file("/t/a.txt", "333", "text/plain").await.unwrap();
    });
    f.ws.symlink("/t/a.txt", "/t/l").unwrap();
    f.sandbox.program("tree", |d| {
        Box::pin(async move {
            let c = |m: &'static str, a: Value| {
                let d = d.clone();
                async move { call(&d, "state", m, a, m).await }
            };
            Ok(json!({
                "shallow": c("walkTree", json!({"path": "/t", "options": {"maxDepth": 1}})).await?,
                "root": c("walkTree", json!({"path": "/t/", "options": {"maxDepth": 0}})).await?,
                "all": c("summarizeTree", json!({"path": "/t"})).await?,
                "one": c("summarizeTree", json!({"path": "/t", "options": {"maxDepth": 1}})).await?,
                "file": c("summarizeTree", json!({"path": "/t/a.txt"})).await?,
                "missing": c("walkTree", json!({"path": "/nope"})).await.unwrap_err(),
                "bad": c("walkTree", json!({"path": "/t", "maxDepth": 1})).await.unwrap_err(),
            }))
        })
    });
    let out = block_on(f.rt.execute("// tree\n", None, &f.connectors));
    assert_eq!(out["status"], "completed", "{out}");
    let r = &out["result"];
    let names: Vec<&str> = r["shallow"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.txt", "b", "l"]);
    let kids = &r["shallow"]["children"];
    assert_eq!(kids[0], json!({"path": "/t/a.txt", "name": "a.txt", "type": "file", "size": 3}));
    assert_eq!(kids[1], json!({"path": "/t/b", "name": "b", "type": "directory", "size": 0}));
    assert_eq!(kids[2]["type"], "symlink");
    assert_eq!(r["root"], json!({"path": "/t", "name": "t", "type": "directory", "size": 0}));
    assert_eq!(
        r["all"],
        json!({"files": 3, "directories": 3, "symlinks": 1, "totalBytes": 6, "maxDepth": 3})
    );
    assert_eq!(
        r["one"],
        json!({"files": 1, "directories": 2, "symlinks": 1, "totalBytes": 3, "maxDepth": 1})
    );
    assert_eq!(
        r["file"],
        json!({"files": 1, "directories": 0, "symlinks": 0, "totalBytes": 3, "maxDepth": 0})
    );
    assert_eq!(r["missing"], "ENOENT: no such file or directory: /nope");
    assert!(r["bad"].as_str().unwrap().starts_with("Invalid input for state.walkTree"), "{r}");
}

// --- types and search ---

#[test]
fn typescript_declarations_come_from_json_schema() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where"},
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object", "additionalProperties": {"type": "number"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "my-key": {"type": ["integer", "null"]},
        },
        "required": ["path"],
        "additionalProperties": false,
    });
    let ts = types::schema_to_ts(&schema);
    assert_eq!(
        ts,
        "{\n  /** Where */\n  path: string;\n  mode?: \"a\" | \"b\";\n  tags?: string[];\n  meta?: {\n    [key: string]: number;\n  };\n  either?: string | null;\n  \"my-key\"?: number | null;\n}"
    );
    assert_eq!(types::schema_to_ts(&json!({"type": "object"})), "Record<string, unknown>");
    let f = fixture();
    let decl = types::namespace_declaration(f.connectors[1].as_ref());
    assert!(decl.starts_with("/** the workspace filesystem"), "{decl}");
    assert!(decl.contains("declare namespace state {"));
    assert!(decl.contains("  function readFile(input: {\n"), "{decl}");
    assert!(decl.contains("}): Promise<string>;"), "{decl}");
    assert!(decl.contains("function exists(input: {\n    /** Absolute workspace path */\n    path: string;\n  }): Promise<boolean>;"), "{decl}");
}

#[test]
fn search_weights_path_method_connector_and_description() {
    let f = fixture();
    let cs: Vec<&dyn Connector> = f.connectors.iter().map(|c| c.as_ref()).collect();
    let r = search::search(&cs, "readFile");
    assert_eq!(r.results[0].path, "state.readFile");
    // path 12 + method 10 for the one word.
    assert_eq!(r.results[0].score, 22);
    let charge = search::search(&cs, "charge card");
    let top = &charge.results[0];
    assert_eq!(
        (top.path.as_str(), top.connector.as_str(), top.kind),
        ("tools.charge", "tools", "write")
    );
    // "charge" hits path, method and description (12+10+5), "card" the description (5).
    assert_eq!(top.score, 32);
    assert!(top.requires_approval);
    let all = search::search(&cs, "");
    assert_eq!(all.total, f.connectors.iter().map(|c| c.methods().len()).sum::<usize>());
    assert_eq!(all.results.len(), all.total.min(search::MAX_RESULTS));
    assert!(!all.truncated);
}

#[test]
fn describe_and_search_are_reachable_from_the_sandbox() {
    let f = fixture();
    f.sandbox.program("describe", |d| {
        Box::pin(async move {
            let found = call(&d, "codemode", "search", json!("json"), "1:1").await?;
            let one = call(&d, "codemode", "describe", json!("state.writeJson"), "2:1").await?;
            let missing = call(&d, "codemode", "describe", json!("nope"), "3:1").await.unwrap_err();
            Ok(json!({"found": found["total"], "types": one["types"], "missing": missing}))
        })
    });
    let out = block_on(f.rt.execute("// describe\n", None, &f.connectors));
    // readJson, writeJson, queryJson, updateJson, and planEdits (its `writeJson` instruction).
    assert_eq!(out["result"]["found"], 5, "{out}");
    assert!(out["result"]["types"]
        .as_str()
        .unwrap()
        .starts_with("/** Write a value as JSON. */\nfunction writeJson(input: {"));
    assert_eq!(
        out["result"]["missing"],
        "Unknown namespace \"nope\"; the namespaces are tools, state"
    );
}

#[test]
fn think_execute_setting_parses() {
    assert_eq!(ExecuteOptions::from_setting("").unwrap(), Some(ExecuteOptions::default()));
    assert_eq!(ExecuteOptions::from_setting(" true ").unwrap(), Some(ExecuteOptions::default()));
    assert_eq!(ExecuteOptions::from_setting("false").unwrap(), None);
    let o =
        ExecuteOptions::from_setting(r#"{"timeout": 5000, "maxInFlight": 2}"#).unwrap().unwrap();
    assert_eq!((o.timeout_ms, o.max_in_flight, o.retention), (5000, 2, 50));
    assert!(ExecuteOptions::from_setting(r#"{"bogus": 1}"#)
        .unwrap_err()
        .to_string()
        .contains("bogus"));
    assert!(ExecuteOptions::from_setting(r#"{"timeout": -1}"#).is_err());
    assert!(ExecuteOptions::from_setting("sometimes").is_err());
}

#[test]
fn stable_stringify_ignores_key_order() {
    assert_eq!(
        stable_stringify(&json!({"b": 1, "a": [{"d": 2, "c": 3}]})),
        r#"{"a":[{"c":3,"d":2}],"b":1}"#
    );
}

/// A connector whose `put` can be undone (`fail` marks one whose undo throws), standing in
/// for a tool with a revert, which no built-in connector has.
#[derive(Default)]
struct Undoable {
    undone: RefCell<Vec<Value>>,
}

#[async_trait(?Send)]
impl Connector for Undoable {
    fn name(&self) -> &str {
        "undo"
    }
    fn hint(&self) -> &str {
        "undoable puts"
    }
    fn methods(&self) -> &[connectors::MethodSpec] {
        &[]
    }
    async fn call(
        &self,
        _method: &str,
        args: Value,
        _ctx: &connectors::CallContext,
    ) -> Result<Value, connectors::ConnectorError> {
        Ok(json!({"put": args["v"]}))
    }
    async fn revert(
        &self,
        method: &str,
        args: &Value,
        result: Option<&Value>,
        _ctx: &connectors::CallContext,
    ) -> Result<bool, connectors::ConnectorError> {
        if args["fail"] == true {
            return Err(connectors::ConnectorError::Failed("cannot undo".into()));
        }
        self.undone.borrow_mut().push(json!([method, args["v"], result]));
        Ok(method == "put")
    }
}

#[test]
fn rollback_undoes_applied_calls_newest_first_and_marks_the_run() {
    let f = fixture();
    let undo = Rc::new(Undoable::default());
    let mut connectors = f.connectors.clone();
    connectors.push(undo.clone());
    f.sandbox.program("puts", |d| {
        Box::pin(async move {
            call(&d, "state", "writeFile", json!({"path": "/r.txt", "content": "x"}), "2:1")
                .await?;
            call(&d, "undo", "put", json!({"v": 1}), "3:1").await?;
            call(&d, "undo", "put", json!({"v": 2}), "4:1").await?;
            call(&d, "undo", "get", json!({"v": 3}), "5:1").await?;
            Ok(json!("done"))
        })
    });
    let out = block_on(f.rt.execute("// puts\n", None, &connectors));
    let id = out["executionId"].as_str().unwrap().to_owned();
    let rolled = block_on(f.rt.rollback(&id, &connectors)).unwrap();
    assert_eq!(rolled, json!({"executionId": id, "reverted": 3, "status": "rolled_back"}));
    assert_eq!(
        *undo.undone.borrow(),
        [
            json!(["get", 3, {"put": 3}]),
            json!(["put", 2, {"put": 2}]),
            json!(["put", 1, {"put": 1}])
        ]
    );
    let journal = journal::Journal::new(f.sql.as_ref());
    let states: Vec<_> = journal.log(&id).unwrap().iter().map(|e| e.state).collect();
    use journal::CallState::{Applied, Reverted};
    assert_eq!(states, [Reverted, Reverted, Reverted, Applied]);
    assert_eq!(journal.execution(&id).unwrap().unwrap().status, journal::ExecStatus::RolledBack);
    // The state write is undone too: the file it made is gone.
    assert_eq!(read(&f, "/r.txt"), None);

    // A failed undo is reported after the others ran; nothing reverted leaves the status.
    f.sandbox.program("bad", |d| {
        Box::pin(async move {
            call(&d, "undo", "put", json!({"v": 9, "fail": true}), "2:1").await?;
            Ok(Value::Null)
        })
    });
    let bad = block_on(f.rt.execute("// bad\n", None, &connectors));
    let bad_id = bad["executionId"].as_str().unwrap();
    let err = block_on(f.rt.rollback(bad_id, &connectors)).unwrap_err().to_string();
    assert_eq!(err, "Rollback reverted 0 action(s) but 1 failed: undo.put: cannot undo");
    assert_eq!(journal.execution(bad_id).unwrap().unwrap().status, journal::ExecStatus::Completed);

    // A paused run cannot be rolled back, an unknown id is an error.
    approval_program(&f);
    let paused = block_on(f.rt.execute("// approve\n", None, &f.connectors));
    let paused_id = paused["executionId"].as_str().unwrap();
    let err = block_on(f.rt.rollback(paused_id, &connectors)).unwrap_err().to_string();
    assert!(err.contains("is paused; only a settled execution"), "{err}");
    let err = block_on(f.rt.rollback("exec_nope", &connectors)).unwrap_err().to_string();
    assert_eq!(err, "Execution exec_nope does not exist");
}

/// Every entry of the workspace: path, type, mime type, bytes (or a symlink's target).
fn snapshot_all(f: &Fixture) -> Vec<Value> {
    let mut out = Vec::new();
    for e in f.ws.glob("/**").unwrap() {
        let body = match e.kind {
            crate::workspace::EntryType::File => {
                let bytes = block_on(f.ws.read_file_bytes(&e.path)).unwrap().unwrap();
                json!(String::from_utf8_lossy(&bytes))
            }
            _ => json!(e.target),
        };
        out.push(json!([e.path, e.kind.as_str(), e.mime_type, body]));
    }
    out
}

#[test]
fn rollback_restores_the_workspace_after_every_kind_of_state_write() {
    let f = fixture();
    block_on(async {
        f.ws.write_file("/keep/a.txt", "A", "text/plain").await.unwrap();
        f.ws.write_file("/d/x.txt", "X", "text/plain").await.unwrap();
        f.ws.write_file("/d/sub/y.md", "Y", "text/markdown").await.unwrap();
        f.ws.write_file_bytes("/bin", &[0, 1, 2], "application/octet-stream").await.unwrap();
        f.ws.write_file("/j.json", "{\"n\": 1}", "application/json").await.unwrap();
        f.ws.symlink("/d/x.txt", "/link").unwrap();
    });
    let before = snapshot_all(&f);
    f.sandbox.program("all", |d| {
        Box::pin(async move {
            let c = |m: &'static str, a: Value| {
                let d = d.clone();
                async move { call(&d, "state", m, a, m).await }
            };
            c("writeFile", json!({"path": "/link", "content": "through the link"})).await?;
            c("writeFile", json!({"path": "/keep/a.txt", "content": "A2"})).await?;
            c("appendFile", json!({"path": "/keep/a.txt", "content": "+"})).await?;
            c("writeFile", json!({"path": "/new/deep/n.txt", "content": "N"})).await?;
            c("updateJson", json!({"path": "/j.json", "operations": [{"op": "set", "path": "n", "value": 2}]})).await?;
            c("writeFileBytes", json!({"path": "/bin", "base64": "/w=="})).await?;
            c("rm", json!({"path": "/d", "recursive": true})).await?;
            c("mkdir", json!({"path": "/m/n", "recursive": true})).await?;
            c("mv", json!({"src": "/keep/a.txt", "dest": "/moved.txt"})).await?;
            c("cp", json!({"src": "/moved.txt", "dest": "/keep/copy.txt"})).await?;
            c("symlink", json!({"target": "/bin", "linkPath": "/keep/l2"})).await?;
            c("rm", json!({"path": "/link"})).await?;
            c("applyEdits", json!({"edits": [{"path": "/j.json", "content": "[]"}, {"path": "/e/1.txt", "content": "1"}]})).await?;
            c("replaceInFiles", json!({"pattern": "/**/*.txt", "search": "N", "replacement": "M"})).await?;
            c("compressFile", json!({"path": "/moved.txt"})).await?;
            Ok(json!("done"))
        })
    });
    let out = block_on(f.rt.execute("// all\n", None, &f.connectors));
    assert_eq!(out["status"], "completed", "{out}");
    assert_ne!(snapshot_all(&f), before);
    let id = out["executionId"].as_str().unwrap();
    let rolled = block_on(f.rt.rollback(id, &f.connectors)).unwrap();
    assert_eq!(rolled, json!({"executionId": id, "reverted": 15, "status": "rolled_back"}));
    assert_eq!(snapshot_all(&f), before);
    // Deleting the execution takes its undo records with it.
    f.rt.delete_execution(id).unwrap();
    let left = f.sql.exec("SELECT COUNT(*) FROM think_cm_undo", &[]).unwrap();
    assert_eq!(left[0][0].as_i64(), Some(0));
}

#[test]
fn a_previous_content_over_the_undo_limit_is_not_kept_and_its_call_is_not_undone() {
    let f = fixture();
    let big = "b".repeat(undo::MAX_UNDO_FILE_BYTES as usize + 1);
    block_on(f.ws.write_file("/big.txt", &big, "text/plain")).unwrap();
    f.sandbox.program("big", |d| {
        Box::pin(async move {
            call(&d, "state", "writeFile", json!({"path": "/small.txt", "content": "s"}), "2:1")
                .await?;
            call(&d, "state", "writeFile", json!({"path": "/big.txt", "content": "tiny"}), "3:1")
                .await?;
            Ok(Value::Null)
        })
    });
    let out = block_on(f.rt.execute("// big\n", None, &f.connectors));
    let id = out["executionId"].as_str().unwrap();
    let err = block_on(f.rt.rollback(id, &f.connectors)).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("Rollback reverted 1 action(s) but 1 failed: state.writeFile: the previous content of /big.txt ({} bytes) was over the undo limit (1000000 bytes per file, 16000000 per call), so it was not kept; nothing of this call was undone", big.len())
    );
    assert_eq!(read(&f, "/big.txt").as_deref(), Some("tiny"));
    assert_eq!(read(&f, "/small.txt"), None);
    let journal = journal::Journal::new(f.sql.as_ref());
    let states: Vec<_> = journal.log(id).unwrap().iter().map(|e| e.state).collect();
    assert_eq!(states, [journal::CallState::Reverted, journal::CallState::Applied]);
}

#[test]
fn delete_and_prune_executions_spare_paused_runs() {
    let f = fixture();
    approval_program(&f);
    let paused = block_on(f.rt.execute("// approve\n", None, &f.connectors));
    let paused_id = paused["executionId"].as_str().unwrap();
    let mut ids = Vec::new();
    for _ in 0..5 {
        let out = block_on(f.rt.execute("return 1", None, &f.connectors));
        ids.push(out["executionId"].as_str().unwrap().to_owned());
    }
    assert_eq!(f.rt.delete_execution(&ids[0]).unwrap(), json!(true));
    assert_eq!(f.rt.delete_execution(&ids[0]).unwrap(), json!(false));
    assert_eq!(f.rt.prune_executions(Some(2)).unwrap(), json!(2));
    let journal = journal::Journal::new(f.sql.as_ref());
    let left: Vec<_> = journal.executions(100).unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(left.len(), 3);
    assert!(
        left.contains(&paused_id.to_owned()) && left.contains(&ids[4]) && left.contains(&ids[3])
    );
    assert_eq!(f.rt.prune_executions(None).unwrap(), json!(0));
}

#[test]
fn hash_algorithms_and_think_search_and_find_options() {
    let f = fixture();
    f.sandbox.program("opts", |d| {
        Box::pin(async move {
            let c = |m: &'static str, a: Value| {
                let d = d.clone();
                async move { call(&d, "state", m, a, m).await }
            };
            c("writeFile", json!({"path": "/o/abc", "content": "abc"})).await?;
            c("writeFile", json!({"path": "/o/t.md", "content": "Foo bar\nfoobar é foo\nend"}))
                .await?;
            c("writeFile", json!({"path": "/o/sub/deep.md", "content": ""})).await?;
            c("mkdir", json!({"path": "/o/hollow"})).await?;
            let search = |o: Value| c("searchText", json!({"path": "/o/t.md", "query": "foo", "options": o}));
            let find = |o: Value| c("find", json!({"path": "/o", "options": o}));
            let search_re = |q: &str| c("searchText", json!({"path": "/o/t.md", "query": q, "options": {"regex": true}}));
            let paths = |v: Value| -> Vec<String> {
                v.as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap().to_owned()).collect()
            };
            Ok(json!({
                "md5": c("hashFile", json!({"path": "/o/abc", "algorithm": "md5"})).await?,
                "sha1": c("hashFile", json!({"path": "/o/abc", "algorithm": "sha1"})).await?,
                "sha256": c("hashFile", json!({"path": "/o/abc", "algorithm": "sha256"})).await?,
                "badAlgo": c("hashFile", json!({"path": "/o/abc", "algorithm": "crc"})).await.is_err(),
                "plain": search(json!({})).await?,
                "nocase": search(json!({"caseSensitive": false, "maxMatches": 2})).await?,
                "word": search(json!({"wholeWord": true, "contextBefore": 1, "contextAfter": 5})).await?,
                "regex": c("searchFiles", json!({"pattern": "/o/**/*.md", "query": "^f\\w+r", "options": {"regex": true}})).await?,
                "badRegex": c("searchText", json!({"path": "/o/t.md", "query": "(", "options": {"regex": true}})).await.unwrap_err(),
                "lookbehind": search_re("(?<=foo)bar").await?,
                "backref": search_re("(o)\\1").await?,
                "badBounds": search_re("o{2,1}").await.unwrap_err(),
                "exponential": search_re("(\\w|\\d)+$").await.unwrap_err(),
                "md": paths(find(json!({"name": "*.md"})).await?),
                "shallow": paths(find(json!({"maxDepth": 1, "type": ["directory"]})).await?),
                "deep": find(json!({"minDepth": 2})).await?,
                "empty": paths(find(json!({"empty": true})).await?),
                "big": paths(find(json!({"sizeMin": 4, "pathPattern": "*.md"})).await?),
                "future": paths(find(json!({"mtimeAfter": "2100-01-01T00:00:00Z"})).await?),
                "past": paths(find(json!({"mtimeAfter": "2001-09-09", "type": "file", "sizeMin": 1, "sizeMax": 3})).await?),
                "badOption": find(json!({"colour": "red"})).await.is_err(),
            }))
        })
    });
    let out = block_on(f.rt.execute("// opts\n", None, &f.connectors));
    assert_eq!(out["status"], "completed", "{out}");
    let r = &out["result"];
    assert_eq!(r["md5"], "900150983cd24fb0d6963f7d28e17f72");
    assert_eq!(r["sha1"], "a9993e364706816aba3e25717850c26c9cd0d89d");
    assert_eq!(
        r["sha256"],
        crate::platform::digest::hex(crate::platform::digest::Algorithm::Sha256, b"abc")
    );
    assert_eq!(r["badAlgo"], true);
    let at = |v: &Value| -> Vec<(u64, u64)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|m| (m["line"].as_u64().unwrap(), m["column"].as_u64().unwrap()))
            .collect()
    };
    assert_eq!(at(&r["plain"]), [(2, 1), (2, 10)]);
    assert_eq!(at(&r["nocase"]), [(1, 1), (2, 1)]);
    assert_eq!(
        r["word"],
        json!([{"line": 2, "column": 10, "match": "foo", "lineText": "foobar é foo",
            "beforeLines": ["Foo bar"], "afterLines": ["end"]}])
    );
    assert_eq!(
        r["regex"],
        json!([{"path": "/o/t.md", "matches": [
        {"line": 2, "column": 1, "match": "foobar", "lineText": "foobar é foo"}]}])
    );
    assert!(
        r["badRegex"].as_str().unwrap().starts_with("Invalid search pattern"),
        "{}",
        r["badRegex"]
    );
    // JS syntax: look-behind and backreferences work; bounds out of order are refused as JS does.
    assert_eq!(at(&r["lookbehind"]), [(2, 4)]);
    assert_eq!(r["lookbehind"][0]["match"], "bar");
    assert_eq!(at(&r["backref"]), [(1, 2), (2, 2), (2, 11)]);
    assert_eq!(r["badBounds"], "Invalid search pattern: Invalid regular expression: /o{2,1}/");
    let exponential = r["exponential"].as_str().unwrap();
    assert!(
        exponential.starts_with(
            "Invalid search pattern: the pattern \"(\\w|\\d)+$\" repeats alternatives that can \
             start with the same character (\"(\\w|\\d)+\")"
        ),
        "{exponential}"
    );
    assert_eq!(r["md"], json!(["/o/sub/deep.md", "/o/t.md"]));
    assert_eq!(r["shallow"], json!(["/o/hollow", "/o/sub"]));
    assert_eq!(r["deep"].as_array().unwrap().len(), 1);
    assert_eq!(r["deep"][0]["path"], "/o/sub/deep.md");
    assert_eq!(r["deep"][0]["depth"], 2);
    assert_eq!(r["empty"], json!(["/o/hollow", "/o/sub/deep.md"]));
    assert_eq!(r["big"], json!(["/o/t.md"]));
    assert_eq!(r["future"], json!([]));
    assert_eq!(r["past"], json!(["/o/abc"]));
    assert_eq!(r["badOption"], true);
}

#[test]
fn edit_plans_preview_then_apply_and_roll_back_on_failure() {
    let f = fixture();
    block_on(f.ws.write_file("/e/a.txt", "one two one", "text/plain")).unwrap();
    block_on(f.ws.write_file("/e/b.txt", "keep", "text/plain")).unwrap();
    f.sandbox.program("plan", |d| {
        Box::pin(async move {
            let c = |m: &'static str, a: Value| {
                let d = d.clone();
                async move { call(&d, "state", m, a, m).await }
            };
            let plan = c("planEdits", json!({"instructions": [
                {"kind": "replace", "path": "/e/a.txt", "search": "ONE", "replacement": "$1",
                    "options": {"caseSensitive": false}},
                {"kind": "write", "path": "/e/new.txt", "content": "fresh"},
                {"kind": "writeJson", "path": "/e/c.json", "value": {"k": 1}, "options": {"spaces": 0}},
                {"kind": "write", "path": "/e/b.txt", "content": "keep"},
            ]}))
            .await?;
            let untouched = c("readFile", json!({"path": "/e/a.txt"})).await?;
            let missing = c("planEdits", json!({"instructions": [
                {"kind": "replace", "path": "/e/none", "search": "x", "replacement": "y"}]}))
            .await
            .unwrap_err();
            let dry = c("applyEdits", json!({"edits": [{"path": "/e/b.txt", "content": "dry"}],
                "options": {"dryRun": true}}))
            .await?;
            let applied = c("applyEditPlan", json!({"plan": plan.clone()})).await?;
            // The second edit fails (a directory is in the way): the first is undone.
            let failed = c("applyEdits", json!({"edits": [
                {"path": "/e/b.txt", "content": "changed"},
                {"path": "/e/new.txt/under", "content": "x"},
                {"path": "/e/b.txt", "content": "never"},
            ]}))
            .await
            .unwrap_err();
            Ok(json!({"plan": plan, "untouched": untouched, "missing": missing, "dry": dry,
                "applied": applied, "failed": failed}))
        })
    });
    let out = block_on(f.rt.execute("// plan\n", None, &f.connectors));
    assert_eq!(out["status"], "completed", "{out}");
    let r = &out["result"];
    let plan = &r["plan"];
    assert_eq!(
        (plan["totalChanged"].as_u64(), plan["totalInstructions"].as_u64()),
        (Some(3), Some(4))
    );
    let contents: Vec<_> = plan["edits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap(),
                e["changed"].as_bool().unwrap(),
                e["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        contents,
        [
            ("/e/a.txt", true, "$1 two $1"),
            ("/e/new.txt", true, "fresh"),
            ("/e/c.json", true, "{\"k\":1}\n"),
            ("/e/b.txt", false, "keep")
        ]
    );
    assert!(
        plan["edits"][0]["diff"].as_str().unwrap().contains("-one two one\n+$1 two $1"),
        "{}",
        plan["edits"][0]["diff"]
    );
    assert_eq!(plan["edits"][3]["diff"], "");
    assert_eq!(r["untouched"], "one two one");
    assert_eq!(r["missing"], "ENOENT: no such file or directory, open '/e/none'");
    assert_eq!(r["dry"]["dryRun"], true);
    assert_eq!(r["dry"]["totalChanged"], 1);
    assert_eq!(r["applied"]["totalChanged"], 3);
    let failed = r["failed"].as_str().unwrap();
    assert!(
        failed.starts_with("applyEdits failed at /e/new.txt/under: ")
            && failed.ends_with("(rolled back)"),
        "{failed}"
    );
    assert_eq!(read(&f, "/e/a.txt").as_deref(), Some("$1 two $1"));
    assert_eq!(read(&f, "/e/new.txt").as_deref(), Some("fresh"));
    assert_eq!(read(&f, "/e/c.json").as_deref(), Some("{\"k\":1}\n"));
    assert_eq!(read(&f, "/e/b.txt").as_deref(), Some("keep"));
}

#[test]
fn archives_and_gzip_round_trip_through_the_workspace() {
    let f = fixture();
    block_on(f.ws.write_file("/src/a.txt", "alpha", "text/plain")).unwrap();
    block_on(f.ws.write_file("/src/sub/b.txt", &"b".repeat(700), "text/plain")).unwrap();
    // Over 100 bytes in all, so the ustar prefix field carries its directories.
    let long = format!("/src/{}/{}/c.txt", "d".repeat(60), "e".repeat(60));
    block_on(f.ws.write_file(&long, "long", "text/plain")).unwrap();
    block_on(f.ws.write_file("/one.txt", "solo", "text/plain")).unwrap();
    f.sandbox.program("tar", |d| {
        Box::pin(async move {
            let c = |m: &'static str, a: Value| {
                let d = d.clone();
                async move { call(&d, "state", m, a, m).await }
            };
            let made =
                c("createArchive", json!({"path": "/out/x.tar", "sources": ["/src", "/one.txt"]}))
                    .await?;
            let listed = c("listArchive", json!({"path": "/out/x.tar"})).await?;
            let extracted =
                c("extractArchive", json!({"path": "/out/x.tar", "destination": "/copy"})).await?;
            let gz = c("compressFile", json!({"path": "/src/sub/b.txt"})).await?;
            let gunz = c(
                "decompressFile",
                json!({"path": "/src/sub/b.txt.gz", "destination": "/back.txt"}),
            )
            .await?;
            let not_gz = c("decompressFile", json!({"path": "/one.txt"})).await.unwrap_err();
            let not_tar = c("listArchive", json!({"path": "/src/sub/b.txt.gz"})).await.unwrap_err();
            Ok(json!({"made": made, "listed": listed, "extracted": extracted, "gz": gz,
                "gunz": gunz, "notGz": not_gz, "notTar": not_tar}))
        })
    });
    let out = block_on(f.rt.execute("// tar\n", None, &f.connectors));
    assert_eq!(out["status"], "completed", "{out}");
    let r = &out["result"];
    let long_rel = long.trim_start_matches('/');
    let names: Vec<_> = r["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap().to_owned(), e["size"].as_u64().unwrap()))
        .collect();
    let mut want = vec![
        ("one.txt".to_owned(), 4),
        ("src".to_owned(), 0),
        ("src/a.txt".to_owned(), 5),
        (format!("src/{}", "d".repeat(60)), 0),
        (format!("src/{}/{}", "d".repeat(60), "e".repeat(60)), 0),
        (long_rel.to_owned(), 4),
        ("src/sub".to_owned(), 0),
        ("src/sub/b.txt".to_owned(), 700),
    ];
    want.sort();
    assert_eq!(names, want);
    assert_eq!(r["made"]["entries"].as_array().unwrap().len(), 8);
    // Headers and bodies in 512-byte blocks, then two zero blocks.
    let blocks = 8 + 1 + 2 + 1 + 1 + 2;
    assert_eq!(r["made"]["bytesWritten"], blocks * 512);
    assert_eq!(r["extracted"]["destination"], "/copy");
    assert_eq!(read(&f, "/copy/src/sub/b.txt"), Some("b".repeat(700)));
    assert_eq!(read(&f, &format!("/copy{long}")).as_deref(), Some("long"));
    assert_eq!(read(&f, "/copy/one.txt").as_deref(), Some("solo"));
    assert_eq!(r["gz"]["destination"], "/src/sub/b.txt.gz");
    assert!(r["gz"]["bytesWritten"].as_u64().unwrap() < 100, "{}", r["gz"]);
    assert_eq!(
        r["gunz"],
        json!({"path": "/src/sub/b.txt.gz", "destination": "/back.txt", "bytesWritten": 700})
    );
    assert_eq!(read(&f, "/back.txt"), Some("b".repeat(700)));
    assert!(
        r["notGz"].as_str().unwrap().starts_with("decompressFile: /one.txt is not gzip data"),
        "{}",
        r["notGz"]
    );
    assert!(r["notTar"].as_str().unwrap().contains("tar"), "{}", r["notTar"]);
}

#[test]
fn an_archive_entry_with_dotdot_is_refused_before_anything_is_written() {
    let f = fixture();
    // A hand-made tar whose one entry climbs out of the destination.
    let mut tar = vec![0u8; 512 * 4];
    tar[..12].copy_from_slice(b"../../etc/pw");
    tar[124..135].copy_from_slice(b"00000000001");
    tar[156] = b'0';
    tar[148..156].fill(b' ');
    let sum: u32 = tar[..512].iter().map(|&b| u32::from(b)).sum();
    tar[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    tar[512] = b'x';
    block_on(f.ws.write_file_bytes("/evil.tar", &tar, "application/x-tar")).unwrap();
    f.sandbox.program("evil", |d| {
        Box::pin(async move {
            let e = call(
                &d,
                "state",
                "extractArchive",
                json!({"path": "/evil.tar", "destination": "/safe"}),
                "1:1",
            )
            .await
            .unwrap_err();
            Ok(json!(e))
        })
    });
    let out = block_on(f.rt.execute("// evil\n", None, &f.connectors));
    assert_eq!(
        out["result"], "extractArchive: entry \"../../etc/pw\" would land outside /safe",
        "{out}"
    );
    assert_eq!(read(&f, "/etc/pw"), None);
}

#[test]
fn state_reads_versions_and_refuses_stale_writes() {
    let f = fixture();
    block_on(f.ws.write_file("/v/a.txt", "one\n", "text/plain")).unwrap();
    let ws = f.ws.clone();
    f.sandbox.program("versions", move |d| {
        let ws = ws.clone();
        Box::pin(async move {
            let c = |m: &'static str, a: Value| {
                let d = d.clone();
                async move { call(&d, "state", m, a, m).await }
            };
            let first = c("readFile", json!({"path": "/v/a.txt", "withVersion": true})).await?;
            let v1 = first["version"].as_str().unwrap().to_owned();
            let plain = c("readFile", json!({"path": "/v/a.txt"})).await?;
            c("writeFile", json!({"path": "/v/a.txt", "content": "two\n", "expectedVersion": v1}))
                .await?;
            let by = ws.version("/v/a.txt").unwrap().unwrap().changed_by;
            // The app changes it behind the script's back.
            ws.write_file("/v/a.txt", "app\n", "text/plain").await.unwrap();
            let second = c("readFile", json!({"path": "/v/a.txt", "withVersion": true})).await?;
            ws.write_file("/v/a.txt", "app2\n", "text/plain").await.unwrap();
            let stale = c(
                "writeFile",
                json!({"path": "/v/a.txt", "content": "x", "expectedVersion": second["version"]}),
            )
            .await
            .unwrap_err();
            Ok(json!({"first": first, "plain": plain, "by": format!("{by:?}"), "stale": stale}))
        })
    });
    let out = block_on(f.rt.execute("// versions\n", None, &f.connectors));
    let r = &out["result"];
    assert_eq!(r["first"]["content"], "one\n", "{out}");
    assert!(r["first"]["version"].as_str().unwrap().starts_with("1:"), "{out}");
    assert_eq!(r["plain"], "one\n", "without withVersion readFile is Think's string");
    assert_eq!(r["by"], "Some(Code)");
    let stale = r["stale"].as_str().unwrap();
    assert!(
        stale.contains("changed since version 3:") && stale.contains("changed by app"),
        "{stale}"
    );
    assert!(stale.contains("-app") && stale.contains("+app2"), "{stale}");
    assert_eq!(read(&f, "/v/a.txt").as_deref(), Some("app2\n"));
}

/// `levels` nested arrays around a 0.
fn nested(levels: usize) -> Value {
    (0..levels).fold(json!(0), |inner, _| json!([inner]))
}

#[test]
fn deep_results_replay_as_recorded_or_fail_the_call() {
    // serde_json, which reads the journal back, takes exactly MAX_DURABLE_DEPTH levels.
    let limit = crate::codemode::MAX_DURABLE_DEPTH;
    assert!(serde_json::from_str::<Value>(&nested(limit).to_string()).is_ok());
    assert!(serde_json::from_str::<Value>(&nested(limit + 1).to_string()).is_err());
    assert_eq!(runtime::nesting(&nested(limit)), limit);

    let f = fixture();
    let undo = Rc::new(Undoable::default());
    let mut connectors = f.connectors.clone();
    connectors.push(undo);
    // `undo.put` answers {"put": v}: one level more than its argument.
    for (name, levels) in [("deep", limit - 1), ("deeper", limit)] {
        f.sandbox.program(name, move |d| {
            Box::pin(async move {
                let put = call(&d, "undo", "put", json!({"v": nested(levels)}), "2:1").await?;
                call(&d, "tools", "charge", json!({"cents": 500}), "3:1").await?;
                Ok(json!(runtime::nesting(&put)))
            })
        });
    }
    let out = block_on(f.rt.execute("// deep\n", None, &connectors));
    assert_eq!(out["status"], "paused", "{out}");
    let id = out["executionId"].as_str().unwrap().to_owned();
    let done = block_on(f.rt.approve(&id, &connectors)).unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], json!(limit), "the replay served the recorded value whole");

    let out = block_on(f.rt.execute("// deeper\n", None, &connectors));
    assert_eq!(out["status"], "error", "{out}");
    let error = out["error"].as_str().unwrap();
    assert!(error.contains("undo.put nests 128 levels deep, over the 127"), "{error}");
}

/// The least argument `schema` accepts: its required keys only, strings as a path.
fn minimal(schema: &Value) -> Value {
    if let Some(first) = schema.get("anyOf").and_then(|a| a.get(0)) {
        return minimal(first);
    }
    if let Some(first) = schema.get("enum").and_then(|a| a.get(0)) {
        return first.clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    match schema["type"].as_str() {
        Some("object") => {
            let required = schema["required"].as_array().into_iter().flatten();
            let keys = required.filter_map(Value::as_str);
            Value::Object(keys.map(|k| (k.to_owned(), minimal(&schema["properties"][k]))).collect())
        }
        Some("string") => json!("/m"),
        Some("array") => json!([]),
        Some("integer" | "number") => json!(0),
        Some("boolean") => json!(false),
        _ => Value::Null,
    }
}

#[test]
fn every_declared_state_method_is_listed_dispatched_and_undone_when_it_writes() {
    use super::connectors::{CallContext, CallKind, ConnectorError, StateMethod};
    let f = fixture();
    let state = StateConnector::new(f.ws.clone());
    let listed: Vec<&str> = state.methods().iter().map(|m| m.name.as_str()).collect();
    let declared: Vec<&str> = StateMethod::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(listed, declared);
    let unique: std::collections::HashSet<&str> = declared.iter().copied().collect();
    assert_eq!(unique.len(), declared.len(), "a name declared twice");
    let ctx = CallContext { execution_id: "e".into(), seq: 1 };
    for (i, &m) in StateMethod::ALL.iter().enumerate() {
        let name = m.name();
        assert_eq!((m as usize, StateMethod::from_name(name)), (i, Some(m)));
        let spec = &state.methods()[i];
        assert_eq!(spec.kind, m.kind(), "state.{name}");
        // The call may fail on an empty workspace, but as the method's own failure.
        let args = minimal(&spec.input_schema);
        if let Err(e @ (ConnectorError::UnknownMethod(_) | ConnectorError::InvalidInput(_))) =
            block_on(state.call(name, args.clone(), &ctx))
        {
            panic!("state.{name}({args}): {e}");
        }
        // A write says what it may change, so a rollback can restore it; a read changes nothing.
        let paths = block_on(undo::affected_paths(&f.ws, m, &args));
        assert_eq!(paths.is_some(), m.kind() == CallKind::Write, "state.{name}");
    }
    let typo = block_on(state.call("readFiel", json!({"path": "/a"}), &ctx));
    assert_eq!(typo.unwrap_err().to_string(), "state.readFiel is not a function");
}
