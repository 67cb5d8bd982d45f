// SPDX-License-Identifier: MIT
// Frames one chunk: header, optional zstd compression, crc32. Pure function of its inputs, so
// the writer thread and the unit tests (which build synthetic traces) share it.
#ifndef HEAPPROF_PRELOAD_CHUNK_H
#define HEAPPROF_PRELOAD_CHUNK_H

#include "format/hpt_format.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ZSTD_CCtx_s ZSTD_CCtx;

// Worst-case bytes hp_chunk_encode needs in `out` for raw_len payload bytes.
size_t hp_chunk_bound(size_t raw_len);

// Writes header + payload into out (capacity out_cap >= hp_chunk_bound(raw_len)). The caller
// fills hdr->type, tid, n_records, seq, base_time_ns, base_addr and flags (only
// HPT_CHUNK_COLUMNS is kept); this sets magic, HPT_CHUNK_ZSTD, sizes and crc32. cctx NULL stores the payload uncompressed (also done when zstd would not shrink it).
// Returns the total bytes written, or 0 on failure. Never allocates when cctx is given.
size_t hp_chunk_encode(uint8_t *out, size_t out_cap, hpt_chunk_hdr_t *hdr, const uint8_t *raw,
                       size_t raw_len, ZSTD_CCtx *cctx);

// hp_chunk_encode in two steps, so that chunks compressed on several threads at once can take
// their seq numbers in the order they are written: hp_chunk_pack does everything but seq and
// crc32 and returns the payload's crc (out as for hp_chunk_encode, 0 bytes on failure);
// hp_chunk_seal sets seq and the crc32 over the header and that payload.
size_t hp_chunk_pack(uint8_t *out, size_t out_cap, hpt_chunk_hdr_t *hdr, const uint8_t *raw,
                     size_t raw_len, ZSTD_CCtx *cctx, uint32_t *payload_crc);
void hp_chunk_seal(uint8_t *out, uint64_t seq, uint32_t payload_crc);

// crc32 of a header (with its crc32 field taken as 0) followed by a payload.
uint32_t hp_chunk_crc(const hpt_chunk_hdr_t *hdr, const uint8_t *payload, size_t len);

#endif
