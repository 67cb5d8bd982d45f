// SPDX-License-Identifier: MIT
// Memory for the analyzer's big tables probed at random (the live table's slots and values,
// hmap's slots and pools): from 8 MiB up, mappings of their own at 2 MiB boundaries, asked for
// 2 MiB pages, grown without a copy and without losing those pages. glibc's realloc of a big block
// moves it with mremap to wherever the kernel finds room, 4 KiB aligned: the huge pages of the
// old range then come back mapped 4 KiB at a time, and a table that doubled a few times had
// most of its memory so (report on rust_vec_growth: 56 of ~400 MB on huge pages). Below 8 MiB
// (fewer than four huge pages: a hint is not worth a mapping) these are malloc and free.
// Like xmalloc, never returns NULL: out of memory prints one line and exits with status 2.
#ifndef HEAPPROF_ANALYZER_BIGMEM_H
#define HEAPPROF_ANALYZER_BIGMEM_H

#include <stddef.h>

// bytes of memory, uninitialised (fresh pages of a mapping read as zero).
void *big_alloc(size_t bytes);
// p (from big_alloc or big_realloc, of old_bytes) holding new_bytes, its first
// min(old_bytes, new_bytes) bytes kept; may move.
void *big_realloc(void *p, size_t old_bytes, size_t new_bytes);
// Gives back p, of bytes (as last allocated); NULL: nothing.
void big_free(void *p, size_t bytes);

#endif
