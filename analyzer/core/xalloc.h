// SPDX-License-Identifier: MIT
// Allocation that cannot fail: the analyzer is a tool, so running out of memory prints one line
// and exits with status 2 instead of threading NULL checks through every caller.
#ifndef HEAPPROF_ANALYZER_XALLOC_H
#define HEAPPROF_ANALYZER_XALLOC_H

#include <stddef.h>

// Never return NULL. xmalloc(0) and friends return a unique non-NULL pointer.
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size); // also exits if n * size overflows
void *xrealloc(void *p, size_t n);
// The one out-of-memory message for n bytes, and exit status 2 (for allocators of their own).
__attribute__((noreturn, cold)) void xalloc_fail(size_t n);
char *xstrdup(const char *s);
// Returns p (an array of *cap elements of elem_bytes) grown to hold at least need elements,
// at least doubling, and updates *cap; the new tail is uninitialised. Usage:
// `v = xgrow(v, &cap, n + 1, sizeof *v);`
void *xgrow(void *p, size_t *cap, size_t need, size_t elem_bytes);

#endif
