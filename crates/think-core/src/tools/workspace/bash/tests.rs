//! End-to-end tests of `run_bash` over an in-memory workspace and a fake engine that edits
//! its filesystem the way a script would and reports it the way `bridge.mjs` does.

use super::*;
use crate::store::StoreError;
use crate::workspace::{Errno, FsError};
use serde_json::json;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::task::{Context, Poll, Waker};

/// Drives a future whose I/O is all in memory, so it never waits on anything.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Dir,
    File(Vec<u8>),
    Link,
}

/// A workspace in a map, with failure injection.
#[derive(Default)]
struct MemFs {
    nodes: RefCell<BTreeMap<String, Node>>,
    fail_read: BTreeSet<String>,
    fail_write: BTreeSet<String>,
    fail_list: bool,
    ops: RefCell<Vec<String>>,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl MemFs {
    fn with(files: &[(&str, &[u8])], dirs: &[&str]) -> Self {
        let fs = MemFs::default();
        fs.nodes.borrow_mut().insert("/".into(), Node::Dir);
        for d in dirs {
            fs.mkdir_sync(d);
        }
        for (p, bytes) in files {
            fs.mkdir_sync(parent(p));
            fs.nodes.borrow_mut().insert((*p).into(), Node::File(bytes.to_vec()));
        }
        fs
    }

    fn mkdir_sync(&self, path: &str) {
        let mut p = path.to_owned();
        loop {
            self.nodes.borrow_mut().entry(p.clone()).or_insert(Node::Dir);
            if p == "/" {
                break;
            }
            p = parent(&p).to_owned();
        }
    }

    fn file(&self, path: &str) -> Option<Vec<u8>> {
        match self.nodes.borrow().get(path) {
            Some(Node::File(b)) => Some(b.clone()),
            _ => None,
        }
    }

    fn paths(&self) -> Vec<String> {
        self.nodes.borrow().keys().cloned().collect()
    }
}

#[async_trait(?Send)]
impl BashFs for MemFs {
    async fn read_dir(&self, dir: &str) -> Result<Vec<DirEntry>, FsError> {
        if self.fail_list {
            return Err(FsError::Store(StoreError::Sql(format!("cannot list {dir}"))));
        }
        Ok(self
            .nodes
            .borrow()
            .iter()
            .filter(|(p, _)| p.as_str() != "/" && parent(p) == dir)
            .map(|(p, n)| DirEntry {
                path: p.clone(),
                kind: match n {
                    Node::Dir => EntryKind::Directory,
                    Node::File(_) => EntryKind::File,
                    Node::Link => EntryKind::Other,
                },
                size: match n {
                    Node::File(b) => b.len() as u64,
                    _ => 0,
                },
            })
            .collect())
    }

    async fn read_file_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        if self.fail_read.contains(path) {
            return Err(FsError::Store(StoreError::Sql("unreadable".into())));
        }
        Ok(self.file(path))
    }

    async fn mkdir(&self, path: &str) -> Result<(), FsError> {
        self.ops.borrow_mut().push(format!("mkdir {path}"));
        if self.fail_write.contains(path) {
            return Err(FsError::new(Errno::Perm, "mkdir", path));
        }
        if let Some(Node::File(_)) = self.nodes.borrow().get(path) {
            return Err(FsError::new(Errno::Exist, "mkdir", path));
        }
        self.mkdir_sync(path);
        Ok(())
    }

    async fn write_file_bytes(&self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.ops.borrow_mut().push(format!("write {path}"));
        if self.fail_write.contains(path) {
            return Err(FsError::new(Errno::Perm, "open", path));
        }
        if let Some(Node::Dir) = self.nodes.borrow().get(path) {
            return Err(FsError::new(Errno::IsDir, "open", path));
        }
        self.mkdir_sync(parent(path));
        self.nodes.borrow_mut().insert(path.into(), Node::File(bytes.to_vec()));
        Ok(())
    }

