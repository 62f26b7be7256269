//! The edit of a text the model's own write or edit left (kept in memory, see
//! `workspace/recent.rs`): one statement while the file still holds that text, and the
//! file as it is whenever anything else changed it behind the kept text's back.

use super::*;
use crate::checkpoint::{Checkpoints, RewindScope};
use crate::codemode::connectors::{CallContext, Connector, StateConnector};
use crate::store::sqlite::SqliteSql;
use crate::store::Sql;
use crate::tools::workspace::bash::BashFs;
use crate::tools::ToolContext;
use crate::workspace::tests::{block_on, clock};
use crate::workspace::{Workspace, WorkspaceOptions};
use serde_json::{json, Value};

struct Fx {
    sql: Rc<SqliteSql>,
    ws: Rc<Workspace>,
    write: ToolRef,
    edit: ToolRef,
    read: ToolRef,
}

fn fx(guard_stale_writes: bool) -> Fx {
    let sql = Rc::new(SqliteSql::new());
    let options = WorkspaceOptions { guard_stale_writes, ..Default::default() };
    let ws = Rc::new(Workspace::with_options(sql.clone(), clock(), options).unwrap());
    let (write, edit, read) =
        (write_tool(ws.clone()), edit_tool(ws.clone()), read_tool(ws.clone()));
    Fx { sql, ws, write, edit, read }
}

fn run(tool: &ToolRef, input: Value) -> Value {
    block_on(tool.execute(input, &ToolContext::default())).expect("tool runs")
}

impl Fx {
    /// The statements `f` ran.
    fn statements(&self, f: impl FnOnce()) -> usize {
        let before = self.sql.statements();
        f();
        self.sql.statements() - before
    }

    fn text(&self, path: &str) -> String {
        block_on(self.ws.read_file(path)).unwrap().unwrap_or_default()
    }

    fn edit(&self, path: &str, old: &str, new: &str) -> Value {
        run(&self.edit, json!({"path": path, "old_string": old, "new_string": new}))
    }
}

#[test]
fn an_edit_of_the_models_own_text_is_one_statement_and_a_changed_file_is_read() {
    let f = fx(true);
    f.ws.mkdir("/src", false).unwrap();
    let body = format!("fn main() {{}}\n{}", "// filler line\n".repeat(700));
    let wrote = f.statements(|| drop(run(&f.write, json!({"path": "/src/a.rs", "content": body}))));
    assert_eq!(wrote, 1);
    let mut out = Value::Null;
    let n = f.statements(|| out = f.edit("/src/a.rs", "main", "start"));
    assert_eq!(n, 1, "the kept text's edit is its one guarded UPDATE");
    assert_eq!(out, json!({"path": "/src/a.rs", "replaced": true, "lines": 702}));
    assert_eq!(f.edit("/src/a.rs", "start() {}", "start() { go() }")["replaced"], true);
    assert!(f.text("/src/a.rs").starts_with("fn start() { go() }\n// filler"));
    // The app rewrites the file: the kept text is stale, the guarded UPDATE changes
    // nothing, and the edit reads the file (and refuses: the model has not seen it).
    block_on(f.ws.write_file("/src/a.rs", "fn app() {}\n", "text/plain")).unwrap();
    let mut refused = Value::Null;
    let n = f.statements(|| refused = f.edit("/src/a.rs", "app", "x"));
    let msg = refused["error"].as_str().unwrap_or_default().to_owned();
    assert!(msg.contains("changed by app at") && msg.contains("+fn app() {}"), "{msg}");
    assert!(n >= 2, "{n}");
    assert_eq!(f.text("/src/a.rs"), "fn app() {}\n");
    // A read keeps nothing: the edit after it reads the file, the next one does not.
    run(&f.read, json!({"path": "/src/a.rs"}));
    assert_eq!(f.statements(|| assert_eq!(f.edit("/src/a.rs", "app", "b")["replaced"], true)), 2);
    assert_eq!(
        f.statements(|| assert_eq!(f.edit("/src/a.rs", "fn b", "fn c")["replaced"], true)),
        1
    );
    // A file the model never read nor wrote: the check and the read, then the rewrite.
    block_on(f.ws.write_file("/src/b.rs", "fn b() {}\n", "text/plain")).unwrap();
    assert_eq!(
        f.statements(|| assert_eq!(f.edit("/src/b.rs", "fn b", "fn c")["replaced"], true)),
        2
    );
    assert_eq!(f.text("/src/a.rs"), "fn c() {}\n");
    // The edit that replaced it noted its version on the row, as the two-step edit does.
    let v = run(&f.read, json!({"path": "/src/a.rs"}))["version"].as_str().unwrap().to_owned();
    assert!(v.starts_with("6:"), "{v}");
}

