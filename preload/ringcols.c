// SPDX-License-Identifier: MIT
// Ring entries -> a chunk's columns or rows. The columns are hpt_cols_transpose's, field for
// field (the same codes, the same address cache), but from absolute values: no varint is
// decoded for a heap event, and the rows' length, which the columns' table must state, is
// summed from the lengths their varints would have.
#include "ringcols.h"

#include "ringent.h"

#include <string.h>

// hp_re_read_fixed inlined here makes GCC 12 see hp_rent_t fields read that it cannot prove were
// filled (it fills those of the kind it met, and the code below reads only those): a false
// -Wmaybe-uninitialized, silenced for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Bytes of v as a varint (hpt_put_varint), by its top bit's index: a table, since the division
// by 7 cost ~10 instructions a field (50 an event on c_churn).
static const uint8_t vlen_by_bit[64] = {
    1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 10,
};
static inline size_t vlen(uint64_t v) {
    return vlen_by_bit[63 ^ __builtin_clzll(v | 1)];
}

static inline bool is_event(uint8_t tag) {
    return (tag >= HPT_REC_MALLOC && tag <= HPT_REC_REALLOC) || tag == HPT_REC_FREE_SIZED;
}

// The trace record at p, as the rows want it: its bytes (*rec, *len), moved into scratch where
// its time counts from another time than the rows' (*w_time). Advances *w_time and *raw_time
// past it. Returns the byte after it in the ring, or NULL if it does not decode.
static const uint8_t *raw_record(const uint8_t *p, const uint8_t *end, uint64_t *w_time,
                                 uint64_t *raw_time, uint8_t *scratch, const uint8_t **rec,
                                 size_t *len) {
    hpt_dstate_t st = {.time_ns = *raw_time};
    hpt_rec_t r;
    const uint8_t *next = hpt_rec_decode(p, end, &st, &r);
    if (!next)
        return NULL;
    *rec = p;
    *len = (size_t)(next - p);
    switch (r.tag) {
    case HPT_REC_THREAD_START:
    case HPT_REC_THREAD_END:
    case HPT_REC_MODULE_LOAD:
    case HPT_REC_MODULE_UNLOAD:
    case HPT_REC_CPU_SAMPLE:
    case HPT_REC_TOUCH_LIVE:
        break;
    default:
        return next; // no time: as it stands
    }
    if (*raw_time != *w_time) {
        // the delta after the tag, against the rows' time instead
        uint64_t dummy, d = st.time_ns - *w_time;
        const uint8_t *rest = hpt_get_varint(p + 1, next, &dummy);
        if (r.tag == HPT_REC_CPU_SAMPLE)
            d = hpt_zigzag((int64_t)d);
        else if (st.time_ns < *w_time)
            return NULL; // times go forward in a thread's stream
        if (!rest || (size_t)(next - rest) + 1 + HPT_VARINT_MAX > HP_RC_SCRATCH)
            return NULL;
        uint8_t *q = scratch;
        *q++ = r.tag;
        q = hpt_put_varint(q, d);
        memcpy(q, rest, (size_t)(next - rest));
        q += next - rest;
        *rec = scratch;
        *len = (size_t)(q - scratch);
    }
    *w_time = *raw_time = st.time_ns;
    return next;
}

// Entries the address cache's slots are asked for ahead of (rc_ahead). Every event reads or
// writes the slot of its address, at random in the cache's 768 KiB (HPT_COLS_SLOTS of 24
// bytes): more than a second-level cache of 512 KiB holds, where the slot's load took 29% of
// write_records' samples (perf, c_churn). 16 was no better than 8 there.
#define RC_AHEAD 8u

