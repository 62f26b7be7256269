//! Checkpoints against real SQLite (and the in-memory blob store standing in for R2).

use super::*;
use crate::agent::store::ChatStore;
use crate::codemode::connectors::{CallContext, Connector, StateConnector};
use crate::protocol::message::UIMessage;
use crate::store::sqlite::{MemoryBlobs, SqliteSql};
use crate::store::BlobStore;
use crate::tools::workspace::bash::BashFs;
use crate::workspace::tests::{block_on, clock};
use crate::workspace::WorkspaceOptions;
use serde_json::json;
use std::collections::BTreeMap;

struct Fx {
    sql: Rc<dyn Sql>,
    counter: Rc<SqliteSql>,
    ws: Rc<Workspace>,
    cp: Checkpoints,
    blobs: Option<Rc<MemoryBlobs>>,
}

fn fx_with(sql: Rc<SqliteSql>, blobs: Option<Rc<MemoryBlobs>>, retention: Retention) -> Fx {
    let dyn_sql: Rc<dyn Sql> = sql.clone();
    let ws = Rc::new(
        Workspace::with_options(
            dyn_sql.clone(),
            clock(),
            WorkspaceOptions {
                blobs: blobs.clone().map(|b| b as Rc<dyn BlobStore>),
                blob_prefix: "agent".into(),
                inline_threshold: 100_000,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let cp = Checkpoints::with_retention(ws.clone(), retention).unwrap();
    Fx { sql: dyn_sql, counter: sql, ws, cp, blobs }
}

fn fx() -> Fx {
    fx_with(Rc::new(SqliteSql::new()), None, Retention::default())
}

fn fx_r2() -> Fx {
    fx_with(Rc::new(SqliteSql::new()), Some(Rc::new(MemoryBlobs::default())), Retention::default())
}

fn write(ws: &Workspace, p: &str, s: &str) {
    block_on(ws.write_file(p, s, "text/plain")).unwrap();
}

/// Everything observable: each entry's type, MIME type, target and bytes, and the transcript.
type State =
    (BTreeMap<String, (String, String, Option<String>, Option<Vec<u8>>)>, Vec<Vec<String>>);

fn state(f: &Fx) -> State {
    let t = f.ws.table_name();
    let rows = f
        .sql
        .exec(&format!("SELECT path, type, mime_type, target FROM {t} ORDER BY path"), &[])
        .unwrap();
    let mut files = BTreeMap::new();
    for r in rows {
        let path = col_str(&r, 0).unwrap();
        let kind = col_str(&r, 1).unwrap();
        let bytes = if kind == "file" {
            Some(block_on(f.ws.read_file_bytes(&path)).unwrap().unwrap())
        } else {
            None
        };
        files.insert(path, (kind, col_str(&r, 2).unwrap(), col_str(&r, 3), bytes));
    }
    let msgs = f
        .sql
        .exec("SELECT seq, id, role, body FROM think_messages ORDER BY seq", &[])
        .unwrap()
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| match v {
                    SqlValue::Integer(i) => i.to_string(),
                    v => v.into_string().unwrap_or_default(),
                })
                .collect()
        })
        .collect();
    (files, msgs)
}

/// Asserts two states are equal, naming only what differs (states hold whole files).
#[track_caller]
fn same(a: &State, b: &State, what: &str) {
    let differing: Vec<&String> =
        a.0.keys().chain(b.0.keys()).filter(|k| a.0.get(*k) != b.0.get(*k)).collect();
    assert!(
        differing.is_empty() && a.1 == b.1,
        "{what}: paths {differing:?} differ, or messages {:?} vs {:?}",
        a.1,
        b.1
    );
}

fn blob_bytes(f: &Fx) -> i64 {
    let b = crate::workspace::journal::blob_table(f.ws.namespace());
    let rows = f
        .sql
        .exec(&format!("SELECT COALESCE(SUM(COALESCE(length(content), 0)), 0) FROM {b}"), &[])
        .unwrap();
    col_i64(&rows[0], 0)
}

fn message(id: &str, role: &str, text: &str) -> UIMessage {
    UIMessage::from_value(
        json!({"id": id, "role": role, "parts": [{"type": "text", "text": text}]}),
    )
    .unwrap()
}

fn create(f: &Fx, label: &str) -> CheckpointInfo {
    block_on(f.cp.create(Some(label), None)).unwrap()
}

/// A workspace with files, directories, a symlink and a transcript.
fn seed(f: &Fx) {
    write(&f.ws, "/src/a.txt", "alpha\n");
    write(&f.ws, "/src/b.txt", "bravo\n");
    write(&f.ws, "/src/deep/c.txt", "charlie\n");
    block_on(f.ws.write_file_bytes("/bin.dat", &[0, 159, 146, 150], "application/octet-stream"))
        .unwrap();
    f.ws.symlink("/src/a.txt", "/link").unwrap();
    write(&f.ws, "/log.txt", "line 1\n");
    let chat = ChatStore::new(f.sql.as_ref());
    chat.upsert(&message("u1", "user", "hello"), 1.0).unwrap();
    chat.upsert(&message("a1", "assistant", "hi"), 2.0).unwrap();
}

