//! What the entry shim (js/shim.mjs) asks before it resets the wasm instance to give back
//! linear memory: how much memory there is, and whether any Rust work outlives the calls in
//! flight. Every task that runs in the background (turns, MCP listeners, alarm changes,
//! browser sockets) is spawned through [`spawn`], which counts it until its future ends, so
//! the shim resets only an isolate in which nothing but persisted state would be lost.

use std::cell::Cell;
use std::future::Future;

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};

thread_local! {
    /// Background tasks spawned through [`spawn`] whose futures have not ended yet.
    static BUSY: Cell<u32> = const { Cell::new(0) };
}

/// Holds one count of [`BUSY`] while it lives: moved into a future that JS runs outside the
/// calls the shim sees (a spawned task, a promise handed to a sandbox).
pub(crate) struct Busy;

impl Busy {
    /// Counts live work until the returned guard is dropped.
    pub(crate) fn enter() -> Self {
        BUSY.with(|b| b.set(b.get() + 1));
        Busy
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let left = BUSY.with(|b| {
            let left = b.get().saturating_sub(1);
            b.set(left);
            left
        });
        if left == 0 {
            schedule_check();
        }
    }
}

/// Asks the shim to look at the memory once the running Rust code has returned: the last
/// background task may end after the last call settled (a turn started by a WebSocket frame).
fn schedule_check() {
    let idle = js_sys::Reflect::get(&js_sys::global(), &"__thinkIdleReset".into());
    let schedule = idle.and_then(|idle| js_sys::Reflect::get(&idle, &"schedule".into()));
    if let Ok(f) = schedule.and_then(|f| f.dyn_into::<js_sys::Function>()) {
        let _ = f.call0(&JsValue::UNDEFINED);
    }
}

/// Runs `task` on the isolate's event loop, counted as live work until it ends, so that an
/// idle reset never cuts it off.
pub fn spawn(task: impl Future<Output = ()> + 'static) {
    let busy = Busy::enter();
    wasm_bindgen_futures::spawn_local(async move {
        let _busy = busy;
        task.await;
    });
}

/// Background tasks not finished yet (the shim resets only when this is 0).
pub fn busy_tasks() -> u32 {
    BUSY.with(Cell::get)
}

/// For the shim: background tasks still running.
#[wasm_bindgen(js_name = __think_busy_tasks)]
pub fn shim_busy_tasks() -> u32 {
    busy_tasks()
}

/// For the shim and the bench: the size of this instance's linear memory, in bytes.
#[wasm_bindgen(js_name = __think_memory_bytes)]
pub fn memory_bytes() -> f64 {
    core::arch::wasm32::memory_size(0) as f64 * 65536.0
}
