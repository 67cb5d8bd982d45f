// SPDX-License-Identifier: MIT
// cpu_hot_rust: one CPU-hot function and one allocation-hot function, built by CMake with
// rustc -C opt-level=3 -g and no frame pointers, so CPU stacks must come from the CFI walk.
// main -> run_hot -> hot_loop spins for about half a second of CPU without allocating;
// main -> alloc_many makes N_BLOCKS boxed [u8; 64] and drops them. See cpu_hot_rust.expect; the C twin is samples/c/cpu_hot.c.

use std::hint::black_box;

const N_BLOCKS: usize = 10000;

#[inline(never)]
fn hot_loop(n: u64) -> u64 {
    let mut h: u64 = 1469598103934665603;
    for i in 0..n {
        h = black_box((h ^ i).wrapping_mul(1099511628211));
    }
    h
}

#[inline(never)]
fn run_hot(n: u64) -> u64 {
    let h = hot_loop(black_box(n));
    black_box(h)
}

#[inline(never)]
fn alloc_many() -> usize {
    let mut v: Vec<Box<[u8; 64]>> = Vec::with_capacity(N_BLOCKS);
    for i in 0..N_BLOCKS {
        v.push(black_box(Box::new([i as u8; 64])));
    }
    v.iter().map(|b| b[0] as usize).sum()
}

fn main() {
    let millions: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    let h = run_hot(millions * 1_000_000);
    let s = alloc_many();
    println!("ok {} {}", h & 15, s);
}