// Asks for the cache slots of the entry at p (the freed block's and the new block's), and
// returns the entry after it; NULL where p is a trace record (its varint length is not known
// here) or runs past end.
static inline __attribute__((always_inline)) const uint8_t *
rc_ahead(const uint8_t *p, const uint8_t *end, const hpt_cols_enc_t *enc) {
    if (p >= end || *p < HP_RE_FIRST)
        return NULL;
    const size_t bytes = hp_re_bytes(*p);
    if (!bytes || (size_t)(end - p) < bytes)
        return NULL;
    if (*p == HP_RE_REALLOC) {
        __builtin_prefetch(&enc->slot[hpt_cols_hash(enc, hp_re_ld64(p + 21))]);
        __builtin_prefetch(&enc->slot[hpt_cols_hash(enc, hp_re_ld64(p + 29))]);
    } else if (*p < HP_RE_TBASE) {
        __builtin_prefetch(&enc->slot[hpt_cols_hash(enc, hp_re_ld64(p + 5))]);
    }
    return p + bytes;
}

// Asks for the slots of up to RC_AHEAD more entries from la (*la_n counts the entries asked for
// past the one being written), stopping at a trace record or the end; returns where it
// stopped. Called once the count falls below RC_AHEAD, so a walk covers several entries: one
// entry per event cost ~39 instructions an event with its loop control (callgrind, cpp_mixed).
// This and the room checks below took the drain from 448 to 423 instructions an event on
// c_churn, 466 -> 428 on cpp_mixed, 402 -> 371 on rust_vec_growth (session 34).
static inline __attribute__((always_inline)) const uint8_t *
rc_ahead_batch(const uint8_t *la, const uint8_t *end, const hpt_cols_enc_t *enc, unsigned *la_n) {
    for (unsigned j = 0; j < RC_AHEAD; j++) {
        const uint8_t *nx = rc_ahead(la, end, enc);
        if (!nx)
            break;
        la = nx;
        ++*la_n;
    }
    return la;
}

// Entries written between two checks of the columns' room: a heap entry puts at most
// RC_PUTS_MAX varints into any one column (a REALLOC's two times, an ALIGNED's size and
// alignment, a FREE's two touch varints) and one TAG byte, so RC_ROOM_EVERY entries need at
// most this much room in each column, and the puts between two checks need none of their own
// (a check on every put was ~21 instructions an event, callgrind on cpp_mixed).
#define RC_ROOM_EVERY 32u
#define RC_PUTS_MAX 2u
#define RC_ROOM_BYTES ((size_t)RC_ROOM_EVERY * RC_PUTS_MAX * HPT_VARINT_MAX)

static inline bool rc_room(const hpt_colw_t *w) {
    for (int i = 0; i < HPT_COLS; i++)
        if ((size_t)(w[i].end - w[i].p) < RC_ROOM_BYTES)
            return false;
    return true;
}

// A varint into a column whose room rc_room has checked.
static inline void rc_put(hpt_colw_t *w, uint64_t v) {
    w->p = hpt_put_varint(w->p, v);
}

