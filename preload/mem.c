// SPDX-License-Identifier: MIT
// mmap-backed memory for the shim. Never calls the interposed allocator.
#include "mem.h"

#include <sys/mman.h>

#define ARENA_BLOCK (1u << 20)

static size_t page_round(size_t n) {
    return (n + 4095) & ~(size_t)4095;
}

void *hp_mem_map(size_t size) {
    void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *hp_mem_map_parent_only(size_t size) {
    void *p = hp_mem_map(size);
    if (p)
        madvise(p, page_round(size), MADV_DONTFORK); // advice: a failure only costs speed
    return p;
}

void hp_mem_unmap(void *p, size_t size) {
    if (p)
        munmap(p, page_round(size));
}

void *hp_arena_alloc(hp_arena_t *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if ((size_t)(a->end - a->cur) < size) {
        size_t block = size > ARENA_BLOCK ? page_round(size) : ARENA_BLOCK;
        char *p = hp_mem_map(block);
        if (!p)
            return NULL;
        a->cur = p;
        a->end = p + block;
    }
    void *r = a->cur;
    a->cur += size;
    return r;
}
