// SPDX-License-Identifier: MIT
// trace_builder: writes synthetic .hpt traces for tests and benchmarks. Records are encoded
// here independently of the shim (tag byte + LEB128 varints, zigzag address deltas, as in
// docs/trace-format.md#records) and framed with the shim's real hp_chunk_encode.
// Times are absolute (relative to the trace start); the builder computes the deltas.
//
// Chunk form: EVENTS chunks are written in column form (HPT_CHUNK_COLUMNS) by default, their
// records put through hpt_cols_transpose as the shim's drainers do (preload/pipeline.c), because
// that is what every real trace holds: the tests then feed the reader what the shim writes and
// exercise its column path (hpt_cols_untranspose), not only the row decoder. Like the shim, the
// builder writes a chunk as rows where the column form cannot carry it: a record the transpose
// does not take (PROCESS, TRAILER, one that does not decode, a value the codes cannot express)
// or a payload the test assembled itself with tb_payload (stored as it is). An empty chunk (the
// shim writes none) is an empty row payload. One difference on purpose: the shim keeps rows when
// the columns would not be smaller (a chunk of a few records); the builder writes columns
// whenever they carry the chunk, so small test chunks take the column path too. META and
// TRAILER chunks are always rows, as in the shim. tb_set_rows(tb, true) writes rows, for tests
// that need the row layout itself (damage at a record's byte offset, the row decoder).
#ifndef HEAPPROF_TESTS_TRACE_BUILDER_H
#define HEAPPROF_TESTS_TRACE_BUILDER_H

#include "format/hpt_format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tb tb_t;

// A builder whose file starts with a current-version header (pid 4242). Exits
// on OOM.
tb_t *tb_new(void);
// The header tb_new writes, for callers that change a field or two (flags).
void tb_default_hdr(hpt_file_hdr_t *h);
// The same with a caller-made header, written as is (for bad magic / version tests).
tb_t *tb_new_hdr(const hpt_file_hdr_t *hdr);
void tb_free(tb_t *tb);

// Opens a chunk (type, tid, delta bases); records go into it until tb_end.
void tb_begin(tb_t *tb, uint16_t type, uint32_t tid, uint64_t base_time_ns, uint64_t base_addr);
// Frames the open chunk (zstd-compressed if compress and it shrinks) with the next seq and
// appends it. Returns the chunk's offset in the file.
size_t tb_end(tb_t *tb, bool compress);
// Appends a SYNC chunk with watermark w; returns its offset.
size_t tb_sync(tb_t *tb, uint64_t w);
// Rows (true) or the column form (false, the default) for EVENTS chunks ended from now on.
void tb_set_rows(tb_t *tb, bool rows);
// Overrides the open chunk's record count (tests of chunks whose count lies).
void tb_set_n_records(tb_t *tb, uint32_t n);
// Skips n sequence numbers, as if n chunks were lost.
void tb_skip_seq(tb_t *tb, uint64_t n);
// Appends raw bytes to the file (garbage, partial chunks).
void tb_raw(tb_t *tb, const void *p, size_t n);
// Appends already encoded records (n_records of them) to the open chunk's payload (or a whole
// payload, stored as it is). A chunk holding such bytes is written as rows, never transposed.
void tb_payload(tb_t *tb, const void *p, size_t n, uint32_t n_records);

void tb_rec_malloc(tb_t *tb, uint64_t t, uint64_t stack, uint64_t addr, uint64_t size);
void tb_rec_calloc(tb_t *tb, uint64_t t, uint64_t stack, uint64_t addr, uint64_t size);
void tb_rec_aligned(tb_t *tb, uint64_t t, uint64_t stack, uint64_t addr, uint64_t size,
                    uint64_t align);
void tb_rec_free(tb_t *tb, uint64_t t, uint64_t addr);
// A FREE with a bytes-touched measure: method HPT_TOUCH_FILL or _RESIDENT (-1: none).
void tb_rec_free_touch(tb_t *tb, uint64_t t, uint64_t addr, int method, uint64_t touched,
                       uint64_t touched_nz);
// A block still live at exit and its measure (TOUCH_LIVE, tid 0's EVENTS chunks as rows).
void tb_rec_touch_live(tb_t *tb, uint64_t t, uint64_t addr, int method, uint64_t touched,
                       uint64_t touched_nz);
void tb_rec_realloc(tb_t *tb, uint64_t t, uint64_t t2, uint64_t stack, uint64_t old_addr,
                    uint64_t new_addr, uint64_t size);
void tb_rec_stack(tb_t *tb, uint64_t id, uint32_t n, const uint64_t *frames);
void tb_rec_thread_start(tb_t *tb, uint64_t t, const char *name);
void tb_rec_thread_end(tb_t *tb, uint64_t t);
void tb_rec_module_load(tb_t *tb, uint64_t t, uint64_t base, uint64_t size, const char *path,
                        const uint8_t *build_id, uint32_t build_id_len);
void tb_rec_module_unload(tb_t *tb, uint64_t t, uint64_t base);
void tb_rec_process(tb_t *tb, const char *exe, int argc, const char *const *argv);
void tb_rec_trailer(tb_t *tb, uint64_t n_events, uint64_t n_lost, uint64_t n_stacks,
                    uint64_t n_overflows);
// CPU_SAMPLE (its time may be below the previous record's) and CPU_INFO.
void tb_rec_cpu_sample(tb_t *tb, uint64_t t, uint32_t tid, uint64_t stack);
// An allocator the shim found beside libc's (META only; status: enum hpt_alloc_status).
void tb_rec_allocator(tb_t *tb, unsigned status, const char *family, const char *detail);
void tb_rec_cpu_info(tb_t *tb, unsigned source, uint32_t hz, uint64_t n_samples, uint64_t n_lost,
                     const char *reason);

// The file so far (after the last tb_flush); writable, for tests that damage it.
uint8_t *tb_data(tb_t *tb, size_t *n);
// Bytes in the open chunk's payload so far, as rows (before any transpose).
size_t tb_chunk_bytes(const tb_t *tb);
// Writes the file bytes accumulated since the last flush to f and forgets them (streaming
// big traces). Returns 0 or -1.
int tb_flush(tb_t *tb, FILE *f);
// Writes the whole file to path. Returns 0 or -1.
int tb_write(tb_t *tb, const char *path);
// Writes it to a new temporary file; path receives its name (at least 64 bytes).
int tb_write_tmp(tb_t *tb, char *path);

#endif