size_t hp_rc_columns(const uint8_t *in, size_t n, size_t max_bytes, uint8_t *out, size_t out_cap,
                     hpt_cols_enc_t *enc, uint8_t *scratch, hp_rc_pos_t *pos,
                     hp_rc_info_t *info) {
    if (out_cap < HPT_COLS_HDR_MAX + (size_t)HPT_COLS * 4 * HPT_VARINT_MAX)
        return 0;
    const size_t region = (out_cap - HPT_COLS_HDR_MAX) / HPT_COLS;
    hpt_cols_enc_begin(enc, n);
    hpt_colw_t w[HPT_COLS];
    uint8_t *base = out + HPT_COLS_HDR_MAX;
    for (int i = 0; i < HPT_COLS; i++) {
        w[i].p = base + (size_t)i * region;
        w[i].end = w[i].p + region;
    }
    uint64_t t_prev = pos->w.time_ns, a_prev = pos->w.addr, raw_time = pos->raw_time;
    uint64_t t_hi = pos->t_hi;
    // the untranspose starts its free addresses at the chunk's base (0 there, relative)
    uint64_t prev_free = a_prev, last_realloc_size = 0;
    uint32_t n_allocs = 0, n_records = 0, n_events = 0;
    size_t rows = 0;
    const uint8_t *p = in, *end = in + n;
    const uint8_t *la = p; // the next entry to ask the slots of, la_n entries past p
    unsigned la_n = 0, room_n = 0; // heap entries that may still be written unchecked
    while (p < end) {
        hp_rent_t e;
        const uint8_t *next;
        // a batch more once fewer than RC_AHEAD are asked for; past a trace record the
        // lookahead stopped at, on from p again
        la_n -= la_n > 0;
        if (la <= p) {
            la = p;
            la_n = 0;
        }
        if (la_n < RC_AHEAD)
            la = rc_ahead_batch(la, end, enc, &la_n);
        if (*p < HP_RE_FIRST) {
            uint64_t wt = t_prev, rt = raw_time;
            const uint8_t *rec;
            size_t len;
            if (!(next = raw_record(p, end, &wt, &rt, scratch, &rec, &len)))
                return 0;
            if (rows && rows + len > max_bytes)
                break;
            switch (*p) {
            case HPT_REC_STACK:
            case HPT_REC_THREAD_START:
            case HPT_REC_THREAD_END:
            case HPT_REC_MODULE_LOAD:
            case HPT_REC_MODULE_UNLOAD:
            case HPT_REC_CPU_SAMPLE:
            case HPT_REC_CPU_INFO:
            case HPT_REC_TOUCH_LIVE:
            case HPT_REC_ALLOCATOR:
                break;
            default:
                return 0; // the column form does not carry it
            }
            if (!hpt_colw_bytes(&w[HPT_COL_TAG], p, 1) ||
                !hpt_colw_bytes(&w[HPT_COL_OTHER], rec, len))
                return 0;
            rows += len;
            n_records++;
            t_prev = wt;
            raw_time = rt;
            p = next;
            room_n = 0; // it took TAG's room, which the last check counted for heap entries
            continue;
        }
        if (!(next = hp_re_read_fixed(p, end, t_hi, &e)))
            return 0;
        if (e.tag >= HP_RE_FIRST) { // TBASE or THI
            if (e.tag == HP_RE_TBASE)
                raw_time = e.t;
            else
                t_hi = e.t;
            p = next;
            continue;
        }
        if (!room_n) {
            if (!rc_room(w))
                return 0; // out of room: the caller writes rows
            room_n = RC_ROOM_EVERY;
        }
        room_n--;
        const uint64_t dt = e.t - t_prev;
        uint64_t v, old = 0, old_size = 0;
        bool known = false;
        size_t len;
        switch (e.tag) {
        case HPT_REC_MALLOC:
        case HPT_REC_CALLOC:
        case HPT_REC_ALIGNED:
            len = 1 + vlen(dt) + vlen(e.stack) + vlen(hpt_zigzag((int64_t)(e.addr - a_prev))) +
                  vlen(e.size) + (e.tag == HPT_REC_ALIGNED ? vlen(e.align) : 0);
            if (rows && rows + len > max_bytes)
                goto cut;
            if (!hpt_cols_addr_code((int64_t)(e.addr - a_prev), &v))
                return 0;
            rc_put(&w[HPT_COL_TIME], dt);
            rc_put(&w[HPT_COL_STACK], e.stack);
            rc_put(&w[HPT_COL_SIZE], e.size);
            if (e.tag == HPT_REC_ALIGNED)
                rc_put(&w[HPT_COL_SIZE], e.align);
            rc_put(&w[HPT_COL_ADDR], v);
            t_prev = e.t;
            break;
        default: // FREE, FREE_SIZED, REALLOC
            old = e.tag == HPT_REC_REALLOC ? e.old : e.addr;
            len = 1 + vlen(dt) + vlen(hpt_zigzag((int64_t)(old - a_prev)));
            if (e.tag == HPT_REC_FREE) {
                if (!e.touch) {
                    len += 1;
                } else {
                    len += vlen(((e.touched << 2) | (e.touch - 1u)) + 1);
                    if (e.touch - 1u != HPT_TOUCH_RESIDENT)
                        len += vlen(hpt_zigzag((int64_t)(e.nz - e.touched)));
                }
            } else if (e.tag == HPT_REC_FREE_SIZED) {
                len += vlen(e.size) + vlen(e.align);
            } else {
                len += vlen(e.t2 - e.t) + vlen(e.stack) +
                       vlen(hpt_zigzag((int64_t)(e.addr - old))) + vlen(e.size);
            }
            if (rows && rows + len > max_bytes)
                goto cut;
            {
                const hpt_cols_slot_t *s = &enc->slot[hpt_cols_hash(enc, old)];
                uint64_t delta;
                // the code shifted once more must keep its top bit
                if (!hpt_cols_addr_code((int64_t)(old - prev_free), &delta) || delta >> 63)
                    return 0;
                delta = delta << 1 | 1;
                known = s->epoch == enc->epoch && s->addr == old;
                // a reference names the block by its allocation: n_allocs - 1 - ordinal back
                v = known ? (uint64_t)(n_allocs - 1 - s->ordinal) << 1 : delta;
                old_size = s->size;
                if (delta >> 63 || (known && v > delta))
                    known = false, v = delta;
            }
            if (e.tag == HPT_REC_REALLOC) {
                uint64_t size_code, addr_code;
                uint64_t z = hpt_zigzag((int64_t)(e.size - last_realloc_size));
                if ((z < e.size ? z : e.size) >> 63 ||
                    !hpt_cols_addr_code((int64_t)(e.addr - old), &addr_code))
                    return 0;
                size_code = z < e.size ? z << 1 | 1 : e.size << 1;
                rc_put(&w[HPT_COL_TIME], dt);
                rc_put(&w[HPT_COL_TIME], e.t2 - e.t);
                rc_put(&w[HPT_COL_FREE], v);
                rc_put(&w[HPT_COL_STACK], e.stack);
                rc_put(&w[HPT_COL_SIZE], size_code);
                rc_put(&w[HPT_COL_ADDR], addr_code);
                last_realloc_size = e.size;
                t_prev = e.t2;
            } else {
                rc_put(&w[HPT_COL_TIME], dt);
                rc_put(&w[HPT_COL_FREE], v);
                if (e.tag == HPT_REC_FREE_SIZED) {
                    int64_t d = (int64_t)(e.size - (known ? old_size : 0));
                    rc_put(&w[HPT_COL_SIZE], hpt_zigzag(d));
                    rc_put(&w[HPT_COL_SIZE], e.align);
                } else {
                    rc_put(&w[HPT_COL_TOUCH],
                           e.touch ? ((e.touched << 2) | (e.touch - 1u)) + 1 : 0);
                    if (e.touch && e.touch - 1u != HPT_TOUCH_RESIDENT) {
                        int64_t d = (int64_t)(e.nz - (known ? old_size : e.touched));
                        rc_put(&w[HPT_COL_TOUCH], hpt_zigzag(d));
                    }
                }
                t_prev = e.t;
            }
            prev_free = old;
            break;
        }
        *w[HPT_COL_TAG].p++ = e.tag;
        if (e.tag != HPT_REC_FREE && e.tag != HPT_REC_FREE_SIZED) { // a new block
            hpt_cols_slot_t *s = &enc->slot[hpt_cols_hash(enc, e.addr)];
            s->addr = e.addr;
            s->size = e.size;
            s->ordinal = n_allocs++;
            s->epoch = enc->epoch;
        }
        a_prev = e.addr;
        raw_time = t_prev;
        rows += len;
        n_records++;
        n_events++;
        p = next;
    }
cut:
    if (!n_records && p < end)
        return 0; // nothing fit (cannot be: the first record is always taken)
    info->in_bytes = (size_t)(p - in);
    info->row_bytes = rows;
    info->n_records = n_records;
    info->n_events = n_events;
    pos->w.time_ns = t_prev;
    pos->w.addr = a_prev;
    pos->raw_time = raw_time;
    pos->t_hi = t_hi;
    // the table, then the columns moved down behind it (regions only move towards out)
    uint8_t *q = hpt_put_varint(out, HPT_COLS);
    q = hpt_put_varint(q, rows);
    for (int i = 0; i < HPT_COLS; i++)
        q = hpt_put_varint(q, (uint64_t)(w[i].p - (base + (size_t)i * region)));
    for (int i = 0; i < HPT_COLS; i++) {
        size_t len = (size_t)(w[i].p - (base + (size_t)i * region));
        memmove(q, base + (size_t)i * region, len);
        q += len;
    }
    return (size_t)(q - out);
}

