// SPDX-License-Identifier: MIT
// Big tables on 2 MiB-aligned mappings (bigmem.h says why). A mapping grows in place where the
// pages after it are free, else its pages move by mremap to a fresh range at a 2 MiB boundary:
// the kernel moves whole page-table entries when source and destination share that alignment,
// so pages already 2 MiB stay so, and nothing is copied.
#include "core/bigmem.h"

#include "core/xalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE ((size_t)2 << 20)
#define BIG_MIN ((size_t)8 << 20)

static size_t map_len(size_t bytes) { return (bytes + HUGE - 1) & ~(HUGE - 1); }

// len bytes (a multiple of HUGE) mapped at a HUGE boundary, or NULL.
static void *map_aligned(size_t len) {
    size_t span = len + HUGE;
    uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1);
    size_t head = a - (uintptr_t)p, tail = span - head - len;
    if (head)
        munmap(p, head);
    if (tail)
        munmap((void *)(a + len), tail);
    // a hint (this Debian's default gives 2 MiB pages only where asked): refusal changes nothing
    (void)madvise((void *)a, len, MADV_HUGEPAGE);
    return (void *)a;
}

void *big_alloc(size_t bytes) {
    if (bytes < BIG_MIN)
        return xmalloc(bytes);
    size_t len = map_len(bytes);
    void *p = map_aligned(len);
    if (!p) {
        // no room for the alignment's extra 2 MiB (an address-space limit): the same length
        // anywhere, which big_free and big_realloc handle alike, without huge pages
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            xalloc_fail(bytes);
    }
    return p;
}

void *big_realloc(void *p, size_t old_bytes, size_t new_bytes) {
    if (!p)
        return big_alloc(new_bytes);
    if (old_bytes < BIG_MIN && new_bytes < BIG_MIN)
        return xrealloc(p, new_bytes);
    size_t keep = old_bytes < new_bytes ? old_bytes : new_bytes;
    if (old_bytes < BIG_MIN || new_bytes < BIG_MIN) {
        // across the threshold: a copy of less than BIG_MIN bytes
        void *q = big_alloc(new_bytes);
        memcpy(q, p, keep);
        big_free(p, old_bytes);
        return q;
    }
    size_t ol = map_len(old_bytes), nl = map_len(new_bytes);
    if (nl <= ol) {
        if (nl < ol)
            munmap((uint8_t *)p + nl, ol - nl);
        return p;
    }
    if (mremap(p, ol, nl, 0) != MAP_FAILED) // in place: the mapping keeps its advice
        return p;
    // Moved to a fresh aligned range, which costs the address space of both at once; where that
    // is refused (an address-space limit counts the reservation whole, a plain move only the
    // growth) the kernel's own move, anywhere, without keeping huge pages.
    void *dst = map_aligned(nl), *q;
    if (dst) {
        q = mremap(p, ol, nl, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
        if (q == MAP_FAILED)
            munmap(dst, nl);
    }
    if (!dst || q == MAP_FAILED) {
        q = mremap(p, ol, nl, MREMAP_MAYMOVE);
        if (q == MAP_FAILED)
            xalloc_fail(new_bytes);
    }
    // the old range's advice moved with it; this covers the grown part (and the kernel's move)
    (void)madvise(q, nl, MADV_HUGEPAGE);
    return q;
}

void big_free(void *p, size_t bytes) {
    if (!p)
        return;
    if (bytes < BIG_MIN)
        free(p);
    else
        munmap(p, map_len(bytes));
}
