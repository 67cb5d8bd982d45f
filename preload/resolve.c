// SPDX-License-Identifier: MIT
// Heap stream encoder: see resolve.h and docs/trace-format.md#heap.
#include "resolve.h"

#include <string.h>
#include <sys/mman.h>

#define FIRST_CAP 4096u // slots; grows by doubling at 3/4 full

static uint64_t *map_slots(size_t cap) {
    // MAP_POPULATE: a probe reads a slot before it writes one, and a read of an untouched page
    // maps the shared zero page; the write after it then costs a fault and a TLB shootdown IPI
    // to the app's CPU (4% of the writer's time on rust_vec_growth before this)
    void *p = mmap(NULL, cap * 2 * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

// Neighbouring blocks get neighbouring slots: blocks made together are mostly freed together,
// so a table far bigger than the cache is still probed in cache (a scattering hash made every
// probe a miss: a third of the writer's time on rust_vec_growth's 2.8 M live blocks). The
// higher bits are folded in so that blocks at a power-of-two stride (mmapped ones) spread out
// instead of piling onto one slot.
static inline size_t home(const hp_resolve_t *rs, uint64_t addr) {
    uint64_t h = (addr >> 4) ^ (addr >> 19) ^ (addr >> 33);
    return (size_t)h & (rs->cap - 1);
}

bool hp_resolve_init(hp_resolve_t *rs, unsigned time_shift) {
    memset(rs, 0, sizeof *rs);
    rs->tab = map_slots(FIRST_CAP);
    if (!rs->tab)
        return false;
    rs->cap = FIRST_CAP;
    rs->enc.addr = 1;
    rs->enc.time_shift = time_shift;
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
    size_t i = home(rs, addr);
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

// Removes addr; returns its serial, or 0 if it was not live. Backward-shift deletion keeps
// probe chains whole without tombstones, so endless churn never degrades the table.
static uint64_t take(hp_resolve_t *rs, uint64_t addr) {
    size_t i = probe(rs, addr);
    if (!rs->tab[2 * i])
        return 0;
    uint64_t serial = rs->tab[2 * i + 1];
    size_t mask = rs->cap - 1;
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        uint64_t k = rs->tab[2 * j];
        if (!k)
            break;
        size_t h = home(rs, k);
        // move k back to the hole unless its home lies cyclically in (i, j]
        if (((j - h) & mask) >= ((j - i) & mask)) {
            rs->tab[2 * i] = k;
            rs->tab[2 * i + 1] = rs->tab[2 * j + 1];
            i = j;
        }
    }
    rs->tab[2 * i] = 0;
    rs->n--;
    return serial;
}

// Inserts addr with serial; if addr is live already (its free was missed), returns the serial
// it had and leaves the slot to the caller's choice (see born()). 0 = inserted fresh.
static bool put(hp_resolve_t *rs, uint64_t addr, uint64_t serial, uint64_t *was) {
    if ((rs->n + 1) * 4 > rs->cap * 3 && !grow(rs))
        return false;
    size_t i = probe(rs, addr);
    *was = rs->tab[2 * i] ? rs->tab[2 * i + 1] : 0;
    if (!*was)
        rs->n++;
    rs->tab[2 * i] = addr;
    rs->tab[2 * i + 1] = *was ? *was : serial;
    return true;
}

void hp_resolve_prefetch(const hp_resolve_t *rs, const hpt_rec_t *rec) {
    uint64_t a = rec->tag == HPT_REC_REALLOC ? rec->old_addr : rec->addr;
    if (rec->tag <= HPT_REC_REALLOC && a)
        __builtin_prefetch(&rs->tab[2 * home(rs, a)], 1);
}

static inline uint64_t next_dt(hp_resolve_t *rs, uint64_t t) {
    uint64_t q = t >> rs->enc.time_shift, prev = rs->enc.time_ns >> rs->enc.time_shift;
    // a record the merge could only place late (no membarrier) keeps the stream's order
    uint64_t dt = q > prev ? q - prev : 0;
    rs->enc.time_ns = (prev + dt) << rs->enc.time_shift;
    return dt;
}

static inline uint8_t *put_dt(hp_resolve_t *rs, uint8_t *p, uint64_t t) {
    return hpt_put_varint(p, next_dt(rs, t));
}

// A heap record's tag byte, with its time delta folded in.
static inline uint8_t *put_htag(hp_resolve_t *rs, uint8_t *p, uint8_t tag, uint64_t t) {
    return hpt_put_htag(p, tag, next_dt(rs, t));
}

static inline uint8_t *put_tid(hp_resolve_t *rs, uint8_t *p, uint32_t tid) {
    if (tid == rs->tid)
        return p;
    rs->tid = tid;
    rs->n_out++;
    *p++ = HPT_REC_H_TID;
    return hpt_put_varint(p, tid);
}

static inline uint64_t ref_of(const hp_resolve_t *rs, uint64_t serial) {
    return serial ? rs->enc.addr - serial : 0;
}

// A new block at addr: its serial (base, or the live one it replaces, announced by H_REUSE).
// keep: the serial an in-place realloc keeps (0: none). Returns 0 when out of memory.
static uint64_t born(hp_resolve_t *rs, uint8_t **pp, uint64_t addr, uint64_t keep) {
    uint64_t was, serial = keep ? keep : rs->enc.addr;
    if (!put(rs, addr, serial, &was))
        return 0;
    if (was && !keep) {
        rs->n_reused++;
        rs->n_out++;
        uint8_t *p = *pp;
        *p++ = HPT_REC_H_REUSE;
        *pp = hpt_put_varint(p, ref_of(rs, was));
        return was;
    }
    if (was)
        rs->tab[2 * probe(rs, addr) + 1] = keep; // cannot happen in-place; stay consistent
    return serial;
}

// Copies a ring record whose layout does not change in the heap stream, replacing its leading
// dt (ring: ns since the ring's previous record) by the heap stream's.
static uint8_t *copy_timed(hp_resolve_t *rs, uint8_t *p, const hpt_rec_t *rec, const uint8_t *raw,
                           const uint8_t *raw_end) {
    uint64_t skip;
    const uint8_t *rest = hpt_get_varint(raw + 1, raw_end, &skip);
    if (!rest || (size_t)(raw_end - rest) > HP_RESOLVE_REC_MAX - 16)
        return NULL;
    *p++ = rec->tag;
    p = put_dt(rs, p, rec->time_ns);
    memcpy(p, rest, (size_t)(raw_end - rest));
    return p + (raw_end - rest);
}

uint8_t *hp_resolve_rec(hp_resolve_t *rs, uint8_t *p, uint32_t tid, const hpt_rec_t *rec,
                        const uint8_t *raw, const uint8_t *raw_end, int half,
                        hp_resolve_pending_t *pend) {
    p = put_tid(rs, p, tid);
    if (rec->tag != HPT_REC_REALLOC || half || rec->old_addr)
        rs->n_out++; // the one record below (a realloc(NULL, n) has no half 0)
    switch (rec->tag) {
    case HPT_REC_MALLOC:
    case HPT_REC_CALLOC:
    case HPT_REC_ALIGNED: {
        uint64_t serial = born(rs, &p, rec->addr, 0); // may put an H_REUSE first
        if (!serial)
            return NULL;
        p = put_htag(rs, p,
                     rec->tag == HPT_REC_MALLOC   ? HPT_REC_H_MALLOC
                     : rec->tag == HPT_REC_CALLOC ? HPT_REC_H_CALLOC
                                                  : HPT_REC_H_ALIGNED,
                     rec->time_ns);
        p = hpt_put_varint(p, rec->stack);
        p = hpt_put_varint(p, rec->size);
        if (rec->tag == HPT_REC_ALIGNED)
            p = hpt_put_varint(p, rec->align);
        if (serial == rs->enc.addr)
            rs->enc.addr++;
        return p;
    }
    case HPT_REC_FREE: {
        uint64_t serial = take(rs, rec->addr);
        p = put_htag(rs, p, HPT_REC_H_FREE, rec->time_ns);
        p = hpt_put_varint(p, ref_of(rs, serial));
        if (!rec->touch)
            return hpt_put_htouch(p, -1, 0, 0);
        return hpt_put_htouch(p, rec->touch - 1, rec->touched, rec->touched_nz);
    }
    case HPT_REC_REALLOC:
        if (half == 0) {
            pend->old_addr = rec->old_addr;
            pend->old_serial = 0;
            if (!rec->old_addr)
                return p; // realloc(NULL, n): nothing dies
            pend->old_serial = take(rs, rec->old_addr);
            p = put_htag(rs, p, HPT_REC_H_REALLOC_FREE, rec->time_ns);
            return hpt_put_varint(p, ref_of(rs, pend->old_serial));
        } else {
            bool in_place = pend->old_serial && rec->addr == pend->old_addr;
            // against the base before this block takes it (an H_REUSE leaves the base alone)
            uint64_t old = pend->old_serial ? (ref_of(rs, pend->old_serial) << 1) | in_place : 0;
            uint64_t serial = born(rs, &p, rec->addr, in_place ? pend->old_serial : 0);
            if (!serial)
                return NULL;
            p = put_htag(rs, p, HPT_REC_H_REALLOC, rec->time2_ns);
            p = hpt_put_varint(p, rec->stack);
            p = hpt_put_varint(p, rec->size);
            p = hpt_put_varint(p, old);
            if (serial == rs->enc.addr && !in_place)
                rs->enc.addr++;
            return p;
        }
    case HPT_REC_STACK:
        if ((size_t)(raw_end - raw) > HP_RESOLVE_REC_MAX)
            return NULL;
        memcpy(p, raw, (size_t)(raw_end - raw));
        return p + (raw_end - raw);
    case HPT_REC_THREAD_START:
    case HPT_REC_THREAD_END:
    case HPT_REC_MODULE_LOAD:
    case HPT_REC_MODULE_UNLOAD:
        return copy_timed(rs, p, rec, raw, raw_end);
    default:
        return NULL; // samples and process records never travel in an app thread's ring
    }
}