    async fn remove(&self, path: &str, recursive: bool) -> Result<(), FsError> {
        self.ops.borrow_mut().push(format!("rm{} {path}", if recursive { " -r" } else { "" }));
        if self.fail_write.contains(path) {
            return Err(FsError::new(Errno::Perm, "rm", path));
        }
        let prefix = format!("{path}/");
        let mut nodes = self.nodes.borrow_mut();
        let has_children = nodes.keys().any(|p| p.starts_with(&prefix));
        if has_children && !recursive {
            return Err(FsError::new(Errno::NotEmpty, "rm", path));
        }
        nodes.retain(|p, _| p != path && !p.starts_with(&prefix));
        Ok(())
    }
}

/// The engine's view: path → Some(bytes) for files, None for directories.
type EngineFs = BTreeMap<String, Option<Vec<u8>>>;
type Script = Box<dyn Fn(&mut EngineFs) -> (String, i32)>;

/// Simulates just-bash: mounts the request, adds just-bash's own layout, runs `script`
/// against the map, then reports entries like `bridge.mjs` (unchanged content elided, new
/// paths under `excludeRoots` left out).
struct FakeEngine {
    script: Script,
    error: Option<(String, bool)>,
    seen: RefCell<Option<EngineRequest>>,
}

impl FakeEngine {
    fn new(script: impl Fn(&mut EngineFs) -> (String, i32) + 'static) -> Self {
        Self { script: Box::new(script), error: None, seen: RefCell::new(None) }
    }

    fn request(&self) -> EngineRequest {
        self.seen.borrow().clone().expect("engine ran")
    }
}

#[async_trait(?Send)]
impl BashEngine for FakeEngine {
    async fn run(&self, request: EngineRequest) -> Result<EngineResponse, BashError> {
        *self.seen.borrow_mut() = Some(request.clone());
        let mounted: BTreeMap<String, Vec<u8>> = request.files.iter().cloned().collect();
        let mut fs: EngineFs = BTreeMap::new();
        let layout = ["/", "/bin", "/usr", "/usr/bin", "/dev", "/proc"].map(String::from);
        for d in layout.iter().chain(&request.dirs) {
            fs.insert(d.clone(), None);
        }
        fs.insert("/bin/ls".into(), Some(b"stub".to_vec()));
        fs.insert("/dev/null".into(), Some(Vec::new()));
        for (p, b) in &request.files {
            fs.insert(p.clone(), Some(b.clone()));
        }
        let (stdout, exit_code) = (self.script)(&mut fs);
        let excluded = |p: &str| {
            !mounted.contains_key(p)
                && !request.dirs.iter().any(|d| d == p)
                && request.exclude_roots.iter().any(|r| p == r || p.starts_with(&format!("{r}/")))
        };
        let entries = fs
            .into_iter()
            .filter(|(p, _)| p != "/" && !excluded(p))
            .map(|(path, content)| match content {
                None => FinalEntry { path, kind: FinalKind::Dir, content: None },
                Some(bytes) => {
                    let same = mounted.get(&path) == Some(&bytes);
                    FinalEntry {
                        path,
                        kind: FinalKind::File,
                        content: if same { None } else { Some(bytes) },
                    }
                }
            })
            .collect();
        let (error, aborted) = match &self.error {
            Some((m, a)) => (Some(m.clone()), *a),
            None => (None, false),
        };
        Ok(EngineResponse { stdout, stderr: String::new(), exit_code, aborted, error, entries })
    }
}

fn input(script: &str) -> BashInput {
    BashInput { script: script.into(), cwd: None }
}

fn run(fs: &MemFs, engine: &FakeEngine, options: &BashOptions) -> serde_json::Value {
    let out = block_on(run_bash(fs, engine, options, input("(simulated)"))).expect("tool ran");
    serde_json::to_value(out).expect("json")
}

fn put(fs: &mut EngineFs, path: &str, bytes: &[u8]) {
    fs.insert(path.into(), Some(bytes.to_vec()));
}

#[test]
fn read_only_script_changes_nothing() {
    let ws = MemFs::with(&[("/notes.txt", b"a\nb\n"), ("/d/x.txt", b"x")], &["/empty"]);
    let engine = FakeEngine::new(|_| ("2\n".into(), 0));
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!(
        out,
        json!({"stdout": "2\n", "stderr": "", "exitCode": 0,
               "changedFiles": {"created": [], "updated": [], "deleted": [],
                                "directoriesCreated": [], "directoriesDeleted": []}})
    );
    assert!(ws.ops.borrow().is_empty(), "no workspace writes: {:?}", ws.ops.borrow());
}

