// SPDX-License-Identifier: MIT
// Header-only varint/zigzag codec and the one record decoder, shared by the shim's writer
// (which walks records to cut self-contained chunks) and the analyzer's reader.
// Never allocates; every read is bounds-checked against `end`, so it is safe on untrusted bytes.
#ifndef HEAPPROF_FORMAT_HPT_CODEC_H
#define HEAPPROF_FORMAT_HPT_CODEC_H

#include "hpt_format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HPT_VARINT_MAX 10 // bytes of the longest uint64 varint

// Writes v as LEB128 at p (room for HPT_VARINT_MAX bytes); returns the byte after it.
static inline uint8_t *hpt_put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t hpt_zigzag(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t hpt_unzigzag(uint64_t v) {
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

// Reads one varint; returns the byte after it, or NULL if it runs past end or over 10 bytes.
static inline const uint8_t *hpt_get_varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    // most values fit one or two bytes: no loop, no shift bookkeeping
    if (p < end && !(p[0] & 0x80)) {
        *out = p[0];
        return p + 1;
    }
    if (end - p >= 2 && !(p[1] & 0x80)) {
        *out = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        return p + 2;
    }
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (p >= end)
            return NULL;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return NULL; // more than 64 bits: damage, not a value
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return p;
        }
    }
    return NULL;
}

// Delta state of one record stream: what "previous" means for dt and addr.
typedef struct hpt_dstate {
    uint64_t time_ns;
    uint64_t addr;       // HEAP chunks: the serial base (docs/trace-format.md#heap)
    uint32_t time_shift; // HEAP chunks: dt counts 2^time_shift ns; 0 elsewhere
    uint64_t reuse;      // HEAP chunks: the serial an H_REUSE gave the next allocation (0: none)
    uint64_t last_free;  // HEAP chunks: the serial of the last block H_FREE or H_REALLOC_FREE
                         // named (base - 1 at the start of a chunk)
    uint64_t last_realloc_size; // HEAP chunks: the size of the last H_REALLOC (0 at first)
} hpt_dstate_t;

// One decoded record. Strings and frames point into the decoded buffer.
typedef struct hpt_rec {
    uint8_t tag;
    uint64_t time_ns;  // absolute (relative to the file's start_ns); REALLOC: before the call
    uint64_t time2_ns; // REALLOC: after the call returned
    uint64_t stack;    // stack id (allocations) or defined id (STACK)
    uint64_t addr;     // block address (allocs, FREE), new address (REALLOC), base (MODULE_*)
    uint64_t old_addr; // REALLOC only
    uint64_t size;     // bytes (allocs), module size (MODULE_LOAD)
    uint64_t align;    // ALIGNED only
    uint32_t n_frames; // STACK only
    const uint8_t *frames; // STACK: encoded frames, decode with hpt_stack_frames()
    const uint8_t *frames_end;
    const uint8_t *str;    // THREAD_START name, MODULE_LOAD path, PROCESS exe
    uint32_t str_len;
    const uint8_t *str2;   // MODULE_LOAD build id (raw bytes), PROCESS args (argc in size)
    uint32_t str2_len;
    uint64_t counters[10]; // TRAILER (10); CPU_INFO (4): source, hz, n_samples, n_lost (reason in str)
    uint64_t tid;          // CPU_SAMPLE: the sampled thread; H_TID: the thread
    uint64_t ref;          // H_FREE, H_REALLOC_FREE, H_REUSE: the block's serial (0 = unknown);
                           // H_REALLOC: the old block's serial (0 = none or unknown)
    uint8_t in_place;      // H_REALLOC: the block keeps the old serial
    uint64_t serial;       // H_MALLOC, H_CALLOC, H_ALIGNED, H_REALLOC: the new block's serial
    uint8_t touch;         // FREE: 0 not measured, else 1 + HPT_TOUCH_*
    uint64_t touched;      // with touch: bytes touched (FILL*: differing from the pattern)
    uint64_t touched_nz;   // with touch: FILL*: bytes that are not zero; RESIDENT: = touched
} hpt_rec_t;

