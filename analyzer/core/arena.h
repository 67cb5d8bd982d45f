// SPDX-License-Identifier: MIT
// arena: memory for many small things that live as long as their owner (the reader's stacks,
// module paths and thread names; the symbolizer's interned strings): bump allocation from
// 64 KiB blocks, freed all at once. Exits on OOM, as xalloc does.
#ifndef HEAPPROF_ANALYZER_ARENA_H
#define HEAPPROF_ANALYZER_ARENA_H

#include <stddef.h>

typedef struct arena_block arena_block_t;

typedef struct arena {
    arena_block_t *top; // the block being filled; the others hang off it
} arena_t;

// n bytes, 16-byte aligned. An arena starts zeroed ({0}).
void *arena_alloc(arena_t *a, size_t n);
// A NUL-terminated copy of the n bytes at s (which may hold NULs; NULL with n == 0 is fine).
char *arena_strndup(arena_t *a, const void *s, size_t n);
void arena_free(arena_t *a);

#endif
