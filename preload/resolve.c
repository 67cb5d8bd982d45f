// SPDX-License-Identifier: MIT
// Heap stream encoder: see resolve.h and docs/trace-format.md#heap.
#include "resolve.h"

#include <string.h>
#include <sys/mman.h>

#define FIRST_CAP 4096u // slots; grows by doubling (see put for when)

static uint64_t *map_slots(size_t cap) {
    // MAP_POPULATE: a probe reads a slot before it writes one, and a read of an untouched page
    // maps the shared zero page; the write after it then costs a fault and a TLB shootdown IPI
    // to the app's CPU (4% of the writer's time on rust_vec_growth before this)
    void *p = mmap(NULL, cap * 2 * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

bool hp_resolve_init(hp_resolve_t *rs, unsigned time_shift) {
    memset(rs, 0, sizeof *rs);
    rs->tab = map_slots(FIRST_CAP);
    if (!rs->tab)
        return false;
    rs->cap = FIRST_CAP;
    rs->enc = hpt_heap_state(0, 1, time_shift);
    return true;
}

void hp_resolve_fini(hp_resolve_t *rs) {
    if (rs->tab)
        munmap(rs->tab, rs->cap * 2 * sizeof(uint64_t));
    rs->tab = NULL;
    rs->cap = rs->n = 0;
}

// Slot of addr, or of the empty slot where it would go.
static inline size_t probe(const hp_resolve_t *rs, uint64_t addr) {
    size_t i = hp_resolve_home(rs, addr);
    while (rs->tab[2 * i] && rs->tab[2 * i] != addr)
        i = (i + 1) & (rs->cap - 1);
    return i;
}

static bool grow(hp_resolve_t *rs) {
    size_t old_cap = rs->cap;
    uint64_t *old = rs->tab, *fresh = map_slots(old_cap * 2);
    if (!fresh)
        return false;
    rs->tab = fresh;
    rs->cap = old_cap * 2;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[2 * i])
            continue;
        size_t j = probe(rs, old[2 * i]);
        rs->tab[2 * j] = old[2 * i];
        rs->tab[2 * j + 1] = old[2 * i + 1];
    }
    munmap(old, old_cap * 2 * sizeof(uint64_t));
    return true;
}

// A live block's word in the table: serial << 1 | CALLOC_BIT (made by calloc, so its touch
// count is the bytes not zero: it was never pattern-filled).
#define CALLOC_BIT 1u

// Removes addr; returns its word, or 0 if it was not live. Backward-shift deletion keeps probe
// chains whole without tombstones, so endless churn never degrades the table.
static uint64_t take(hp_resolve_t *rs, uint64_t addr) {
    size_t i = probe(rs, addr);
    if (!rs->tab[2 * i])
        return 0;
    uint64_t word = rs->tab[2 * i + 1];
    size_t mask = rs->cap - 1;
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        uint64_t k = rs->tab[2 * j];
        if (!k)
            break;
        size_t h = hp_resolve_home(rs, k);
        // move k back to the hole unless its home lies cyclically in (i, j]
        if (((j - h) & mask) >= ((j - i) & mask)) {
            rs->tab[2 * i] = k;
            rs->tab[2 * i + 1] = rs->tab[2 * j + 1];
            i = j;
        }
    }
    rs->tab[2 * i] = 0;
    rs->n--;
    return word;
}

// Sets addr's word; *was gets the word it had (0: it was not live). Returns the word's slot,
// or NULL when out of memory.
static uint64_t *put(hp_resolve_t *rs, uint64_t addr, uint64_t word, uint64_t *was) {
    // at most 3/4 full, or 1/2 while small: linear probing's runs grow fast past 1/2, and a small
    // table costs nothing to keep sparse (a big one costs the profiled process memory)
    size_t limit = rs->cap <= HP_RESOLVE_SMALL ? rs->cap / 2 : rs->cap / 4 * 3;
    if (rs->n + 1 > limit && !grow(rs))
        return NULL;
    size_t i = probe(rs, addr);
    *was = rs->tab[2 * i] ? rs->tab[2 * i + 1] : 0;
    if (!*was)
        rs->n++;
    rs->tab[2 * i] = addr;
    rs->tab[2 * i + 1] = word;
    return &rs->tab[2 * i + 1];
}