// Encodes a block's touch measure (see hpt_format.h): method HPT_TOUCH_*, or -1 for none.
// Room for 2 * HPT_VARINT_MAX bytes.
static inline uint8_t *hpt_put_touch(uint8_t *p, int method, uint64_t touched, uint64_t touched_nz) {
    if (method < 0)
        return hpt_put_varint(p, 0);
    p = hpt_put_varint(p, ((touched << 2) | (uint64_t)method) + 1);
    if (method != HPT_TOUCH_RESIDENT)
        p = hpt_put_varint(p, hpt_zigzag((int64_t)(touched_nz - touched)));
    return p;
}

static inline const uint8_t *hpt_get_bytes(const uint8_t *p, const uint8_t *end, const uint8_t **s,
                                           uint32_t *len) {
    uint64_t n;
    if (!(p = hpt_get_varint(p, end, &n)) || n > HPT_MAX_STRING || n > (uint64_t)(end - p))
        return NULL;
    *s = p;
    *len = (uint32_t)n;
    return p + n;
}

static inline const uint8_t *hpt_get_dt(const uint8_t *p, const uint8_t *end, hpt_dstate_t *st,
                                        uint64_t *t) {
    uint64_t d;
    if (!(p = hpt_get_varint(p, end, &d)))
        return NULL;
    st->time_ns += d << st->time_shift;
    *t = st->time_ns;
    return p;
}

// Writes a heap record's tag byte with dt folded in (and the varint when it does not fit).
static inline uint8_t *hpt_put_htag(uint8_t *p, uint8_t tag, uint64_t dt) {
    *p++ = (uint8_t)(tag | (dt < 7 ? dt : 7) << 5);
    return dt < 7 ? p : hpt_put_varint(p, dt - 7);
}

// The heap stream's touch measure: one count, the one that means "touched" for this block (the
// writer knows which blocks were calloc'd): v = 0 not measured, else v - 1 = count << 2 | method.
static inline uint8_t *hpt_put_htouch(uint8_t *p, int method, uint64_t count) {
    return hpt_put_varint(p, method < 0 ? 0 : ((count << 2) | (uint64_t)method) + 1);
}

// The serial a new block of the heap stream takes: the one an H_REUSE named, else the base.
static inline uint64_t hpt_take_serial(hpt_dstate_t *st) {
    uint64_t s = st->reuse ? st->reuse : st->addr++;
    st->reuse = 0;
    return s;
}

static inline const uint8_t *hpt_get_addr(const uint8_t *p, const uint8_t *end, hpt_dstate_t *st,
                                          uint64_t *a) {
    uint64_t z;
    if (!(p = hpt_get_varint(p, end, &z)))
        return NULL;
    st->addr += (uint64_t)hpt_unzigzag(z);
    *a = st->addr;
    return p;
}

static inline const uint8_t *hpt_get_touch(const uint8_t *p, const uint8_t *end, hpt_rec_t *r) {
    uint64_t v, z;
    if (!(p = hpt_get_varint(p, end, &v)))
        return NULL;
    r->touch = 0;
    if (v == 0)
        return p;
    v--;
    if ((v & 3) > HPT_TOUCH_FILL_SAMPLED)
        return NULL;
    r->touch = (uint8_t)(1 + (v & 3));
    r->touched = r->touched_nz = v >> 2;
    if ((v & 3) != HPT_TOUCH_RESIDENT) {
        if (!(p = hpt_get_varint(p, end, &z)))
            return NULL;
        r->touched_nz += (uint64_t)hpt_unzigzag(z);
    }
    return p;
}

