// SPDX-License-Identifier: MIT
// One chunk's payload -> events and definitions (chunk_decode.h). Decodes rows through
// hpt_rec_decode after zstd; a column chunk's heap events come straight from its columns
// (cols_decode.c), and a column chunk that decoder refuses goes through its rows
// (hpt_cols_untranspose, then hpt_rec_decode), which alone say what a damaged chunk keeps.
// Everything a definition could fail on is checked here, so that the reader, applying it
// later, cannot fail half-way through a chunk.
#include "trace/chunk_decode.h"

#include "core/xalloc.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>

static inline reader_event_t *push(dchunk_t *c) {
    if (c->n_ev == c->ev_cap)
        c->ev = xgrow(c->ev, &c->ev_cap, c->n_ev + 1, sizeof *c->ev);
    return &c->ev[c->n_ev++];
}

// A thread or module event (rare, so zeroed whole; allocation events fill their fields only).
static reader_event_t *push_meta(dchunk_t *c, uint8_t kind, uint64_t time_ns) {
    reader_event_t *e = push(c);
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->tid = c->h.tid;
    e->time_ns = time_ns;
    return e;
}

static void def(dchunk_t *c, const hpt_rec_t *rec, size_t ev, size_t frames_at) {
    c->defs = xgrow(c->defs, &c->defs_cap, c->n_defs + 1, sizeof *c->defs);
    c->defs[c->n_defs].rec = *rec;
    c->defs[c->n_defs].frames_at = frames_at;
    c->defs[c->n_defs++].ev = ev;
}

// The checks of what the reader will do with a definition: frames that expand (into c->frames,
// for the reader to copy: each stack is expanded once), argv strings that fit, a CPU source it
// knows.
static bool def_valid(dchunk_t *c, const hpt_rec_t *rec) {
    switch (rec->tag) {
    case HPT_REC_STACK:
        c->frames = xgrow(c->frames, &c->frames_cap, c->n_frames + rec->n_frames + 1,
                          sizeof *c->frames);
        if (hpt_stack_frames(rec, c->frames + c->n_frames) != 0)
            return false;
        c->n_frames += rec->n_frames;
        return true;
    case HPT_REC_PROCESS: {
        const uint8_t *p = rec->str2, *end = rec->str2 + rec->str2_len;
        for (uint64_t i = 0; i < rec->size; i++) {
            const uint8_t *s;
            uint32_t n;
            if (!(p = hpt_get_bytes(p, end, &s, &n)))
                return false;
        }
        return true;
    }
    case HPT_REC_CPU_INFO:
        return rec->counters[0] <= HPT_CPU_TIMER;
    case HPT_REC_ALLOCATOR:
        return rec->counters[0] <= HPT_ALLOC_UNHOOKED;
    default:
        return true;
    }
}

// The event of a FREE, a TOUCH_LIVE (a block live at exit: the same fields) or a FREE_SIZED
// (no touch measure; the size and alignment its free named, in the slots of the measure).
static void push_free(dchunk_t *c, uint32_t tid, const hpt_rec_t *rec) {
    reader_event_t *e = push(c);
    e->kind = rec->tag == HPT_REC_TOUCH_LIVE ? READER_TOUCH_LIVE : READER_FREE;
    e->flags = rec->tag == HPT_REC_FREE_SIZED ? READER_FREE_SIZED : 0;
    e->tid = tid;
    e->time_ns = rec->time_ns;
    e->stack = 0;
    e->addr = rec->addr;
    if (rec->tag == HPT_REC_FREE_SIZED) {
        e->touch = 0;
        e->free_align = rec->align;
        e->size = rec->size;
    } else {
        e->touch = rec->touch;
        e->touched_nz = rec->touch ? rec->touched_nz : 0;
        e->touched = rec->touch ? rec->touched : 0;
    }
}

