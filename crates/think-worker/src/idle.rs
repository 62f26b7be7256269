//! What the entry shim (js/shim.mjs) asks before it resets the wasm instance to give back
//! linear memory: how much memory there is, and whether any Rust work outlives the calls in
//! flight. Every task that runs in the background (turns, MCP listeners, alarm changes,
//! browser sockets) is spawned through [`spawn`], which counts it until its future ends, so
//! the shim resets only an isolate in which nothing but persisted state would be lost.
//! [`LiveHeap`], the shipped agent's global allocator, counts the heap bytes live, so the
//! shim can tell live data from free memory the allocator keeps after a peak. It is written
//! here, not taken from a crate: `peak_alloc` keeps a lifetime peak the shim cannot restart,
//! and `peakmem-alloc`'s restartable peak is one more dependency for the same two counters.
//! The counting cost nothing measurable (`node bench/cpu-ab.mjs` against the plain
//! allocator; BENCHMARKS.md "Idle reset").

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Heap bytes handed out by [`LiveHeap`] and not given back yet.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most of [`LIVE`] at once since the shim last took it ([`take_peak_bytes`]).
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Adds `grown` bytes to [`LIVE`] and raises [`PEAK`] to it.
#[inline]
fn grow_live(grown: usize) {
    let live = LIVE.load(Ordering::Relaxed) + grown;
    LIVE.store(live, Ordering::Relaxed);
    raise_peak(live);
}

/// Raises [`PEAK`] to `bytes` live at once.
#[inline]
fn raise_peak(bytes: usize) {
    if bytes > PEAK.load(Ordering::Relaxed) {
        PEAK.store(bytes, Ordering::Relaxed);
    }
}

/// Takes `freed` bytes off [`LIVE`] (wrapping, as `fetch_sub` does: an allocator must not panic).
#[inline]
fn shrink_live(freed: usize) {
    LIVE.store(LIVE.load(Ordering::Relaxed).wrapping_sub(freed), Ordering::Relaxed);
}

/// The default allocator (wasm32's dlmalloc), counting the bytes live, so that the idle reset
/// can give back the free memory a peak left without churning live data. The shipped agent
/// installs it; a crate with its own agent class installs it with
/// `#[global_allocator] static A: think_worker::idle::LiveHeap = think_worker::idle::LiveHeap;`
/// (without it the shim sees no live bytes and resets on the threshold alone).
pub struct LiveHeap;

// SAFETY: every call is forwarded to `System` unchanged; the counters are only arithmetic
// (the isolate is single-threaded, the atomics only make the statics `Sync`: a load and a
// store, not a read-modify-write, since no other thread can interleave).
unsafe impl GlobalAlloc for LiveHeap {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grow_live(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grow_live(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        shrink_live(layout.size());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if p != ptr {
                // Moved: the old block and the new one were both live while it was copied.
                raise_peak(LIVE.load(Ordering::Relaxed) + new_size);
            }
            if new_size >= layout.size() {
                grow_live(new_size - layout.size());
            } else {
                shrink_live(layout.size() - new_size);
            }
        }
        p
    }
}

/// Heap bytes live now, as counted by [`LiveHeap`] (0 if another allocator is installed).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most heap bytes live at once since the last call, which starts the next stretch at
/// the bytes live now: the shim takes it at each idle point, to tell whether the work since
/// the previous one needed the memory.
pub fn take_peak_bytes() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    let peak = PEAK.load(Ordering::Relaxed).max(live);
    PEAK.store(live, Ordering::Relaxed);
    peak
}

/// For the shim, at an idle point: drops what is kept in memory only to speed up the work in
/// flight (the texts kept for the model's next edit), and returns how many bytes that was.
#[wasm_bindgen(js_name = __think_drop_caches)]
pub fn shim_drop_caches() -> f64 {
    think_core::workspace::drop_kept_texts() as f64
}

/// For the shim: [`take_peak_bytes`], as a JS number.
#[wasm_bindgen(js_name = __think_take_peak_bytes)]
pub fn shim_take_peak_bytes() -> f64 {
    take_peak_bytes() as f64
}
