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

ZSTD_CCtx *hp_zstd_cctx_new(int level) {
    ZSTD_customMem mem = {zstd_alloc, zstd_free, NULL};
    ZSTD_CCtx *c = ZSTD_createCCtx_advanced(mem);
    if (c)
        ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    return c;
}

void hp_zstd_cctx_free(ZSTD_CCtx *cctx) {
    ZSTD_freeCCtx(cctx);
}
