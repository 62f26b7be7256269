//! A global allocator for the host tests that counts, per thread, the bytes live and their
//! peak, so a test can bound what one operation holds at once (the wasm linear memory keeps
//! its high-water mark for good, so the peak is what the isolate pays).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting what each thread holds.
pub struct PeakAlloc;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // `try_with`: a thread being torn down has no counters any more.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to `System` unchanged; only counters are updated.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        note(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            // A realloc that moves holds both blocks for a moment, as wasm's allocator does.
            note(new_size as isize);
            note(-(layout.size() as isize));
        }
        p
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

/// Bytes this thread holds now (allocated here and not yet freed).
pub fn live() -> usize {
    LIVE.with(|l| l.get().max(0) as usize)
}

/// Restarts this thread's peak at what it holds now; returns that.
pub fn reset_peak() -> usize {
    let now = live();
    PEAK.with(|p| p.set(now as isize));
    now
}

/// The most this thread held at once since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.with(|p| p.get().max(0) as usize)
}
