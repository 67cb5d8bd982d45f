// SPDX-License-Identifier: MIT
#include "touch.h"

#include "compiler.h"
#include "config.h"
#include "real.h"

#include <string.h>
#include <sys/mman.h>

#define PAGE 4096u
#define ONES 0x0101010101010101ull

// Number of non-zero bytes in the 8 bytes of x.
static inline uint64_t nonzero_bytes(uint64_t x) {
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7full;
    uint64_t hi = (((x & low7) + low7) | x) & ~low7; // top bit of each non-zero byte
    return ((hi >> 7) * ONES) >> 56;
}

// Bytes of [p, p + n) that differ from the pattern and that are not zero, in one pass.
static void count_filled(const uint8_t *p, size_t n, hp_touch_t *out) {
    const uint64_t pat = HPT_TOUCH_PATTERN * ONES;
    uint64_t diff = 0, nz = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        diff += nonzero_bytes(w ^ pat);
        nz += nonzero_bytes(w);
    }
    for (; i < n; i++) {
        diff += p[i] != HPT_TOUCH_PATTERN;
        nz += p[i] != 0;
    }
    out->touched = diff;
    out->touched_nz = nz;
}

// Bytes of [p, p + n) on resident pages. mincore fails only for unmapped ranges, which a live
// block cannot be; on failure the block is reported as not measured.
static int count_resident(const uint8_t *p, size_t n, hp_touch_t *out) {
    uintptr_t start = (uintptr_t)p, end = start + n;
    uintptr_t page = start & ~(uintptr_t)(PAGE - 1);
    unsigned char vec[1024];
    uint64_t bytes = 0;
    while (page < end) {
        size_t pages = (end - page + PAGE - 1) / PAGE;
        if (pages > sizeof vec)
            pages = sizeof vec;
        if (mincore((void *)page, pages * PAGE, vec) != 0)
            return -1;
        for (size_t k = 0; k < pages; k++, page += PAGE) {
            if (!(vec[k] & 1))
                continue;
            uintptr_t a = page > start ? page : start;
            uintptr_t b = page + PAGE < end ? page + PAGE : end;
            bytes += b - a;
        }
    }
    out->touched = out->touched_nz = bytes;
    return 0;
}

size_t hp_touch_usable(const void *p) {
    return hp_real.malloc_usable_size((void *)p);
}

void hp_touch_fill(void *p, size_t keep) {
    size_t n = hp_touch_usable(p);
    if (n > hp_config.touch_fill_max || keep >= n)
        return;
    memset((uint8_t *)p + keep, HPT_TOUCH_PATTERN, n - keep);
}

void hp_touch_measure(const void *p, hp_touch_t *out) {
    out->method = -1;
    size_t n = hp_touch_usable(p);
    if (HP_UNLIKELY(n > ((size_t)1 << 46)))
        return; // not a block the allocator knows: leave it to the real free to complain
    if (n <= hp_config.touch_fill_max) {
        count_filled(p, n, out);
        out->method = HPT_TOUCH_FILL;
    } else if (count_resident(p, n, out) == 0) {
        out->method = HPT_TOUCH_RESIDENT;
    }
}
