// SPDX-License-Identifier: MIT
// Header-only column form of an EVENTS chunk's payload (HPT_CHUNK_COLUMNS,
// docs/trace-format.md#columns): hpt_cols_transpose (records -> columns, the
// shim's drainers) and hpt_cols_untranspose (columns -> the same record bytes,
// the analyzer's reader). Never allocates: callers pass every buffer. The
// untranspose checks every length and index, so it is safe on untrusted bytes.
#ifndef HEAPPROF_FORMAT_HPT_COLUMNS_H
#define HEAPPROF_FORMAT_HPT_COLUMNS_H

#include "hpt_codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// The columns, in payload order. A record's tag byte goes to TAG; its fields to
// the columns below, in record order (docs/trace-format.md#columns says how
// each is coded).
enum hpt_col {
    HPT_COL_TAG,   // one tag byte per record
    HPT_COL_TIME,  // dt of MALLOC, CALLOC, ALIGNED, FREE, REALLOC; then REALLOC's
                   // dt2
    HPT_COL_STACK, // stack ids of allocations
    HPT_COL_ADDR,  // allocations' addresses (REALLOC: the new one), as an address
                   // delta
    HPT_COL_FREE,  // FREE's address and REALLOC's old address: a reference or a
                   // delta
    HPT_COL_SIZE,  // sizes (ALIGNED: then the alignment); REALLOC: a size code
    HPT_COL_TOUCH, // FREE's touch varints, the second relative to the freed
                   // block's size
    HPT_COL_OTHER, // every other record whole, tag byte included
    HPT_COLS
};

// Bytes before the columns at most: n_cols, row_bytes and HPT_COLS lengths.
#define HPT_COLS_HDR_MAX ((2 + HPT_COLS) * HPT_VARINT_MAX)

// The transposer's memory of this chunk's allocations: a direct-mapped cache of
// address -> (ordinal, size), valid for entries of the current chunk (epoch).
// Lossy by design: a free whose block fell out of it is coded as a delta
// instead. A chunk uses the first 2^bits slots, by its size (hpt_cols_enc_begin):
// the table is 768 KiB, mapped zeroed, and a short process's one small chunk
// scattered its few hundred blocks over ~150 of its pages.
#define HPT_COLS_SLOTS (1u << 15)
#define HPT_COLS_SLOT_BITS_MIN 8
typedef struct hpt_cols_slot {
    uint64_t addr, size;
    uint32_t ordinal, epoch;
} hpt_cols_slot_t;
typedef struct hpt_cols_enc {
    uint32_t epoch;
    uint32_t shift; // 64 - the chunk's slot bits
    hpt_cols_slot_t slot[HPT_COLS_SLOTS];
} hpt_cols_enc_t;

// Starts a chunk of at most `bytes` of input: a new epoch (the slots of earlier
// chunks no longer count), and as many slots as one per 8 bytes of it, between
// 2^HPT_COLS_SLOT_BITS_MIN and HPT_COLS_SLOTS (at least two per allocation: no
// record of one is under 16 bytes).
static inline void hpt_cols_enc_begin(hpt_cols_enc_t *enc, size_t bytes) {
    if (++enc->epoch == 0) { // wrapped: old entries could look current
        memset(enc->slot, 0, sizeof enc->slot);
        enc->epoch = 1;
    }
    unsigned bits = HPT_COLS_SLOT_BITS_MIN;
    while ((1u << bits) < HPT_COLS_SLOTS && ((size_t)1 << bits) < bytes / 8)
        bits++;
    enc->shift = 64 - bits;
}

// An untransposer's record of one allocation of the chunk (index: its ordinal).
typedef struct hpt_cols_alloc {
    uint64_t addr, size;
} hpt_cols_alloc_t;

// An address delta: zigzag(d >> 4) << 1 when d is a multiple of 16 (allocators
// hand out 16-byte aligned blocks), else zigzag(d) << 1 | 1. False if d does
// not fit either form.
static inline bool hpt_cols_addr_code(int64_t d, uint64_t *v) {
    uint64_t z = (d & 15) ? hpt_zigzag(d) : hpt_zigzag(d >> 4);
    if (z >> 63)
        return false;
    *v = (d & 15) ? z << 1 | 1 : z << 1;
    return true;
}
static inline uint64_t hpt_cols_addr_delta(uint64_t v) {
    uint64_t d = (uint64_t)hpt_unzigzag(v >> 1);
    return (v & 1) ? d : d << 4;
}

