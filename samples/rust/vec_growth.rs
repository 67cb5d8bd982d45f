// SPDX-License-Identifier: MIT
// vec_growth: Rust collections grown one element at a time, built by CMake with rustc -C
// opt-level=3 -g and no frame pointers (the case heapprof's unwinder must handle). Exercises
// RawVec's amortised doubling (each growth is a libc realloc), String::push/push_str growth and a
// Vec<Vec<u8>> of many small inner vectors. Deterministic (an LCG, no clock, no addresses printed);
// prints a checksum. Counts follow std's growth policy (.expect); over_reserve wastes 1 MiB.

use std::{hint::black_box, sync::atomic::{AtomicBool, Ordering}};

const N_U64_VECS: u64 = 2000; // Vec<u64> of 1..=1000 elements
const N_STRINGS: u64 = 1000; // Strings of comma-separated numbers
const N_ROWS: u64 = 20000; // inner Vec<u8> of 1..=64 bytes

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(1099511628211)
}

#[inline(never)]
fn grow_u64_vecs() -> u64 {
    let mut h = 14695981039346656037u64;
    for i in 0..N_U64_VECS {
        let n = (i * 7919) % 1000 + 1;
        let mut v: Vec<u64> = if presized() { Vec::with_capacity(n as usize) } else { Vec::new() };
        for k in 0..n {
            v.push(k ^ i);
        }
        let v = black_box(v);
        h = mix(h, v.len() as u64);
        h = mix(h, v.iter().fold(0u64, |a, &x| a.wrapping_add(x)));
    }
    h
}

#[inline(never)]
fn grow_strings() -> u64 {
    let mut h = 14695981039346656037u64;
    let mut kept: Vec<String> = Vec::new();
    for i in 0..N_STRINGS {
        let mut s = String::new();
        for k in 0..(i % 50 + 1) {
            s.push_str(&(k * 31 + i).to_string());
            s.push(',');
        }
        h = mix(h, s.len() as u64);
        if i % 10 == 0 {
            kept.push(s);
        }
    }
    let kept = black_box(kept);
    h = mix(h, kept.iter().map(|s| s.len() as u64).sum::<u64>());
    h
}

#[inline(never)]
fn grow_rows() -> u64 {
    let mut rng = Lcg(7);
    let mut rows: Vec<Vec<u8>> = Vec::new();
    for _ in 0..N_ROWS {
        let n = 1 + rng.next() % 64;
        let mut row = Vec::new();
        for k in 0..n {
            row.push((k as u8).wrapping_mul(3));
        }
        rows.push(row);
    }
    let rows = black_box(rows);
    let mut h = 14695981039346656037u64;
    for r in &rows {
        h = mix(h, r.len() as u64 + r[r.len() - 1] as u64);
    }
    h
}

// A buffer reserved far beyond its use: 1 MiB asked for, 1 KiB written. heapprof's
// "Reserved but untouched" must show it almost untouched (docs/trace-format.md#touch).
#[inline(never)]
fn over_reserve() -> u64 {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    for k in 0..1024u32 {
        buf.push((k % 251) as u8);
    }
    let buf = black_box(buf);
    buf.iter().map(|&b| b as u64).sum()
}

// A Vec<u8> made with a capacity of 128 and grown a byte at a time to 1 MiB: 13 doublings. Its
// first block looks like 4 elements of 32 bytes; growth advice must name the capacity in its
// real elements (1048576 bytes), not one inferred from an assumed start (32768).
#[inline(never)]
fn grow_from_capacity() -> u64 {
    let mut buf: Vec<u8> = Vec::with_capacity(if presized() { 1 << 20 } else { 128 });
    for k in 0..(1u32 << 20) {
        buf.push((k % 253) as u8);
    }
    let buf = black_box(buf);
    buf.len() as u64 + buf[12345] as u64
}

// Paths made by Path::join, which copies the path into a new PathBuf and grows it by the new
// part: a growth the program cannot reserve for (the buffer is std's), so no advice.
#[inline(never)]
fn join_paths() -> u64 {
    let base = std::path::PathBuf::from("/var/lib/heapprof");
    let mut n = 0u64;
    for i in 0..200u32 {
        let p = black_box(base.join(format!("entry-{}", i)));
        n += p.as_os_str().len() as u64;
    }
    n
}

fn main() {
    // `vec_growth --presized`: the with_capacity fix heapprof's advice names, for `heapprof diff`
    PRESIZED.store(std::env::args().any(|a| a == "--presized"), Ordering::Relaxed);
    let mut h = over_reserve();
    h = mix(h, grow_u64_vecs());
    h = mix(h, grow_strings());
    h = mix(h, grow_rows());
    h = mix(h, grow_from_capacity());
    h = mix(h, join_paths());
    println!("checksum {:016x}", h);
}

static PRESIZED: AtomicBool = AtomicBool::new(false);

fn presized() -> bool {
    PRESIZED.load(Ordering::Relaxed)
}