/// Every way another writer can change a file the model left: with the stale-write guard
/// off, so that the edit goes through, it must apply to the file as that writer left it.
#[test]
fn an_edit_applies_to_what_any_other_writer_left_not_to_the_kept_text() {
    type Change = Box<dyn Fn(&Fx, &str)>;
    let app: Change =
        Box::new(|f, p| block_on(f.ws.write_file(p, "alpha two\n", "text/plain")).unwrap());
    let bash: Change = Box::new(|f, p| {
        block_on(BashFs::write_file_bytes(f.ws.as_ref(), p, b"alpha two\n")).unwrap();
    });
    let code: Change = Box::new(|f, p| {
        let state = StateConnector::new(f.ws.clone());
        let ctx = CallContext { execution_id: "e1".into(), seq: 1 };
        let args = json!({"path": p, "content": "alpha two\n"});
        block_on(state.call("writeFile", args, &ctx)).unwrap();
    });
    // An append leaves no hash: the kept text's cannot match it.
    let append: Change = Box::new(|f, p| {
        block_on(f.ws.rewrite_file(p, "alpha ", "text/plain")).unwrap();
        block_on(f.ws.append_file(p, "two\n", "text/plain")).unwrap();
    });
    let moved: Change = Box::new(|f, p| {
        block_on(f.ws.write_file("/elsewhere.txt", "alpha two\n", "text/plain")).unwrap();
        block_on(f.ws.rm(p, false, false)).unwrap();
        block_on(f.ws.mv("/elsewhere.txt", p)).unwrap();
    });
    // Raw SQL, as a rewind writes: content and its hash together.
    let raw: Change = Box::new(|f, p| {
        let hash = crate::workspace::content_hash(b"alpha two\n");
        let sql = format!(
            "UPDATE {} SET content = 'alpha two\n', hash = ?, version = version + 1,
               changed_by = 'app' WHERE path = ?",
            f.ws.table_name()
        );
        f.sql.exec(&sql, &[hash.into(), p.into()]).unwrap();
    });
    // Another workspace over the same database (another instance of the object).
    let other: Change = Box::new(|f, p| {
        let twin = Workspace::new(f.sql.clone(), clock());
        block_on(twin.write_file(p, "alpha two\n", "text/plain")).unwrap();
    });
    for (name, change) in
        [("app", app), ("bash", bash), ("code", code), ("append", append), ("mv", moved)]
            .into_iter()
            .chain([("raw", raw), ("other", other)])
    {
        let f = fx(false);
        run(&f.write, json!({"path": "/f.txt", "content": "alpha one\n"}));
        assert_eq!(f.edit("/f.txt", "one", "uno")["replaced"], true, "{name}");
        change(&f, "/f.txt");
        assert_eq!(f.text("/f.txt"), "alpha two\n", "{name}");
        assert_eq!(f.edit("/f.txt", "alpha", "ALPHA")["replaced"], true, "{name}");
        assert_eq!(f.text("/f.txt"), "ALPHA two\n", "{name}: the file as it was, edited");
        // And the text that edit left is kept in turn.
        let n = f.statements(|| drop(f.edit("/f.txt", "two", "2")));
        assert_eq!((n, f.text("/f.txt").as_str()), (1, "ALPHA 2\n"), "{name}");
    }
}