#[test]
fn request_carries_mounts_dirs_and_settings() {
    let ws = MemFs::with(&[("/a.txt", b"A"), ("/d/e/b.txt", b"B")], &["/empty"]);
    let engine = FakeEngine::new(|_| (String::new(), 0));
    let options = BashOptions { timeout_ms: 5_000, network: true, ..BashOptions::default() };
    let inp = BashInput { script: "ls".into(), cwd: Some("d/./e/../e".into()) };
    block_on(run_bash(&ws, &engine, &options, inp)).expect("ran");
    let req = engine.request();
    assert_eq!(
        req.files,
        [("/a.txt".to_owned(), b"A".to_vec()), ("/d/e/b.txt".to_owned(), b"B".to_vec())]
    );
    assert_eq!(req.dirs, ["/", "/d", "/d/e", "/empty"]);
    assert_eq!((req.script.as_str(), req.cwd.as_str()), ("ls", "/d/e"));
    assert_eq!((req.timeout_ms, req.network), (5_000, true));
    assert_eq!(req.exclude_roots, ["/tmp", "/bin", "/usr", "/dev", "/proc", "/sys"]);
}

#[test]
fn default_cwd_is_root() {
    let ws = MemFs::with(&[], &[]);
    let engine = FakeEngine::new(|_| (String::new(), 0));
    run(&ws, &engine, &BashOptions::default());
    assert_eq!(engine.request().cwd, "/");
}