// Every record that is not a heap event of the column form (chunk_decode.h).
bool dchunk_record(dchunk_t *c, const hpt_rec_t *rec) {
    switch (rec->tag) {
    case HPT_REC_TOUCH_LIVE:
        if (c->keep)
            push_free(c, c->h.tid, rec);
        return true;
    case HPT_REC_THREAD_START:
    case HPT_REC_THREAD_END:
    case HPT_REC_MODULE_LOAD:
    case HPT_REC_MODULE_UNLOAD: {
        size_t at = SIZE_MAX;
        if (c->keep) {
            static const uint8_t kind[] = {
                [HPT_REC_THREAD_START] = READER_THREAD_START,
                [HPT_REC_THREAD_END] = READER_THREAD_END,
                [HPT_REC_MODULE_LOAD] = READER_MODULE_LOAD,
                [HPT_REC_MODULE_UNLOAD] = READER_MODULE_UNLOAD,
            };
            reader_event_t *e = push_meta(c, kind[rec->tag], rec->time_ns);
            if (rec->tag == HPT_REC_MODULE_LOAD || rec->tag == HPT_REC_MODULE_UNLOAD) {
                e->addr = rec->addr;
                e->size = rec->tag == HPT_REC_MODULE_LOAD ? rec->size : 0;
            }
            at = c->n_ev - 1;
        }
        def(c, rec, at, 0);
        return true;
    }
    case HPT_REC_CPU_SAMPLE:
        c->cpu = xgrow(c->cpu, &c->cpu_cap, c->n_cpu + 1, sizeof *c->cpu);
        c->cpu[c->n_cpu++] = rec->stack;
        return true;
    case HPT_REC_STACK:
    case HPT_REC_PROCESS:
    case HPT_REC_CPU_INFO:
    case HPT_REC_ALLOCATOR:
    case HPT_REC_TRAILER: {
        size_t frames_at = c->n_frames;
        if (!def_valid(c, rec))
            return false;
        def(c, rec, SIZE_MAX, frames_at);
        return true;
    }
    default:
        return false; // hpt_rec_decode knows a tag this reader does not: treat as damage
    }
}

// Decodes n records from [p, end) into c. False at the first record that does not decode (or
// holds a definition the reader could not take): what came before it stays in c.
static bool decode_records(dchunk_t *c, const uint8_t *p, const uint8_t *end, uint32_t n) {
    hpt_dstate_t st = {.time_ns = c->h.base_time_ns, .addr = c->h.base_addr};
    hpt_rec_t rec;
    memset(&rec, 0, sizeof rec); // hpt_rec_decode fills only the fields of the tag it met
    const uint32_t tid = c->h.tid;
    const bool keep = c->keep;
    reader_event_t *e;
    for (uint32_t i = 0; i < n; i++) {
        if (!(p = hpt_rec_decode(p, end, &st, &rec)))
            return false;
        switch (rec.tag) {
        case HPT_REC_MALLOC:
        case HPT_REC_CALLOC:
        case HPT_REC_ALIGNED:
            if (!keep)
                break;
            e = push(c);
            e->kind = READER_ALLOC;
            e->sub = rec.tag == HPT_REC_MALLOC   ? READER_MALLOC
                     : rec.tag == HPT_REC_CALLOC ? READER_CALLOC
                                                 : READER_ALIGNED;
            e->flags = 0;
            e->tid = tid;
            e->time_ns = rec.time_ns;
            e->stack = rec.stack;
            e->addr = rec.addr;
            e->old_addr = 0;
            e->size = rec.size;
            break;
        case HPT_REC_FREE:
        case HPT_REC_FREE_SIZED:
            if (keep)
                push_free(c, tid, &rec);
            break;
        case HPT_REC_REALLOC:
            if (!keep)
                break;
            // two halves so the merge places the old block's death and the new block's birth
            // each at its own time (docs/trace-format.md#records)
            if (rec.old_addr != 0) {
                e = push(c);
                e->kind = READER_FREE;
                e->touch = rec.touch;
                e->flags = READER_FREE_OF_REALLOC;
                e->tid = tid;
                e->time_ns = rec.time_ns;
                e->stack = rec.stack;
                e->addr = rec.old_addr;
                e->touched_nz = rec.touch ? rec.touched_nz : 0;
                e->touched = rec.touch ? rec.touched : 0;
            }
            e = push(c);
            e->kind = READER_ALLOC;
            e->sub = READER_REALLOC;
            e->flags = 0;
            e->tid = tid;
            e->time_ns = rec.time2_ns;
            e->stack = rec.stack;
            e->addr = rec.addr;
            e->old_addr = rec.old_addr;
            e->size = rec.size;
            break;
        default:
            // the rest: definitions, thread and module events, CPU samples, TOUCH_LIVE
            if (!dchunk_record(c, &rec))
                return false;
            break;
        }
    }
    return p == end;
}

