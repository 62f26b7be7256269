//! What the Rust side holds at once while the model writes and reads a large file through
//! the whole host path: the OpenAI provider's SSE stream, the turn engine, the stream to the
//! tabs and its SQLite buffer, the workspace (with a blob store for the spill), and the
//! persisted answer. The allocator of the host tests counts each thread's peak, and runs the
//! agent's allocations through wasm's own allocator over a memory that only grows
//! ([`crate::test_support::alloc`]), so the test also reads what the turn adds to the wasm
//! linear memory's high-water mark, which the Worker keeps for good.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use async_trait::async_trait;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use serde_json::{json, Value};

use super::{Agent, AgentSpec, Deps, ModelChoice};
use crate::model::openai::OpenAiConfig;
use crate::platform::{Alarm, HttpClient, HttpError, HttpRequest, HttpResponse, Sockets, Tasks};
use crate::store::sqlite::SqliteSql;
use crate::store::{BlobStore, StoreError};
use crate::test_support::{alloc, ManualClock};

const MB: usize = 1024 * 1024;

/// Tabs that keep the size of what they are sent, and only the small frames themselves.
#[derive(Default)]
struct CountingSockets {
    largest: Cell<usize>,
    small: RefCell<Vec<String>>,
}

impl Sockets for CountingSockets {
    fn ids(&self) -> Vec<String> {
        vec!["tab".into()]
    }
    fn send(&self, _id: &str, text: &str) {
        self.largest.set(self.largest.get().max(text.len()));
        if text.len() < 4096 {
            self.small.borrow_mut().push(text.to_owned());
        }
    }
}

struct Spawner(futures::executor::LocalSpawner);
impl Tasks for Spawner {
    fn spawn(&self, task: futures::future::LocalBoxFuture<'static, ()>) {
        let _ = self.0.spawn_local(task);
    }
}

/// A blob store on disk, standing in for R2: as there, what it stores is outside the memory
/// measured, and a get copies the object into a new buffer.
struct DiskBlobs(std::path::PathBuf);

impl DiskBlobs {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("think-rs-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
    fn path(&self, key: &str) -> std::path::PathBuf {
        self.0.join(key.replace('/', "%"))
    }
}

impl Drop for DiskBlobs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[async_trait(?Send)]
impl BlobStore for DiskBlobs {
    async fn put(&self, key: &str, bytes: &[u8], _content_type: &str) -> Result<(), StoreError> {
        std::fs::write(self.path(key), bytes).map_err(|e| StoreError::Blob(e.to_string()))
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(std::fs::read(self.path(key)).ok())
    }
    async fn delete(&self, keys: &[String]) -> Result<(), StoreError> {
        for k in keys {
            let _ = std::fs::remove_file(self.path(k));
        }
        Ok(())
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let names = std::fs::read_dir(&self.0).map_err(|e| StoreError::Blob(e.to_string()))?;
        Ok(names
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .map(|n| n.replace('%', "/"))
            .filter(|k| k.starts_with(prefix))
            .collect())
    }
}

struct NoAlarm;
impl Alarm for NoAlarm {
    fn set(&self, _at_ms: f64) {}
    fn set_no_later(&self, _at_ms: f64) {}
}

/// An OpenAI-compatible endpoint that answers each request with the next scripted event
/// stream, in 64 KB network chunks, as the scripted model of the Miniflare tests sends it.
/// Every answer stays held until the end, so freeing one does not lower the peak measured.
#[derive(Default)]
struct ScriptedEndpoint {
    bodies: RefCell<Vec<Rc<Vec<u8>>>>,
    served: RefCell<Vec<Rc<Vec<u8>>>>,
}

impl ScriptedEndpoint {
    /// Queues an answer of these Chat Completions chunks.
    fn push(&self, chunks: &[Value]) {
        let mut body = String::new();
        for c in chunks {
            body.push_str("data: ");
            body.push_str(&c.to_string());
            body.push_str("\n\n");
        }
        body.push_str("data: [DONE]\n\n");
        let mut body = body.into_bytes();
        body.shrink_to_fit();
        self.bodies.borrow_mut().push(Rc::new(body));
    }
}

#[async_trait(?Send)]
impl HttpClient for ScriptedEndpoint {
    async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        drop(req);
        let mut bodies = self.bodies.borrow_mut();
        if bodies.is_empty() {
            return Err(HttpError::Connect("no scripted answer".into()));
        }
        let body = bodies.remove(0);
        self.served.borrow_mut().push(body.clone());
        let pieces = body.len().div_ceil(64 * 1024);
        let stream = futures::stream::iter(0..pieces).map(move |i| {
            let end = ((i + 1) * 64 * 1024).min(body.len());
            Ok(body[i * 64 * 1024..end].to_vec())
        });
        Ok(HttpResponse { status: 200, headers: vec![], body: stream.boxed_local() })
    }
}

fn delta(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// A tool call whose arguments come in two halves, as the Miniflare scripted model sends them.
fn tool_call_answer(id: &str, name: &str, args: &Value) -> Vec<Value> {
    let args = args.to_string();
    let half = args.len() / 2;
    let (a, b) = args.split_at((0..=half).rev().find(|i| args.is_char_boundary(*i)).unwrap_or(0));
    vec![
        delta(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": a}}]}),
            None,
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}), None),
        delta(json!({}), Some("tool_calls")),
    ]
}

fn text_answer(text: &str) -> Vec<Value> {
    vec![delta(json!({"content": text}), None), delta(json!({}), Some("stop"))]
}

