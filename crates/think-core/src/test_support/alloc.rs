//! A global allocator for the host tests that counts, per thread, the bytes live and their
//! peak, so a test can bound what one operation holds at once (the wasm linear memory keeps
//! its high-water mark for good, so the peak is what the isolate pays).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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

// SAFETY: every call is forwarded to `System`, or in wasm mode to dlmalloc, unchanged;
// a block is freed by the allocator whose region holds it.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = if wasm_mode() {
            WASM_HEAP.with(|h| h.malloc(layout.size(), layout.align()))
        } else {
            System.alloc(layout)
        };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = if wasm_mode() {
            WASM_HEAP.with(|h| h.calloc(layout.size(), layout.align()))
        } else {
            System.alloc_zeroed(layout)
        };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_region(ptr) {
            WASM_HEAP.with(|h| h.free(ptr, layout.size(), layout.align()));
        } else {
            System.dealloc(ptr, layout);
        }
        note(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = if in_region(ptr) {
            WASM_HEAP.with(|h| h.realloc(ptr, layout.size(), layout.align(), new_size))
        } else {
            System.realloc(ptr, layout, new_size)
        };
        if !p.is_null() {
            // A realloc that moves holds both blocks for a moment.
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

/// Bytes of the region standing in for wasm linear memory (reserved, not touched).
const REGION_BYTES: usize = 1 << 30;
/// The wasm page, the unit linear memory grows by.
const WASM_PAGE: usize = 64 * 1024;

static REGION_BASE: AtomicUsize = AtomicUsize::new(0);
static REGION_TOP: AtomicUsize = AtomicUsize::new(0);

/// The system side of the wasm allocator as `memory.grow` provides it: memory is only ever
/// appended, in pages, and never given back.
struct Grow;

// SAFETY: hands out disjoint, page-aligned parts of one reserved region, never reused.
unsafe impl dlmalloc::Allocator for Grow {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let base = REGION_BASE.load(Ordering::Relaxed);
        let bytes = size.div_ceil(WASM_PAGE) * WASM_PAGE;
        let at = REGION_TOP.fetch_add(bytes, Ordering::Relaxed);
        if base == 0 || at + bytes > REGION_BYTES {
            return (std::ptr::null_mut(), 0, 0);
        }
        ((base + at) as *mut u8, bytes, 0)
    }
    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        std::ptr::null_mut()
    }
    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }
    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }
    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }
    fn allocates_zeros(&self) -> bool {
        true
    }
    fn page_size(&self) -> usize {
        WASM_PAGE
    }
}

/// The allocator wasm32-unknown-unknown's std uses (dlmalloc over `memory.grow`), behind a
/// spin lock: only one test thread allocates in it, but any thread may free.
struct WasmHeap {
    lock: AtomicBool,
    heap: UnsafeCell<dlmalloc::Dlmalloc<Grow>>,
}

// SAFETY: `heap` is only touched with `lock` held.
unsafe impl Sync for WasmHeap {}

static WASM_HEAP: WasmHeap = WasmHeap {
    lock: AtomicBool::new(false),
    heap: UnsafeCell::new(dlmalloc::Dlmalloc::new_with_allocator(Grow)),
};

impl WasmHeap {
    fn with<R>(&self, f: impl FnOnce(&mut dlmalloc::Dlmalloc<Grow>) -> R) -> R {
        while self.lock.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held.
        let r = f(unsafe { &mut *self.heap.get() });
        self.lock.store(false, Ordering::Release);
        r
    }
}

fn in_region(ptr: *mut u8) -> bool {
    let base = REGION_BASE.load(Ordering::Relaxed);
    base != 0 && (ptr as usize) >= base && (ptr as usize) < base + REGION_BYTES
}

thread_local! {
    static WASM_MODE: Cell<bool> = const { Cell::new(false) };
}

fn wasm_mode() -> bool {
    WASM_MODE.try_with(|m| m.get()).unwrap_or(false)
}

/// Runs `f` with this thread's allocations made as in the Worker, by wasm's allocator in
/// a linear memory that only grows; [`wasm_memory`] then tells its size, the figure the V8
/// inspector reads in the Worker.
pub fn as_in_wasm<R>(f: impl FnOnce() -> R) -> R {
    if REGION_BASE.load(Ordering::Relaxed) == 0 {
        // Reserved once; the pages count only once touched.
        let layout = Layout::from_size_align(REGION_BYTES, WASM_PAGE).expect("layout");
        // SAFETY: a non-zero size.
        let base = unsafe { System.alloc(layout) };
        assert!(!base.is_null(), "reserving the wasm region");
        REGION_BASE.store(base as usize, Ordering::Relaxed);
    }
    let was = WASM_MODE.with(|m| m.replace(true));
    let r = f();
    WASM_MODE.with(|m| m.set(was));
    r
}

/// The size of the stand-in linear memory: its high-water mark, as in the Worker.
pub fn wasm_memory() -> usize {
    REGION_TOP.load(Ordering::Relaxed)
}