/// Every kind of change, through the workspace, bash's write-back and `state.*`.
fn mutate_everything(f: &Fx) {
    let ws = &f.ws;
    block_on(ws.rewrite_file("/src/a.txt", "alpha edited\n", "text/plain")).unwrap();
    block_on(ws.append_file("/log.txt", "line 2\n", "text/plain")).unwrap();
    block_on(ws.mv("/src/b.txt", "/moved/b.txt")).unwrap();
    block_on(ws.cp("/src/deep", "/copy", true)).unwrap();
    block_on(ws.rm("/src/deep", true, false)).unwrap();
    ws.mkdir("/made/dir", true).unwrap();
    ws.symlink("/moved", "/link2").unwrap();
    block_on(ws.rm("/link", false, false)).unwrap();
    // Bash's write-back goes through BashFs.
    block_on(BashFs::write_file_bytes(ws.as_ref(), "/bash/out.txt", b"from bash\n")).unwrap();
    block_on(BashFs::write_file_bytes(ws.as_ref(), "/bin.dat", b"rewritten by bash")).unwrap();
    block_on(BashFs::remove(ws.as_ref(), "/copy", true)).unwrap();
    // Code Mode's state.* connector.
    let state = StateConnector::new(ws.clone());
    let ctx = CallContext { execution_id: "e1".into(), seq: 1 };
    let call = |m: &str, a: serde_json::Value| block_on(state.call(m, a, &ctx)).unwrap();
    call("writeFile", json!({"path": "/code/x.json", "content": "{}"}));
    call("appendFile", json!({"path": "/log.txt", "content": "line 3\n"}));
    call("writeJson", json!({"path": "/src/a.txt", "value": {"k": 1}}));
    call("mv", json!({"src": "/moved/b.txt", "dest": "/code/b.txt"}));
    call("rm", json!({"path": "/made", "recursive": true}));
    let chat = ChatStore::new(f.sql.as_ref());
    chat.upsert(&message("u1", "user", "hello, edited"), 3.0).unwrap();
    chat.upsert(&message("u2", "user", "next"), 4.0).unwrap();
    chat.upsert(&message("a2", "assistant", "answer"), 5.0).unwrap();
}

#[test]
fn rewind_restores_every_byte_after_every_kind_of_write_and_is_undoable() {
    let f = fx();
    seed(&f);
    let before = state(&f);
    let k = create(&f, "before");
    mutate_everything(&f);
    let after = state(&f);
    assert_ne!(before, after);
    let out = block_on(f.cp.rewind(&k.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), before, "rewind restores the files and the transcript");
    assert_eq!(out.messages_removed, 2);
    assert!(out.files_restored >= 8, "{out:?}");
    // The rewind took a checkpoint first: rewinding to it undoes the rewind.
    let again = block_on(f.cp.rewind(&out.undo.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), after, "rewind of the rewind");
    // And the undo of the undo.
    block_on(f.cp.rewind(&again.undo.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), before);
}

#[test]
fn every_write_path_is_journaled() {
    let f = fx();
    seed(&f);
    let k = create(&f, "k");
    mutate_everything(&f);
    let changed = f.cp.list().unwrap().last().unwrap().files_changed;
    assert_eq!(f.cp.list().unwrap()[0].id, k.id);
    let j = &f.cp.tables.j;
    let paths: Vec<String> = f
        .sql
        .exec(&format!("SELECT path FROM {j} ORDER BY path"), &[])
        .unwrap()
        .iter()
        .filter_map(|r| col_str(r, 0))
        .collect();
    for p in [
        "/src/a.txt",
        "/log.txt",
        "/src/b.txt",
        "/moved/b.txt",
        "/copy/c.txt",
        "/src/deep/c.txt",
        "/made/dir",
        "/link2",
        "/link",
        "/bash/out.txt",
        "/bin.dat",
        "/code/x.json",
        "/code/b.txt",
    ] {
        assert!(paths.contains(&p.to_owned()), "{p} not journaled: {paths:?}");
    }
    assert!(changed >= 13, "{changed}");
}

#[test]
fn scope_restores_files_or_transcript_alone() {
    let f = fx();
    seed(&f);
    let (files0, msgs0) = state(&f);
    let k = create(&f, "k");
    mutate_everything(&f);
    let (files1, msgs1) = state(&f);
    let scope = RewindScope { files: true, transcript: false };
    block_on(f.cp.rewind(&k.id, scope)).unwrap();
    assert_eq!(state(&f), (files0.clone(), msgs1.clone()));
    let scope = RewindScope { files: false, transcript: true };
    block_on(f.cp.rewind(&k.id, scope)).unwrap();
    assert_eq!(state(&f), (files0, msgs0));
    let _ = files1;
}

#[test]
fn checkpoints_of_an_unchanged_workspace_add_rows_not_bytes() {
    let f = fx();
    for i in 0..200 {
        write(&f.ws, &format!("/d/f{i}.txt"), &"x".repeat(1000));
    }
    let before = f.counter.statements();
    create(&f, "one");
    create(&f, "two");
    assert!(f.counter.statements() - before <= 4, "a checkpoint is O(1) statements");
    assert_eq!(blob_bytes(&f), 0, "no content copied");
    // Changing one file saves its prior 1000 bytes once, however often it changes.
    write(&f.ws, "/d/f1.txt", "new");
    write(&f.ws, "/d/f1.txt", "newer");
    assert_eq!(blob_bytes(&f), 1000);
    // Content already saved is not saved again (content-addressed).
    create(&f, "three");
    write(&f.ws, "/d/f2.txt", "other");
    assert_eq!(blob_bytes(&f), 1000, "f2 had the same content as f1: deduplicated");
}

#[test]
fn journaling_adds_no_statement_to_the_write_path() {
    let count = |journal: bool| {
        let f = fx();
        write(&f.ws, "/a.txt", "one");
        if journal {
            create(&f, "k");
        }
        let before = f.counter.statements();
        write(&f.ws, "/a.txt", "two");
        write(&f.ws, "/b.txt", "new");
        block_on(f.ws.rewrite_file("/a.txt", "three", "text/plain")).unwrap();
        block_on(f.ws.append_file("/a.txt", "four", "text/plain")).unwrap();
        block_on(f.ws.rm("/b.txt", false, false)).unwrap();
        f.ws.mkdir("/d", false).unwrap();
        block_on(f.ws.mv("/a.txt", "/d/a.txt")).unwrap();
        block_on(f.ws.cp("/d", "/e", true)).unwrap();
        block_on(f.ws.rm("/d", true, false)).unwrap();
        f.ws.symlink("/e", "/l").unwrap();
        f.counter.statements() - before
    };
    assert_eq!(count(true), count(false));
}