bool dchunk_crc_ok(const hpt_chunk_hdr_t *h, const uint8_t *payload) {
    hpt_chunk_hdr_t z = *h;
    z.crc32 = 0;
    // libdeflate's CRC-32 is zlib's, 4x faster with PCLMULQDQ (the tests check with zlib's)
    return libdeflate_crc32(libdeflate_crc32(0, &z, sizeof z), payload, h->stored_bytes) ==
           h->crc32;
}

void dchunk_decode(dchunk_t *c, ZSTD_DCtx *dctx) {
    const hpt_chunk_hdr_t *h = &c->h;
    c->ok = false;
    c->n_ev = c->n_defs = c->n_cpu = c->n_frames = 0;
    c->min_time_ns = UINT64_MAX;
    c->crc_ok = dchunk_crc_ok(h, c->in);
    if (!c->crc_ok)
        return;
    if (h->type == HPT_CHUNK_SYNC) {
        c->ok = true;
        return;
    }
    if (h->n_records > h->raw_bytes)
        return; // every record takes at least two bytes
    if (c->keep && c->ev_cap < h->n_records) {
        // room for an event a record at once, in a fresh buffer: grown while decoding, the
        // events made so far were copied at every doubling (realloc), ~4 instructions an event
        free(c->ev);
        c->ev_cap = 0;
        c->ev = xgrow(NULL, &c->ev_cap, h->n_records, sizeof *c->ev);
    }
    const uint8_t *p = c->in;
    if (h->flags & HPT_CHUNK_ZSTD) {
        if (ZSTD_getFrameContentSize(c->in, h->stored_bytes) != h->raw_bytes ||
            ZSTD_findFrameCompressedSize(c->in, h->stored_bytes) != h->stored_bytes)
            return;
        c->raw = xgrow(c->raw, &c->raw_cap, h->raw_bytes + 1, 1);
        size_t got = ZSTD_decompressDCtx(dctx, c->raw, h->raw_bytes, c->in, h->stored_bytes);
        if (ZSTD_isError(got) || got != h->raw_bytes)
            return;
        p = c->raw;
    }
    const uint8_t *end = p + h->raw_bytes;
    if (h->flags & HPT_CHUNK_COLUMNS) {
        if (!c->via_rows && cols_decode(c, p, h->raw_bytes)) {
            c->ok = true;
            goto done;
        }
        // damage somewhere, or a corner the direct decoder leaves to the rows: start again
        // through them, which say what a damaged chunk keeps (chunk_decode.h, cols_decode)
        c->n_ev = c->n_defs = c->n_cpu = c->n_frames = 0;
        hpt_colr_t cols[HPT_COLS];
        uint64_t row_bytes;
        if (!hpt_cols_open(p, h->raw_bytes, cols, &row_bytes) || row_bytes > HPT_CHUNK_MAX_RAW)
            return;
        // an allocation record takes at least five row bytes: tag, dt, stack, address, size
        size_t n_allocs = (size_t)row_bytes / 5 + 1;
        c->rows = xgrow(c->rows, &c->rows_cap, (size_t)row_bytes + 1, 1);
        c->col_allocs = xgrow(c->col_allocs, &c->col_allocs_cap, n_allocs, sizeof *c->col_allocs);
        if (hpt_cols_untranspose(p, h->raw_bytes, c->rows, (size_t)row_bytes, c->col_allocs,
                                 n_allocs) != row_bytes)
            return;
        p = c->rows;
        end = p + row_bytes;
    }
    c->ok = decode_records(c, p, end, h->n_records);
done:
    if (c->ok && c->n_ev) {
        // a chunk's deltas are unsigned, so its times never go down: the first is the least
        c->min_time_ns = c->ev[0].time_ns;
    }
}

void dchunk_fini(dchunk_t *c) {
    free(c->in);
    free(c->ev);
    free(c->defs);
    free(c->cpu);
    free(c->raw);
    free(c->rows);
    free(c->col_allocs);
    free(c->frames);
}
