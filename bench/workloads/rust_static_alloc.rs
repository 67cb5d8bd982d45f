// SPDX-License-Identifier: MIT
// bench/static_alloc.sh's workload: boxes of mixed sizes and growing vectors, N rounds. Built
// twice: plain (Rust's System allocator, libc's malloc: the shim's preloaded path) and with
// `--cfg je`, a #[global_allocator] over jemalloc's mallocx/rallocx/sdallocx linked in
// statically as tikv-jemallocator does (the shim's patched path, issue #21).
use std::hint::black_box;

#[cfg(je)]
mod je {
    use std::alloc::{GlobalAlloc, Layout};
    extern "C" {
        fn mallocx(size: usize, flags: i32) -> *mut u8;
        fn rallocx(p: *mut u8, size: usize, flags: i32) -> *mut u8;
        fn sdallocx(p: *mut u8, size: usize, flags: i32);
    }
    fn flags(l: &Layout) -> i32 {
        if l.align() <= 16 && l.align() <= l.size() {
            0
        } else {
            l.align().trailing_zeros() as i32
        }
    }
    pub struct Je;
    unsafe impl GlobalAlloc for Je {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            mallocx(l.size(), flags(&l))
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            sdallocx(p, l.size(), flags(&l))
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            rallocx(p, n, flags(&l))
        }
    }
    #[global_allocator]
    static A: Je = Je;
}

#[inline(never)]
fn round(i: usize) -> usize {
    let mut keep: Vec<Box<[u8]>> = Vec::new();
    for k in 0..64 {
        keep.push(vec![k as u8; 16 + (i * 7 + k * 13) % 500].into_boxed_slice());
    }
    let mut v = Vec::new();
    for k in 0..200u32 {
        v.push(k);
    }
    keep.len() + black_box(&v).len()
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20000);
    let mut sum = 0;
    for i in 0..n {
        sum += round(i);
    }
    println!("{}", sum);
}