#[test]
fn transcript_rewind_removes_later_messages_and_restores_edited_ones() {
    let f = fx();
    let chat = ChatStore::new(f.sql.as_ref());
    chat.upsert(&message("u1", "user", "one"), 1.0).unwrap();
    chat.upsert(&message("a1", "assistant", "two"), 2.0).unwrap();
    let before = state(&f);
    let k = create(&f, "k");
    chat.upsert(&message("u2", "user", "three"), 3.0).unwrap();
    chat.upsert(&message("a1", "assistant", "two, regenerated"), 4.0).unwrap();
    create(&f, "later");
    chat.truncate_after("u1").unwrap();
    chat.upsert(&message("a9", "assistant", "other"), 5.0).unwrap();
    let out = block_on(f.cp.rewind(&k.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), before);
    assert_eq!(out.messages_removed, 1, "a9 (u2 was already gone)");
    let ids: Vec<String> = chat.messages().unwrap().into_iter().map(|m| m.id).collect();
    assert_eq!(ids, ["u1", "a1"]);
}

#[test]
fn diff_lists_changes_with_unified_diffs() {
    let f = fx();
    seed(&f);
    let k = create(&f, "k");
    block_on(f.ws.rewrite_file("/src/a.txt", "alpha\nmore\n", "text/plain")).unwrap();
    write(&f.ws, "/new.txt", "fresh\n");
    block_on(f.ws.rm("/src/b.txt", false, false)).unwrap();
    write(&f.ws, "/log.txt", "tmp");
    write(&f.ws, "/log.txt", "line 1\n");
    block_on(f.ws.write_file_bytes("/bin.dat", &[1, 255, 0], "application/octet-stream")).unwrap();
    let changes = block_on(f.cp.diff(&k.id)).unwrap();
    let by: BTreeMap<&str, &FileChange> = changes.iter().map(|c| (c.path.as_str(), c)).collect();
    assert_eq!(by.len(), 4, "{changes:?} (log.txt changed back: not listed)");
    assert_eq!(by["/src/a.txt"].kind, ChangeKind::Modified);
    assert!(by["/src/a.txt"].diff.as_deref().unwrap().contains("+more"), "{changes:?}");
    assert_eq!(by["/new.txt"].kind, ChangeKind::Added);
    assert!(by["/new.txt"].diff.as_deref().unwrap().contains("+fresh"));
    assert_eq!(by["/src/b.txt"].kind, ChangeKind::Deleted);
    assert!(by["/src/b.txt"].diff.as_deref().unwrap().contains("-bravo"));
    assert_eq!(by["/bin.dat"].diff, None);
    assert_eq!(by["/bin.dat"].note.as_deref(), Some("binary"));
    assert!(matches!(block_on(f.cp.diff("c999")), Err(CheckpointError::NotFound(_))));
    assert!(matches!(block_on(f.cp.diff("nope")), Err(CheckpointError::NotFound(_))));
}

#[test]
fn spilled_files_are_shared_by_reference_and_restored() {
    let f = fx_r2();
    let blobs = f.blobs.clone().unwrap();
    let big1 = "1".repeat(300_000);
    let big2 = "2".repeat(300_000);
    write(&f.ws, "/big.txt", &big1);
    write(&f.ws, "/other.txt", &big1);
    assert_eq!(blobs.objects.borrow().len(), 2);
    let before = state(&f);
    let k = create(&f, "k");
    write(&f.ws, "/big.txt", &big2);
    block_on(f.ws.rm("/other.txt", false, false)).unwrap();
    write(&f.ws, "/other.txt", &big2);
    block_on(f.ws.mv("/other.txt", "/moved.txt")).unwrap();
    // Both old objects are kept for the checkpoint: other.txt's had big.txt's content and
    // hash, but a hash names one content only within one stored object (the hash is not
    // collision resistant, `workspace/version.rs`), so the blob is not shared.
    assert_eq!(blobs.objects.borrow().len(), 4, "{:?}", blobs.objects.borrow().keys());
    assert_eq!(blob_bytes(&f), 0, "R2 content is referenced, not copied into SQL");
    let after = state(&f);
    let puts_before = blobs.objects.borrow().clone();
    let out = block_on(f.cp.rewind(&k.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), before);
    assert_eq!(*blobs.objects.borrow(), puts_before, "a rewind writes no R2 object");
    block_on(f.cp.rewind(&out.undo.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), after);
    // Dropping every checkpoint collects the objects only they needed.
    let stats = block_on(f.cp.prune(Retention { max_checkpoints: 0, max_bytes: 0 })).unwrap();
    assert_eq!(stats.checkpoints_dropped, 3);
    assert_eq!(stats.r2_deleted, 2, "{stats:?}");
    assert_eq!(blobs.objects.borrow().len(), 2, "only the live files' objects remain");
    assert_eq!(state(&f), after);
}