static inline uint64_t next_dt(hp_resolve_t *rs, uint64_t t) {
    uint64_t q = t >> rs->enc.time_shift, prev = rs->enc.time_ns >> rs->enc.time_shift;
    // a record the merge could only place late (no membarrier) keeps the stream's order
    uint64_t dt = q > prev ? q - prev : 0;
    rs->n_late += q < prev;
    rs->enc.time_ns = (prev + dt) << rs->enc.time_shift;
    return dt;
}

// Column cursors of the chunk being written.
#define MAIN(o) ((o)->col[HPT_HCOL_MAIN] + (o)->len[HPT_HCOL_MAIN])

static inline void put_col(hp_hout_t *o, int col, uint64_t v) {
    uint8_t *p = o->col[col] + o->len[col];
    o->len[col] = (size_t)(hpt_put_varint(p, v) - o->col[col]);
}

// A heap record's tag byte in MAIN, with its time delta folded in.
static inline void put_htag(hp_resolve_t *rs, hp_hout_t *o, uint8_t tag, uint64_t t) {
    o->len[HPT_HCOL_MAIN] =
        (size_t)(hpt_put_htag(MAIN(o), tag, next_dt(rs, t)) - o->col[HPT_HCOL_MAIN]);
    rs->n_out++;
}

static inline void put_tid(hp_resolve_t *rs, hp_hout_t *o, uint32_t tid) {
    if (tid == rs->tid)
        return;
    rs->tid = tid;
    rs->n_out++;
    o->col[HPT_HCOL_MAIN][o->len[HPT_HCOL_MAIN]++] = HPT_REC_H_TID;
    put_col(o, HPT_HCOL_MAIN, tid);
}

static inline uint64_t ref_of(const hp_resolve_t *rs, uint64_t serial) {
    return serial ? rs->enc.addr - serial : 0;
}

// The block a free names (hpt_dying_code: young, or in order after the last one freed).
static inline void put_dying(hp_resolve_t *rs, hp_hout_t *o, uint64_t serial) {
    put_col(o, HPT_HCOL_REF, hpt_dying_code(&rs->enc, serial));
    if (serial)
        rs->enc.last_free = serial;
}

void hp_resolve_chunk_start(hp_resolve_t *rs) {
    rs->enc = hpt_heap_state(rs->enc.time_ns, rs->enc.addr, rs->enc.time_shift);
}

// A new block at addr: its serial (base, or the live one it replaces, announced by H_REUSE).
// keep: the serial an in-place realloc keeps (0: none). Returns 0 when out of memory.
static uint64_t born(hp_resolve_t *rs, hp_hout_t *o, uint64_t addr, uint64_t keep, bool calloc) {
    uint64_t was, serial = keep ? keep : rs->enc.addr;
    uint64_t *word = put(rs, addr, serial << 1 | calloc, &was);
    if (!word)
        return 0;
    if (was && !keep) {
        serial = was >> 1;
        *word = serial << 1 | calloc;
        rs->n_reused++;
        rs->n_out++;
        o->col[HPT_HCOL_MAIN][o->len[HPT_HCOL_MAIN]++] = HPT_REC_H_REUSE;
        put_col(o, HPT_HCOL_REF, ref_of(rs, serial));
    }
    return serial;
}