// Decodes the record at p, advancing st. Returns the byte after the record, or NULL if the
// bytes are not a well-formed record (unknown tag, overrun, absurd count).
static inline const uint8_t *hpt_rec_decode(const uint8_t *p, const uint8_t *end, hpt_dstate_t *st,
                                            hpt_rec_t *r) {
    if (p >= end)
        return NULL;
    r->tag = *p++;
    uint64_t n;
    switch (r->tag) {
    case HPT_REC_MALLOC:
    case HPT_REC_CALLOC:
    case HPT_REC_ALIGNED:
        if (!(p = hpt_get_dt(p, end, st, &r->time_ns)) || !(p = hpt_get_varint(p, end, &r->stack)) ||
            !(p = hpt_get_addr(p, end, st, &r->addr)) || !(p = hpt_get_varint(p, end, &r->size)))
            return NULL;
        r->align = 0;
        if (r->tag == HPT_REC_ALIGNED && !(p = hpt_get_varint(p, end, &r->align)))
            return NULL;
        return p;
    case HPT_REC_FREE:
        if (!(p = hpt_get_dt(p, end, st, &r->time_ns)) || !(p = hpt_get_addr(p, end, st, &r->addr)))
            return NULL;
        return hpt_get_touch(p, end, r);
    case HPT_REC_REALLOC:
        if (!(p = hpt_get_dt(p, end, st, &r->time_ns)) || !(p = hpt_get_varint(p, end, &n)))
            return NULL;
        r->time2_ns = r->time_ns + n;
        st->time_ns = r->time2_ns;
        if (!(p = hpt_get_varint(p, end, &r->stack)) || !(p = hpt_get_addr(p, end, st, &r->old_addr)) ||
            !(p = hpt_get_addr(p, end, st, &r->addr)) || !(p = hpt_get_varint(p, end, &r->size)))
            return NULL;
        r->touch = 0;
        return p;
    case HPT_REC_STACK:
        if (!(p = hpt_get_varint(p, end, &r->stack)) || !(p = hpt_get_varint(p, end, &n)) ||
            n > HPT_MAX_FRAMES)
            return NULL;
        r->n_frames = (uint32_t)n;
        r->frames = p;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t f;
            if (!(p = hpt_get_varint(p, end, &f)))
                return NULL;
        }
        r->frames_end = p;
        return p;
    case HPT_REC_THREAD_START:
        if (!(p = hpt_get_dt(p, end, st, &r->time_ns)))
            return NULL;
        return hpt_get_bytes(p, end, &r->str, &r->str_len);
    case HPT_REC_THREAD_END:
        return hpt_get_dt(p, end, st, &r->time_ns);
    case HPT_REC_MODULE_LOAD:
        if (!(p = hpt_get_dt(p, end, st, &r->time_ns)) || !(p = hpt_get_varint(p, end, &r->addr)) ||
            !(p = hpt_get_varint(p, end, &r->size)) || !(p = hpt_get_bytes(p, end, &r->str, &r->str_len)))
            return NULL;
        return hpt_get_bytes(p, end, &r->str2, &r->str2_len);
    case HPT_REC_MODULE_UNLOAD:
        if (!(p = hpt_get_dt(p, end, st, &r->time_ns)))
            return NULL;
        return hpt_get_varint(p, end, &r->addr);
    case HPT_REC_PROCESS:
        // exe, then argc and the args; the args stay encoded (str2 spans them, size = argc)
        if (!(p = hpt_get_bytes(p, end, &r->str, &r->str_len)) || !(p = hpt_get_varint(p, end, &r->size)) ||
            r->size > 4096)
            return NULL;
        r->str2 = p;
        for (uint64_t i = 0; i < r->size; i++) {
            const uint8_t *s;
            uint32_t l;
            if (!(p = hpt_get_bytes(p, end, &s, &l)))
                return NULL;
        }
        r->str2_len = (uint32_t)(p - r->str2);
        return p;
    case HPT_REC_TRAILER:
        for (int i = 0; i < 10; i++)
            if (!(p = hpt_get_varint(p, end, &r->counters[i])))
                return NULL;
        return p;
    case HPT_REC_CPU_SAMPLE: {
        // samples of several CPUs interleave, so their time delta is signed
        uint64_t z;
        if (!(p = hpt_get_varint(p, end, &z)))
            return NULL;
        st->time_ns += (uint64_t)hpt_unzigzag(z);
        r->time_ns = st->time_ns;
        if (!(p = hpt_get_varint(p, end, &r->tid)))
            return NULL;
        return hpt_get_varint(p, end, &r->stack);
    }
    case HPT_REC_CPU_INFO:
        for (int i = 0; i < 4; i++)
            if (!(p = hpt_get_varint(p, end, &r->counters[i])))
                return NULL;
        return hpt_get_bytes(p, end, &r->str, &r->str_len);
    default:
        return NULL;
    }
}