#[test]
fn chunked_files_keep_their_chunks_while_a_checkpoint_needs_them() {
    let f = fx();
    let big1: String = (0..2_500_000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    write(&f.ws, "/big.txt", &big1);
    let before = state(&f);
    let k = create(&f, "k");
    write(&f.ws, "/big.txt", "small now");
    block_on(f.ws.rm("/big.txt", false, false)).unwrap();
    write(&f.ws, "/big.txt", &big1.replace('a', "A"));
    let after = state(&f);
    block_on(f.cp.rewind(&k.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), before);
    block_on(f.cp.prune(Retention { max_checkpoints: 0, max_bytes: 0 })).unwrap();
    assert_eq!(state(&f), before, "the live file's chunks survive the GC");
    let c = f.ws.chunk_table_name();
    let chunks = f.sql.exec(&format!("SELECT COUNT(DISTINCT chunk_id) FROM {c}"), &[]).unwrap();
    assert_eq!(col_i64(&chunks[0], 0), 1, "the other chunk sets were collected");
    let _ = after;
}

#[test]
fn retention_keeps_the_last_checkpoints_and_collects_their_content() {
    let f = fx_with(
        Rc::new(SqliteSql::new()),
        None,
        Retention { max_checkpoints: 3, max_bytes: 1_000_000_000 },
    );
    for i in 0..6 {
        create(&f, &format!("k{i}"));
        write(&f.ws, "/a.txt", &format!("{i}").repeat(10_000));
    }
    let list = f.cp.list().unwrap();
    assert_eq!(
        list.iter().map(|c| c.label.clone().unwrap()).collect::<Vec<_>>(),
        ["k3", "k4", "k5"]
    );
    // The prior contents of epochs 3..5 are 2, 3, 4 (10 KB each); 0 and 1 were collected.
    assert_eq!(blob_bytes(&f), 30_000);
    assert!(matches!(
        block_on(f.cp.rewind("c1", RewindScope::default())),
        Err(CheckpointError::NotFound(_))
    ));
    block_on(f.cp.rewind(&list[0].id, RewindScope::default())).unwrap();
    assert_eq!(block_on(f.ws.read_file("/a.txt")).unwrap().unwrap(), "2".repeat(10_000));
    // By bytes: 15 KB keeps only what fits (and always the newest checkpoint).
    let stats = block_on(f.cp.prune(Retention { max_checkpoints: 50, max_bytes: 15_000 })).unwrap();
    assert!(stats.checkpoints_dropped >= 1 && blob_bytes(&f) <= 15_000, "{stats:?}");
}

#[test]
fn export_then_import_reproduces_the_checkpoint() {
    let f = fx_r2();
    seed(&f);
    write(&f.ws, "/spilled.txt", &"s".repeat(200_000));
    // Inline content larger than a page: spans pages.
    block_on(f.ws.write_file_bytes("/page.bin", &vec![7u8; 95_000], "application/octet-stream"))
        .unwrap();
    let k = create(&f, "k");
    let at_k = state(&f);
    mutate_everything(&f);
    write(&f.ws, "/spilled.txt", "gone");
    let now = state(&f);
    let g = fx_with(Rc::new(SqliteSql::new()), f.blobs.clone(), Retention::default());
    let pages = fork(&f, &g, &k.id);
    assert!(pages >= 1);
    assert_eq!(state(&g), at_k, "the fork holds the checkpoint's state");
    assert_eq!(state(&f), now, "the original keeps its own");
    // A fork is imported into an empty instance only.
    let page = block_on(f.cp.export_page(&k.id, None)).unwrap();
    assert!(matches!(block_on(g.cp.import_page(&page)), Err(CheckpointError::NotEmpty)));
}

/// Every entry's created and modified times, by path.
fn times(f: &Fx) -> Vec<(String, i64, i64)> {
    let t = f.ws.table_name();
    f.sql
        .exec(
            &format!(
                "SELECT path, created_at, modified_at FROM {t} WHERE path != '/' ORDER BY path"
            ),
            &[],
        )
        .unwrap()
        .into_iter()
        .map(|r| (col_str(&r, 0).unwrap(), col_i64(&r, 1), col_i64(&r, 2)))
        .collect()
}

#[test]
fn a_fork_keeps_every_entrys_times_as_they_were_at_the_checkpoint() {
    let f = fx_r2();
    seed(&f);
    write(&f.ws, "/spilled.txt", &"s".repeat(200_000));
    block_on(f.ws.write_file_bytes("/page.bin", &vec![7u8; 95_000], "application/octet-stream"))
        .unwrap();
    // Distinct times per entry, in the past, so that none is the importer's clock.
    let t = f.ws.table_name().to_owned();
    f.sql
        .exec(
            &format!(
                "UPDATE {t} SET created_at = 1000000 + rowid * 7, modified_at = 2000000 + rowid * 13
                 WHERE path != '/'"
            ),
            &[],
        )
        .unwrap();
    let k = create(&f, "k");
    let at_k = times(&f);
    assert!(at_k.len() >= 5, "{at_k:?}");
    // Changed after the checkpoint: the export takes these entries' times from the journal.
    mutate_everything(&f);
    write(&f.ws, "/spilled.txt", "gone");
    let g = fx_with(Rc::new(SqliteSql::new()), f.blobs.clone(), Retention::default());
    fork(&f, &g, &k.id);
    assert_eq!(times(&g), at_k);
}

/// Copies checkpoint `id` of `from` into `to`, page by page through JSON; returns the pages.
fn fork(from: &Fx, to: &Fx, id: &str) -> usize {
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = block_on(from.cp.export_page(id, cursor.as_deref())).unwrap();
        let wire = serde_json::to_string(&page).unwrap();
        assert!(wire.len() <= 1_048_576, "a page is {} bytes", wire.len());
        let page: ExportPage = serde_json::from_str(&wire).unwrap();
        block_on(to.cp.import_page(&page)).unwrap();
        pages += 1;
        match page.next {
            Some(n) => cursor = Some(n),
            None => return pages,
        }
    }
}

#[test]
fn large_content_spans_export_pages() {
    let f = fx();
    let big: Vec<u8> = (0..2_300_000u32).map(|i| (i % 251) as u8).collect();
    block_on(f.ws.write_file_bytes("/chunked.bin", &big, "application/octet-stream")).unwrap();
    write(&f.ws, "/inline.txt", &"é".repeat(700_000));
    let k = create(&f, "k");
    let at_k = state(&f);
    block_on(f.ws.rm("/chunked.bin", false, false)).unwrap();
    let g = fx();
    let pages = fork(&f, &g, &k.id);
    assert!(pages >= 5, "{pages}");
    assert_eq!(state(&g), at_k);
}

/// A database that fails at statement `k`: either that statement alone (an error the code
/// sees and rolls back), or every statement from `k` on (the process dying there: nothing
/// more reaches SQLite, and the file is reopened as a restarted object would).
struct Faulty {
    inner: SqliteSql,
    count: std::cell::Cell<usize>,
    fail_at: std::cell::Cell<usize>,
    die: bool,
}

