// SPDX-License-Identifier: MIT
// A column chunk's payload -> events without rows (cols_decode in chunk_decode.h). The walk is
// hpt_cols_untranspose's, value for value: the same columns read in the same order, the same
// block references and size codes; where hpt_rec_decode would parse the row back, the event is
// filled from the values in hand. The rows' size the table states is checked as the reference
// checks it, without the rows: see `rows` below.
#include "trace/chunk_decode.h"

#include "core/xalloc.h"

#include <string.h>

// Bytes of v as a canonical LEB128 varint (what hpt_put_varint writes), by its top bit.
static const uint8_t vlen_by_bit[64] = {
    1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 10,
};
static inline uint64_t vlen(uint64_t v) {
    return vlen_by_bit[63 ^ __builtin_clzll(v | 1)];
}

// A column's next value, which must also be a canonical varint: the shim writes no other, and
// then a value copied into the rows as it is takes there the bytes it takes in its column, so
// the rows' size is counted from the columns' lengths (cols_decode). Anything else (a varint
// padded with 0x80 bytes, one over 64 bits, the column's end) is false: the rows decide.
// fast: the caller knows HPT_VARINT_MAX bytes are left in the column (see fast_records), so
// the end is not looked at. always_inline: many call sites on the per-event path, each with
// fast a constant, and gcc calls it otherwise.
static inline __attribute__((always_inline)) bool get(hpt_colr_t *c, uint64_t *out,
                                                      const bool fast) {
    const uint8_t *p = c->p;
    if (!fast && c->end - p < HPT_VARINT_MAX) { // near the column's end: every read checked
        const uint8_t *q = hpt_get_varint(p, c->end, out);
        if (!q || (q - p > 1 && q[-1] == 0))
            return false;
        c->p = q;
        return true;
    }
    // most values take one or two bytes: unrolled
    uint64_t b = p[0], v = b & 0x7f;
    if (b < 0x80) {
        *out = b;
        c->p = p + 1;
        return true;
    }
    b = p[1];
    v |= (b & 0x7f) << 7;
    if (b < 0x80) {
        if (b == 0)
            return false; // padded
        *out = v;
        c->p = p + 2;
        return true;
    }
    unsigned i = 2;
    for (;; i++) {
        b = p[i];
        v |= (b & 0x7f) << (7 * i);
        if (b < 0x80)
            break;
        if (i == HPT_VARINT_MAX - 1)
            return false;
    }
    if (b == 0 || (i == HPT_VARINT_MAX - 1 && b > 1))
        return false; // padded, or over 64 bits
    *out = v;
    c->p = p + i + 1;
    return true;
}

// Room for k more events in c->ev, grown as one push at a time would grow it (xgrow doubles
// to the first size that fits, so the capacities, which the reader's hand-over looks at, are
// the reference's).
static inline __attribute__((always_inline)) reader_event_t *room(dchunk_t *c, size_t n_ev,
                                                                  size_t k) {
    if (n_ev + k > c->ev_cap)
        c->ev = xgrow(c->ev, &c->ev_cap, n_ev + k, sizeof *c->ev);
    return c->ev + n_ev;
}

// The walk's state between records: the columns (each a local of its own once record() is
// inlined, not an array), the rows' delta state as hpt_rec_decode keeps it from the chunk's
// bases, and the counts.
typedef struct walk {
    hpt_colr_t tim, stk, adr, fre, siz, tch, oth;
    uint64_t t, addr, prev_free, last_realloc_size;
    // the row bytes the reference would write: a tag byte a record, then every value it copies
    // from a column as it is (all of TIME, STACK and OTHER, most of SIZE and TOUCH: their
    // lengths, the varints being canonical), then below what the values it rewrites (addresses,
    // some sizes, the second touch varint) take as rows instead of as columns
    uint64_t rows;
    size_t n_ev, n_alloc, n_allocs;
    hpt_cols_alloc_t *allocs;
    uint32_t tid;
    bool keep;
} walk_t;

// A record takes at most two values from any one column (ALIGNED: size and alignment; REALLOC:
// two times; FREE: two touch varints; FREE_SIZED: size and alignment), HPT_VARINT_MAX bytes at
// most each: so many records can be read with no look at the columns' ends (get's fast).
static inline size_t fast_records(const walk_t *w) {
    const hpt_colr_t *cols[] = {&w->tim, &w->stk, &w->adr, &w->fre, &w->siz, &w->tch};
    size_t k = SIZE_MAX;
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++) {
        size_t r = (size_t)(cols[i]->end - cols[i]->p) / (2 * HPT_VARINT_MAX);
        k = r < k ? r : k;
    }
    return k;
}