// The slot of addr in the current chunk (its top bits of a multiplicative hash).
static inline uint32_t hpt_cols_hash(const hpt_cols_enc_t *enc, uint64_t addr) {
    uint64_t h = (addr >> 4) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> enc->shift);
}

// A column being written: [p, end) of its region in out.
typedef struct hpt_colw {
    uint8_t *p, *end;
} hpt_colw_t;

static inline bool hpt_colw_put(hpt_colw_t *w, uint64_t v) {
    if (w->end - w->p < HPT_VARINT_MAX)
        return false;
    w->p = hpt_put_varint(w->p, v);
    return true;
}

static inline bool hpt_colw_bytes(hpt_colw_t *w, const uint8_t *s, size_t n) {
    if ((size_t)(w->end - w->p) < n)
        return false;
    memcpy(w->p, s, n);
    w->p += n;
    return true;
}

// Bytes of out that hpt_cols_transpose needs for row_bytes of records.
static inline size_t hpt_cols_bound(size_t row_bytes) {
    return HPT_COLS_HDR_MAX + (size_t)HPT_COLS * (row_bytes + 2 * HPT_VARINT_MAX);
}

// What a transpose consumed: the rows it took (whole records), how many records
// and heap events they hold, and the delta state after them relative to the
// chunk's base (add it to the base for the next chunk's).
typedef struct hpt_cols_info {
    size_t row_bytes;
    uint32_t n_records, n_events;
    hpt_dstate_t end;
} hpt_cols_info_t;

// Longest record the column form takes whole (a MODULE_LOAD's path and build id,
// a STACK of HPT_MAX_FRAMES frames): a chunk's rows stop at most this far past
// max_bytes.
#define HPT_COLS_REC_MAX 8192u

