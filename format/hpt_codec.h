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
    uint64_t addr;
} hpt_dstate_t;

// One decoded record. Strings and frames point into the decoded buffer.
typedef struct hpt_rec {
    uint8_t tag;
    uint64_t time_ns;  // absolute (relative to the file's start_ns); REALLOC: before the call
    uint64_t time2_ns; // REALLOC: after the call returned
    uint64_t stack;    // stack id (allocations) or defined id (STACK)
    uint64_t addr;     // block address (allocs, FREE), new address (REALLOC), base (MODULE_*)
    uint64_t old_addr; // REALLOC only
    uint64_t size;     // bytes (allocs, FREE_SIZED: as the free named them), module size (MODULE_LOAD)
    uint64_t align;    // ALIGNED, FREE_SIZED (0: not given)
    uint32_t n_frames; // STACK only
    const uint8_t *frames; // STACK: encoded frames, decode with hpt_stack_frames()
    const uint8_t *frames_end;
    const uint8_t *str;    // THREAD_START name, MODULE_LOAD path, PROCESS exe, ALLOCATOR family
    uint32_t str_len;
    const uint8_t *str2;   // MODULE_LOAD build id (raw bytes), PROCESS args (argc in size),
                           // ALLOCATOR detail (status in counters[0])
    uint32_t str2_len;
    uint64_t counters[10]; // TRAILER (10); CPU_INFO (4): source, hz, n_samples, n_lost (reason in str)
    uint64_t tid;          // CPU_SAMPLE: the sampled thread
    uint8_t touch;         // FREE: 0 not measured, else 1 + HPT_TOUCH_*
    uint64_t touched;      // with touch: bytes touched (FILL*: differing from the pattern)
    uint64_t touched_nz;   // with touch: bytes that are not zero (RESIDENT: = touched)
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
    st->time_ns += d;
    *t = st->time_ns;
    return p;
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
    v--; // every method (v & 3) is defined: FILL, RESIDENT, FILL_SAMPLED, PAGES
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
    case HPT_REC_TOUCH_LIVE:
        if (!(p = hpt_get_dt(p, end, st, &r->time_ns)) || !(p = hpt_get_varint(p, end, &r->addr)))
            return NULL;
        return hpt_get_touch(p, end, r);
    case HPT_REC_FREE_SIZED:
        if (!(p = hpt_get_dt(p, end, st, &r->time_ns)) || !(p = hpt_get_addr(p, end, st, &r->addr)) ||
            !(p = hpt_get_varint(p, end, &r->size)))
            return NULL;
        r->touch = 0;
        return hpt_get_varint(p, end, &r->align);
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
    case HPT_REC_ALLOCATOR:
        // status in counters[0], family in str, detail in str2
        if (!(p = hpt_get_varint(p, end, &r->counters[0])) ||
            !(p = hpt_get_bytes(p, end, &r->str, &r->str_len)))
            return NULL;
        return hpt_get_bytes(p, end, &r->str2, &r->str2_len);
    case HPT_REC_CPU_INFO:
        for (int i = 0; i < 4; i++)
            if (!(p = hpt_get_varint(p, end, &r->counters[i])))
                return NULL;
        return hpt_get_bytes(p, end, &r->str, &r->str_len);
    default:
        return NULL;
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