/// The same writers with the guard on: the edit is refused as before the kept texts, with
/// the writer named, and nothing is written.
#[test]
fn a_kept_text_never_lets_a_stale_edit_through_the_guard() {
    let f = fx(true);
    run(&f.write, json!({"path": "/g.txt", "content": "keep\nold\n"}));
    f.edit("/g.txt", "old", "mine");
    block_on(BashFs::write_file_bytes(f.ws.as_ref(), "/g.txt", b"keep\nbash\n")).unwrap();
    let msg = f.edit("/g.txt", "keep", "k")["error"].as_str().unwrap_or_default().to_owned();
    assert!(msg.contains("changed by bash at") && msg.contains("-mine"), "{msg}");
    assert_eq!(f.text("/g.txt"), "keep\nbash\n");
    // A rewind restores an older text under an app write: refused too.
    let cp = Checkpoints::new(f.ws.clone()).unwrap();
    run(&f.write, json!({"path": "/r.txt", "content": "first\n"}));
    let k = block_on(cp.create(Some("k"), None)).unwrap();
    f.edit("/r.txt", "first", "second");
    block_on(cp.rewind(&k.id, RewindScope::default())).unwrap();
    assert_eq!(f.text("/r.txt"), "first\n");
    let msg = f.edit("/r.txt", "second", "third")["error"].as_str().unwrap_or_default().to_owned();
    assert!(msg.contains("changed by app at"), "{msg}");
    assert_eq!(f.text("/r.txt"), "first\n");
    // With the version named, the kept text's edit checks it like the read does.
    let v = run(&f.read, json!({"path": "/r.txt"}))["version"].clone();
    let ok =
        json!({"path": "/r.txt", "old_string": "first", "new_string": "1st", "expectedVersion": v});
    assert_eq!(run(&f.edit, ok)["replaced"], true);
    let stale =
        json!({"path": "/r.txt", "old_string": "1st", "new_string": "x", "expectedVersion": v});
    let msg = run(&f.edit, stale)["error"].as_str().unwrap_or_default().to_owned();
    assert!(msg.contains("changed since version") && msg.contains("changed by tool"), "{msg}");
    assert_eq!(f.text("/r.txt"), "1st\n");
    let v = run(&f.read, json!({"path": "/r.txt"}))["version"].clone();
    let named =
        json!({"path": "/r.txt", "old_string": "1st", "new_string": "one", "expectedVersion": v});
    assert_eq!(f.statements(|| assert_eq!(run(&f.edit, named)["replaced"], true)), 1);
    assert_eq!(f.text("/r.txt"), "one\n");
}

#[test]
fn a_rolled_back_edit_leaves_nothing_to_trust() {
    let f = fx(true);
    run(&f.write, json!({"path": "/t.txt", "content": "one two\n"}));
    let mut body = || -> Result<(), crate::store::StoreError> {
        assert_eq!(f.edit("/t.txt", "one", "uno")["replaced"], true);
        Err(crate::store::StoreError::Aborted("rolled back".into()))
    };
    assert!(f.sql.transaction(&mut body).is_err());
    assert_eq!(f.text("/t.txt"), "one two\n");
    // The text kept by the rolled-back edit is not the file's: the next edit reads it.
    assert_eq!(f.edit("/t.txt", "two", "2")["replaced"], true);
    assert_eq!(f.text("/t.txt"), "one 2\n");
}

#[test]
fn what_the_kept_text_cannot_decide_is_decided_by_the_file() {
    let f = fx(false);
    run(&f.write, json!({"path": "/m.txt", "content": "x x\n"}));
    block_on(f.ws.write_file("/m.txt", "x y\n", "text/plain")).unwrap();
    // Ambiguous in the kept text, unique in the file.
    assert_eq!(f.edit("/m.txt", "x", "z")["replaced"], true);
    assert_eq!(f.text("/m.txt"), "z y\n");
    // Absent from the kept text, present in the file.
    block_on(f.ws.write_file("/m.txt", "w y\n", "text/plain")).unwrap();
    assert_eq!(f.edit("/m.txt", "w", "v")["replaced"], true);
    assert_eq!(f.text("/m.txt"), "v y\n");
    // Present in the kept text, gone from the file: the file's error.
    block_on(f.ws.rm("/m.txt", false, false)).unwrap();
    let out = f.edit("/m.txt", "v", "u");
    assert_eq!(out["error"], "File not found: /m.txt");
}
