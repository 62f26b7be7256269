//! The think-rs side of `npm run bench`.
//!
//! One Durable Object per benchmark run holds a [`Workspace`] over its SQLite and the
//! `WORKSPACE_R2` bucket, exactly as the shipped agent builds it, and the tools from
//! [`workspace_tools`]. Routes (all POST, JSON bodies; `?do=<name>` picks the object):
//!
//! - `/setup/files` `{files:[{path,content}]}`: writes files with the Workspace API (untimed).
//! - `/run/<tool>` `{inputs:[…], iterations}`: runs every input through tool `<tool>`, in
//!   order, `iterations` times, and returns `{ms, calls, errors, outputs?}` where `ms` is the
//!   time inside the object per iteration. Any tool in the set can be a workload, so a new
//!   tool (bash) needs no new route.
//! - `/call/<tool>` `{input}`: one call, returning the tool's output (for parity checks).
//! - `/floor/<tool>` `{inputs:[…], iterations}`: the same inputs through the bare SQL the
//!   tool needs at minimum, issued from plain JavaScript in this object (`src/floor.js`);
//!   returns `{ms}`, or `{unsupported: true}` for a tool without a floor.
//! - `/run/checkpoint`, `/run/rewind` `{inputs:[{paths}]}`: a checkpoint and 10 changed
//!   files, or the rewind after them (the checkpoint rows); returns `{ms, bytes}`.
//! - `/memory`: the wasm linear memory of this isolate, in bytes.
//! - `/info`: the workspace's totals, its grep index rows and the database size.
//! - `/alarm/settled`: waits until the object's alarm is no longer set, and returns how
//!   many alarms ran and their time (`{alarms, ms}`). `/setup/files` with
//!   `"indexAlarm": true` sets the alarm, which indexes for grep as the agent's does
//!   (bounded runs of `INDEX_RUN_BYTES`, re-armed while files remain).
//!
//! A body with `"grepIndex": false` rebuilds the object's workspace without grep's trigram
//! index first (on by default, as in the agent; the set-up and the runs of a workload say
//! it alike).
//!
//! `/run` also reports `peakBytes`: the most wasm heap bytes live at once during the run
//! beyond those live when it started, counted by this crate's global allocator. Every
//! response carries `x-wasm-memory: <linear memory before>,<after>,<peak live heap bytes>`
//! for the request, so the bench can name the requests that grow the memory.
//!
//! The object goes through the product's idle reset (js/shim.mjs, README "Memory"): when a
//! request leaves the linear memory above the threshold, or more free memory than the slack
//! beyond what it needed at once, and nothing runs in the background, the wasm instance is
//! reset and the object rebuilt on its next request. So nothing here is
//! kept only in memory across requests: the alarm statistics are in the object's storage.
//! A request's inputs stay JSON text until the request is parsed and are dropped (with the
//! body) before the clock starts; a run's outputs are dropped as they come unless kept.
//!
//! The TypeScript worker in `bench/ts-worker` answers the same routes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::rc::Rc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use think_core::checkpoint::{Checkpoints, RewindScope};
use think_core::tools::workspace::{workspace_tools, WorkspaceToolsOptions};
use think_core::tools::{ToolContext, ToolRef};
use think_worker::idle::{live_bytes, LiveHeap};
use think_worker::{DoSql, R2Blobs, WorkerClock};
use think_core::workspace::{Workspace, WorkspaceOptions, INDEX_RUN_BYTES};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::{
    durable_object, event, Context, DurableObject, Env, Request, Response, Result, State,
};

/// The product's counting allocator ([`LiveHeap`], which the idle reset reads), plus the
/// high-water mark of its live bytes, so a run can report the peak memory it needed (the
/// isolate is single-threaded; the atomics are only there to make the statics `Sync`).
struct Counting;

static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The high-water mark of live bytes within the current request (for `x-wasm-memory`).
static LIVE_PEAK: AtomicUsize = AtomicUsize::new(0);

