// SPDX-License-Identifier: MIT
// Bytes touched (issue #5): how much of each block the program ever used, measured by the shim at
// no cost to the analyzer. Small blocks are filled with HPT_TOUCH_PATTERN when they are handed
// out and compared with it when they are freed; blocks larger than HEAPPROF_TOUCH_FILL_MAX are
// never filled (that would make a huge untouched reservation resident) and are measured by
// their resident pages instead. docs/trace-format.md#touch has the exact meaning of each figure.
// Runs on the app's threads inside malloc/free: no allocation, no locks, one syscall only on the
// resident-pages path.
#ifndef HEAPPROF_PRELOAD_TOUCH_H
#define HEAPPROF_PRELOAD_TOUCH_H

#include "format/hpt_format.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hp_touch {
    int method;          // HPT_TOUCH_FILL, HPT_TOUCH_RESIDENT, or -1: not measured
    uint64_t touched;    // bytes differing from the pattern, or on resident pages
    uint64_t touched_nz; // FILL: bytes that are not zero (the figure for a calloc block)
} hp_touch_t;

// A block the program is about to receive: fill its usable bytes from `keep` on (0 for a fresh
// block; what realloc preserved for a moved or grown one). Not for calloc blocks.
void hp_touch_fill(void *p, size_t keep);

// Measures a live block before it is freed or reallocated.
void hp_touch_measure(const void *p, hp_touch_t *out);

// Usable size of a live block, as the real allocator reports it.
size_t hp_touch_usable(const void *p);

#endif
