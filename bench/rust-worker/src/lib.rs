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
//! beyond those live when it started, counted by this crate's global allocator.
//!
//! The TypeScript worker in `bench/ts-worker` answers the same routes.

use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use think_rs::checkpoint::{Checkpoints, RewindScope};
use think_rs::tools::workspace::{workspace_tools, WorkspaceToolsOptions};
use think_rs::tools::{ToolContext, ToolRef};
use think_rs::wasm::{DoSql, R2Blobs, WorkerClock};
use think_rs::workspace::{Workspace, WorkspaceOptions, INDEX_RUN_BYTES};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::{
    durable_object, event, Context, DurableObject, Env, Request, Response, Result, State,
};

/// The system allocator, counting live bytes and their high-water mark, so a run can
/// report the peak memory it needed (the isolate is single-threaded; the atomics are only
/// there to make the statics `Sync`).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            let live = LIVE.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(live, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
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
    /// Alarms run since the object started, and their time in ms.
    alarms: std::cell::Cell<(u32, f64)>,
}

/// A workspace as the agent builds it, with the tools over it.
struct Built {
    grep_index: bool,
    ws: Rc<Workspace>,
    tools: HashMap<String, ToolRef>,
}

impl Built {
    fn new(state: &State, env: &Env, grep_index: bool) -> Built {
        let sql: Rc<dyn think_rs::store::Sql> = Rc::new(DoSql::new(state));
        let blobs = env
            .bucket("WORKSPACE_R2")
            .ok()
            .map(|b| Rc::new(R2Blobs(b)) as Rc<dyn think_rs::store::BlobStore>);
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
            bash_engine: Some(Rc::new(think_rs::wasm::JustBash)),
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
        console_error_panic_hook::set_once();
        let sql: JsValue = AsRef::<JsValue>::as_ref(&state.storage().sql()).clone();
        let built = std::cell::RefCell::new(Built::new(
            &state,
            &env,
            WorkspaceOptions::default().grep_index,
        ));
        Self { state, env, built, sql, alarms: Default::default() }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let path = req.path();
        // As bytes: a 10 MB body read as text would leave a 10 MB string on the JS heap.
        let body: Value = if req.method() == worker::Method::Post {
            serde_json::from_slice(&req.bytes().await?)
                .map_err(|e| worker::Error::RustError(e.to_string()))?
        } else {
            Value::Null
        };
        let grep_index =
            body["grepIndex"].as_bool().unwrap_or(WorkspaceOptions::default().grep_index);
        if self.built.borrow().grep_index != grep_index {
            *self.built.borrow_mut() = Built::new(&self.state, &self.env, grep_index);
        }
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match parts.as_slice() {
            ["setup", "files"] => self.setup_files(&body).await,
            ["run", "checkpoint"] => self.checkpoint(&body, false).await,
            ["run", "rewind"] => self.checkpoint(&body, true).await,
            ["run", tool] => self.run(tool, &body).await,
            ["call", tool] => self.call(tool, &body).await,
            ["floor", tool] => self.floor(tool, &body),
            ["memory"] => Response::from_json(&json!({ "wasmMemoryBytes": wasm_memory_bytes() })),
            ["info"] => self.info(),
            ["alarm", "settled"] => self.alarm_settled().await,
            _ => error(404, format!("no route {path}")),
        }
    }

    /// One bounded run of grep's indexing, as the agent's alarm does it.
    async fn alarm(&self) -> Result<Response> {
        let start = now_ms();
        let run = self.ws().index_unindexed(INDEX_RUN_BYTES);
        let (n, ms) = self.alarms.get();
        self.alarms.set((n + 1, ms + now_ms() - start));
        match run {
            Ok(run) if run.more => self.set_alarm_now().await?,
            Ok(_) => {}
            Err(e) => return error(500, e.to_string()),
        }
        Response::ok("ok")
    }
}

impl BenchRust {
    fn ws(&self) -> Rc<Workspace> {
        self.built.borrow().ws.clone()
    }

    fn tool(&self, name: &str) -> Option<ToolRef> {
        self.built.borrow().tools.get(name).cloned()
    }

