// SPDX-License-Identifier: MIT
// What a thread's ring holds: the shim's in-memory form of its records, never written to a file.
// Heap events go in as fixed-width entries (absolute time and addresses, a kind byte and plain
// little-endian stores): the app thread makes one with a few stores and keeps no delta state; the
// drain computes the deltas the trace's columns want (ringcols.h). Every other record (STACK,
// THREAD_START, MODULE_*, ALLOCATOR, the CPU ring's samples) goes in as its trace record, varint
// coded, its tag byte first: tags are below HP_RE_FIRST, entries' kinds at or above it.
//
// An event's time is its low 32 bits; a THI entry gives the high 32 bits of the times after it
// (every 4.3 s of a thread's events, at most). The owner writes one before an event whose high
// bits differ from those of the last THI it committed (hp_ring_t.t_hi): one whose commit a
// longjmp abandoned is only written again.
//
// A trace record's times count from the stream's time: the last event's (or record's) before it
// in the ring. A TBASE entry says instead from which time the records after it count, up to the
// next event: what a producer that does not know the stream's time writes first (the module scan
// of a new stack, thread exit).
#ifndef HEAPPROF_PRELOAD_RINGENT_H
#define HEAPPROF_PRELOAD_RINGENT_H

#include "format/hpt_codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// Entry kinds. Layouts (fields unaligned, little-endian; t: the time's low 32 bits, a: an
// address; widths in bits where not 64):
//   ALLOC + tag (MALLOC, CALLOC)            kind t:32 a stack:32 size:32       21 bytes
//   ALLOC64 + tag (MALLOC, CALLOC, ALIGNED) kind t:32 a stack:32 size [align]  25 (ALIGNED 33)
//   FREE_NONE                               kind t:32 a                        13 (not measured)
//   FREE32 + method                         kind t:32 a touched:32 nz:32       21
//   FREE64 + method                         kind t:32 a touched nz             29
//   FREE_SIZED                              kind t:32 a size align             29
//   REALLOC                                 kind t0 t1 stack:32 old new size   45 (whole times)
//   TBASE                                   kind t                              9 (a whole time)
//   THI                                     kind hi:32                          5
enum {
    HP_RE_FIRST = 0xc0,
    HP_RE_ALLOC = 0xc0,   // + HPT_REC_MALLOC or CALLOC
    HP_RE_ALLOC64 = 0xc4, // + HPT_REC_MALLOC, CALLOC or ALIGNED
    HP_RE_FREE_NONE = 0xc8,
    HP_RE_FREE32 = 0xd0, // + HPT_TOUCH_*
    HP_RE_FREE64 = 0xd8, // + HPT_TOUCH_*
    HP_RE_FREE_SIZED = 0xe0,
    HP_RE_REALLOC = 0xe1,
    HP_RE_TBASE = 0xe2,
    HP_RE_THI = 0xe3,
};

#define HP_RE_ALLOC_MAX 33u // an ALIGNED one
#define HP_RE_FREE_MAX 29u
#define HP_RE_REALLOC_BYTES 45u
#define HP_RE_TBASE_BYTES 9u
#define HP_RE_THI_BYTES 5u

static inline void hp_re_st64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, 8);
}
static inline void hp_re_st32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}
static inline uint64_t hp_re_ld64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline uint32_t hp_re_ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

// Writers: each returns the entry's bytes, written at p (room for the kind's largest). Event
// times: the caller has made sure a THI of t's high bits is in the ring before.
static inline size_t hp_re_put_alloc(uint8_t *p, uint8_t tag, uint64_t t, uint64_t addr,
                                     uint32_t stack, uint64_t size, uint64_t align) {
    hp_re_st32(p + 1, (uint32_t)t);
    hp_re_st64(p + 5, addr);
    hp_re_st32(p + 13, stack);
    if (!(size >> 32) && tag != HPT_REC_ALIGNED) {
        p[0] = (uint8_t)(HP_RE_ALLOC + tag);
        hp_re_st32(p + 17, (uint32_t)size);
        return 21;
    }
    p[0] = (uint8_t)(HP_RE_ALLOC64 + tag);
    hp_re_st64(p + 17, size);
    if (tag != HPT_REC_ALIGNED)
        return 25;
    hp_re_st64(p + 25, align);
    return 33;
}

// method: HPT_TOUCH_*, or -1 for not measured.
static inline size_t hp_re_put_free(uint8_t *p, uint64_t t, uint64_t addr, int method,
                                    uint64_t touched, uint64_t nz) {
    hp_re_st32(p + 1, (uint32_t)t);
    hp_re_st64(p + 5, addr);
    if (method < 0) {
        p[0] = HP_RE_FREE_NONE;
        return 13;
    }
    if (!((touched | nz) >> 32)) {
        p[0] = (uint8_t)(HP_RE_FREE32 + method);
        hp_re_st32(p + 13, (uint32_t)touched);
        hp_re_st32(p + 17, (uint32_t)nz);
        return 21;
    }
    p[0] = (uint8_t)(HP_RE_FREE64 + method);
    hp_re_st64(p + 13, touched);
    hp_re_st64(p + 21, nz);
    return 29;
}