// Transposes the records at rows (row_bytes available) into the columns of one
// chunk at out, taking whole records while they stay within max_bytes (at least
// one); out must hold hpt_cols_bound(min(row_bytes, max_bytes +
// HPT_COLS_REC_MAX)). Returns the payload's size and fills *info, or 0 if a
// record does not decode, is of a kind the column form does not carry (PROCESS,
// TRAILER, unknown tags) or holds a value the codes cannot express: the
// caller then writes the rows as they are. enc must stay with the caller across
// calls (its epoch separates chunks). Hot path of the drainers: one pass (the
// only decode of each record), no allocation.
static inline size_t hpt_cols_transpose(const uint8_t *rows, size_t row_bytes, size_t max_bytes,
                                        uint8_t *out, size_t out_cap, hpt_cols_enc_t *enc,
                                        hpt_cols_info_t *info) {
    const size_t take = row_bytes < max_bytes + HPT_COLS_REC_MAX ? row_bytes
                                                                  : max_bytes + HPT_COLS_REC_MAX;
    const size_t region = take + 2 * HPT_VARINT_MAX;
    if (out_cap < hpt_cols_bound(take))
        return 0;
    hpt_cols_enc_begin(enc, take);
    hpt_colw_t w[HPT_COLS];
    uint8_t *base = out + HPT_COLS_HDR_MAX;
    for (int i = 0; i < HPT_COLS; i++) {
        w[i].p = base + (size_t)i * region;
        w[i].end = w[i].p + region;
    }
    // addresses relative to the chunk's base: only differences are written
    hpt_dstate_t st = {0};
    hpt_rec_t r;
    uint64_t prev_free = 0, last_realloc_size = 0;
    uint32_t n_allocs = 0, n_records = 0, n_events = 0;
    const uint8_t *p = rows, *end = rows + row_bytes;
    while (p < end) {
        const uint64_t t0 = st.time_ns, a0 = st.addr;
        const hpt_dstate_t before = st;
        const uint8_t *next = hpt_rec_decode(p, end, &st, &r);
        if (!next)
            return 0;
        if (p != rows && (size_t)(next - rows) > max_bytes) {
            st = before; // this record starts the next chunk
            break;
        }
        if ((size_t)(next - rows) > take || !hpt_colw_bytes(&w[HPT_COL_TAG], p, 1))
            return 0;
        n_records++;
        n_events += (r.tag <= HPT_REC_REALLOC && r.tag >= HPT_REC_MALLOC) ||
                    r.tag == HPT_REC_FREE_SIZED;
        uint64_t v, old = 0, old_size = 0;
        bool ok = true, known = false, is_alloc = false;
        switch (r.tag) {
        case HPT_REC_FREE:
        case HPT_REC_FREE_SIZED:
        case HPT_REC_REALLOC:
            old = r.tag == HPT_REC_REALLOC ? r.old_addr : r.addr;
            ok = hpt_colw_put(&w[HPT_COL_TIME], r.time_ns - t0);
            if (r.tag == HPT_REC_REALLOC)
                ok = ok && hpt_colw_put(&w[HPT_COL_TIME], r.time2_ns - r.time_ns);
            {
                const hpt_cols_slot_t *s = &enc->slot[hpt_cols_hash(enc, old)];
                uint64_t delta;
                // the code shifted once more must keep its top bit
                if (!hpt_cols_addr_code((int64_t)(old - prev_free), &delta) || delta >> 63)
                    return 0;
                delta = delta << 1 | 1;
                known = s->epoch == enc->epoch && s->addr == old;
                // a reference names the block by its allocation: n_allocs - 1 - ordinal
                // back
                v = known ? (uint64_t)(n_allocs - 1 - s->ordinal) << 1 : delta;
                old_size = s->size;
                if (delta >> 63 || (known && v > delta))
                    known = false, v = delta;
                ok = ok && hpt_colw_put(&w[HPT_COL_FREE], v);
                prev_free = old;
            }
            if (r.tag == HPT_REC_FREE_SIZED) {
                // the size the free named, against the block's when the reference says which
                // block it is (mostly 0: they agree), then the alignment
                int64_t d = (int64_t)(r.size - (known ? old_size : 0));
                ok = ok && hpt_colw_put(&w[HPT_COL_SIZE], hpt_zigzag(d)) &&
                     hpt_colw_put(&w[HPT_COL_SIZE], r.align);
                break;
            }
            if (r.tag == HPT_REC_FREE) {
                // the touch varints, the second (FILL*: non-zero minus differing bytes)
                // made relative to the block's size when the reference says which block
                // it is
                ok = ok && hpt_colw_put(&w[HPT_COL_TOUCH],
                                        r.touch ? ((r.touched << 2) | (r.touch - 1u)) + 1 : 0);
                if (r.touch && r.touch - 1u != HPT_TOUCH_RESIDENT) {
                    int64_t d = (int64_t)(r.touched_nz - (known ? old_size : r.touched));
                    ok = ok && hpt_colw_put(&w[HPT_COL_TOUCH], hpt_zigzag(d));
                }
                break;
            }
            ok = ok && hpt_colw_put(&w[HPT_COL_STACK], r.stack);
            // a realloc's size: plain or as a change from the previous realloc's (a
            // string grown a byte at a time), whichever is smaller
            v = hpt_zigzag((int64_t)(r.size - last_realloc_size));
            last_realloc_size = r.size;
            if ((v < r.size ? v : r.size) >> 63)
                return 0;
            ok = ok && hpt_colw_put(&w[HPT_COL_SIZE], v < r.size ? v << 1 | 1 : r.size << 1);
            // the new address against the old one, as in the record
            if (!hpt_cols_addr_code((int64_t)(r.addr - old), &v))
                return 0;
            ok = ok && hpt_colw_put(&w[HPT_COL_ADDR], v);
            is_alloc = true;
            break;
        case HPT_REC_MALLOC:
        case HPT_REC_CALLOC:
        case HPT_REC_ALIGNED:
            ok = hpt_colw_put(&w[HPT_COL_TIME], r.time_ns - t0) &&
                 hpt_colw_put(&w[HPT_COL_STACK], r.stack) && hpt_colw_put(&w[HPT_COL_SIZE], r.size);
            if (r.tag == HPT_REC_ALIGNED)
                ok = ok && hpt_colw_put(&w[HPT_COL_SIZE], r.align);
            if (!hpt_cols_addr_code((int64_t)(r.addr - a0), &v))
                return 0;
            ok = ok && hpt_colw_put(&w[HPT_COL_ADDR], v);
            is_alloc = true;
            break;
        case HPT_REC_STACK:
        case HPT_REC_THREAD_START:
        case HPT_REC_THREAD_END:
        case HPT_REC_MODULE_LOAD:
        case HPT_REC_MODULE_UNLOAD:
        case HPT_REC_CPU_SAMPLE:
        case HPT_REC_CPU_INFO:
        case HPT_REC_TOUCH_LIVE: // its address is absolute: no address state to carry
        case HPT_REC_ALLOCATOR: // found in a library loaded by dlopen (docs/trace-format.md#allocators)
            ok = hpt_colw_bytes(&w[HPT_COL_OTHER], p, (size_t)(next - p));
            break;
        default:
            return 0;
        }
        if (!ok)
            return 0;
        if (is_alloc) {
            hpt_cols_slot_t *s = &enc->slot[hpt_cols_hash(enc, r.addr)];
            s->addr = r.addr;
            s->size = r.size;
            s->ordinal = n_allocs++;
            s->epoch = enc->epoch;
        }
        p = next;
    }
    // the table, then the columns moved down behind it (regions only move towards
    // out)
    info->row_bytes = (size_t)(p - rows);
    info->n_records = n_records;
    info->n_events = n_events;
    info->end = st;
    uint8_t *q = hpt_put_varint(out, HPT_COLS);
    q = hpt_put_varint(q, info->row_bytes);
    for (int i = 0; i < HPT_COLS; i++)
        q = hpt_put_varint(q, (uint64_t)(w[i].p - (base + (size_t)i * region)));
    for (int i = 0; i < HPT_COLS; i++) {
        size_t len = (size_t)(w[i].p - (base + (size_t)i * region));
        memmove(q, base + (size_t)i * region, len);
        q += len;
    }
    return (size_t)(q - out);
}