// ---- the heap stream (docs/trace-format.md#heap) ----
// A HEAP chunk's payload holds its records' fields in columns, so that each compresses with
// statistics of its own: varint HPT_HCOLS, the byte sizes of all columns but the last, then
// the columns back to back. A record's tag byte (and everything of a record that is not a heap
// event: STACK, THREAD_*, MODULE_*) is in MAIN; its other fields are in their columns, in
// record order.
enum hpt_hcol {
    HPT_HCOL_MAIN,  // tag bytes (dt in the top bits), dt overflow, H_TID's tid, other records
    HPT_HCOL_STACK, // stack ids of new blocks
    HPT_HCOL_SIZE,  // sizes of new blocks (and H_ALIGNED's alignment)
    HPT_HCOL_REF,   // block references: H_FREE, H_REALLOC_FREE, H_REUSE, H_REALLOC's old
    HPT_HCOL_TOUCH, // H_FREE's touch measure
    HPT_HCOLS
};

typedef struct hpt_hcur {
    const uint8_t *p[HPT_HCOLS], *end[HPT_HCOLS];
} hpt_hcur_t;

// Splits a HEAP payload into its columns. False if the column table does not fit.
static inline bool hpt_hcur_open(hpt_hcur_t *c, const uint8_t *p, const uint8_t *end) {
    uint64_t n, len[HPT_HCOLS - 1];
    if (!(p = hpt_get_varint(p, end, &n)) || n != HPT_HCOLS)
        return false;
    for (int i = 0; i < HPT_HCOLS - 1; i++)
        if (!(p = hpt_get_varint(p, end, &len[i])))
            return false;
    for (int i = 0; i < HPT_HCOLS; i++) {
        c->p[i] = p;
        if (i < HPT_HCOLS - 1) {
            if (len[i] > (uint64_t)(end - p))
                return false;
            p += len[i];
        } else {
            p = end;
        }
        c->end[i] = p;
    }
    return true;
}

// The delta state a HEAP chunk starts from (its header's bases).
static inline hpt_dstate_t hpt_heap_state(uint64_t base_time_ns, uint64_t base_serial,
                                          uint32_t time_shift) {
    hpt_dstate_t st = {.time_ns = base_time_ns,
                       .addr = base_serial,
                       .time_shift = time_shift,
                       .last_free = base_serial - 1};
    return st;
}

// The block a free names, as one varint v: 0 = a block never seen allocated; else, with
// w = v - 1, bit 0 of w picks the form: 0: serial = base - 1 - (w >> 1) (blocks that die young),
// 1: serial = last_free + 1 + unzigzag(w >> 1) (blocks that die in the order they were made,
// or backwards: a Vec<String> dropped, a batch freed). The encoder writes whichever is shorter.
static inline uint64_t hpt_dying_code(const hpt_dstate_t *st, uint64_t serial) {
    if (!serial)
        return 0;
    uint64_t young = st->addr - 1 - serial;
    uint64_t ordered = hpt_zigzag((int64_t)(serial - st->last_free - 1));
    return (young <= ordered ? young << 1 : (ordered << 1) | 1) + 1;
}