struct Bench {
    pool: LocalPool,
    agent: Rc<Agent>,
    endpoint: Rc<ScriptedEndpoint>,
    sockets: Rc<CountingSockets>,
    turns: usize,
}

impl Bench {
    fn new() -> Self {
        let pool = LocalPool::new();
        let endpoint = Rc::new(ScriptedEndpoint::default());
        let sockets = Rc::new(CountingSockets::default());
        let deps = Deps {
            sql: Rc::new(SqliteSql::new()),
            sockets: sockets.clone(),
            clock: ManualClock::new(),
            http: endpoint.clone(),
            blobs: Some(Rc::new(DiskBlobs::new())),
            bash_engine: None,
            sandbox: None,
            browser: None,
            tasks: Rc::new(Spawner(pool.spawner())),
            alarm: Rc::new(NoAlarm),
            instance_id: "mem".into(),
        };
        let model = ModelChoice::OpenAi(OpenAiConfig {
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key: String::new(),
            model: "m".into(),
        });
        let agent = alloc::as_in_wasm(|| {
            let agent = Agent::new("ThinkAgent", AgentSpec::new(model), deps);
            agent.on_connect("tab");
            agent
        });
        Self { pool, agent, endpoint, sockets, turns: 0 }
    }

    /// Runs one turn in which the model calls `name` with `args`, then answers; returns the
    /// peak bytes the turn added over what was held before it, and what it left held.
    fn turn(&mut self, name: &str, args: &Value) -> (usize, isize) {
        self.turns += 1;
        let n = self.turns;
        self.endpoint.push(&tool_call_answer(&format!("call_{n}"), name, args));
        self.endpoint.push(&text_answer("done"));
        let frame = json!({"type": "cf_agent_use_chat_request", "id": format!("r-{n}"), "init": {"method": "POST", "body": json!({
            "messages": [{"id": format!("u-{n}"), "role": "user", "parts": [{"type": "text", "text": format!("run {name}")}]}],
            "trigger": "submit-message"
        }).to_string()}})
        .to_string();
        let agent = self.agent.clone();
        let before = alloc::reset_peak();
        alloc::as_in_wasm(|| {
            let _ = self
                .pool
                .spawner()
                .spawn_local(async move { agent.on_message("tab", &frame).await });
            self.pool.run_until_stalled();
        });
        (alloc::peak() - before, alloc::live() as isize - before as isize)
    }
}

fn file_of(bytes: usize) -> String {
    let line = &"0123456789abcdef".repeat(4)[..63];
    format!("{line}\n").repeat(bytes / 64 + 1)[..bytes].to_owned()
}

/// Most a write through the model may hold at once, as a multiple of the file: the
/// history's text of the arguments and one more of the file's size at a time (the parsed
/// input, the frame announcing it, or the next model request in pieces); 3.2x before the
/// input was announced from the text and the answer kept that text.
const WRITE_MAX_MULTIPLE: f64 = 2.5;
/// Most a read may hold at once: the file as the blob store returns it, and a little more.
const READ_MAX_MULTIPLE: f64 = 1.25;
/// Most the wasm linear memory may grow for a write, as a multiple of the file: what is
/// held at once plus the holes wasm's allocator cannot reuse for the larger blocks after
/// them (4.2x before the parsed input left room for the frame after it).
const WASM_MAX_MULTIPLE: f64 = 3.5;

#[test]
fn a_large_write_and_read_hold_a_small_multiple_of_the_file_and_give_it_back() {
    let mut b = Bench::new();
    // A first small turn fills what is built once per instance (compiled tool schemas).
    b.turn("write", &json!({"path": "/warm.txt", "content": "warm"}));
    let size = 8 * MB;
    let args = json!({"path": "/big.txt", "content": file_of(size)});
    let idle_wasm = alloc::wasm_memory();
    let (write_peak, write_left) = b.turn("write", &args);
    let write_wasm = alloc::wasm_memory() - idle_wasm;
    drop(args);
    let (read_peak, read_left) =
        b.turn("read", &json!({"path": "/big.txt", "offset": size / 64 - 1}));
    let read_wasm = alloc::wasm_memory() - idle_wasm - write_wasm;
    let x = |n: usize| n as f64 / size as f64;
    let figures = format!(
        "write: peak +{write_peak} B ({:.2}x), wasm +{write_wasm} B ({:.2}x), left {write_left} B; read: peak +{read_peak} B ({:.2}x), wasm +{read_wasm} B, left {read_left} B; largest frame {} B",
        x(write_peak),
        x(write_wasm),
        x(read_peak),
        b.sockets.largest.get()
    );
    eprintln!("{figures}");
    let said = |needle: &str| b.sockets.small.borrow().iter().any(|f| f.contains(needle));
    assert!(said(&format!(r#"\"bytesWritten\":{size}"#)), "the write succeeded");
    assert!(said(&format!(r#"\"totalLines\":{}"#, size / 64 + 1)), "the read succeeded");
    assert!(b.sockets.largest.get() > size, "the write was announced whole: {figures}");
    assert!((write_peak as f64) < WRITE_MAX_MULTIPLE * size as f64, "{figures}");
    assert!((read_peak as f64) < READ_MAX_MULTIPLE * size as f64, "{figures}");
    assert!((write_wasm as f64) < WASM_MAX_MULTIPLE * size as f64, "{figures}");
    assert!((read_wasm as f64) < READ_MAX_MULTIPLE * size as f64, "{figures}");
    // What the turn held is given back (the transcript lives in SQLite, the file in the store).
    assert!(write_left < (MB / 2) as isize, "{figures}");
    assert!(read_left < (MB / 2) as isize, "{figures}");
}
