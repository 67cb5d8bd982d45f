// SPDX-License-Identifier: MIT
// The open trace file: its descriptor (reopened by path if the program closes it), and chunk
// writes in seq order. Any thread may write a chunk; one write(2) per chunk under a lock held
// only for that call, so chunks never interleave and seq numbers follow file order.
#ifndef HEAPPROF_PRELOAD_TRACEOUT_H
#define HEAPPROF_PRELOAD_TRACEOUT_H

#include "format/hpt_codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ZSTD_CCtx_s ZSTD_CCtx;

// Takes ownership of fd, created at path; writes the file header and resets seq. False (fd
// closed) on failure.
bool hp_traceout_open(int fd, const char *path, const hpt_file_hdr_t *hdr);

// Seals a chunk made by hp_chunk_pack with the next seq and writes it. Returns false if the
// trace cannot be written (profiling is then disabled, once) or was closed. Thread-safe.
bool hp_traceout_write(uint8_t *chunk, size_t n, uint32_t payload_crc);

// Packs and writes one chunk from a caller's buffer. flags: 0 or HPT_CHUNK_COLUMNS (raw is a
// column payload). out must hold hp_chunk_bound(len) bytes; cctx may be NULL (stored
// uncompressed).
bool hp_traceout_chunk(uint16_t type, uint16_t flags, uint32_t tid, const uint8_t *raw,
                       size_t len, uint32_t nrec, hpt_dstate_t base, uint8_t *out, size_t out_cap,
                       ZSTD_CCtx *cctx);

// Chunks written since the last call (the flusher writes a SYNC only after new chunks).
uint64_t hp_traceout_take_count(void);
// Raw bytes of EVENTS chunks written since the last take (what the reader buffers until a SYNC).
uint64_t hp_traceout_take_bytes(void);
void hp_traceout_add_bytes(uint64_t raw_bytes);

// Writes nothing more and closes the file (after the TRAILER at exit). Waits for a write in
// progress.
void hp_traceout_close(void);

// fork: the child must never write into the parent's file.
void hp_traceout_fork_prepare(void);
void hp_traceout_fork_parent(void);
void hp_traceout_fork_child(void);

#endif