static inline size_t hp_re_put_free_sized(uint8_t *p, uint64_t t, uint64_t addr, uint64_t size,
                                          uint64_t align) {
    p[0] = HP_RE_FREE_SIZED;
    hp_re_st32(p + 1, (uint32_t)t);
    hp_re_st64(p + 5, addr);
    hp_re_st64(p + 13, size);
    hp_re_st64(p + 21, align);
    return 29;
}

static inline size_t hp_re_put_realloc(uint8_t *p, uint64_t t0, uint64_t t1, uint32_t stack,
                                       uint64_t old, uint64_t addr, uint64_t size) {
    p[0] = HP_RE_REALLOC;
    hp_re_st64(p + 1, t0);
    hp_re_st64(p + 9, t1);
    hp_re_st32(p + 17, stack);
    hp_re_st64(p + 21, old);
    hp_re_st64(p + 29, addr);
    hp_re_st64(p + 37, size);
    return HP_RE_REALLOC_BYTES;
}

static inline size_t hp_re_put_tbase(uint8_t *p, uint64_t t) {
    p[0] = HP_RE_TBASE;
    hp_re_st64(p + 1, t);
    return HP_RE_TBASE_BYTES;
}

static inline size_t hp_re_put_thi(uint8_t *p, uint32_t hi) {
    p[0] = HP_RE_THI;
    hp_re_st32(p + 1, hi);
    return HP_RE_THI_BYTES;
}

// One entry read back.
typedef struct hp_rent {
    uint8_t tag;   // the trace record's tag (HPT_REC_*); HP_RE_TBASE or HP_RE_THI for those
    uint8_t touch; // FREE: 0 not measured, else 1 + HPT_TOUCH_*
    uint32_t stack;
    uint64_t t, t2, addr, old, size, align, touched, nz; // THI: t is the high bits
} hp_rent_t;

// Bytes of each fixed entry by kind - HP_RE_FIRST, 0 for no kind of entry: for a reader that
// only steps over entries (the drain's lookahead). hp_re_read_fixed keeps its own sizes, each
// checked where it reads the entry (one switch; its reading through this table first cost the
// drain ~7 instructions an event, callgrind on c_churn); test_ringcols checks both agree.
static const uint8_t hp_re_bytes_of[256 - HP_RE_FIRST] = {
    [HP_RE_ALLOC + HPT_REC_MALLOC - HP_RE_FIRST] = 21,
    [HP_RE_ALLOC + HPT_REC_CALLOC - HP_RE_FIRST] = 21,
    [HP_RE_ALLOC64 + HPT_REC_MALLOC - HP_RE_FIRST] = 25,
    [HP_RE_ALLOC64 + HPT_REC_CALLOC - HP_RE_FIRST] = 25,
    [HP_RE_ALLOC64 + HPT_REC_ALIGNED - HP_RE_FIRST] = HP_RE_ALLOC_MAX,
    [HP_RE_FREE_NONE - HP_RE_FIRST] = 13,
    [HP_RE_FREE32 + 0 - HP_RE_FIRST] = 21,
    [HP_RE_FREE32 + 1 - HP_RE_FIRST] = 21,
    [HP_RE_FREE32 + 2 - HP_RE_FIRST] = 21,
    [HP_RE_FREE32 + 3 - HP_RE_FIRST] = 21,
    [HP_RE_FREE64 + 0 - HP_RE_FIRST] = HP_RE_FREE_MAX,
    [HP_RE_FREE64 + 1 - HP_RE_FIRST] = HP_RE_FREE_MAX,
    [HP_RE_FREE64 + 2 - HP_RE_FIRST] = HP_RE_FREE_MAX,
    [HP_RE_FREE64 + 3 - HP_RE_FIRST] = HP_RE_FREE_MAX,
    [HP_RE_FREE_SIZED - HP_RE_FIRST] = HP_RE_FREE_MAX,
    [HP_RE_REALLOC - HP_RE_FIRST] = HP_RE_REALLOC_BYTES,
    [HP_RE_TBASE - HP_RE_FIRST] = HP_RE_TBASE_BYTES,
    [HP_RE_THI - HP_RE_FIRST] = HP_RE_THI_BYTES,
};

