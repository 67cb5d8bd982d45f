// SPDX-License-Identifier: MIT
// Chunk framing for the trace (docs/trace-format.md#chunks). Runs on the pipeline's drainers:
// no locks, no allocation beyond what zstd does inside its context.
#include "chunk.h"

#include <libdeflate.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

size_t hp_chunk_bound(size_t raw_len) {
    return sizeof(hpt_chunk_hdr_t) + ZSTD_compressBound(raw_len);
}

uint32_t hp_chunk_crc(const hpt_chunk_hdr_t *hdr, const uint8_t *payload, size_t len) {
    hpt_chunk_hdr_t h = *hdr;
    h.crc32 = 0;
    // libdeflate's CRC-32 is zlib's (the same polynomial and chaining), 4x faster on CPUs with
    // PCLMULQDQ (docs/design.md#event-cost)
    return libdeflate_crc32(libdeflate_crc32(0, &h, sizeof h), payload, len);
}

size_t hp_chunk_pack(uint8_t *out, size_t out_cap, hpt_chunk_hdr_t *hdr, const uint8_t *raw,
                     size_t raw_len, ZSTD_CCtx *cctx, uint32_t *payload_crc) {
    if (raw_len > HPT_CHUNK_MAX_RAW || out_cap < hp_chunk_bound(raw_len))
        return 0;
    uint8_t *payload = out + sizeof *hdr;
    size_t stored = raw_len;
    hdr->flags &= HPT_CHUNK_COLUMNS;
    if (cctx && raw_len > 64) {
        size_t z = ZSTD_compress2(cctx, payload, out_cap - sizeof *hdr, raw, raw_len);
        if (!ZSTD_isError(z) && z < raw_len) {
            stored = z;
            hdr->flags |= HPT_CHUNK_ZSTD;
        }
    }
    if (!(hdr->flags & HPT_CHUNK_ZSTD) && raw_len)
        memcpy(payload, raw, raw_len);
    hdr->magic = HPT_CHUNK_MAGIC;
    hdr->stored_bytes = (uint32_t)stored;
    hdr->raw_bytes = (uint32_t)raw_len;
    hdr->reserved = 0;
    hdr->crc32 = 0;
    memcpy(out, hdr, sizeof *hdr);
    *payload_crc = libdeflate_crc32(0, payload, stored);
    return sizeof *hdr + stored;
}

void hp_chunk_seal(uint8_t *out, uint64_t seq, uint32_t payload_crc) {
    hpt_chunk_hdr_t h;
    memcpy(&h, out, sizeof h);
    h.seq = seq;
    h.crc32 = 0;
    // zlib joins the header's CRC with the payload's computed earlier (libdeflate has no combine)
    uLong crc = libdeflate_crc32(0, &h, sizeof h);
    h.crc32 = (uint32_t)crc32_combine(crc, payload_crc, (z_off_t)h.stored_bytes);
    memcpy(out, &h, sizeof h);
}

size_t hp_chunk_encode(uint8_t *out, size_t out_cap, hpt_chunk_hdr_t *hdr, const uint8_t *raw,
                       size_t raw_len, ZSTD_CCtx *cctx) {
    uint32_t pcrc;
    size_t n = hp_chunk_pack(out, out_cap, hdr, raw, raw_len, cctx, &pcrc);
    if (!n)
        return 0;
    hp_chunk_seal(out, hdr->seq, pcrc);
    memcpy(hdr, out, sizeof *hdr);
    return n;
}