impl Faulty {
    /// Counts one statement and fails it when it is the one (or past the one) to fail.
    fn next_statement(&self) -> Result<(), StoreError> {
        let n = self.count.get() + 1;
        self.count.set(n);
        let k = self.fail_at.get();
        if n == k || (self.die && k > 0 && n > k) {
            return Err(StoreError::Sql(format!("injected fault at statement {n}")));
        }
        Ok(())
    }
}

impl Sql for Faulty {
    fn exec(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<crate::store::Row>, StoreError> {
        self.next_statement()?;
        self.inner.exec(sql, params)
    }

    fn exec_changed(&self, sql: &str, params: &[SqlValue]) -> Result<bool, StoreError> {
        self.next_statement()?;
        self.inner.exec_changed(sql, params)
    }

    fn transaction(&self, f: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.exec("SAVEPOINT fault_tx", &[])?;
        let result = f().and_then(|()| self.exec("RELEASE fault_tx", &[]).map(|_| ()));
        if result.is_err() && !self.die {
            // A failed body or commit rolls back, as `transactionSync` does.
            self.inner.exec("ROLLBACK TO fault_tx", &[])?;
            self.inner.exec("RELEASE fault_tx", &[])?;
        }
        result
    }
}

/// A workspace over `sql` spilling to `blobs` (no checkpoints yet).
fn workspace_over(sql: Rc<dyn Sql>, blobs: Rc<dyn BlobStore>) -> Rc<Workspace> {
    Rc::new(
        Workspace::with_options(
            sql,
            clock(),
            WorkspaceOptions {
                blobs: Some(blobs),
                blob_prefix: "agent".into(),
                inline_threshold: 100_000,
                ..Default::default()
            },
        )
        .unwrap(),
    )
}

/// A workspace over `sql` with checkpoints and the shared blob store.
fn over(sql: Rc<dyn Sql>, blobs: &Rc<MemoryBlobs>) -> (Rc<Workspace>, Checkpoints) {
    let ws = workspace_over(sql, blobs.clone());
    let cp = Checkpoints::new(ws.clone()).unwrap();
    (ws, cp)
}

fn state_of(sql: Rc<dyn Sql>, blobs: &Rc<MemoryBlobs>) -> State {
    let (ws, cp) = over(sql.clone(), blobs);
    state(&Fx { sql, counter: Rc::new(SqliteSql::new()), ws, cp, blobs: Some(blobs.clone()) })
}

/// Builds the scene of a rewind in the database file `path`: returns the state at the
/// checkpoint, the state now, and the checkpoint's id.
fn scene(path: &std::path::Path, blobs: &Rc<MemoryBlobs>) -> (State, State, String) {
    let sql: Rc<dyn Sql> = Rc::new(SqliteSql::open(path));
    let (ws, cp) = over(sql.clone(), blobs);
    let f = Fx { sql, counter: Rc::new(SqliteSql::new()), ws, cp, blobs: Some(blobs.clone()) };
    seed(&f);
    write(&f.ws, "/spilled.txt", &"s".repeat(150_000));
    let k = create(&f, "k");
    let old = state(&f);
    mutate_everything(&f);
    write(&f.ws, "/spilled.txt", &"t".repeat(150_000));
    (old, state(&f), k.id)
}

#[test]
fn a_rewind_is_all_or_nothing_whichever_statement_fails_or_the_process_dies_at() {
    let dir = std::env::temp_dir().join(format!("think-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // How many statements a successful rewind runs.
    let (total, restored) = {
        let path = dir.join("count.db");
        let blobs = Rc::new(MemoryBlobs::default());
        let (at_k, _, id) = scene(&path, &blobs);
        let faulty = Rc::new(Faulty {
            inner: SqliteSql::open(&path),
            count: 0.into(),
            fail_at: 0.into(),
            die: false,
        });
        let (_, cp) = over(faulty.clone(), &blobs);
        let start = faulty.count.get();
        block_on(cp.rewind(&id, RewindScope::default())).unwrap();
        let total = faulty.count.get() - start;
        same(&state_of(faulty.clone(), &blobs), &at_k, "counting run");
        (total, at_k)
    };
    assert!(total >= 5, "{total}");
    let _ = restored;
    for die in [false, true] {
        for k in 1..=total {
            let path = dir.join(format!("k{k}-{die}.db"));
            let _ = std::fs::remove_file(&path);
            let blobs = Rc::new(MemoryBlobs::default());
            let (_, now, id) = scene(&path, &blobs);
            let objects = blobs.objects.borrow().clone();
            let result = {
                let faulty = Rc::new(Faulty {
                    inner: SqliteSql::open(&path),
                    count: 0.into(),
                    fail_at: 0.into(),
                    die,
                });
                let (_, cp) = over(faulty.clone(), &blobs);
                faulty.fail_at.set(faulty.count.get() + k);
                let result = block_on(cp.rewind(&id, RewindScope::default()));
                if !die {
                    // The object kept running: its own view is the old state, whole.
                    faulty.fail_at.set(0);
                    same(&state_of(faulty.clone(), &blobs), &now, &format!("k={k}: {result:?}"));
                }
                result.is_ok()
            };
            // Reopened (after a crash, or just again): entirely the old or the new state.
            let after = state_of(Rc::new(SqliteSql::open(&path)), &blobs);
            assert!(!result, "k={k} die={die}: the fault reached the rewind");
            same(&after, &now, &format!("k={k} die={die}: a failed rewind changed nothing"));
            assert_eq!(*blobs.objects.borrow(), objects, "k={k}: no R2 object touched");
            let _ = std::fs::remove_file(&path);
        }
    }
    // Without a fault, the same scene rewinds whole.
    let path = dir.join("whole.db");
    let blobs = Rc::new(MemoryBlobs::default());
    let (at_k, _, id) = scene(&path, &blobs);
    let (_, cp) = over(Rc::new(SqliteSql::open(&path)), &blobs);
    block_on(cp.rewind(&id, RewindScope::default())).unwrap();
    same(&state_of(Rc::new(SqliteSql::open(&path)), &blobs), &at_k, "whole");
    let _ = std::fs::remove_dir_all(&dir);
}

/// BENCHMARKS.md's host figure: a checkpoint of 1,000 files with 10 then changed, and the
/// rewind. Prints the time and bytes (`cargo test --lib checkpoint_cost -- --nocapture`)
/// and asserts the bytes: only the 10 prior contents are stored.
#[test]
fn checkpoint_cost_of_1000_files_with_10_changed() {
    let body =
        |i: usize, tag: &str| format!("{tag} file {i}\n{}", "lorem ipsum dolor\n".repeat(110));
    let size = body(0, "v1").len();
    let run = |journal: bool| {
        let f = fx();
        for i in 0..1000 {
            write(&f.ws, &format!("/src/m{}/f{i}.txt", i % 20), &body(i, "v1"));
        }
        let before = state(&f);
        let t0 = std::time::Instant::now();
        let k = if journal { Some(create(&f, "turn")) } else { None };
        let create_time = t0.elapsed();
        let t1 = std::time::Instant::now();
        for i in 0..10 {
            write(&f.ws, &format!("/src/m{}/f{i}.txt", i % 20), &body(i, "v2"));
        }
        let write_time = t1.elapsed();
        (f, before, k, create_time, write_time)
    };
    let (_, _, _, _, plain_writes) = run(false);
    let (f, before, k, create_time, writes) = run(true);
    let k = k.unwrap();
    let stored = blob_bytes(&f);
    let j = &f.cp.tables.j;
    let rows = col_i64(&f.sql.exec(&format!("SELECT COUNT(*) FROM {j}"), &[]).unwrap()[0], 0);
    assert_eq!(stored, 10 * size as i64, "only the 10 changed files' prior content");
    assert_eq!(rows, 10);
    assert_eq!(f.cp.list().unwrap()[0].files_changed, 10);
    let t2 = std::time::Instant::now();
    block_on(f.cp.rewind(&k.id, RewindScope::default())).unwrap();
    let rewind_time = t2.elapsed();
    same(&state(&f), &before, "rewind");
    println!(
        "checkpoint of 1000 files ({} KB): {:?}, 1 row; 10 files then changed: {} bytes of prior \
         content + {} journal rows; those 10 writes {:?} (unjournaled {:?}); rewind {:?}",
        1000 * size / 1000,
        create_time,
        stored,
        rows,
        writes,
        plain_writes,
        rewind_time
    );
}

#[test]
fn a_restarted_workspace_shares_spilled_objects_before_checkpoints_are_built() {
    let sql = Rc::new(SqliteSql::new());
    let blobs = Rc::new(MemoryBlobs::default());
    let f = fx_with(sql.clone(), Some(blobs.clone()), Retention::default());
    write(&f.ws, "/big.txt", &"1".repeat(200_000));
    let before = state(&f);
    let k = create(&f, "k");
    // The object restarts: a new Workspace over the same database, no Checkpoints yet.
    let ws = Workspace::with_options(
        sql.clone(),
        clock(),
        WorkspaceOptions {
            blobs: Some(blobs.clone() as Rc<dyn BlobStore>),
            blob_prefix: "agent".into(),
            inline_threshold: 100_000,
            ..Default::default()
        },
    )
    .unwrap();
    write(&ws, "/big.txt", &"2".repeat(200_000));
    assert_eq!(blobs.objects.borrow().len(), 2, "the checkpoint's object was not overwritten");
    block_on(f.cp.rewind(&k.id, RewindScope::default())).unwrap();
    same(&state(&f), &before, "restored");
}

/// Random operations (inline, spilled and chunked content, every mutation kind, transcript
/// edits) with checkpoints among them; then rewinds to checkpoints in random order, each
/// of which must give back exactly the state recorded when that checkpoint was taken, also
/// after retention dropped the oldest.
#[test]
fn random_histories_rewind_to_exactly_each_checkpoint() {
    for seed_value in [1u64, 7, 42] {
        let f = fx_with(
            Rc::new(SqliteSql::new()),
            Some(Rc::new(MemoryBlobs::default())),
            Retention { max_checkpoints: 12, max_bytes: 1_000_000_000 },
        );
        let mut rng = seed_value;
        let mut next = |n: u64| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) % n
        };
        let paths = ["/a", "/b", "/d/c", "/d/e/f", "/g"];
        let chat = ChatStore::new(f.sql.as_ref());
        let mut recorded: Vec<(String, State)> = Vec::new();
        let random_op = |f: &Fx, step: usize, next: &mut dyn FnMut(u64) -> u64| {
            let p = paths[next(paths.len() as u64) as usize];
            let q = paths[next(paths.len() as u64) as usize];
            let size = [10usize, 150_000, 1_800_000][next(3) as usize];
            let ws = &f.ws;
            // Errors (a missing source, a file where a directory is) are fine: the
            // operation then changed nothing, which the checkpoints must agree with.
            match next(9) {
                0 | 1 => {
                    let text = format!("{step}").repeat(size / 2 + 1);
                    let _ = block_on(ws.write_file(p, &text, "text/plain"));
                }
                2 => {
                    let _ = block_on(ws.append_file(p, "+", "text/plain"));
                }
                3 => {
                    let _ = block_on(ws.rm(p, true, true));
                }
                4 => {
                    let _ = block_on(ws.mv(p, q));
                }
                5 => {
                    let _ = block_on(ws.cp(p, q, true));
                }
                6 => {
                    let _ = ws.mkdir(p, true);
                }
                7 => {
                    let _ = ws.symlink(q, p);
                }
                _ => {
                    let id = format!("m{}", next(6));
                    if next(3) == 0 {
                        let _ = chat.truncate_after(&id);
                    } else {
                        let m = message(&id, "user", &format!("s{step}"));
                        chat.upsert(&m, step as f64).unwrap();
                    }
                }
            }
        };
        for step in 0..60 {
            random_op(&f, step, &mut next);
            if next(4) == 0 {
                let k = create(&f, &format!("s{step}"));
                recorded.push((k.id, state(&f)));
            }
        }
        for round in 0..12 {
            let live: Vec<String> = f.cp.list().unwrap().into_iter().map(|c| c.id).collect();
            recorded.retain(|(id, _)| live.contains(id));
            assert!(recorded.len() >= 3, "seed {seed_value}: {} checkpoints", recorded.len());
            let (id, expected) = recorded[next(recorded.len() as u64) as usize].clone();
            let present = state(&f);
            let out = block_on(f.cp.rewind(&id, RewindScope::default())).unwrap();
            same(&state(&f), &expected, &format!("seed {seed_value}, rewind to {id}"));
            // The rewind's own checkpoint holds the state before it.
            recorded.push((out.undo.id, present));
            for step in 0..3 {
                random_op(&f, 100 + round * 3 + step, &mut next);
            }
        }
        // A fork of any remaining checkpoint holds exactly its state.
        let live: Vec<String> = f.cp.list().unwrap().into_iter().map(|c| c.id).collect();
        recorded.retain(|(id, _)| live.contains(id));
        for (id, expected) in recorded.iter().take(3) {
            let g = fx_with(Rc::new(SqliteSql::new()), f.blobs.clone(), Retention::default());
            fork(&f, &g, id);
            same(&state(&g), expected, &format!("seed {seed_value}, fork of {id}"));
        }
    }
}

#[test]
fn retention_on_create_deletes_the_r2_objects_of_dropped_checkpoints() {
    let blobs = Rc::new(MemoryBlobs::default());
    let f = fx_with(
        Rc::new(SqliteSql::new()),
        Some(blobs.clone()),
        Retention { max_checkpoints: 2, max_bytes: 1_000_000_000 },
    );
    let mut states = Vec::new();
    for i in 0..6u8 {
        write(&f.ws, "/big.bin", &char::from(b'a' + i).to_string().repeat(200_000));
        let k = create(&f, &format!("k{i}"));
        states.push((k.id, state(&f)));
    }
    // The live object, and the prior content k4 needs (nothing changed after k5); the
    // objects only k0..k3 needed were deleted when those were dropped.
    assert_eq!(blobs.objects.borrow().len(), 2, "{:?}", blobs.objects.borrow().keys());
    assert_eq!(f.cp.list().unwrap().len(), 2);
    for (id, expected) in states.iter().rev().take(2) {
        block_on(f.cp.rewind(id, RewindScope::default())).unwrap();
        same(&state(&f), expected, id);
    }
}

#[test]
fn bad_ids_and_cursors_are_clear_errors() {
    let f = fx();
    write(&f.ws, "/a.txt", "a");
    let k = create(&f, "k");
    for cursor in ["x", "f:", "f:abc:/a", "m:z"] {
        let err = block_on(f.cp.export_page(&k.id, Some(cursor))).unwrap_err();
        assert!(matches!(err, CheckpointError::BadPage(_)), "{cursor}: {err}");
    }
    let err = block_on(f.cp.export_page("c42", None)).unwrap_err();
    assert_eq!(err.to_string(), "no checkpoint \"c42\"");
    let err = block_on(f.cp.rewind("", RewindScope::default())).unwrap_err();
    assert!(matches!(err, CheckpointError::NotFound(_)));
    // A piece out of order is refused, and nothing is written for that file.
    let g = fx();
    let page = ExportPage {
        checkpoint: k.id.clone(),
        first: true,
        items: vec![
            ExportItem::File {
                path: "/x.bin".into(),
                mime_type: "application/octet-stream".into(),
                text: false,
                offset: 0,
                bytes: vec![1, 2],
                last: false,
                times: None,
            },
            ExportItem::File {
                path: "/x.bin".into(),
                mime_type: "application/octet-stream".into(),
                text: false,
                offset: 5,
                bytes: vec![3],
                last: true,
                times: None,
            },
        ],
        next: None,
    };
    let err = block_on(g.cp.import_page(&page)).unwrap_err();
    assert!(matches!(err, CheckpointError::BadPage(_)), "{err}");
    assert_eq!(block_on(g.ws.read_file("/x.bin")).unwrap(), None);
}

/// The work of one checkpoint at the retention limit (SQLite VM steps of `create`) with
/// `kept` checkpoints kept, each followed by 10 changed files.
fn steps_of_a_create_at_the_limit(kept: usize) -> u64 {
    let f = fx_with(
        Rc::new(SqliteSql::new()),
        None,
        Retention { max_checkpoints: kept, max_bytes: 1_000_000_000 },
    );
    for i in 0..kept + 3 {
        create(&f, &format!("k{i}"));
        for n in 0..10 {
            write(&f.ws, &format!("/f{n}.txt"), &format!("{i} {n} {}", "x".repeat(2_000)));
        }
    }
    let before = f.counter.steps();
    create(&f, "at the limit");
    let steps = f.counter.steps() - before;
    assert_eq!(f.cp.list().unwrap().len(), kept);
    steps
}

/// Retention at the limit costs what it drops, not what it keeps: the pass used to sum and
/// scan every blob (twice per checkpoint), so turn starts grew slower as history grew.
#[test]
fn retention_at_the_limit_costs_what_it_drops_not_what_it_keeps() {
    let small = steps_of_a_create_at_the_limit(5);
    let large = steps_of_a_create_at_the_limit(60);
    assert!(large < small * 2, "{large} VM steps with 60 kept vs {small} with 5");
}

/// A blob store whose deletes fail while `fail` is set: an isolate that dies between a
/// prune's SQL commit and its R2 deletes.
struct FailingDeletes {
    inner: Rc<MemoryBlobs>,
    fail: std::cell::Cell<bool>,
}

#[async_trait::async_trait(?Send)]
impl BlobStore for FailingDeletes {
    async fn put(&self, key: &str, bytes: &[u8], ct: &str) -> Result<(), StoreError> {
        self.inner.put(key, bytes, ct).await
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key).await
    }
    async fn delete(&self, keys: &[String]) -> Result<(), StoreError> {
        if self.fail.get() {
            return Err(StoreError::Aborted("the isolate died".into()));
        }
        self.inner.delete(keys).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.list(prefix).await
    }
}