// Bytes of the fixed entry of kind k (>= HP_RE_FIRST), 0 for no kind of entry.
static inline size_t hp_re_bytes(uint8_t k) { return hp_re_bytes_of[k - HP_RE_FIRST]; }

// Reads the fixed entry at p (*p >= HP_RE_FIRST), its time's high bits t_hi (the last THI's).
// Returns the byte after it (p + hp_re_bytes(*p)), or NULL if it runs past end or its kind is
// unknown.
static inline __attribute__((always_inline)) const uint8_t *
hp_re_read_fixed(const uint8_t *p, const uint8_t *end, uint64_t t_hi, hp_rent_t *e) {
    const size_t avail = (size_t)(end - p);
    const uint8_t k = p[0];
    if (avail < 13) {
        if (k == HP_RE_THI && avail >= HP_RE_THI_BYTES) {
            e->tag = HP_RE_THI;
            e->t = hp_re_ld32(p + 1);
            return p + HP_RE_THI_BYTES;
        }
        if (k == HP_RE_TBASE && avail >= HP_RE_TBASE_BYTES) {
            e->tag = HP_RE_TBASE;
            e->t = hp_re_ld64(p + 1);
            return p + HP_RE_TBASE_BYTES;
        }
        return NULL;
    }
    e->t = t_hi << 32 | hp_re_ld32(p + 1);
    e->addr = hp_re_ld64(p + 5);
    switch (k) {
    case HP_RE_ALLOC + HPT_REC_MALLOC:
    case HP_RE_ALLOC + HPT_REC_CALLOC:
        if (avail < 21)
            return NULL;
        e->tag = (uint8_t)(k - HP_RE_ALLOC);
        e->stack = hp_re_ld32(p + 13);
        e->size = hp_re_ld32(p + 17);
        e->align = 0;
        return p + 21;
    case HP_RE_ALLOC64 + HPT_REC_MALLOC:
    case HP_RE_ALLOC64 + HPT_REC_CALLOC:
    case HP_RE_ALLOC64 + HPT_REC_ALIGNED:
        e->tag = (uint8_t)(k - HP_RE_ALLOC64);
        if (avail < 25 || (e->tag == HPT_REC_ALIGNED && avail < 33))
            return NULL;
        e->stack = hp_re_ld32(p + 13);
        e->size = hp_re_ld64(p + 17);
        e->align = 0;
        if (e->tag != HPT_REC_ALIGNED)
            return p + 25;
        e->align = hp_re_ld64(p + 25);
        return p + 33;
    case HP_RE_FREE_NONE:
        e->tag = HPT_REC_FREE;
        e->touch = 0;
        return p + 13;
    case HP_RE_FREE32 + 0:
    case HP_RE_FREE32 + 1:
    case HP_RE_FREE32 + 2:
    case HP_RE_FREE32 + 3:
        if (avail < 21)
            return NULL;
        e->tag = HPT_REC_FREE;
        e->touch = (uint8_t)(1 + k - HP_RE_FREE32);
        e->touched = hp_re_ld32(p + 13);
        e->nz = hp_re_ld32(p + 17);
        return p + 21;
    case HP_RE_FREE64 + 0:
    case HP_RE_FREE64 + 1:
    case HP_RE_FREE64 + 2:
    case HP_RE_FREE64 + 3:
        if (avail < 29)
            return NULL;
        e->tag = HPT_REC_FREE;
        e->touch = (uint8_t)(1 + k - HP_RE_FREE64);
        e->touched = hp_re_ld64(p + 13);
        e->nz = hp_re_ld64(p + 21);
        return p + 29;
    case HP_RE_FREE_SIZED:
        if (avail < 29)
            return NULL;
        e->tag = HPT_REC_FREE_SIZED;
        e->size = hp_re_ld64(p + 13);
        e->align = hp_re_ld64(p + 21);
        e->touch = 0;
        return p + 29;
    case HP_RE_REALLOC:
        if (avail < HP_RE_REALLOC_BYTES)
            return NULL;
        e->tag = HPT_REC_REALLOC;
        e->t = hp_re_ld64(p + 1);
        e->t2 = hp_re_ld64(p + 9);
        e->stack = hp_re_ld32(p + 17);
        e->old = hp_re_ld64(p + 21);
        e->addr = hp_re_ld64(p + 29);
        e->size = hp_re_ld64(p + 37);
        e->touch = 0;
        return p + HP_RE_REALLOC_BYTES;
    case HP_RE_TBASE:
        e->tag = HP_RE_TBASE;
        e->t = hp_re_ld64(p + 1);
        return p + HP_RE_TBASE_BYTES;
    case HP_RE_THI:
        e->tag = HP_RE_THI;
        e->t = hp_re_ld32(p + 1);
        return p + HP_RE_THI_BYTES;
    default:
        return NULL;
    }
}

#endif