// A column being read.
typedef struct hpt_colr {
    const uint8_t *p, *end;
} hpt_colr_t;

static inline bool hpt_colr_get(hpt_colr_t *c, uint64_t *v) {
    const uint8_t *q = hpt_get_varint(c->p, c->end, v);
    if (!q)
        return false;
    c->p = q;
    return true;
}

// Reads a column payload's table: the row bytes it stands for and its records
// (one tag each). False if the table is damaged or its lengths do not add up to
// n exactly.
static inline bool hpt_cols_open(const uint8_t *in, size_t n, hpt_colr_t col[HPT_COLS],
                                 uint64_t *row_bytes) {
    const uint8_t *p = in, *end = in + n;
    uint64_t k, len[HPT_COLS];
    if (!(p = hpt_get_varint(p, end, &k)) || k != HPT_COLS ||
        !(p = hpt_get_varint(p, end, row_bytes)))
        return false;
    for (int i = 0; i < HPT_COLS; i++)
        if (!(p = hpt_get_varint(p, end, &len[i])))
            return false;
    for (int i = 0; i < HPT_COLS; i++) {
        if (len[i] > (uint64_t)(end - p))
            return false;
        col[i].p = p;
        col[i].end = p += len[i];
    }
    return p == end;
}

// Rebuilds the records of a column payload [in, in + n) into rows (capacity
// rows_cap). allocs holds n_allocs entries of scratch (one per record is always
// enough). Returns the row bytes written, which the payload's table says they
// are, or 0 if the payload is damaged: a table that does not add up, a column
// read past its end or not to its end, a reference to no allocation, a record
// that does not fit rows_cap. Never reads or writes out of bounds.
static inline size_t hpt_cols_untranspose(const uint8_t *in, size_t n, uint8_t *rows,
                                          size_t rows_cap, hpt_cols_alloc_t *allocs,
                                          size_t n_allocs) {
    hpt_colr_t c[HPT_COLS];
    uint64_t row_bytes;
    if (!hpt_cols_open(in, n, c, &row_bytes) || row_bytes > rows_cap)
        return 0;
    uint8_t *o = rows, *const oend = rows + row_bytes;
    uint64_t addr = 0, prev_free = 0, last_realloc_size = 0;
    size_t n_alloc = 0;
    while (c[HPT_COL_TAG].p < c[HPT_COL_TAG].end) {
        const uint8_t tag = *c[HPT_COL_TAG].p++;
        if ((tag < HPT_REC_MALLOC || tag > HPT_REC_REALLOC) && tag != HPT_REC_FREE_SIZED) {
            // a whole record in OTHER, its tag repeated there
            hpt_colr_t *oc = &c[HPT_COL_OTHER];
            hpt_dstate_t st = {0};
            hpt_rec_t r;
            const uint8_t *next;
            if (oc->p >= oc->end || *oc->p != tag || tag == HPT_REC_PROCESS ||
                tag == HPT_REC_TRAILER || !(next = hpt_rec_decode(oc->p, oc->end, &st, &r)) ||
                (size_t)(next - oc->p) > (size_t)(oend - o))
                return 0;
            memcpy(o, oc->p, (size_t)(next - oc->p));
            o += next - oc->p;
            oc->p = next;
            continue;
        }
        // the record is built aside (tag and at most six varints), then copied if
        // it fits
        uint8_t tmp[1 + 6 * HPT_VARINT_MAX], *t = tmp;
        uint64_t dt, v, z, stack, size;
        *t++ = tag;
        if (!hpt_colr_get(&c[HPT_COL_TIME], &dt))
            return 0;
        t = hpt_put_varint(t, dt);
        if (tag == HPT_REC_FREE || tag == HPT_REC_FREE_SIZED || tag == HPT_REC_REALLOC) {
            if (tag == HPT_REC_REALLOC) {
                if (!hpt_colr_get(&c[HPT_COL_TIME], &dt) ||
                    !hpt_colr_get(&c[HPT_COL_STACK], &stack))
                    return 0;
                t = hpt_put_varint(t, dt);
                t = hpt_put_varint(t, stack);
            }
            if (!hpt_colr_get(&c[HPT_COL_FREE], &v))
                return 0;
            uint64_t old, old_size = 0;
            const bool known = !(v & 1);
            if (v & 1) {
                old = prev_free + hpt_cols_addr_delta(v >> 1);
            } else {
                if ((v >> 1) >= n_alloc)
                    return 0; // names an allocation the chunk has not made
                old = allocs[n_alloc - 1 - (v >> 1)].addr;
                old_size = allocs[n_alloc - 1 - (v >> 1)].size;
            }
            prev_free = old;
            t = hpt_put_varint(t, hpt_zigzag((int64_t)(old - addr)));
            addr = old;
            if (tag == HPT_REC_FREE_SIZED) {
                // the named size, relative to the block's when the reference says which
                if (!hpt_colr_get(&c[HPT_COL_SIZE], &z) || !hpt_colr_get(&c[HPT_COL_SIZE], &v))
                    return 0;
                t = hpt_put_varint(t, (known ? old_size : 0) + (uint64_t)hpt_unzigzag(z));
                t = hpt_put_varint(t, v);
                goto copy;
            }
            if (tag == HPT_REC_FREE) {
                if (!hpt_colr_get(&c[HPT_COL_TOUCH], &v))
                    return 0;
                t = hpt_put_varint(t, v);
                if (v && ((v - 1) & 3) != HPT_TOUCH_RESIDENT) {
                    if (!hpt_colr_get(&c[HPT_COL_TOUCH], &z))
                        return 0;
                    // known block: z is relative to its size, else to the first count
                    uint64_t nz = (known ? old_size : (v - 1) >> 2) + (uint64_t)hpt_unzigzag(z);
                    t = hpt_put_varint(t, hpt_zigzag((int64_t)(nz - ((v - 1) >> 2))));
                }
                goto copy;
            }
            if (!hpt_colr_get(&c[HPT_COL_SIZE], &v))
                return 0;
            size = (v & 1) ? last_realloc_size + (uint64_t)hpt_unzigzag(v >> 1) : v >> 1;
            last_realloc_size = size;
        } else {
            if (!hpt_colr_get(&c[HPT_COL_STACK], &stack) || !hpt_colr_get(&c[HPT_COL_SIZE], &size))
                return 0;
            t = hpt_put_varint(t, stack);
        }
        // an allocation's new address
        if (!hpt_colr_get(&c[HPT_COL_ADDR], &v))
            return 0;
        uint64_t a = addr + hpt_cols_addr_delta(v);
        t = hpt_put_varint(t, hpt_zigzag((int64_t)(a - addr)));
        addr = a;
        t = hpt_put_varint(t, size);
        if (tag == HPT_REC_ALIGNED) {
            if (!hpt_colr_get(&c[HPT_COL_SIZE], &v))
                return 0;
            t = hpt_put_varint(t, v);
        }
        if (n_alloc >= n_allocs)
            return 0;
        allocs[n_alloc].addr = a;
        allocs[n_alloc++].size = size;
    copy:
        if ((size_t)(t - tmp) > (size_t)(oend - o))
            return 0;
        memcpy(o, tmp, (size_t)(t - tmp));
        o += t - tmp;
    }
    for (int i = 0; i < HPT_COLS; i++)
        if (c[i].p != c[i].end)
            return 0;
    return o == oend ? (size_t)row_bytes : 0;
}

#endif