// An H_REALLOC's size, as one varint: (size << 1) or (zigzag(size - last_realloc_size) << 1 | 1),
// whichever is shorter: a string grown a byte at a time costs next to nothing.
static inline uint64_t hpt_realloc_size_code(hpt_dstate_t *st, uint64_t size) {
    uint64_t delta = hpt_zigzag((int64_t)(size - st->last_realloc_size));
    st->last_realloc_size = size;
    return delta < size ? delta << 1 | 1 : size << 1;
}

// Every column read to its end: a chunk whose record count and columns agree.
static inline bool hpt_hcur_done(const hpt_hcur_t *c) {
    for (int i = 0; i < HPT_HCOLS; i++)
        if (c->p[i] != c->end[i])
            return false;
    return true;
}

// Writes the column table for columns of these sizes at p (room: 1 + 4 * HPT_VARINT_MAX).
static inline uint8_t *hpt_hcols_table(uint8_t *p, const size_t len[HPT_HCOLS]) {
    p = hpt_put_varint(p, HPT_HCOLS);
    for (int i = 0; i < HPT_HCOLS - 1; i++)
        p = hpt_put_varint(p, len[i]);
    return p;
}

static inline bool hpt_hget(hpt_hcur_t *c, int col, uint64_t *v) {
    const uint8_t *q = hpt_get_varint(c->p[col], c->end[col], v);
    if (!q)
        return false;
    c->p[col] = q;
    return true;
}

// A block reference: ref counts back from the serial base; 0 = unknown.
static inline bool hpt_hget_ref(hpt_hcur_t *c, const hpt_dstate_t *st, uint64_t *serial) {
    uint64_t d;
    if (!hpt_hget(c, HPT_HCOL_REF, &d) || d > st->addr)
        return false; // a serial below 0 (0 itself is never a block's)
    *serial = d ? st->addr - d : 0;
    return true;
}

// The block an H_FREE or H_REALLOC_FREE names (see hpt_dying_code).
static inline bool hpt_hget_dying(hpt_hcur_t *c, hpt_dstate_t *st, uint64_t *serial) {
    uint64_t v;
    if (!hpt_hget(c, HPT_HCOL_REF, &v))
        return false;
    if (v == 0) {
        *serial = 0;
        return true;
    }
    uint64_t w = v - 1, s;
    if (w & 1)
        s = st->last_free + 1 + (uint64_t)hpt_unzigzag(w >> 1);
    else if ((w >> 1) < st->addr)
        s = st->addr - 1 - (w >> 1);
    else
        return false;
    if (s == 0 || s >= st->addr)
        return false; // not a serial given out yet
    st->last_free = s;
    *serial = s;
    return true;
}

// A heap record's time delta: `small` (the tag byte's top three bits) if below 7, else 7 plus
// the varint that follows the tag byte in MAIN.
static inline bool hpt_hget_dt(hpt_hcur_t *c, hpt_dstate_t *st, unsigned small, uint64_t *t) {
    uint64_t d = small;
    if (small == 7) {
        if (!hpt_hget(c, HPT_HCOL_MAIN, &d))
            return false;
        d += 7;
    }
    st->time_ns += d << st->time_shift;
    *t = st->time_ns;
    return true;
}

static inline bool hpt_hget_alloc(hpt_hcur_t *c, hpt_dstate_t *st, unsigned small,
                                  hpt_rec_t *r) {
    r->align = 0;
    if (!hpt_hget_dt(c, st, small, &r->time_ns) || !hpt_hget(c, HPT_HCOL_STACK, &r->stack) ||
        !hpt_hget(c, HPT_HCOL_SIZE, &r->size))
        return false;
    r->time2_ns = r->time_ns;
    return true;
}

