// SPDX-License-Identifier: MIT
// The only place the shim speaks: one line on stderr via write(2), no stdio, no allocation.
#ifndef HEAPPROF_PRELOAD_DIAG_H
#define HEAPPROF_PRELOAD_DIAG_H

#include <stddef.h>
#include <stdint.h>

// Writes "heapprof: " + the NULL-terminated list of strings + "\n" to stderr in one write(2).
// Async-signal-safe; silently truncates beyond 1 KiB.
void hp_diag_line(const char *first, ...) __attribute__((sentinel));

// Joins the NULL-terminated list of strings into buf (cap bytes, NUL included), cut at the end;
// returns the length. Async-signal-safe.
size_t hp_diag_join(char *buf, size_t cap, const char *first, ...) __attribute__((sentinel));

// Formats v in decimal into buf (>= 21 bytes); returns buf.
char *hp_diag_u64(char *buf, uint64_t v);

#endif
