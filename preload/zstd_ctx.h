// SPDX-License-Identifier: MIT
// The shim's zstd compression contexts, their memory from the shim's own mappings (mem.c)
// rather than the host's malloc. A context is made by a drainer, which may be a program's
// thread draining its own full ring: zstd's allocations there held glibc's arena lock inside
// the program's malloc, where a fork from a signal handler then waited for it for good, and
// they put the shim's buffers in the host's heap.
#ifndef HEAPPROF_PRELOAD_ZSTD_CTX_H
#define HEAPPROF_PRELOAD_ZSTD_CTX_H

typedef struct ZSTD_CCtx_s ZSTD_CCtx;

// A context compressing at level, or NULL without memory. Cold.
ZSTD_CCtx *hp_zstd_cctx_new(int level);
void hp_zstd_cctx_free(ZSTD_CCtx *cctx);

#endif
