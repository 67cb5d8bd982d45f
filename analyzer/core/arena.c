// SPDX-License-Identifier: MIT
// Bump allocation in 64 KiB blocks; an object larger than a block gets a block of its own.
#include "core/arena.h"

#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK_BYTES (64u << 10)

struct arena_block {
    arena_block_t *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *arena_alloc(arena_t *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    arena_block_t *b = a->top;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK_BYTES ? n : ARENA_BLOCK_BYTES;
        b = xmalloc(sizeof *b + cap);
        b->next = a->top;
        b->used = 0;
        b->cap = cap;
        a->top = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

char *arena_strndup(arena_t *a, const void *s, size_t n) {
    char *p = arena_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void arena_free(arena_t *a) {
    while (a->top) {
        arena_block_t *next = a->top->next;
        free(a->top);
        a->top = next;
    }
}
