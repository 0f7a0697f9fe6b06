//! A counting global allocator: live bytes and the peak of live bytes, per thread, so a property
//! can bound what one call allocated while other test threads run. Included (with `#[path]`) by
//! the `frame_decode` fuzz target and by `tests/it/fuzz_corpus.rs`; it becomes that binary's
//! global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

pub struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn grow(n: usize) {
    // `try_with`: during thread teardown the slots may be gone; those bytes are not ours to count
    let _ = LIVE.try_with(|l| {
        let v = l.get() + n;
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
    let _ = LARGEST.try_with(|m| m.set(m.get().max(n)));
}

fn shrink(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // counted as "old and new both live" for a moment: the worst a moving realloc costs
            grow(new_size);
            shrink(layout.size());
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What the current thread allocated while running `f`: the peak of live bytes above the level
/// at the start, and the largest single allocation or reallocation.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub peak: usize,
    pub largest: usize,
}

pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Usage) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    LARGEST.with(|m| m.set(0));
    let out = f();
    let peak = PEAK.with(Cell::get).saturating_sub(base);
    let largest = LARGEST.with(Cell::get);
    (out, Usage { peak, largest })
}