/// Notes `extra` bytes held beyond the live count (a realloc that moves holds both blocks).
fn note_peak(extra: usize) {
    let live = live_bytes() + extra;
    PEAK.fetch_max(live, Ordering::Relaxed);
    LIVE_PEAK.fetch_max(live, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = LiveHeap.alloc(layout);
        note_peak(0);
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = LiveHeap.alloc_zeroed(layout);
        note_peak(0);
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LiveHeap.dealloc(ptr, layout);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = LiveHeap.realloc(ptr, layout, new_size);
        if !p.is_null() {
            note_peak(layout.size());
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[wasm_bindgen(module = "/src/floor.js")]
extern "C" {
    #[wasm_bindgen(js_name = floorRun)]
    fn floor_run(sql: &JsValue, tool: &str, inputs: &str, iterations: u32) -> String;
}

#[durable_object]
pub struct BenchRust {
    state: State,
    env: Env,
    /// The workspace and its tools, rebuilt when a request asks for other options.
    built: std::cell::RefCell<Built>,
    /// `ctx.storage.sql`, for the floor.
    sql: JsValue,
}

/// The storage key of the alarms run since the object was created, and their time in ms.
const ALARMS_KEY: &str = "bench-alarms";

/// A request body: the fields every route reads, the inputs kept as JSON text.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Body<'a> {
    #[serde(borrow)]
    inputs: Option<&'a RawValue>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(borrow)]
    files: Vec<SetupFile<'a>>,
    iterations: Option<u64>,
    keep_outputs: bool,
    grep_index: Option<bool>,
    index_alarm: bool,
}

/// One file of `/setup/files`.
#[derive(Deserialize)]
struct SetupFile<'a> {
    #[serde(borrow)]
    path: Cow<'a, str>,
    #[serde(borrow)]
    content: Cow<'a, str>,
}

/// The input of the checkpoint rows.
#[derive(Deserialize)]
struct CheckpointInput {
    paths: Vec<String>,
}

/// What a request asks for, owned, so that its body can be dropped before the work starts.
enum Job {
    Setup {
        files: Vec<(String, String)>,
        index_alarm: bool,
    },
    Run {
        tool: String,
        batches: Vec<Vec<Value>>,
        calls: usize,
        keep: bool,
    },
    Checkpoint {
        paths: Vec<String>,
        iterations: usize,
        rewind: bool,
    },
    Call {
        tool: String,
        input: Value,
    },
    Memory,
    Info,
    AlarmSettled,
    /// Answered while parsing (the floor, an unknown route).
    Done(Result<Response>),
}

/// A workspace as the agent builds it, with the tools over it.
struct Built {
    grep_index: bool,
    ws: Rc<Workspace>,
    tools: HashMap<String, ToolRef>,
}

impl Built {
    fn new(state: &State, env: &Env, grep_index: bool) -> Built {
        let sql: Rc<dyn think_core::store::Sql> = Rc::new(DoSql::new(state));
        let blobs = env
            .bucket("WORKSPACE_R2")
            .ok()
            .map(|b| Rc::new(R2Blobs(b)) as Rc<dyn think_core::store::BlobStore>);
        let options = WorkspaceOptions {
            blobs,
            blob_prefix: format!("bench-rust/{}", state.id()),
            grep_index,
            ..WorkspaceOptions::default()
        };
        let ws = Rc::new(
            Workspace::with_options(sql, Rc::new(WorkerClock), options)
                .expect("default namespace is valid"),
        );
        // bash runs in just-bash, bundled into this Worker as into the agent.
        let options = WorkspaceToolsOptions {
            bash: true,
            bash_engine: Some(Rc::new(think_worker::JustBash)),
            ..WorkspaceToolsOptions::default()
        };
        let tools = workspace_tools(ws.clone(), options)
            .into_iter()
            .map(|t| (t.definition().name.clone(), t))
            .collect();
        Built { grep_index, ws, tools }
    }
}

fn now_ms() -> f64 {
    js_sys::Date::now()
}

fn error(status: u16, msg: impl Into<String>) -> Result<Response> {
    Ok(Response::from_json(&json!({ "error": msg.into() }))?.with_status(status))
}

impl DurableObject for BenchRust {
    fn new(state: State, env: Env) -> Self {
        // The regular-expression engine and the natives the workspace tools use.
        think_worker::install_platform();
        let sql: JsValue = AsRef::<JsValue>::as_ref(&state.storage().sql()).clone();
        let built = std::cell::RefCell::new(Built::new(
            &state,
            &env,
            WorkspaceOptions::default().grep_index,
        ));
        Self { state, env, built, sql }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let before = think_worker::idle::memory_bytes();
        LIVE_PEAK.store(live_bytes(), Ordering::Relaxed);
        let mut resp = self.handle(req).await?;
        let after = think_worker::idle::memory_bytes();
        let peak = LIVE_PEAK.load(Ordering::Relaxed);
        resp.headers_mut().set("x-wasm-memory", &format!("{before},{after},{peak}"))?;
        Ok(resp)
    }

    /// One bounded run of grep's indexing, as the agent's alarm does it.
    async fn alarm(&self) -> Result<Response> {
        let start = now_ms();
        let run = self.ws().index_unindexed(INDEX_RUN_BYTES);
        let elapsed = now_ms() - start;
        let storage = self.state.storage();
        let (n, ms) = storage.get::<(u32, f64)>(ALARMS_KEY).await?.unwrap_or_default();
        storage.put(ALARMS_KEY, (n + 1, ms + elapsed)).await?;
        match run {
            Ok(run) if run.more => self.set_alarm_now().await?,
            Ok(_) => {}
            Err(e) => return error(500, e.to_string()),
        }
        Response::ok("ok")
    }
}

impl BenchRust {
    /// Parses the request into a [`Job`], drops the body, and does the job.
    async fn handle(&self, mut req: Request) -> Result<Response> {
        let path = req.path();
        // As bytes: a 10 MB body read as text would leave a 10 MB string on the JS heap.
        let bytes = if req.method() == worker::Method::Post { req.bytes().await? } else { vec![] };
        let job = match self.job(&path, &bytes) {
            Ok(job) => job,
            Err(e) => return error(400, e.to_string()),
        };
        drop(bytes);
        match job {
            Job::Setup { files, index_alarm } => self.setup_files(files, index_alarm).await,
            Job::Run { tool, batches, calls, keep } => self.run(&tool, batches, calls, keep).await,
            Job::Checkpoint { paths, iterations, rewind } => {
                self.checkpoint(&paths, iterations, rewind).await
            }
            Job::Call { tool, input } => self.call(&tool, input).await,
            Job::Memory => Response::from_json(&json!({
                "wasmMemoryBytes": think_worker::idle::memory_bytes(),
                "idleResets": idle_resets(),
                "liveBytes": live_bytes(),
            })),
            Job::Info => self.info(),
            Job::AlarmSettled => self.alarm_settled().await,
            Job::Done(resp) => resp,
        }
    }

    /// What `path` with body `bytes` asks for; the floor runs here, on the borrowed text.
    fn job(&self, path: &str, bytes: &[u8]) -> serde_json::Result<Job> {
        let body: Body =
            if bytes.is_empty() { Body::default() } else { serde_json::from_slice(bytes)? };
        let grep_index = body.grep_index.unwrap_or(WorkspaceOptions::default().grep_index);
        if self.built.borrow().grep_index != grep_index {
            *self.built.borrow_mut() = Built::new(&self.state, &self.env, grep_index);
        }
        let inputs = body.inputs.map_or("[]", RawValue::get);
        let iterations = body.iterations.unwrap_or(1).max(1) as usize;
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        Ok(match parts.as_slice() {
            ["setup", "files"] => Job::Setup {
                files: body
                    .files
                    .into_iter()
                    .map(|f| (f.path.into_owned(), f.content.into_owned()))
                    .collect(),
                index_alarm: body.index_alarm,
            },
            ["run", kind @ ("checkpoint" | "rewind")] => {
                let first: Vec<CheckpointInput> = serde_json::from_str(inputs)?;
                Job::Checkpoint {
                    paths: first.into_iter().next().map(|i| i.paths).unwrap_or_default(),
                    iterations,
                    rewind: *kind == "rewind",
                }
            }
            ["run", tool] => {
                // Parsed before the clock starts, one batch per iteration: the agent hands
                // each call an owned value, and the other sides prepare theirs alike.
                let batches = (0..iterations)
                    .map(|_| serde_json::from_str::<Vec<Value>>(inputs))
                    .collect::<serde_json::Result<Vec<_>>>()?;
                let calls = batches.first().map_or(0, Vec::len);
                Job::Run { tool: (*tool).to_owned(), batches, calls, keep: body.keep_outputs }
            }
            ["call", tool] => Job::Call {
                tool: (*tool).to_owned(),
                input: body.input.map_or(Ok(Value::Null), |i| serde_json::from_str(i.get()))?,
            },
            ["floor", tool] => Job::Done(self.floor(tool, inputs, iterations)),
            ["memory"] => Job::Memory,
            ["info"] => Job::Info,
            ["alarm", "settled"] => Job::AlarmSettled,
            _ => Job::Done(error(404, format!("no route {path}"))),
        })
    }

    fn ws(&self) -> Rc<Workspace> {
        self.built.borrow().ws.clone()
    }

    fn tool(&self, name: &str) -> Option<ToolRef> {
        self.built.borrow().tools.get(name).cloned()
    }

    async fn setup_files(
        &self,
        files: Vec<(String, String)>,
        index_alarm: bool,
    ) -> Result<Response> {
        let written = files.len();
        for (path, content) in files {
            if let Err(e) = self.ws().write_file(&path, &content, "text/plain").await {
                return error(500, e.to_string());
            }
        }
        if index_alarm {
            self.set_alarm_now().await?;
        }
        Response::from_json(&json!({ "written": written }))
    }

    async fn set_alarm_now(&self) -> Result<()> {
        let when = worker::ScheduledTime::new(js_sys::Date::new(&now_ms().into()));
        self.state.storage().set_alarm(when).await
    }

    async fn alarm_settled(&self) -> Result<Response> {
        let deadline = now_ms() + 120_000.0;
        while self.state.storage().get_alarm().await?.is_some() {
            if now_ms() > deadline {
                return error(504, "the alarm kept re-arming for 2 minutes");
            }
            worker::Delay::from(std::time::Duration::from_millis(20)).await;
        }
        let (alarms, ms) =
            self.state.storage().get::<(u32, f64)>(ALARMS_KEY).await?.unwrap_or_default();
        Response::from_json(&json!({ "alarms": alarms, "ms": ms }))
    }

    async fn run(
        &self,
        tool: &str,
        batches: Vec<Vec<Value>>,
        calls: usize,
        keep: bool,
    ) -> Result<Response> {
        let Some(t) = self.tool(tool) else { return error(404, format!("no tool {tool}")) };
        // As the floor does: a workspace rebuilt after an idle reset creates its tables on
        // first use, which the agent does when it starts, not in a tool call.
        if let Err(e) = self.ws().stat("/") {
            return error(500, e.to_string());
        }
        let ctx = ToolContext { tool_call_id: "bench".into(), tool_name: tool.into() };
        let iterations = batches.len().max(1);
        let mut outputs = Vec::with_capacity(if keep { calls } else { 0 });
        let mut errors = 0usize;
        let base = live_bytes();
        PEAK.store(base, Ordering::Relaxed);
        let start = now_ms();
        for batch in batches {
            outputs.clear();
            errors = 0;
            for input in batch {
                let out = t.execute(input, &ctx).await.unwrap_or_else(|e| {
                    errors += 1;
                    json!({ "thrown": e.to_string() })
                });
                if keep {
                    outputs.push(out);
                }
            }
        }
        let ms = (now_ms() - start) / iterations as f64;
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        let mut out = json!({ "ms": ms, "calls": calls, "errors": errors, "peakBytes": peak });
        if keep {
            out["outputs"] = Value::Array(outputs);
        }
        Response::from_json(&out)
    }

    /// The checkpoint rows, `iterations` times over: a checkpoint, then a fresh revision
    /// written to each of `inputs[0].paths`. Timed: those two (`rewind` false) or the rewind
    /// to that checkpoint that follows them (`rewind` true). `bytes`: how much the database
    /// grew per checkpoint and its writes. Both are per iteration.
    async fn checkpoint(
        &self,
        paths: &[String],
        iterations: usize,
        rewind: bool,
    ) -> Result<Response> {
        let ws = self.ws();
        let store = match Checkpoints::new(ws.clone()) {
            Ok(s) => s,
            Err(e) => return error(500, e.to_string()),
        };
        let size = || {
            js_sys::Reflect::get(&self.sql, &"databaseSize".into())
                .ok()
                .and_then(|v| v.as_f64())
                .unwrap_or(0.0)
        };
        let (mut ms, mut grew) = (0.0, 0.0);
        for _ in 0..iterations {
            let before = size();
            let start = now_ms();
            let revision = format!("\n// revision {start}\n");
            let info = match store.create(Some("bench"), None).await {
                Ok(i) => i,
                Err(e) => return error(500, e.to_string()),
            };
            for p in paths {
                let old = ws.read_file(p).await.ok().flatten().unwrap_or_default();
                let new = format!("{}{revision}", &old[..old.len().min(10 * 1024)]);
                if let Err(e) = ws.write_file(p, &new, "text/plain").await {
                    return error(500, e.to_string());
                }
            }
            grew += size() - before;
            if !rewind {
                ms += now_ms() - start;
                continue;
            }
            let start = now_ms();
            let scope = RewindScope { files: true, transcript: false };
            if let Err(e) = store.rewind(&info.id, scope).await {
                return error(500, e.to_string());
            }
            ms += now_ms() - start;
        }
        let n = iterations as f64;
        let out = json!({ "ms": ms / n, "calls": paths.len(), "errors": 0, "bytes": grew / n });
        Response::from_json(&out)
    }

    /// The workspace's totals and the size of the object's whole database.
    fn info(&self) -> Result<Response> {
        let info = match self.ws().info() {
            Ok(i) => i,
            Err(e) => return error(500, e.to_string()),
        };
        let db = js_sys::Reflect::get(&self.sql, &"databaseSize".into())
            .ok()
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0);
        Response::from_json(&json!({
            "fileCount": info.file_count,
            "totalBytes": info.total_bytes,
            "grepIndexRows": info.grep_index_rows,
            "grepIndexBytes": info.grep_index_bytes,
            "databaseSize": db,
        }))
    }

    fn floor(&self, tool: &str, inputs: &str, iterations: usize) -> Result<Response> {
        // The workspace creates its tables on first use; a fresh object has none yet.
        if let Err(e) = self.ws().stat("/") {
            return error(500, e.to_string());
        }
        let iterations = iterations.clamp(1, 1000) as u32;
        let out: Value = serde_json::from_str(&floor_run(&self.sql, tool, inputs, iterations))
            .map_err(|e| worker::Error::RustError(e.to_string()))?;
        Response::from_json(&out)
    }

    async fn call(&self, tool: &str, input: Value) -> Result<Response> {
        let Some(t) = self.tool(tool) else { return error(404, format!("no tool {tool}")) };
        let ctx = ToolContext { tool_call_id: "call".into(), tool_name: tool.into() };
        let out = match t.execute(input, &ctx).await {
            Ok(v) => json!({ "output": v }),
            Err(e) => json!({ "thrown": e.to_string() }),
        };
        Response::from_json(&out)
    }
}

/// How many times the shim has reset this isolate's wasm instance when idle.
fn idle_resets() -> f64 {
    js_sys::Reflect::get(&js_sys::global(), &"__thinkIdleReset".into())
        .and_then(|idle| js_sys::Reflect::get(&idle, &"resets".into()))
        .ok()
        .and_then(|n| n.as_f64())
        .unwrap_or(0.0)
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let url = req.url()?;
    let name = url
        .query_pairs()
        .find(|(k, _)| k == "do")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| "default".into());
    let stub = env.durable_object("BENCH_RUST")?.id_from_name(&name)?.get_stub()?;
    stub.fetch_with_request(req).await
}
