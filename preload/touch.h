// SPDX-License-Identifier: MIT
// Bytes touched (issue #5): how much of each block the program ever used, measured by the shim at
// no cost to the analyzer (docs/trace-format.md#touch has the exact meaning of each figure).
//
// A block is filled with HPT_TOUCH_PATTERN when it is handed out and compared with it when it is
// freed. The cost is bounded per block, not per byte: a block larger than
// HEAPPROF_TOUCH_SAMPLE_BYTES has only every k-th 64-byte line filled and compared (k a power of
// two up to one line a page, so that at most that many bytes are, or one line a page), and the
// counts are scaled by k. Blocks larger than HEAPPROF_TOUCH_FILL_MAX are filled only on the pages
// already resident when they are handed out (a huge untouched reservation must stay out of RSS)
// and compared only on the pages resident when they are freed (issue #23).
//
// Runs on the app's threads inside malloc/free: no allocation, no locks, no syscall except
// mincore for blocks above HEAPPROF_TOUCH_FILL_MAX.
#ifndef HEAPPROF_PRELOAD_TOUCH_H
#define HEAPPROF_PRELOAD_TOUCH_H

#include "format/hpt_format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hp_touch {
    int method;          // HPT_TOUCH_*, or -1: not measured
    uint64_t touched;    // bytes differing from the pattern (on resident pages: PAGES)
    uint64_t touched_nz; // bytes that are not zero (the figure for a calloc block)
} hp_touch_t;

// A block the program is about to receive, of `usable` bytes (hp_touch_usable): fill what is
// measured of it from byte `keep` on (0 for a fresh block; what realloc preserved for a moved
// or grown one). Not for calloc blocks. Above touch_fill_max: one mincore per 8 MiB, and only
// resident pages are written.
void hp_touch_fill(void *p, size_t usable, size_t keep);

// hp_touch_fill(p, hp_touch_usable(p), 0) in one call, lean where the block is measured whole
// (a fresh block from malloc or memalign).
void hp_touch_fill_fresh(void *p);

// Measures a live block before it is freed.
void hp_touch_measure(const void *p, hp_touch_t *out);

// Measures n <= HP_TOUCH_LIVE_GROUP blocks that were live at the last record but may have been
// freed since by a thread still running (blocks live at exit, touch_live.h) into out[0..n):
// every byte it reads is copied with process_vm_readv, so an unmapped block gives no figure
// (method -1) instead of a fault. The usable size comes from glibc's chunk header, so with
// another allocator: no figures. A system call per group's headers and per 64 KiB measured
// (1024 ranges); not reentrant (one static buffer); not for the event path.
#define HP_TOUCH_LIVE_GROUP 256u
void hp_touch_measure_live(const uint64_t *addr, size_t n, hp_touch_t *out);

// Usable size of a live block, as the real allocator reports it.
size_t hp_touch_usable(const void *p);

// Finds out whether the real allocator is glibc's, whose chunk header gives a block's usable
// size (touch.c). Once, at start-up, after the real allocator is resolved.
void hp_touch_init(void);
// Whether hp_touch_usable reads glibc's chunk header now (for tests).
bool hp_touch_header_trusted(void);
// Counts with AVX2 (true, where the CPU has it; hp_touch_init picks it then) or SSE2 (false).
// Returns whether AVX2 is used now. For tests: both give the same figures.
bool hp_touch_set_avx2(bool on);

#endif
