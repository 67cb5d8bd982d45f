// SPDX-License-Identifier: MIT
// The live-address table of touch_live.h: linear probing, a count per address (an allocation
// drained before the free of an earlier block at its address by another thread makes 2, then
// 1), doubled at half full, in memory from mem.c that a fork child does not inherit. Runs on
// the drainers with the recursion guard held: no stdio, one lock per drain, never per event.
#include "touch_live.h"

#include "chunk.h"
#include "config.h"
#include "mem.h"
#include "ringent.h"
#include "state.h"
#include "touch.h"
#include "traceout.h"
#include "zstd_ctx.h"

#include <pthread.h>
#include <stdbool.h>
#include <zstd.h>

typedef struct slot {
    uint64_t addr; // 0: empty (no block lives at 0)
    int64_t n;     // allocations less frees drained so far
} slot_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static slot_t *slots;
static size_t cap, used;
static bool broken; // out of memory, or records that did not decode: no figures at exit

// Neighbouring blocks get neighbouring slots (a multiplicative hash made every event a cache
// miss in a big table: 100 ns an event on rust_vec_growth); the high bits folded in keep
// regions 16 MiB apart from piling onto the same slots.
static inline size_t home(uint64_t addr) {
    return (size_t)((addr >> 4) ^ (addr >> 24) ^ (addr >> 44)) & (cap - 1);
}

static bool grow(void) {
    size_t ncap = cap ? cap * 2 : (size_t)1 << 14;
    slot_t *n = hp_mem_map_parent_only(ncap * sizeof *n), *old = slots;
    if (!n)
        return false;
    size_t ocap = cap;
    slots = n;
    cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].addr)
            continue;
        size_t j = home(old[i].addr);
        while (slots[j].addr)
            j = (j + 1) & (cap - 1);
        slots[j] = old[i];
    }
    if (old)
        hp_mem_unmap(old, ocap * sizeof *old);
    return true;
}

// Empties slot i, moving back the entries after it that probed past it.
static void erase(size_t i) {
    size_t mask = cap - 1;
    for (size_t j = (i + 1) & mask; slots[j].addr; j = (j + 1) & mask) {
        size_t h = home(slots[j].addr);
        // j's entry may move to i if its home is not cyclically within (i, j]
        bool stays = i < j ? (h > i && h <= j) : (h > i || h <= j);
        if (!stays) {
            slots[i] = slots[j];
            i = j;
        }
    }
    slots[i].addr = 0;
    slots[i].n = 0;
    used--;
}

static void add(uint64_t addr, int64_t d) {
    if (!addr)
        return;
    if (used + 1 > cap / 2 && !grow()) {
        broken = true;
        return;
    }
    size_t i = home(addr);
    while (slots[i].addr && slots[i].addr != addr)
        i = (i + 1) & (cap - 1);
    if (!slots[i].addr) {
        slots[i].addr = addr;
        slots[i].n = d;
        used++;
        return;
    }
    if ((slots[i].n += d) == 0)
        erase(i);
}

void hp_touch_live_note(const uint8_t *p, const uint8_t *end) {
    pthread_mutex_lock(&lock);
    while (!broken && p < end) {
        hp_rent_t e;
        const uint8_t *next;
        if (*p < HP_RE_FIRST) { // a trace record: never a heap event (ringent.h)
            hpt_dstate_t st = {0};
            hpt_rec_t r;
            next = hpt_rec_decode(p, end, &st, &r);
            e.tag = 0;
        } else {
            next = hp_re_read_fixed(p, end, 0, &e); // times are not needed here
        }
        if (!next) {
            broken = true; // the drain stops profiling too (pipeline.c)
            break;
        }
        switch (e.tag) {
        case HPT_REC_MALLOC:
        case HPT_REC_CALLOC:
        case HPT_REC_ALIGNED:
            add(e.addr, 1);
            break;
        case HPT_REC_FREE:
            add(e.addr, -1);
            break;
        case HPT_REC_REALLOC:
            if (e.old != e.addr) { // in place: the same block lives on
                add(e.old, -1);
                add(e.addr, 1);
            }
            break;
        default:
            break;
        }
        p = next;
    }
    pthread_mutex_unlock(&lock);
}

#define RAW_CAP (64u << 10)

size_t hp_touch_live_emit(void) {
    size_t written = 0;
    pthread_mutex_lock(&lock);
    uint8_t *raw = NULL, *out = NULL;
    size_t out_cap = hp_chunk_bound(RAW_CAP);
    if (broken || !used || !(raw = hp_mem_map(RAW_CAP)) || !(out = hp_mem_map(out_cap)))
        goto done;
    ZSTD_CCtx *cctx = hp_zstd_cctx_new(hp_config.zstd_level);
    hpt_dstate_t base = {.time_ns = hp_state_now(), .addr = 0};
    size_t len = 0;
    uint32_t nrec = 0;
    bool ok = true;
    uint64_t group[HP_TOUCH_LIVE_GROUP];
    hp_touch_t t[HP_TOUCH_LIVE_GROUP];
    for (size_t i = 0; i < cap && ok;) {
        // the next group of live addresses, measured together (a few system calls a group)
        size_t g = 0;
        for (; i < cap && g < HP_TOUCH_LIVE_GROUP; i++)
            if (slots[i].n > 0)
                group[g++] = slots[i].addr;
        hp_touch_measure_live(group, g, t);
        for (size_t j = 0; j < g && ok; j++) {
            if (t[j].method < 0)
                continue; // freed meanwhile, or not glibc's: no figure
            if (len + 1 + 4 * HPT_VARINT_MAX > RAW_CAP) {
                ok = hp_traceout_chunk(HPT_CHUNK_EVENTS, 0, 0, raw, len, nrec, base, out,
                                       out_cap, cctx);
                len = 0;
                nrec = 0;
            }
            uint8_t *q = raw + len;
            *q++ = HPT_REC_TOUCH_LIVE;
            q = hpt_put_varint(q, 0); // every record at the chunk's base time: the exit
            q = hpt_put_varint(q, group[j]);
            q = hpt_put_touch(q, t[j].method, t[j].touched, t[j].touched_nz);
            len = (size_t)(q - raw);
            nrec++;
            written++;
        }
    }
    if (ok && len)
        hp_traceout_chunk(HPT_CHUNK_EVENTS, 0, 0, raw, len, nrec, base, out, out_cap, cctx);
    hp_zstd_cctx_free(cctx);
done:
    if (raw)
        hp_mem_unmap(raw, RAW_CAP);
    if (out)
        hp_mem_unmap(out, out_cap);
    pthread_mutex_unlock(&lock);
    return written;
}

size_t hp_touch_live_count(void) {
    pthread_mutex_lock(&lock);
    size_t n = 0;
    for (size_t i = 0; i < cap; i++)
        n += slots[i].n > 0;
    pthread_mutex_unlock(&lock);
    return n;
}

bool hp_touch_live_has(uint64_t addr) {
    pthread_mutex_lock(&lock);
    bool has = false;
    if (cap) {
        size_t i = home(addr);
        while (slots[i].addr && slots[i].addr != addr)
            i = (i + 1) & (cap - 1);
        has = slots[i].addr == addr && slots[i].n > 0;
    }
    pthread_mutex_unlock(&lock);
    return has;
}

void hp_touch_live_fork_child(void) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    lock = m;
    // the parent's table is not mapped in the child (hp_mem_map_parent_only): forget it
    slots = NULL;
    cap = used = 0;
    broken = false;
}