#[test]
fn writes_back_creates_updates_deletes_and_directories() {
    let ws = MemFs::with(
        &[("/keep", b"k"), ("/edit.txt", b"old"), ("/rm.txt", b"r"), ("/olddir/x", b"x")],
        &[],
    );
    let engine = FakeEngine::new(|fs| {
        put(fs, "/edit.txt", b"new");
        fs.remove("/rm.txt");
        fs.remove("/olddir/x");
        fs.remove("/olddir");
        fs.insert("/src".into(), None);
        fs.insert("/src/lib".into(), None);
        put(fs, "/src/lib/mod.rs", b"fn main() {}\n");
        fs.insert("/emptynew".into(), None);
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!(
        out["changedFiles"],
        json!({"created": ["/src/lib/mod.rs"], "updated": ["/edit.txt"], "deleted": ["/olddir/x", "/rm.txt"],
               "directoriesCreated": ["/emptynew", "/src", "/src/lib"], "directoriesDeleted": ["/olddir"]})
    );
    assert!(out.get("errors").is_none());
    assert_eq!(ws.file("/edit.txt").as_deref(), Some(&b"new"[..]));
    assert_eq!(ws.file("/src/lib/mod.rs").as_deref(), Some(&b"fn main() {}\n"[..]));
    assert_eq!(
        ws.paths(),
        ["/", "/edit.txt", "/emptynew", "/keep", "/src", "/src/lib", "/src/lib/mod.rs"]
    );
}

#[test]
fn binary_files_round_trip_byte_for_byte() {
    let all_bytes: Vec<u8> = (0..=255).collect();
    let ws = MemFs::with(&[("/bin.dat", &all_bytes)], &[]);
    let copy = all_bytes.clone();
    let engine = FakeEngine::new(move |fs| {
        put(fs, "/copy.dat", &copy);
        let mut reversed = copy.clone();
        reversed.reverse();
        put(fs, "/rev.dat", &reversed);
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!(out["changedFiles"]["created"], json!(["/copy.dat", "/rev.dat"]));
    assert_eq!(out["changedFiles"]["updated"], json!([]));
    assert_eq!(ws.file("/copy.dat"), Some(all_bytes.clone()));
    assert_eq!(ws.file("/bin.dat"), Some(all_bytes.clone()));
    assert_eq!(ws.file("/rev.dat").map(|b| b[0]), Some(255));
}

#[test]
fn tmp_and_system_paths_are_not_persisted() {
    let ws = MemFs::with(&[("/a", b"a")], &[]);
    let engine = FakeEngine::new(|fs| {
        fs.insert("/tmp".into(), None);
        put(fs, "/tmp/scratch.txt", b"s");
        put(fs, "/usr/bin/tool", b"t");
        fs.insert("/sys".into(), None);
        put(fs, "/tmp.txt", b"kept");
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!(out["changedFiles"]["created"], json!(["/tmp.txt"]));
    assert_eq!(out["changedFiles"]["directoriesCreated"], json!([]));
    assert_eq!(ws.paths(), ["/", "/a", "/tmp.txt"]);
}

#[test]
fn workspace_tmp_directory_is_synced_like_any_other() {
    let ws = MemFs::with(&[("/tmp/notes", b"n")], &[]);
    let engine = FakeEngine::new(|fs| {
        put(fs, "/tmp/notes", b"edited");
        put(fs, "/tmp/new", b"not persisted");
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!(out["changedFiles"]["updated"], json!(["/tmp/notes"]));
    assert_eq!(out["changedFiles"]["directoriesDeleted"], json!([]));
    assert_eq!(ws.paths(), ["/", "/tmp", "/tmp/notes"]);
}

#[test]
fn oversized_and_excess_files_are_skipped_and_protected() {
    let big = vec![b'x'; 11];
    let ws = MemFs::with(&[("/a", b"1"), ("/b", b"2"), ("/c", b"3"), ("/big.bin", &big)], &[]);
    let options = BashOptions {
        max_workspace_files: 2,
        max_workspace_file_bytes: 10,
        ..BashOptions::default()
    };
    let engine = FakeEngine::new(|fs| {
        // The script cannot see the skipped files; writing them is refused.
        assert!(!fs.contains_key("/big.bin") && !fs.contains_key("/c"));
        put(fs, "/big.bin", b"clobber");
        put(fs, "/c", b"clobber");
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &options);
    let req = engine.request();
    assert_eq!(req.files.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["/a", "/b"]);
    assert_eq!(out["skippedFiles"], json!(["/big.bin", "/c"]));
    assert_eq!(
        out["errors"],
        json!([
            "Skipped writing protected workspace file: /big.bin",
            "Skipped writing protected workspace file: /c"
        ])
    );
    assert_eq!(out["changedFiles"]["updated"], json!([]));
    assert_eq!(ws.file("/big.bin"), Some(big));
    assert_eq!(ws.file("/c").as_deref(), Some(&b"3"[..]));
}

#[test]
fn removing_a_directory_with_protected_files_is_refused() {
    let ws = MemFs::with(&[("/data/small.txt", b"s"), ("/data/raw/huge.bin", &[7; 20])], &[]);
    let options = BashOptions { max_workspace_file_bytes: 10, ..BashOptions::default() };
    let engine = FakeEngine::new(|fs| {
        fs.retain(|p, _| !p.starts_with("/data"));
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &options);
    assert_eq!(out["changedFiles"]["deleted"], json!(["/data/small.txt"]));
    assert_eq!(out["changedFiles"]["directoriesDeleted"], json!([]));
    assert_eq!(
        out["errors"],
        json!([
            "Skipped deleting protected workspace directory: /data",
            "Skipped deleting protected workspace directory: /data/raw"
        ])
    );
    assert_eq!(ws.file("/data/raw/huge.bin"), Some(vec![7; 20]));
    assert_eq!(ws.file("/data/small.txt"), None);
}

#[test]
fn unreadable_files_are_skipped_and_protected() {
    let mut ws = MemFs::with(&[("/ok", b"o"), ("/broken", b"b")], &[]);
    ws.fail_read.insert("/broken".into());
    let engine = FakeEngine::new(|fs| {
        put(fs, "/broken", b"new");
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!(out["skippedFiles"], json!(["/broken"]));
    assert_eq!(out["errors"], json!(["Skipped writing protected workspace file: /broken"]));
}

/// The snapshot reads a directory's files in batches, yet decides each as the one-by-one walk
/// would: at the limit of 3, `/d/2` cannot be read and so frees its place for `/d/4`.
#[test]
fn a_batch_at_the_file_limit_decides_each_file_as_the_walk_does() {
    let files: Vec<(String, Vec<u8>)> =
        (1..=5).map(|i| (format!("/d/{i}"), i.to_string().into_bytes())).collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
    let mut ws = MemFs::with(&refs, &[]);
    ws.fail_read.insert("/d/2".into());
    let options = BashOptions { max_workspace_files: 3, ..BashOptions::default() };
    let snap = block_on(take_snapshot(&ws, &options)).unwrap();
    let mounted: Vec<&str> = snap.files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(mounted, ["/d/1", "/d/3", "/d/4"]);
    assert_eq!(snap.skipped, ["/d/2", "/d/5"]);
    assert_eq!(snap.files[2].1, b"4");
}

#[test]
fn symlinks_are_neither_mounted_nor_protected() {
    let ws = MemFs::with(&[("/a", b"a")], &[]);
    ws.nodes.borrow_mut().insert("/link".into(), Node::Link);
    let engine = FakeEngine::new(|_| (String::new(), 0));
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!(engine.request().files.len(), 1);
    assert!(out.get("skippedFiles").is_none());
}

#[test]
fn failed_operations_are_reported_and_left_out_of_changed_files() {
    let mut ws = MemFs::with(&[("/locked.txt", b"l"), ("/undeletable", b"u")], &[]);
    ws.fail_write.extend([
        "/locked.txt".to_owned(),
        "/undeletable".to_owned(),
        "/newdir".to_owned(),
    ]);
    let engine = FakeEngine::new(|fs| {
        put(fs, "/locked.txt", b"changed");
        fs.remove("/undeletable");
        fs.insert("/newdir".into(), None);
        put(fs, "/fine.txt", b"f");
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!(
        out["changedFiles"],
        json!({"created": ["/fine.txt"], "updated": [], "deleted": [], "directoriesCreated": [], "directoriesDeleted": []})
    );
    assert_eq!(
        out["errors"],
        json!([
            "Failed to create directory /newdir: EPERM: operation not permitted, mkdir '/newdir'",
            "Failed to delete /undeletable: EPERM: operation not permitted, rm '/undeletable'",
            "Failed to write /locked.txt: EPERM: operation not permitted, open '/locked.txt'"
        ])
    );
}

#[test]
fn operations_run_deletes_before_creates() {
    let ws = MemFs::with(&[("/p", b"file"), ("/q/inner", b"i")], &[]);
    let engine = FakeEngine::new(|fs| {
        fs.remove("/p");
        fs.insert("/p".into(), None);
        put(fs, "/p/child", b"c");
        fs.remove("/q/inner");
        fs.remove("/q");
        put(fs, "/q", b"now a file");
        (String::new(), 0)
    });
    let out = run(&ws, &engine, &BashOptions::default());
    assert!(out.get("errors").is_none(), "{out}");
    assert_eq!(
        *ws.ops.borrow(),
        ["rm /q/inner", "rm /p", "rm -r /q", "mkdir /p", "write /p/child", "write /q"]
    );
    assert_eq!(ws.file("/q").as_deref(), Some(&b"now a file"[..]));
    assert_eq!(ws.file("/p/child").as_deref(), Some(&b"c"[..]));
}

#[test]
fn engine_exception_after_timeout_is_exit_124_and_still_writes_back() {
    let ws = MemFs::with(&[], &[]);
    let mut engine = FakeEngine::new(|fs| {
        put(fs, "/partial.txt", b"p");
        ("lost output".into(), 0)
    });
    engine.error = Some(("The operation was aborted".into(), true));
    let out = run(&ws, &engine, &BashOptions::default());
    assert_eq!((out["exitCode"].clone(), out["stdout"].clone()), (json!(124), json!("")));
    assert_eq!(out["stderr"], "The operation was aborted");
    assert_eq!(out["changedFiles"]["created"], json!(["/partial.txt"]));
}

#[test]
fn long_output_is_truncated_with_think_marker() {
    let ws = MemFs::with(&[], &[]);
    let engine = FakeEngine::new(|_| ("y\n".repeat(40_000), 0));
    let out = run(&ws, &engine, &BashOptions::default());
    let stdout = out["stdout"].as_str().unwrap_or_default();
    assert!(stdout.ends_with("\n... (15.6 KB truncated)"), "{}", &stdout[stdout.len() - 40..]);
    assert_eq!(stdout.len(), 64_000 + "\n... (15.6 KB truncated)".len());
}

#[test]
fn listing_failure_fails_the_call() {
    let mut ws = MemFs::with(&[("/a", b"a")], &[]);
    ws.fail_list = true;
    let engine = FakeEngine::new(|_| (String::new(), 0));
    let err = block_on(run_bash(&ws, &engine, &BashOptions::default(), input("ls"))).unwrap_err();
    assert_eq!(err.to_string(), "EIO: storage error, cannot list /");
    assert!(engine.seen.borrow().is_none());
}

#[test]
fn options_deserialize_from_think_config() {
    let o: BashOptions =
        serde_json::from_value(json!({"timeout": 1000, "maxOutputBytes": 10})).expect("valid");
    assert_eq!(o, BashOptions { timeout_ms: 1000, max_output_bytes: 10, ..BashOptions::default() });
    let d: BashOptions = serde_json::from_value(json!({})).expect("valid");
    assert_eq!(
        (
            d.timeout_ms,
            d.network,
            d.max_workspace_files,
            d.max_workspace_file_bytes,
            d.max_output_bytes
        ),
        (30_000, false, 1_000, 1_000_000, 64_000)
    );
    assert!(serde_json::from_value::<BashOptions>(json!({"timeoutMs": 5})).is_err());
}

/// The name, description and schema are compared with Think's own (generated from the
/// pinned package at test time) by tests/tool-schemas.test.mjs; here: the schema compiles.
#[test]
fn tool_schema_compiles() {
    let tool = bash_tool(
        Rc::new(MemFs::with(&[], &[])),
        Rc::new(FakeEngine::new(|_| (String::new(), 0))),
        BashOptions::default(),
    );
    assert_eq!(tool.definition().name, "bash");
    crate::tools::schema::InputValidator::new(&tool.definition().input_schema).unwrap();
}

#[test]
fn tool_runs_the_script_and_returns_the_output_json() {
    let ws = Rc::new(MemFs::with(&[("/a.txt", b"a")], &[]));
    let engine = Rc::new(FakeEngine::new(|fs| {
        put(fs, "/b.txt", b"b");
        ("out\n".into(), 0)
    }));
    let tool = bash_tool(
        ws.clone(),
        engine.clone(),
        BashOptions { timeout_ms: 1234, ..BashOptions::default() },
    );
    let ctx = crate::tools::ToolContext::default();
    let out =
        block_on(tool.execute(json!({"script": "echo out > /dev/stdout", "cwd": "/x/.."}), &ctx))
            .expect("ran");
    assert_eq!(out["stdout"], "out\n");
    assert_eq!(out["changedFiles"]["created"], json!(["/b.txt"]));
    let req = engine.request();
    assert_eq!(
        (req.script.as_str(), req.cwd.as_str(), req.timeout_ms),
        ("echo out > /dev/stdout", "/", 1234)
    );
    assert_eq!(ws.file("/b.txt").as_deref(), Some(&b"b"[..]));
    let err = block_on(tool.execute(json!({"cwd": "/"}), &ctx)).unwrap_err();
    assert!(err.to_string().starts_with("Invalid input for tool \"bash\""), "{}", err.to_string());
}

#[test]
fn engine_failure_is_the_tool_error() {
    struct Broken;
    #[async_trait(?Send)]
    impl BashEngine for Broken {
        async fn run(&self, _request: EngineRequest) -> Result<EngineResponse, BashError> {
            Err(BashError::Engine("just-bash could not start".into()))
        }
    }
    let tool = bash_tool(Rc::new(MemFs::with(&[], &[])), Rc::new(Broken), BashOptions::default());
    let err =
        block_on(tool.execute(json!({"script": "true"}), &crate::tools::ToolContext::default()))
            .unwrap_err();
    assert_eq!(err.to_string(), "just-bash could not start");
    assert!(matches!(err, ToolError::Bash(BashError::Engine(_))));
}

#[test]
fn options_from_a_setting() {
    assert_eq!(BashOptions::from_setting(""), Ok(Some(BashOptions::default())));
    assert_eq!(BashOptions::from_setting(" true "), Ok(Some(BashOptions::default())));
    assert_eq!(BashOptions::from_setting("false"), Ok(None));
    assert_eq!(
        BashOptions::from_setting(r#"{"timeout": 500, "network": true}"#),
        Ok(Some(BashOptions { timeout_ms: 500, network: true, ..BashOptions::default() }))
    );
    let err = BashOptions::from_setting(r#"{"timeoutMs": 500}"#).unwrap_err();
    assert!(err.reason.contains("unknown field"), "{err}");
    assert!(err.to_string().starts_with("expected true, false or a JSON object of bash options: "));
    assert!(BashOptions::from_setting("off").is_err());
}

// --- The tool over a real `Workspace` (SQLite) ---

mod over_workspace {
    use super::*;
    use crate::store::sqlite::SqliteSql;
    use crate::workspace::tests::clock;
    use crate::workspace::Workspace;

    fn workspace() -> Rc<Workspace> {
        Rc::new(Workspace::new(Rc::new(SqliteSql::new()), clock()))
    }

    /// One statement per mounted file was most of a snapshot's time: inline files are read
    /// in batches, and each mounted file is what a read of its own returns (text, bytes, an
    /// empty file, a chunked one; a symlink is not mounted).
    #[test]
    fn the_snapshot_reads_inline_files_in_batches_each_as_its_own_read() {
        let sql = Rc::new(SqliteSql::new());
        let ws = Rc::new(Workspace::new(sql.clone(), clock()));
        for i in 0..300 {
            let body = format!("file {i}\n").repeat(i % 7);
            block_on(ws.write_file(&format!("/d{}/f{i:03}.txt", i % 3), &body, "text/plain"))
                .unwrap();
        }
        let all_bytes: Vec<u8> = (0..=255).collect();
        block_on(ws.write_file_bytes("/bin.dat", &all_bytes, "application/octet-stream")).unwrap();
        let chunked = vec![b'c'; crate::workspace::MAX_INLINE_ROW_BYTES + 10];
        block_on(ws.write_file_bytes("/big.bin", &chunked, "application/octet-stream")).unwrap();
        ws.symlink("/bin.dat", "/link").unwrap();
        let options = BashOptions { max_workspace_file_bytes: 4_000_000, ..BashOptions::default() };
        let before = sql.statements();
        let snap = block_on(take_snapshot(ws.as_ref(), &options)).unwrap();
        let statements = sql.statements() - before;
        assert_eq!(snap.files.len(), 302);
        assert!(snap.skipped.is_empty(), "{:?}", snap.skipped);
        assert!(statements <= 20, "{statements} statements for 302 files");
        for (path, bytes) in &snap.files {
            let own = block_on(ws.read_file_bytes(path)).unwrap();
            assert_eq!(own.as_ref(), Some(bytes), "{path}");
        }
        assert!(snap.files.iter().any(|(p, b)| p == "/big.bin" && *b == chunked));
        assert!(snap.files.iter().any(|(p, b)| p == "/d0/f000.txt" && b.is_empty()));
    }

    #[test]
    fn read_dir_pages_through_large_directories_and_reports_kinds() {
        let ws = workspace();
        for i in 0..1_005 {
            block_on(ws.write_file(&format!("/many/f{i:04}.txt"), "x", "text/plain")).unwrap();
        }
        ws.mkdir("/many/sub", false).unwrap();
        ws.symlink("/many/f0000.txt", "/many/link").unwrap();
        let entries = block_on(BashFs::read_dir(ws.as_ref(), "/many")).unwrap();
        assert_eq!(entries.len(), 1_007);
        assert_eq!(entries.iter().filter(|e| e.kind == EntryKind::File).count(), 1_005);
        let sub = entries.iter().find(|e| e.path == "/many/sub").unwrap();
        assert_eq!(sub.kind, EntryKind::Directory);
        let link = entries.iter().find(|e| e.path == "/many/link").unwrap();
        assert_eq!(link.kind, EntryKind::Other);
        assert_eq!(entries.iter().find(|e| e.path == "/many/f0007.txt").unwrap().size, 1);
    }

    #[test]
    fn changes_land_in_the_workspace_text_as_text_binary_byte_for_byte() {
        let ws = workspace();
        let all_bytes: Vec<u8> = (0..=255).collect();
        block_on(ws.write_file("/notes.txt", "one\n", "text/plain")).unwrap();
        block_on(ws.write_file_bytes("/bin.dat", &all_bytes, "application/octet-stream")).unwrap();
        block_on(ws.write_file("/d/e/keep.txt", "keep\n", "text/plain")).unwrap();
        let copy = all_bytes.clone();
        let engine = FakeEngine::new(move |fs| {
            put(fs, "/notes.txt", "one\ntwo ✓\n".as_bytes());
            put(fs, "/copy.dat", &copy);
            fs.remove("/d/e/keep.txt");
            fs.remove("/d/e");
            put(fs, "/tmp/scratch", b"s");
            (String::new(), 0)
        });
        let out =
            block_on(run_bash(ws.as_ref(), &engine, &BashOptions::default(), input("…"))).unwrap();
        let out = serde_json::to_value(out).unwrap();
        assert_eq!(
            out["changedFiles"],
            json!({"created": ["/copy.dat"], "updated": ["/notes.txt"], "deleted": ["/d/e/keep.txt"],
                   "directoriesCreated": [], "directoriesDeleted": ["/d/e"]})
        );
        assert_eq!(block_on(ws.read_file("/notes.txt")).unwrap().as_deref(), Some("one\ntwo ✓\n"));
        assert_eq!(ws.stat("/notes.txt").unwrap().unwrap().mime_type, "text/plain");
        assert_eq!(block_on(ws.read_file_bytes("/copy.dat")).unwrap(), Some(all_bytes));
        assert_eq!(ws.stat("/copy.dat").unwrap().unwrap().mime_type, "application/octet-stream");
        assert!(!ws.exists("/d/e").unwrap());
        assert!(ws.exists("/d").unwrap());
        assert!(!ws.exists("/tmp").unwrap());
        // The request mounted the workspace as it was.
        let req = engine.request();
        assert_eq!(req.dirs, ["/", "/d", "/d/e"]);
        assert_eq!(req.files.len(), 3);
    }

    #[test]
    fn oversized_workspace_files_are_protected() {
        let ws = workspace();
        block_on(ws.write_file("/big.txt", &"x".repeat(200), "text/plain")).unwrap();
        block_on(ws.write_file("/small.txt", "s", "text/plain")).unwrap();
        let engine = FakeEngine::new(|fs| {
            put(fs, "/big.txt", b"overwritten");
            fs.remove("/small.txt");
            (String::new(), 0)
        });
        let options = BashOptions { max_workspace_file_bytes: 100, ..BashOptions::default() };
        let out = block_on(run_bash(ws.as_ref(), &engine, &options, input("…"))).unwrap();
        assert_eq!(out.skipped_files, ["/big.txt"]);
        assert_eq!(out.errors, ["Skipped writing protected workspace file: /big.txt"]);
        assert_eq!(out.changed_files.deleted, ["/small.txt"]);
        assert_eq!(block_on(ws.read_file("/big.txt")).unwrap(), Some("x".repeat(200)));
        assert!(engine.request().files.iter().all(|(p, _)| p != "/big.txt"));
    }

    #[test]
    fn workspace_tools_include_bash_only_with_an_engine_and_when_enabled() {
        use crate::tools::workspace::{workspace_tools, WorkspaceToolsOptions};
        let names = |options: WorkspaceToolsOptions| -> Vec<String> {
            workspace_tools(workspace(), options)
                .iter()
                .map(|t| t.definition().name.clone())
                .collect()
        };
        let engine: Rc<dyn BashEngine> = Rc::new(FakeEngine::new(|_| (String::new(), 0)));
        let with_engine =
            WorkspaceToolsOptions { bash_engine: Some(engine), ..WorkspaceToolsOptions::default() };
        assert_eq!(
            names(with_engine.clone()),
            ["read", "write", "edit", "list", "find", "grep", "delete", "bash"]
        );
        assert_eq!(names(WorkspaceToolsOptions { bash: false, ..with_engine }).len(), 7);
        assert_eq!(names(WorkspaceToolsOptions::default()).len(), 7);
    }
}