#[test]
fn r2_objects_a_dead_prune_left_are_swept_by_the_next_one() {
    let objects = Rc::new(MemoryBlobs::default());
    let store = Rc::new(FailingDeletes { inner: objects.clone(), fail: false.into() });
    let ws = workspace_over(Rc::new(SqliteSql::new()), store.clone());
    let cp = Checkpoints::with_retention(
        ws.clone(),
        Retention { max_checkpoints: 2, max_bytes: 1_000_000_000 },
    )
    .unwrap();
    for i in 0..3u8 {
        block_on(ws.write_file(
            "/big.bin",
            &char::from(b'a' + i).to_string().repeat(200_000),
            "text/plain",
        ))
        .unwrap();
        block_on(cp.create(Some("k"), None)).unwrap();
    }
    // Live "c" and the prior "b" that the newest checkpoint needs; "a" went with k0.
    assert_eq!(objects.objects.borrow().len(), 2);
    store.fail.set(true);
    block_on(ws.write_file("/big.bin", &"d".repeat(200_000), "text/plain")).unwrap();
    assert!(block_on(cp.create(Some("k"), None)).is_err(), "the R2 delete failed");
    assert_eq!(objects.objects.borrow().len(), 3, "the dropped checkpoint's object is left");
    // A new write never takes the key of an object waiting to be deleted.
    block_on(ws.write_file("/other.bin", &"o".repeat(200_000), "text/plain")).unwrap();
    store.fail.set(false);
    // The next prune (the next checkpoint, with nothing new to drop by then) sweeps it.
    let stats =
        block_on(cp.prune(Retention { max_checkpoints: 50, max_bytes: 1_000_000_000 })).unwrap();
    assert_eq!(stats.r2_deleted, 1);
    let mut left: Vec<Vec<u8>> =
        objects.objects.borrow().values().map(|v| v[..1].to_vec()).collect();
    left.sort();
    assert_eq!(left, [b"c".to_vec(), b"d".to_vec(), b"o".to_vec()]);
    assert_eq!(block_on(ws.read_file("/big.bin")).unwrap().unwrap(), "d".repeat(200_000));
}

