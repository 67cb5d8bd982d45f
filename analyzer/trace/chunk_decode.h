// SPDX-License-Identifier: MIT
// chunk_decode: one verified chunk's payload -> events, in record order, and the records the
// reader must apply itself (definitions: stacks, threads, modules, process, CPU info, trailer).
// Touches nothing but the chunk it is given, so any thread may decode any chunk while the
// reader applies earlier ones (decode_pool.h); the reader still takes chunks in file order, so
// what it hands out does not depend on which thread decoded what. Trace bytes are untrusted:
// every length is checked before use.
#ifndef HEAPPROF_ANALYZER_CHUNK_DECODE_H
#define HEAPPROF_ANALYZER_CHUNK_DECODE_H

#include "format/hpt_codec.h"
#include "format/hpt_columns.h"
#include "format/hpt_format.h"
#include "trace/event.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

// A record for the reader to apply, in record order. Its strings and frames point into the
// chunk's buffers: valid until the chunk is decoded again or finished.
typedef struct dchunk_def {
    hpt_rec_t rec;
    size_t ev; // the event this record made (THREAD_*, MODULE_*) in ev[], or SIZE_MAX
    size_t frames_at; // STACK: where its rec.n_frames frames start in the chunk's frames[]
} dchunk_def_t;

typedef struct dchunk {
    // input, filled by the caller
    hpt_chunk_hdr_t h;    // a plausible header (framing checked; the crc not yet)
    uint64_t frame_bytes; // header + stored payload: what the chunk's damage skips
    uint64_t file_off;    // where the header lies in the file
    uint64_t framing_regions, framing_bytes; // the reader's: the damage framing had passed
                                             // over when it framed this chunk
    bool keep;            // store events (false: definitions only, reader_load_defs)
    bool via_rows;        // a column chunk through its rows (hpt_cols_untranspose, then
                          // hpt_rec_decode), the reference cols_decode is tested against;
                          // false everywhere else
    uint8_t *in;          // the stored payload (a copy: the reader's window moves on)
    size_t in_cap;

    // output of dchunk_decode
    bool crc_ok;         // the header and payload match the header's crc32; if not, nothing
                         // else was looked at (the reader frames again from file_off)
    bool ok;             // every record decoded; if not, defs[] holds those before the damage
                         // and ev[] is to be dropped (a chunk counts entirely or not at all)
    reader_event_t *ev;  // n_ev events in record order (REALLOC: two)
    size_t n_ev, ev_cap;
    uint64_t min_time_ns; // the earliest event time (UINT64_MAX if none): what may be late
    dchunk_def_t *defs;
    size_t n_defs, defs_cap;
    uint64_t *cpu; // stack ids of the CPU samples, counted by the reader only if ok
    size_t n_cpu, cpu_cap;

    // scratch kept between uses
    uint8_t *raw, *rows;
    size_t raw_cap, rows_cap;
    hpt_cols_alloc_t *col_allocs;
    size_t col_allocs_cap;
    uint64_t *frames; // the STACK records' frames, expanded once here (the check that they
    size_t n_frames, frames_cap; // decode) for the reader to copy

} dchunk_t;

// Whether a chunk's header and stored payload match the header's crc32.
bool dchunk_crc_ok(const hpt_chunk_hdr_t *h, const uint8_t *payload);

// Verifies c->in against c->h's crc, then decompresses, untransposes and decodes it per c->h.
// dctx: the calling thread's own. The crc is checked here, on whichever thread decodes, so that
// the reader's framing thread does not pass over every byte of the trace a second time.
void dchunk_decode(dchunk_t *c, ZSTD_DCtx *dctx);

// cols_decode.c, the column form's direct decoder (declared here, as out.h declares its
// writers: it fills a dchunk_t and dchunk_decode calls it, so a header of its own would make
// an include cycle). Decodes the column payload [in, in + n) (decompressed, after c's crc)
// straight into c's events, definitions and CPU samples: the heap events (MALLOC, CALLOC,
// ALIGNED, FREE, FREE_SIZED, REALLOC) from their columns into reader_event_t, without building
// the row bytes and parsing them again (hpt_cols_untranspose, then hpt_rec_decode: the
// reference, kept as dchunk_decode's path for what this one refuses); the records the OTHER
// column holds whole through hpt_rec_decode and dchunk_record as in rows. True only if the
// reference would take the chunk whole, with the same output: every check of both (lengths,
// indexes, the rows' size the table states, the header's record count, the definitions) is
// made on the values. False otherwise, with c's outputs in no particular state: what a damaged
// chunk keeps (the definitions before its damage, or none when the columns do not add up) is
// the reference's alone to say, so the caller empties them and decodes through the rows. Never
// reads out of bounds.
bool cols_decode(dchunk_t *c, const uint8_t *in, size_t n);

// Applies one decoded record that is not a heap event of the column form (definitions, thread
// and module events, CPU samples, TOUCH_LIVE) to c, in record order: the one place both
// decoders (rows here, columns in cols_decode.c) turn such a record into what the reader takes.
// False if the reader could not take it (a definition that does not check, an unknown tag).
bool dchunk_record(dchunk_t *c, const hpt_rec_t *rec);

// Frees c's buffers (c itself is the caller's).
void dchunk_fini(dchunk_t *c);

#endif