// One record of tag `tag`: its values from the columns, its events into c (when kept). False if
// the chunk is not one the reference would take (the caller gives up on it).
static inline __attribute__((always_inline)) bool record(dchunk_t *c, walk_t *w, uint8_t tag,
                                                         const bool fast, hpt_rec_t *rec) {
    hpt_colr_t *const ct = &w->tim, *const cs = &w->stk, *const ca = &w->adr, *const cf = &w->fre,
                      *const cz = &w->siz, *const cu = &w->tch, *const co = &w->oth;
    uint64_t dt, dt2 = 0, v, stack = 0, size, z, old, old_size, d;
    bool known;
    reader_event_t *e;
    switch (tag) {
    case HPT_REC_MALLOC:
    case HPT_REC_CALLOC:
    case HPT_REC_ALIGNED: {
        uint64_t align = 0;
        if (!get(ct, &dt, fast) || !get(cs, &stack, fast) || !get(cz, &size, fast) ||
            !get(ca, &v, fast))
            return false;
        if (tag == HPT_REC_ALIGNED && !get(cz, &align, fast))
            return false;
        d = hpt_cols_addr_delta(v);
        w->rows += vlen(hpt_zigzag((int64_t)d));
        w->t += dt;
        w->addr += d;
        if (w->n_alloc >= w->n_allocs)
            return false;
        w->allocs[w->n_alloc].addr = w->addr;
        w->allocs[w->n_alloc++].size = size;
        if (!w->keep)
            return true;
        e = room(c, w->n_ev++, 1);
        e->kind = READER_ALLOC;
        e->sub = tag == HPT_REC_MALLOC   ? READER_MALLOC
                 : tag == HPT_REC_CALLOC ? READER_CALLOC
                                         : READER_ALIGNED;
        e->flags = 0;
        e->tid = w->tid;
        e->time_ns = w->t;
        e->stack = stack;
        e->addr = w->addr;
        e->old_addr = 0;
        e->size = size;
        return true;
    }
    case HPT_REC_FREE:
    case HPT_REC_FREE_SIZED:
    case HPT_REC_REALLOC: {
        if (!get(ct, &dt, fast))
            return false;
        if (tag == HPT_REC_REALLOC && (!get(ct, &dt2, fast) || !get(cs, &stack, fast)))
            return false;
        // the block code: a reference to one of the chunk's allocations, or a delta from the
        // previous freed address
        if (!get(cf, &v, fast))
            return false;
        known = !(v & 1);
        if (known) {
            if ((v >> 1) >= w->n_alloc)
                return false; // names an allocation the chunk has not made
            old = w->allocs[w->n_alloc - 1 - (v >> 1)].addr;
            old_size = w->allocs[w->n_alloc - 1 - (v >> 1)].size;
        } else {
            old = w->prev_free + hpt_cols_addr_delta(v >> 1);
            old_size = 0;
        }
        w->prev_free = old;
        w->rows += vlen(hpt_zigzag((int64_t)(old - w->addr)));
        w->addr = old;
        if (tag == HPT_REC_FREE_SIZED) {
            // the named size, relative to the block's when the reference says which
            uint64_t align;
            const uint8_t *at = cz->p;
            if (!get(cz, &z, fast))
                return false;
            size = (known ? old_size : 0) + (uint64_t)hpt_unzigzag(z);
            w->rows += vlen(size) - (uint64_t)(cz->p - at);
            if (!get(cz, &align, fast))
                return false;
            w->t += dt;
            if (!w->keep)
                return true;
            e = room(c, w->n_ev++, 1);
            e->kind = READER_FREE;
            e->touch = 0;
            e->flags = READER_FREE_SIZED;
            e->tid = w->tid;
            e->time_ns = w->t;
            e->stack = 0;
            e->addr = old;
            e->free_align = align;
            e->size = size;
            return true;
        }
        if (tag == HPT_REC_FREE) {
            // the touch varints: v as in rows; the second (not for RESIDENT) relative to the
            // block's size when the reference says which block, else to the count
            if (!get(cu, &v, fast))
                return false;
            const uint64_t touched = (v - 1) >> 2;
            uint64_t nz = touched;
            if (v && ((v - 1) & 3) != HPT_TOUCH_RESIDENT) {
                const uint8_t *at = cu->p;
                if (!get(cu, &z, fast))
                    return false;
                nz = (known ? old_size : touched) + (uint64_t)hpt_unzigzag(z);
                w->rows += vlen(hpt_zigzag((int64_t)(nz - touched))) - (uint64_t)(cu->p - at);
            }
            w->t += dt;
            if (!w->keep)
                return true;
            e = room(c, w->n_ev++, 1);
            e->kind = READER_FREE;
            e->touch = v ? (uint8_t)(1 + ((v - 1) & 3)) : 0;
            e->flags = 0;
            e->tid = w->tid;
            e->time_ns = w->t;
            e->stack = 0;
            e->addr = old;
            e->touched_nz = v ? nz : 0;
            e->touched = v ? touched : 0;
            return true;
        }
        // REALLOC: the size code, then the new address against the old one
        const uint8_t *at = cz->p;
        if (!get(cz, &v, fast))
            return false;
        size = (v & 1) ? w->last_realloc_size + (uint64_t)hpt_unzigzag(v >> 1) : v >> 1;
        w->rows += vlen(size) - (uint64_t)(cz->p - at);
        w->last_realloc_size = size;
        if (!get(ca, &v, fast))
            return false;
        d = hpt_cols_addr_delta(v);
        w->addr = old + d;
        w->rows += vlen(hpt_zigzag((int64_t)d));
        if (w->n_alloc >= w->n_allocs)
            return false;
        w->allocs[w->n_alloc].addr = w->addr;
        w->allocs[w->n_alloc++].size = size;
        w->t += dt; // before the call: the old block's death
        if (w->keep) {
            // two halves, as decode_records makes them (realloc(NULL, n): the new one only)
            e = room(c, w->n_ev, 1 + (old != 0));
            if (old != 0) {
                e->kind = READER_FREE;
                e->touch = 0;
                e->flags = READER_FREE_OF_REALLOC;
                e->tid = w->tid;
                e->time_ns = w->t;
                e->stack = stack;
                e->addr = old;
                e->touched_nz = 0;
                e->touched = 0;
                e++;
                w->n_ev++;
            }
            e->kind = READER_ALLOC;
            e->sub = READER_REALLOC;
            e->flags = 0;
            e->tid = w->tid;
            e->time_ns = w->t + dt2;
            e->stack = stack;
            e->addr = w->addr;
            e->old_addr = old;
            e->size = size;
            w->n_ev++;
        }
        w->t += dt2; // after it returned: the new block's birth
        return true;
    }
    default: {
        // a whole record in OTHER, its tag repeated there; decoded from the rows' state (its
        // time delta counts, no address field of these is a delta)
        const uint8_t *next;
        hpt_dstate_t st = {.time_ns = w->t, .addr = w->addr};
        if (co->p >= co->end || *co->p != tag || tag == HPT_REC_PROCESS ||
            tag == HPT_REC_TRAILER || !(next = hpt_rec_decode(co->p, co->end, &st, rec)))
            return false;
        co->p = next;
        w->rows--; // its tag byte counted twice: in TAG and in OTHER's length
        w->t = st.time_ns;
        w->addr = st.addr;
        c->n_ev = w->n_ev;
        if (!dchunk_record(c, rec))
            return false;
        w->n_ev = c->n_ev;
        return true;
    }
    }
}