// Copies a ring record whose layout does not change in the heap stream into MAIN, replacing
// its leading dt (ring: ns since the ring's previous record) by the heap stream's.
static bool copy_timed(hp_resolve_t *rs, hp_hout_t *o, const hpt_rec_t *rec, const uint8_t *raw,
                       const uint8_t *raw_end) {
    uint64_t skip;
    const uint8_t *rest = hpt_get_varint(raw + 1, raw_end, &skip);
    if (!rest || (size_t)(raw_end - rest) > HP_RESOLVE_REC_MAX - 16)
        return false;
    uint8_t *p = MAIN(o);
    *p++ = rec->tag;
    p = hpt_put_varint(p, next_dt(rs, rec->time_ns));
    memcpy(p, rest, (size_t)(raw_end - rest));
    o->len[HPT_HCOL_MAIN] = (size_t)(p + (raw_end - rest) - o->col[HPT_HCOL_MAIN]);
    rs->n_out++;
    return true;
}

// Appends n (<= 2 * HPT_VARINT_MAX) bytes of varints, taken as they are, to column col. A
// fixed 16-byte copy (the source has HP_RESOLVE_EV_SLACK readable bytes, a column room for a
// whole record) costs two loads and two stores; memcpy of a variable length is a call.
static inline void put_raw(hp_hout_t *o, int col, const uint8_t *p, size_t n) {
    uint8_t *d = o->col[col] + o->len[col];
    if (n <= HP_RESOLVE_EV_SLACK)
        memcpy(d, p, HP_RESOLVE_EV_SLACK);
    else
        memcpy(d, p, n);
    o->len[col] += n;
}

bool hp_resolve_ev(hp_resolve_t *rs, hp_hout_t *o, uint32_t tid, const hp_resolve_ev_t *ev,
                   int half, hp_resolve_pending_t *pend) {
    put_tid(rs, o, tid);
    switch (ev->tag) {
    case HPT_REC_MALLOC:
    case HPT_REC_CALLOC:
    case HPT_REC_ALIGNED: {
        // may put an H_REUSE first
        uint64_t serial = born(rs, o, ev->addr, 0, ev->tag == HPT_REC_CALLOC);
        if (!serial)
            return false;
        // the H_ tags are the ring's allocation tags shifted by one constant
        _Static_assert(HPT_REC_H_CALLOC - HPT_REC_CALLOC == HPT_REC_H_MALLOC - HPT_REC_MALLOC &&
                           HPT_REC_H_ALIGNED - HPT_REC_ALIGNED ==
                               HPT_REC_H_MALLOC - HPT_REC_MALLOC,
                       "allocation tags");
        put_htag(rs, o, (uint8_t)(ev->tag + (HPT_REC_H_MALLOC - HPT_REC_MALLOC)), ev->time_ns);
        put_raw(o, HPT_HCOL_STACK, ev->stack_p, ev->stack_len);
        put_raw(o, HPT_HCOL_SIZE, ev->size_p, ev->size_len); // ALIGNED: size, then alignment
        if (serial == rs->enc.addr)
            rs->enc.addr++;
        return true;
    }
    case HPT_REC_FREE: {
        uint64_t v = take(rs, ev->addr), serial = v >> 1;
        put_htag(rs, o, HPT_REC_H_FREE, ev->time_ns);
        put_dying(rs, o, serial);
        // a calloc block was never filled: what it had touched are the bytes not zero (and a
        // filled block's non-zero count, pattern included, would cost bytes for nothing)
        uint8_t *t = o->col[HPT_HCOL_TOUCH] + o->len[HPT_HCOL_TOUCH];
        t = !ev->touch ? hpt_put_htouch(t, -1, 0)
                       : hpt_put_htouch(t, ev->touch - 1,
                                        (v & CALLOC_BIT) ? ev->touched_nz : ev->touched);
        o->len[HPT_HCOL_TOUCH] = (size_t)(t - o->col[HPT_HCOL_TOUCH]);
        return true;
    }
    case HPT_REC_REALLOC:
        if (half == 0) {
            pend->old_addr = ev->old_addr;
            pend->old_serial = 0;
            if (!ev->old_addr)
                return true; // realloc(NULL, n): nothing dies
            pend->old_serial = take(rs, ev->old_addr) >> 1;
            put_htag(rs, o, HPT_REC_H_REALLOC_FREE, ev->time_ns);
            put_dying(rs, o, pend->old_serial);
            return true;
        } else {
            bool in_place = pend->old_serial && ev->addr == pend->old_addr;
            // against the base before this block takes it (an H_REUSE leaves the base alone)
            uint64_t old = pend->old_serial ? (ref_of(rs, pend->old_serial) << 1) | in_place : 0;
            // not calloc'd any more: its bytes past the old size were pattern-filled
            uint64_t serial = born(rs, o, ev->addr, in_place ? pend->old_serial : 0, false);
            if (!serial)
                return false;
            put_htag(rs, o, HPT_REC_H_REALLOC, ev->time2_ns);
            put_raw(o, HPT_HCOL_STACK, ev->stack_p, ev->stack_len);
            put_col(o, HPT_HCOL_SIZE, hpt_realloc_size_code(&rs->enc, ev->size));
            put_col(o, HPT_HCOL_REF, old);
            if (serial == rs->enc.addr && !in_place)
                rs->enc.addr++;
            return true;
        }
    default:
        return false;
    }
}