/// Gives the files at `paths` one stored hash, as two contents crafted to collide under the
/// workspace's non-cryptographic hash would have (`workspace/version.rs`).
fn forge_one_hash(f: &Fx, paths: &[&str]) {
    let t = f.ws.table_name();
    for p in paths {
        f.sql
            .exec(
                &format!("UPDATE {t} SET hash = '0123456789abcdef' WHERE path = ?"),
                &[SqlValue::Text((*p).into())],
            )
            .unwrap();
    }
}

#[test]
fn contents_that_share_a_hash_keep_their_own_blobs_and_show_in_the_diff() {
    let f = fx();
    write(&f.ws, "/a.txt", "alpha\n");
    write(&f.ws, "/b.txt", "bravo\n");
    forge_one_hash(&f, &["/a.txt", "/b.txt"]);
    let before = state(&f);
    let k = create(&f, "k");
    write(&f.ws, "/a.txt", "changed a\n");
    write(&f.ws, "/b.txt", "changed b\n");
    block_on(f.cp.rewind(&k.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), before, "each file gets its own content back");
    // A change to content whose hash equals the checkpoint's is still a change.
    let k2 = create(&f, "k2");
    write(&f.ws, "/a.txt", "forged\n");
    forge_one_hash(&f, &["/a.txt"]);
    let changes = block_on(f.cp.diff(&k2.id)).unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].kind, ChangeKind::Modified);
    assert!(changes[0].diff.as_deref().unwrap().contains("-alpha\n+forged"), "{changes:?}");
}