bool hp_rc_rows(const uint8_t *in, size_t n, size_t max_bytes, uint8_t *out, size_t out_cap,
                uint8_t *scratch, hp_rc_pos_t *pos, hp_rc_info_t *info) {
    uint64_t t_prev = pos->w.time_ns, a_prev = pos->w.addr, raw_time = pos->raw_time;
    uint64_t t_hi = pos->t_hi;
    uint32_t n_records = 0, n_events = 0;
    size_t rows = 0;
    const uint8_t *p = in, *end = in + n;
    while (p < end) {
        uint8_t buf[1 + 7 * HPT_VARINT_MAX];
        const uint8_t *rec = buf, *next;
        size_t len;
        uint64_t wt = t_prev, at = a_prev, rt = raw_time;
        hp_rent_t e;
        if (*p < HP_RE_FIRST) {
            if (!(next = raw_record(p, end, &wt, &rt, scratch, &rec, &len)))
                return false;
            e.tag = *p;
        } else {
            if (!(next = hp_re_read_fixed(p, end, t_hi, &e)))
                return false;
            if (e.tag >= HP_RE_FIRST) { // TBASE or THI
                if (e.tag == HP_RE_TBASE)
                    raw_time = e.t;
                else
                    t_hi = e.t;
                p = next;
                continue;
            }
            // the record the shim wrote before the ring held entries (docs/trace-format.md)
            uint8_t *q = buf;
            *q++ = e.tag;
            q = hpt_put_varint(q, e.t - wt);
            wt = e.t;
            switch (e.tag) {
            case HPT_REC_MALLOC:
            case HPT_REC_CALLOC:
            case HPT_REC_ALIGNED:
                q = hpt_put_varint(q, e.stack);
                q = hpt_put_varint(q, hpt_zigzag((int64_t)(e.addr - at)));
                q = hpt_put_varint(q, e.size);
                if (e.tag == HPT_REC_ALIGNED)
                    q = hpt_put_varint(q, e.align);
                break;
            case HPT_REC_FREE:
                q = hpt_put_varint(q, hpt_zigzag((int64_t)(e.addr - at)));
                q = hpt_put_touch(q, e.touch ? (int)e.touch - 1 : -1, e.touched, e.nz);
                break;
            case HPT_REC_FREE_SIZED:
                q = hpt_put_varint(q, hpt_zigzag((int64_t)(e.addr - at)));
                q = hpt_put_varint(q, e.size);
                q = hpt_put_varint(q, e.align);
                break;
            default: // REALLOC
                q = hpt_put_varint(q, e.t2 - e.t);
                wt = e.t2;
                q = hpt_put_varint(q, e.stack);
                q = hpt_put_varint(q, hpt_zigzag((int64_t)(e.old - at)));
                q = hpt_put_varint(q, hpt_zigzag((int64_t)(e.addr - e.old)));
                q = hpt_put_varint(q, e.size);
                break;
            }
            at = e.addr;
            rt = wt;
            len = (size_t)(q - buf);
        }
        if (rows && rows + len > max_bytes)
            break;
        if (len > out_cap - rows)
            return false;
        memcpy(out + rows, rec, len);
        rows += len;
        n_records++;
        n_events += is_event(e.tag);
        t_prev = wt;
        a_prev = at;
        raw_time = rt;
        p = next;
    }
    info->in_bytes = (size_t)(p - in);
    info->row_bytes = rows;
    info->n_records = n_records;
    info->n_events = n_events;
    pos->w.time_ns = t_prev;
    pos->w.addr = a_prev;
    pos->raw_time = raw_time;
    pos->t_hi = t_hi;
    return true;
}