    async fn setup_files(&self, body: &Value) -> Result<Response> {
        let files = body["files"].as_array().cloned().unwrap_or_default();
        for f in &files {
            let (Some(path), Some(content)) = (f["path"].as_str(), f["content"].as_str()) else {
                return error(400, "files need path and content");
            };
            if let Err(e) = self.ws().write_file(path, content, "text/plain").await {
                return error(500, e.to_string());
            }
        }
        if body["indexAlarm"].as_bool() == Some(true) {
            self.set_alarm_now().await?;
        }
        Response::from_json(&json!({ "written": files.len() }))
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
        let (alarms, ms) = self.alarms.get();
        Response::from_json(&json!({ "alarms": alarms, "ms": ms }))
    }

    async fn run(&self, tool: &str, body: &Value) -> Result<Response> {
        let Some(t) = self.tool(tool) else { return error(404, format!("no tool {tool}")) };
        let inputs = body["inputs"].as_array().cloned().unwrap_or_default();
        let iterations = body["iterations"].as_u64().unwrap_or(1).max(1) as usize;
        let keep = body["keepOutputs"].as_bool().unwrap_or(false);
        let ctx = ToolContext { tool_call_id: "bench".into(), tool_name: tool.into() };
        // Inputs are cloned before the clock starts: the agent hands each call an owned value.
        let batches: Vec<Vec<Value>> = (0..iterations).map(|_| inputs.clone()).collect();
        let mut outputs = Vec::with_capacity(inputs.len());
        let mut errors = 0usize;
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let start = now_ms();
        for batch in batches {
            outputs.clear();
            errors = 0;
            for input in batch {
                match t.execute(input, &ctx).await {
                    Ok(v) => outputs.push(v),
                    Err(e) => {
                        errors += 1;
                        outputs.push(json!({ "thrown": e.to_string() }));
                    }
                }
            }
        }
        let ms = (now_ms() - start) / iterations as f64;
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        let mut out =
            json!({ "ms": ms, "calls": inputs.len(), "errors": errors, "peakBytes": peak });
        if keep {
            out["outputs"] = Value::Array(outputs);
        }
        Response::from_json(&out)
    }

    /// The checkpoint rows, `iterations` times over: a checkpoint, then a fresh revision
    /// written to each of `inputs[0].paths`. Timed: those two (`rewind` false) or the rewind
    /// to that checkpoint that follows them (`rewind` true). `bytes`: how much the database
    /// grew per checkpoint and its writes. Both are per iteration.
    async fn checkpoint(&self, body: &Value, rewind: bool) -> Result<Response> {
        let paths: Vec<String> = body["inputs"][0]["paths"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let iterations = body["iterations"].as_u64().unwrap_or(1).max(1) as usize;
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
            for p in &paths {
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

    fn floor(&self, tool: &str, body: &Value) -> Result<Response> {
        // The workspace creates its tables on first use; a fresh object has none yet.
        if let Err(e) = self.ws().stat("/") {
            return error(500, e.to_string());
        }
        let inputs = body["inputs"].to_string();
        let iterations = body["iterations"].as_u64().unwrap_or(1).clamp(1, 1000) as u32;
        let out: Value = serde_json::from_str(&floor_run(&self.sql, tool, &inputs, iterations))
            .map_err(|e| worker::Error::RustError(e.to_string()))?;
        Response::from_json(&out)
    }

    async fn call(&self, tool: &str, body: &Value) -> Result<Response> {
        let Some(t) = self.tool(tool) else { return error(404, format!("no tool {tool}")) };
        let ctx = ToolContext { tool_call_id: "call".into(), tool_name: tool.into() };
        let out = match t.execute(body["input"].clone(), &ctx).await {
            Ok(v) => json!({ "output": v }),
            Err(e) => json!({ "thrown": e.to_string() }),
        };
        Response::from_json(&out)
    }
}

fn wasm_memory_bytes() -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        core::arch::wasm32::memory_size(0) as u64 * 65536
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        0
    }
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