// Decodes the next record of a HEAP chunk, advancing st. False if the columns do not hold a
// well-formed record (or a record that has no place in the heap stream).
static inline bool hpt_heap_decode(hpt_hcur_t *c, hpt_dstate_t *st, hpt_rec_t *r) {
    const uint8_t *p = c->p[HPT_HCOL_MAIN], *end = c->end[HPT_HCOL_MAIN];
    if (p >= end)
        return false;
    if ((*p & 31) < HPT_REC_H_MALLOC) {
        // a whole record in MAIN; only these travel in the heap stream
        if (*p != HPT_REC_STACK && (*p < HPT_REC_THREAD_START || *p > HPT_REC_MODULE_UNLOAD))
            return false;
        if (!(p = hpt_rec_decode(p, end, st, r)))
            return false;
        c->p[HPT_HCOL_MAIN] = p;
        return true;
    }
    unsigned small = *p >> 5;
    r->tag = *p & 31;
    c->p[HPT_HCOL_MAIN] = p + 1;
    uint64_t v;
    switch (r->tag) {
    case HPT_REC_H_MALLOC:
    case HPT_REC_H_CALLOC:
        if (!hpt_hget_alloc(c, st, small, r))
            return false;
        r->serial = hpt_take_serial(st);
        return true;
    case HPT_REC_H_ALIGNED:
        if (!hpt_hget_alloc(c, st, small, r) || !hpt_hget(c, HPT_HCOL_SIZE, &r->align))
            return false;
        r->serial = hpt_take_serial(st);
        return true;
    case HPT_REC_H_FREE:
        if (!hpt_hget_dt(c, st, small, &r->time_ns) || !hpt_hget_dying(c, st, &r->ref) ||
            !hpt_hget(c, HPT_HCOL_TOUCH, &v))
            return false;
        r->touch = 0;
        if (v == 0)
            return true;
        v--;
        if ((v & 3) > HPT_TOUCH_FILL_SAMPLED)
            return false;
        r->touch = (uint8_t)(1 + (v & 3));
        r->touched = r->touched_nz = v >> 2;
        return true;
    case HPT_REC_H_REALLOC_FREE:
        r->touch = 0;
        return hpt_hget_dt(c, st, small, &r->time_ns) && hpt_hget_dying(c, st, &r->ref);
    case HPT_REC_H_REALLOC:
        if (!hpt_hget_alloc(c, st, small, r))
            return false;
        r->size = (r->size & 1) ? st->last_realloc_size + (uint64_t)hpt_unzigzag(r->size >> 1)
                                : r->size >> 1;
        st->last_realloc_size = r->size;
        if (!hpt_hget(c, HPT_HCOL_REF, &v) || (v >> 1) > st->addr)
            return false;
        r->in_place = (uint8_t)(v & 1);
        r->ref = (v >> 1) ? st->addr - (v >> 1) : 0;
        if (r->in_place && !r->ref)
            return false; // nothing to keep the serial of
        // in place the block keeps its serial; an H_REUSE before it stays pending
        r->serial = r->in_place ? r->ref : hpt_take_serial(st);
        return true;
    case HPT_REC_H_TID:
        return !small && hpt_hget(c, HPT_HCOL_MAIN, &r->tid) && r->tid <= UINT32_MAX;
    case HPT_REC_H_REUSE:
        if (small || !hpt_hget_ref(c, st, &r->ref) || !r->ref)
            return false;
        st->reuse = r->ref;
        return true;
    default:
        return false;
    }
}

// Expands a STACK record's frames into out[0..n_frames) (innermost first). Returns 0, or -1 if
// the encoding is damaged.
static inline int hpt_stack_frames(const hpt_rec_t *r, uint64_t *out) {
    const uint8_t *p = r->frames;
    uint64_t prev = 0;
    for (uint32_t i = 0; i < r->n_frames; i++) {
        uint64_t z;
        if (!(p = hpt_get_varint(p, r->frames_end, &z)))
            return -1;
        prev = i == 0 ? z : prev + (uint64_t)hpt_unzigzag(z);
        out[i] = prev;
    }
    return 0;
}

#endif
