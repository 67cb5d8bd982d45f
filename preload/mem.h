// SPDX-License-Identifier: MIT
// The shim's own memory: mmap-backed, never the host's malloc, so recording an allocation can
// never recurse into the allocator it is recording.
#ifndef HEAPPROF_PRELOAD_MEM_H
#define HEAPPROF_PRELOAD_MEM_H

#include <stddef.h>

// Fresh zeroed pages (size rounded up to a page). NULL on failure. Thread-safe, may syscall.
void *hp_mem_map(size_t size);
void hp_mem_unmap(void *p, size_t size);

// As hp_mem_map, for memory a fork child never uses (the parent's rings and drain buffers): it
// is not copied into the child (MADV_DONTFORK), so a fork copies no page tables for it and the
// parent takes no copy-on-write fault on every page it writes next. The child must forget such
// memory without unmapping it: the range may hold someone else's mapping there.
void *hp_mem_map_parent_only(size_t size);

// Bump arena for objects that live as long as the process (or until hp_arena_reset).
// Not thread-safe: the owner serialises calls (the stack table calls it under its lock).
typedef struct hp_arena {
    char *cur, *end;
} hp_arena_t;

// Returns size bytes aligned to 16, or NULL when the system is out of memory.
void *hp_arena_alloc(hp_arena_t *a, size_t size);

#endif