bool hp_resolve_rec(hp_resolve_t *rs, hp_hout_t *o, uint32_t tid, const hpt_rec_t *rec,
                    const uint8_t *raw, const uint8_t *raw_end, int half,
                    hp_resolve_pending_t *pend) {
    switch (rec->tag) {
    case HPT_REC_MALLOC:
    case HPT_REC_CALLOC:
    case HPT_REC_ALIGNED:
    case HPT_REC_FREE:
    case HPT_REC_REALLOC: {
        // the stack id and size as the ring would carry them, with the slack put_raw reads
        uint8_t stack[HPT_VARINT_MAX + HP_RESOLVE_EV_SLACK] = {0};
        uint8_t size[2 * HPT_VARINT_MAX + HP_RESOLVE_EV_SLACK] = {0};
        hp_resolve_ev_t ev = {.tag = rec->tag,
                              .touch = rec->touch,
                              .time_ns = rec->time_ns,
                              .time2_ns = rec->time2_ns,
                              .addr = rec->addr,
                              .old_addr = rec->old_addr,
                              .size = rec->size,
                              .touched = rec->touched,
                              .touched_nz = rec->touched_nz,
                              .stack_p = stack,
                              .size_p = size};
        ev.stack_len = (uint8_t)(hpt_put_varint(stack, rec->stack) - stack);
        uint8_t *q = hpt_put_varint(size, rec->size);
        if (rec->tag == HPT_REC_ALIGNED)
            q = hpt_put_varint(q, rec->align);
        ev.size_len = (uint8_t)(q - size);
        return hp_resolve_ev(rs, o, tid, &ev, half, pend);
    }
    case HPT_REC_STACK:
        put_tid(rs, o, tid);
        if ((size_t)(raw_end - raw) > HP_RESOLVE_REC_MAX)
            return false;
        memcpy(MAIN(o), raw, (size_t)(raw_end - raw));
        o->len[HPT_HCOL_MAIN] += (size_t)(raw_end - raw);
        rs->n_out++;
        return true;
    case HPT_REC_THREAD_START:
    case HPT_REC_THREAD_END:
    case HPT_REC_MODULE_LOAD:
    case HPT_REC_MODULE_UNLOAD:
        put_tid(rs, o, tid);
        return copy_timed(rs, o, rec, raw, raw_end);
    default:
        return false; // samples and process records never travel in an app thread's ring
    }
}

size_t hp_hout_assemble(hp_hout_t *o, uint8_t *dst) {
    uint8_t *p = hpt_hcols_table(dst, o->len);
    for (int i = 0; i < HPT_HCOLS; i++) {
        memcpy(p, o->col[i], o->len[i]);
        p += o->len[i];
        o->len[i] = 0;
    }
    return (size_t)(p - dst);
}
