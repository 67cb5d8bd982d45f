// SPDX-License-Identifier: MIT
// zstd's memory from the shim's mappings (zstd_ctx.h). zstd frees by address alone, so each
// mapping starts with a header that keeps its size; zstd asks for few, large blocks (the
// context, then its workspace once, kept and reused from chunk to chunk), so a mapping each
// costs nothing measurable.
#define ZSTD_STATIC_LINKING_ONLY // ZSTD_createCCtx_advanced and ZSTD_customMem
#include "zstd_ctx.h"

#include "mem.h"

#include <stdint.h>
#include <zstd.h>

#define HEADER 64u // keeps zstd's blocks 64-byte aligned

static void *zstd_alloc(void *opaque, size_t size) {
    (void)opaque;
    if (size > SIZE_MAX - HEADER)
        return NULL;
    uint8_t *m = hp_mem_map(size + HEADER);
    if (!m)
        return NULL;
    *(size_t *)(void *)m = size + HEADER;
    return m + HEADER;
}

static void zstd_free(void *opaque, void *p) {
    (void)opaque;
    if (!p)
        return;
    uint8_t *m = (uint8_t *)p - HEADER;
    hp_mem_unmap(m, *(size_t *)(void *)m);
}

// At the default level 1, a 4 K-entry hash table (16 KiB, in the first-level cache; level 1's
// own has 8-16 K by the input's size) and a 64 KiB window instead of 256-512 KiB: on the chunks
// of four bench traces 0.8-3.7% fewer bytes (a chunk's columns are seven streams laid end to
// end: a match further back than 64 KiB is rarely worth its longer offset), on realloc_chain's
// 1.4% more, for the same instructions and 0-15% less time, which the drains take from the
// program on a machine with few cores (docs/design.md, "Which part of the drain the program
// pays for"). Other levels keep zstd's own parameters: whoever asks for one wants its ratio.
#define DRAIN_HASH_LOG 12
#define DRAIN_WINDOW_LOG 16

ZSTD_CCtx *hp_zstd_cctx_new(int level) {
    ZSTD_customMem mem = {zstd_alloc, zstd_free, NULL};
    ZSTD_CCtx *c = ZSTD_createCCtx_advanced(mem);
    if (c) {
        ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
        if (level == 1) {
            ZSTD_CCtx_setParameter(c, ZSTD_c_hashLog, DRAIN_HASH_LOG);
            ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, DRAIN_WINDOW_LOG);
        }
    }
    return c;
}

void hp_zstd_cctx_free(ZSTD_CCtx *cctx) {
    ZSTD_freeCCtx(cctx);
}