// Records at least this many in a row are read without looking at the columns' ends: below it,
// near the end of the shortest column, the per-value checks are cheaper than recounting.
#define FAST_MIN 8u

bool cols_decode(dchunk_t *c, const uint8_t *in, size_t n) {
    hpt_colr_t col[HPT_COLS];
    uint64_t row_bytes;
    if (!hpt_cols_open(in, n, col, &row_bytes) || row_bytes > HPT_CHUNK_MAX_RAW)
        return false;
    const uint8_t *tp = col[HPT_COL_TAG].p, *const tend = col[HPT_COL_TAG].end;
    // one tag a record: the reference decodes exactly n_records of the rows, to their end
    if ((uint64_t)(tend - tp) != c->h.n_records)
        return false;
    // the reference's scratch for the chunk's allocations, of its size (never the limit: an
    // allocation takes at least five row bytes)
    const size_t n_allocs = (size_t)row_bytes / 5 + 1;
    c->col_allocs = xgrow(c->col_allocs, &c->col_allocs_cap, n_allocs, sizeof *c->col_allocs);
    // the block code's previous freed address starts at base_addr (the untranspose's 0)
    walk_t w = {.tim = col[HPT_COL_TIME],
                .stk = col[HPT_COL_STACK],
                .adr = col[HPT_COL_ADDR],
                .fre = col[HPT_COL_FREE],
                .siz = col[HPT_COL_SIZE],
                .tch = col[HPT_COL_TOUCH],
                .oth = col[HPT_COL_OTHER],
                .t = c->h.base_time_ns,
                .addr = c->h.base_addr,
                .prev_free = c->h.base_addr,
                .rows = (uint64_t)(tend - tp),
                .n_ev = c->n_ev,
                .n_allocs = n_allocs,
                .allocs = c->col_allocs,
                .tid = c->h.tid,
                .keep = c->keep};
    for (int i = HPT_COL_TIME; i < HPT_COLS; i++)
        if (i != HPT_COL_ADDR && i != HPT_COL_FREE)
            w.rows += (uint64_t)(col[i].end - col[i].p);
    hpt_rec_t rec;
    memset(&rec, 0, sizeof rec);

    while (tp < tend) {
        size_t k = fast_records(&w);
        if (k > (size_t)(tend - tp))
            k = (size_t)(tend - tp);
        if (k >= FAST_MIN) {
            for (const uint8_t *stop = tp + k; tp < stop; tp++)
                if (!record(c, &w, *tp, true, &rec))
                    return false;
        } else {
            if (!record(c, &w, *tp, false, &rec))
                return false;
            tp++;
        }
    }
    c->n_ev = w.n_ev;
    // every column read to its end (TAG: by the loop)
    if (w.tim.p != w.tim.end || w.stk.p != w.stk.end || w.adr.p != w.adr.end ||
        w.fre.p != w.fre.end || w.siz.p != w.siz.end || w.tch.p != w.tch.end ||
        w.oth.p != w.oth.end)
        return false;
    return w.rows == row_bytes;
}
