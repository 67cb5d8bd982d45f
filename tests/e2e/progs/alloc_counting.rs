// SPDX-License-Identifier: MIT
// A #[global_allocator] over a C allocator the shim is not preloaded over, written over FFI as
// the crates do it: `--cfg je` calls jemalloc's malloc/calloc/realloc and mallocx/rallocx/
// sdallocx as tikv-jemallocator does (libjemalloc.a linked in, unprefixed: its malloc is the
// executable's), `--cfg mi` mimalloc's mi_* (imported from libmimalloc.so, as the mimalloc
// crate does with its shared build). The allocator counts what `workload` asks of
// it and prints the counts: the exact figures the trace must hold (test_static_alloc.c).
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

fn count(c: &AtomicU64, bytes: usize) {
    if COUNTING.load(Relaxed) {
        c.fetch_add(1, Relaxed);
        BYTES.fetch_add(bytes as u64, Relaxed);
    }
}

#[cfg(je)]
mod backend {
    // tikv-jemallocator's choices: the standard names where malloc's own alignment suffices,
    // the *allocx forms otherwise, sdallocx always
    use std::alloc::Layout;
    mod ffi {
        extern "C" {
            pub fn malloc(size: usize) -> *mut u8;
            pub fn calloc(n: usize, size: usize) -> *mut u8;
            pub fn realloc(p: *mut u8, size: usize) -> *mut u8;
            pub fn mallocx(size: usize, flags: i32) -> *mut u8;
            pub fn rallocx(p: *mut u8, size: usize, flags: i32) -> *mut u8;
            pub fn sdallocx(p: *mut u8, size: usize, flags: i32);
        }
    }
    use ffi::*;
    const MALLOCX_ZERO: i32 = 0x40;
    fn flags(l: &Layout) -> i32 {
        if l.align() <= 16 && l.align() <= l.size() {
            0
        } else {
            l.align().trailing_zeros() as i32
        }
    }
    pub unsafe fn alloc(l: Layout) -> *mut u8 {
        match flags(&l) {
            0 => malloc(l.size()),
            f => mallocx(l.size(), f),
        }
    }
    pub unsafe fn alloc_zeroed(l: Layout) -> *mut u8 {
        match flags(&l) {
            0 => calloc(1, l.size()),
            f => mallocx(l.size(), f | MALLOCX_ZERO),
        }
    }
    pub unsafe fn dealloc(p: *mut u8, l: Layout) {
        sdallocx(p, l.size(), flags(&l))
    }
    pub unsafe fn realloc(p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        match flags(&l) {
            0 => ffi::realloc(p, n),
            f => rallocx(p, n, f),
        }
    }
}

#[cfg(mi)]
mod backend {
    use std::alloc::Layout;
    extern "C" {
        fn mi_malloc_aligned(size: usize, align: usize) -> *mut u8;
        fn mi_zalloc_aligned(size: usize, align: usize) -> *mut u8;
        fn mi_realloc_aligned(p: *mut u8, size: usize, align: usize) -> *mut u8;
        fn mi_free(p: *mut u8);
    }
    pub unsafe fn alloc(l: Layout) -> *mut u8 {
        mi_malloc_aligned(l.size(), l.align())
    }
    pub unsafe fn alloc_zeroed(l: Layout) -> *mut u8 {
        mi_zalloc_aligned(l.size(), l.align())
    }
    pub unsafe fn dealloc(p: *mut u8, _l: Layout) {
        mi_free(p)
    }
    pub unsafe fn realloc(p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        mi_realloc_aligned(p, n, l.align())
    }
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(&ALLOCS, l.size());
        backend::alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count(&ALLOCS, l.size());
        backend::alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        count(&FREES, 0);
        backend::dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count(&REALLOCS, n);
        backend::realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

#[repr(align(64))]
struct Line([u64; 8]);

#[inline(never)]
fn small_boxes(n: u64) -> u64 {
    let mut sum = 0;
    for i in 0..n {
        let b = Box::new([i; 4]);
        sum += black_box(&b)[3];
    }
    sum
}

#[inline(never)]
fn grow_vec(n: u32) -> usize {
    let mut v = Vec::new(); // no with_capacity: the growth advice's case
    for i in 0..n {
        v.push(i);
    }
    black_box(&v).len()
}

#[inline(never)]
fn zeroed_pages(n: usize) -> usize {
    let mut total = 0;
    for _ in 0..n {
        let v = vec![0u8; 8192];
        total += black_box(&v).len();
    }
    total
}

#[inline(never)]
fn aligned_lines(n: u64) -> u64 {
    let mut sum = 0;
    for i in 0..n {
        let b = Box::new(Line([i; 8]));
        sum += black_box(&b).0[7];
    }
    sum
}

#[inline(never)]
fn workload() -> u64 {
    small_boxes(1000) + grow_vec(5000) as u64 + zeroed_pages(20) as u64 + aligned_lines(30)
}

fn main() {
    COUNTING.store(true, Relaxed);
    let r = black_box(workload());
    COUNTING.store(false, Relaxed);
    println!(
        "allocs={} reallocs={} frees={} bytes={} result={}",
        ALLOCS.load(Relaxed),
        REALLOCS.load(Relaxed),
        FREES.load(Relaxed),
        BYTES.load(Relaxed),
        r
    );
}
