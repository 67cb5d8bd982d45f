// SPDX-License-Identifier: MIT
// reserve_after_free: issue #23's case. Four Vec<u64>s are grown one element at a time to 1 MiB,
// written whole and freed; once the first is freed, glibc's dynamic mmap threshold has risen
// above 1 MiB and the others, and the buffer after them, come from the heap, on the pages the
// earlier vectors wrote. Then Vec::<u8>::with_capacity(1 << 20) holds 1 KiB: heapprof must
// report that buffer as almost untouched, and the vectors as touched whole
// (docs/trace-format.md#touch). Built by CMake with rustc -C opt-level=3 and no frame pointers.
// Deterministic; prints a checksum.

use std::hint::black_box;

const N_VECS: u64 = 4;
const VEC_ELEMS: u64 = 1 << 17; // 1 MiB of u64
const RESERVED: usize = 1 << 20;
const WRITTEN: u32 = 1024;

#[inline(never)]
fn grow_and_free() -> u64 {
    let mut h = 0u64;
    for i in 0..N_VECS {
        let mut v: Vec<u64> = Vec::new();
        for k in 0..VEC_ELEMS {
            v.push((k ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        }
        let v = black_box(v);
        h = h.wrapping_add(v.iter().fold(0u64, |a, &x| a ^ x));
    }
    h
}

#[inline(never)]
fn reserve_after_free() -> u64 {
    let mut buf: Vec<u8> = Vec::with_capacity(RESERVED);
    for k in 0..WRITTEN {
        buf.push((k % 100) as u8 + 1); // never the pattern byte 0xA5
    }
    let buf = black_box(buf);
    buf.iter().map(|&b| b as u64).sum()
}

fn main() {
    let h = grow_and_free() ^ reserve_after_free();
    println!("checksum {:016x}", h);
}