#[test]
fn journal_triggers_that_shared_blobs_by_hash_alone_are_replaced() {
    let sql = Rc::new(SqliteSql::new());
    let f = fx_with(sql.clone(), None, Retention::default());
    write(&f.ws, "/a.txt", "alpha\n");
    write(&f.ws, "/b.txt", "bravo\n");
    // As a database from before: update triggers whose key is the hash alone.
    for event in ["upd", "del"] {
        f.sql.exec(&format!("DROP TRIGGER cf_wsck_{event}_default"), &[]).unwrap();
    }
    f.sql
        .exec(
            "CREATE TRIGGER cf_wsck_upd_default BEFORE UPDATE ON cf_wsfile_default
             BEGIN SELECT COALESCE(OLD.hash, 'u'); END",
            &[],
        )
        .unwrap();
    let f = fx_with(sql, None, Retention::default());
    forge_one_hash(&f, &["/a.txt", "/b.txt"]);
    let before = state(&f);
    let k = create(&f, "k");
    write(&f.ws, "/a.txt", "changed a\n");
    block_on(f.ws.rm("/b.txt", false, false)).unwrap();
    block_on(f.cp.rewind(&k.id, RewindScope::default())).unwrap();
    assert_eq!(state(&f), before);
}

#[test]
fn a_large_file_written_again_with_its_content_is_not_a_change() {
    // Over `MAX_DIFF_BYTES`, so no diff can show the two equal: chunked in SQL, then in R2;
    // each write stores it anew (another chunk set, another object key).
    let big: String = (0..1_200_000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    for f in [fx(), fx_r2()] {
        write(&f.ws, "/big.txt", &big);
        let k = create(&f, "k");
        write(&f.ws, "/big.txt", &big);
        let changes = block_on(f.cp.diff(&k.id)).unwrap();
        assert!(changes.is_empty(), "{changes:?}");
    }
}
