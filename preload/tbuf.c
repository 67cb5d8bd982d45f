// SPDX-License-Identifier: MIT
// Ring creation and growth, the registry of rings, and the cold paths of appending (a ring over
// half full asks the pipeline for a drain; a full one is drained by its owner). Runs inside
// malloc: no stdio, no host allocation; locks only on cold paths.
#include "tbuf.h"

#include "clock.h"
#include "config.h"
#include "debug.h"
#include "guard.h"
#include "mem.h"
#include "state.h"

#include <pthread.h>
#include <string.h>

#define RING_MIN (64u << 10) // a thread that allocates little keeps 64 KiB
// What all rings together may hold beyond RING_MIN each: 16 MiB, or one largest ring. Growth
// spares a few busy threads the waits of a burst; a thousand threads whose rings all fill (more
// than the drainers can write) would only hold more memory each (bench/many_threads.sh: rings
// of 256-512 KiB a thread), and wait as often.
#define GROW_BUDGET (16ull << 20)
static _Atomic uint64_t grown_bytes; // sum over the rings of cap - their first size

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static hp_ring_t *list_head;
// Rings whose threads ran their exit hook (hp_tbuf_close pushes, lock-free), and the reaper's
// own list of those it took and that could not go yet (their drain or their thread still on).
// Reaping used to ask every ring at every nap: 4,000 threads alive and idle cost the flusher
// ~17% of a CPU, a ring struct (a page each) a cache and TLB miss (session 17).
static _Atomic(hp_ring_t *) closed_stack;
static hp_ring_t *reaping; // the flusher's
static const hp_tbuf_drainer_t *drainer; // the pipeline, once attached

// Rings of threads that have ended, kept at their first size for the next threads. A program
// that makes a short thread per request otherwise maps and unmaps a ring for each, and every
// unmap in a multi-threaded process is a TLB shootdown that interrupts each CPU running one of
// its threads, behind the mm's lock that thread creation takes too: bench/thread_churn.sh,
// 10,000 threads 4 at a time, heapprof added ~85 us a thread with no pool, ~60 with a pool of
// 64, ~33 with 256 (the flusher reaps each nap, ~12 ms: at that rate 150 threads end in one).
// A ring that sat unused in the pool for POOL_KEEP_NS is unmapped (hp_tbuf_reap), so the
// memory of ended threads still goes back, a second later where no thread takes it. Each holds
// its struct's page and the data pages its thread wrote (a short thread: one or two), 64 KiB of
// address space. LIFO: the deeper, the longer unused. Under list_lock.
#define POOL_MAX 256u
#define POOL_KEEP_NS 1000000000ull
static hp_ring_t *pool_head;
static unsigned pool_n;

// Ring structs (320 bytes) come from slabs of SLAB_BYTES, not a mapping each: the flusher's
// periodic SYNC walks every ring, and with a page a ring each step was a TLB and a cache miss
// (~0.3 us a ring a walk with 4,000 threads; session 17). A slab starts with a 64-byte header
// (the next slab), then its structs; a free struct's first word links the free list. Slabs are
// never unmapped (4,000 threads' structs are 1.25 MiB); under list_lock.
#define SLAB_BYTES (64u << 10)
#define SLAB_HDR 64u
static uint8_t *slab_list;
static hp_ring_t *struct_free_list;

static void struct_put(hp_ring_t *r) {
    *(hp_ring_t **)(void *)r = struct_free_list;
    struct_free_list = r;
}

// Every struct of slab s back on the free list.
static void slab_free_all(uint8_t *s) {
    for (size_t off = SLAB_HDR; off + sizeof(hp_ring_t) <= SLAB_BYTES; off += sizeof(hp_ring_t))
        struct_put((hp_ring_t *)(void *)(s + off));
}

static hp_ring_t *struct_get(void) {
    if (!struct_free_list) {
        uint8_t *s = hp_mem_map(SLAB_BYTES);
        if (!s)
            return NULL;
        *(uint8_t **)(void *)s = slab_list;
        slab_list = s;
        slab_free_all(s);
    }
    hp_ring_t *r = struct_free_list;
    struct_free_list = *(hp_ring_t **)(void *)r;
    memset(r, 0, sizeof *r);
    return r;
}

// A pooled ring of `cap` bytes made new, or NULL.
static hp_ring_t *pool_take(uint32_t cap) {
    pthread_mutex_lock(&list_lock);
    hp_ring_t *r = pool_head;
    if (r && r->cap == cap) {
        pool_head = r->next;
        pool_n--;
    } else {
        r = NULL;
    }
    pthread_mutex_unlock(&list_lock);
    if (r) {
        uint8_t *data = r->data;
        memset(r, 0, sizeof *r);
        r->data = data;
        r->cap = r->cap0 = cap;
    }
    return r;
}

void hp_tbuf_set_drainer(const hp_tbuf_drainer_t *d) {
    drainer = d;
}

hp_ring_t *hp_tbuf_new(uint32_t tid) {
    uint32_t cap = hp_config.ring_bytes < RING_MIN ? hp_config.ring_bytes : RING_MIN;
    hp_ring_t *r = pool_take(cap);
    if (!r) {
        pthread_mutex_lock(&list_lock);
        r = struct_get();
        pthread_mutex_unlock(&list_lock);
        if (!r)
            return NULL;
        r->cap = r->cap0 = cap;
        r->data = hp_mem_map_parent_only(r->cap);
        if (!r->data) {
            pthread_mutex_lock(&list_lock);
            struct_put(r);
            pthread_mutex_unlock(&list_lock);
            return NULL;
        }
    }
    HP_ASSERT(r->cap >= 4096 && !(r->cap & (r->cap - 1)));
    r->tid = tid;
    // the ring's first record is timed after this (hp_tbuf_busy_now), on a clock that steps
    // back at most HP_CLOCK_SWITCH_LAG_NS when it switches to the TSC
    uint64_t now = hp_state_now();
    atomic_store_explicit(&r->out_t, now > HP_CLOCK_SWITCH_LAG_NS ? now - HP_CLOCK_SWITCH_LAG_NS : 0,
                          memory_order_relaxed);
    pthread_mutex_init(&r->drain, NULL);
    pthread_mutex_lock(&list_lock);
    r->next = list_head;
    r->prev = NULL;
    if (list_head)
        list_head->prev = r;
    list_head = r;
    pthread_mutex_unlock(&list_lock);
    return r;
}

void hp_tbuf_close(hp_ring_t *r) {
    atomic_store_explicit(&r->closed, 1, memory_order_release);
    hp_ring_t *top = atomic_load_explicit(&closed_stack, memory_order_relaxed);
    do
        r->closed_next = top;
    while (!atomic_compare_exchange_weak_explicit(&closed_stack, &top, r, memory_order_release,
                                                  memory_order_relaxed));
}

// Under list_lock.
static void list_unlink(hp_ring_t *r) {
    if (r->prev)
        r->prev->next = r->next;
    else
        list_head = r->next;
    if (r->next)
        r->next->prev = r->prev;
}

hp_ring_t *hp_tbuf_list_lock(void) {
    pthread_mutex_lock(&list_lock);
    return list_head;
}

void hp_tbuf_list_unlock(void) {
    pthread_mutex_unlock(&list_lock);
}

static void ring_unmap(hp_ring_t *r) {
    atomic_fetch_sub_explicit(&grown_bytes, r->cap - r->cap0, memory_order_relaxed);
    hp_mem_unmap(r->data, r->cap);
    struct_put(r); // under list_lock, as every caller is
}

// Unmaps the pooled ring *pp and every one below it (pooled before it). Under list_lock.
static void pool_cut(hp_ring_t **pp) {
    for (hp_ring_t *r = *pp, *next; r; r = next) {
        next = r->next;
        ring_unmap(r);
        pool_n--;
    }
    *pp = NULL;
}

// Under list_lock.
static void ring_free(hp_ring_t *r, uint64_t now) {
    if (r->cap == r->cap0 && pool_n < POOL_MAX) {
        r->pooled_ns = now;
        r->next = pool_head;
        pool_head = r;
        pool_n++;
        return;
    }
    ring_unmap(r);
}

void hp_tbuf_reap(bool (*dead)(hp_ring_t *)) {
    uint64_t now = hp_state_now();
    for (hp_ring_t *r = atomic_exchange_explicit(&closed_stack, NULL, memory_order_acquire), *next;
         r; r = next) {
        next = r->closed_next;
        r->closed_next = reaping;
        reaping = r;
    }
    pthread_mutex_lock(&list_lock);
    for (hp_ring_t **pp = &reaping; *pp;) {
        hp_ring_t *r = *pp;
        if (dead(r)) {
            *pp = r->closed_next;
            list_unlink(r);
            ring_free(r, now);
        } else {
            pp = &r->closed_next;
        }
    }
    // the pool's rings unused for POOL_KEEP_NS: the first such and every one below it
    hp_ring_t **pp = &pool_head;
    while (*pp && now - (*pp)->pooled_ns < POOL_KEEP_NS)
        pp = &(*pp)->next;
    pool_cut(pp);
    pthread_mutex_unlock(&list_lock);
}

void hp_tbuf_pool_drop(void) {
    pthread_mutex_lock(&list_lock);
    pool_cut(&pool_head);
    HP_ASSERT(pool_n == 0);
    pthread_mutex_unlock(&list_lock);
}

void hp_tbuf_forget_all(void) {
    // The structs are copies of the parent's rings, their data never copied here
    // (hp_mem_map_parent_only): every struct of every slab is free in this process.
    struct_free_list = NULL;
    for (uint8_t *s = slab_list; s; s = *(uint8_t **)(void *)s)
        slab_free_all(s);
    list_head = pool_head = NULL;
    atomic_store(&closed_stack, NULL);
    reaping = NULL;
    pool_n = 0;
    atomic_store(&grown_bytes, 0);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    list_lock = fresh;
}

void hp_tbuf_nudge_slow(hp_ring_t *r) {
    if (drainer)
        drainer->enqueue(r);
}

// Whether nothing drains the rings yet while recording is on: start-up, before our constructor
// opens the trace, when the libraries initialised before ours (their static constructors)
// allocate. After the trace ends recording is off and no record is made.
static bool before_pipeline(void) {
    return drainer && !drainer->running() && hp_state_is_on();
}

// The ring's data moved to a mapping of cap bytes (a power of two above the current size),
// charged to the rings' growth budget; false (the ring as it was) past the budget or without
// memory. The records not yet drained keep their positions (head and tail count bytes, the ring
// is indexed by them modulo cap): each byte is copied from its offset modulo the old size to its
// offset modulo the new. Owner only, holding r->drain.
static bool resize(hp_ring_t *r, uint32_t cap) {
    uint32_t old = r->cap;
    uint64_t budget = GROW_BUDGET > hp_config.ring_bytes ? GROW_BUDGET : hp_config.ring_bytes;
    if (atomic_fetch_add_explicit(&grown_bytes, cap - old, memory_order_relaxed) + (cap - old) >
        budget) {
        atomic_fetch_sub_explicit(&grown_bytes, cap - old, memory_order_relaxed);
        return false;
    }
    uint8_t *data = hp_mem_map_parent_only(cap);
    if (!data) {
        atomic_fetch_sub_explicit(&grown_bytes, cap - old, memory_order_relaxed);
        return false;
    }
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (uint64_t pos = atomic_load_explicit(&r->tail, memory_order_acquire); pos < h;) {
        uint32_t from = (uint32_t)pos & (old - 1), to = (uint32_t)pos & (cap - 1);
        uint64_t len = h - pos;
        if (len > old - from)
            len = old - from;
        if (len > cap - to)
            len = cap - to;
        memcpy(data + to, r->data + from, (size_t)len);
        pos += len;
    }
    hp_mem_unmap(r->data, old);
    r->data = data;
    r->cap = cap;
    r->lim = 0; // hp_tbuf_reserve_slow sets it for the new ring
    HP_ASSERT(cap <= hp_config.ring_bytes && !(cap & (cap - 1)));
    return true;
}

// A ring that fills before the pipeline runs doubles with its records kept, up to the largest
// ring (hp_config.ring_bytes) and within the rings' growth budget, instead of dropping what
// comes next: clang, whose LLVM libraries' static constructors allocate before ours runs, lost
// ~5,600 events of a 64 KiB ring (`stats`: "shim lost"). Also how a full ring grows once the
// pipeline runs (hp_tbuf_wait_slow). The owner alone, holding r->drain: a drainer takes the
// lock before it reads the ring. False if n more bytes still do not fit.
static bool grow_keeping(hp_ring_t *r, size_t n) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint32_t cap = r->cap;
    while (h + n - t > cap) {
        if (cap >= hp_config.ring_bytes)
            return false;
        cap *= 2;
    }
    return cap == r->cap || resize(r, cap);
}

// Start-up: room for n more bytes by growth (grow_keeping), under the ring's drain lock.
static bool make_room_before_pipeline(hp_ring_t *r, size_t n) {
    pthread_mutex_lock(&r->drain);
    bool ok = grow_keeping(r, n);
    pthread_mutex_unlock(&r->drain);
    return ok;
}

// Past the limit: where the ring is over half full it asks for a drain (as hp_tbuf_append does
// at every record), then sets the next limit, the nearest of the wrap, the ring's end as the
// drained tail now says (a tail that moves on later only makes the limit early), and where
// the ring is at most half full, the half; above it, an eighth further on, so that a drain taken
// and not yet done is asked for again as hp_tbuf_append would.
void hp_tbuf_room_slow(hp_ring_t *r, size_t n) {
    if (hp_tbuf_reserve_slow(r, n)) // room without a wrap, and a new limit
        return;
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    // full: drained here (a wrap alone needs no wait); before the pipeline runs, grown with its
    // records kept (a ring past the largest size drops the event itself, counted, later)
    if (h + n - atomic_load_explicit(&r->tail, memory_order_acquire) > r->cap && drainer) {
        if (drainer->running())
            (void)hp_tbuf_wait_slow(r, n);
        else if (before_pipeline())
            (void)make_room_before_pipeline(r, n);
    }
}

uint8_t *hp_tbuf_reserve_slow(hp_ring_t *r, size_t max) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint32_t cap = r->cap, off = (uint32_t)h & (cap - 1);
    HP_ASSERT(t <= h && h - t <= cap);
    if (h + max - t > cap / 2 && !atomic_load_explicit(&r->queued, memory_order_relaxed))
        hp_tbuf_nudge_slow(r);
    uint64_t lim = h + (cap - off);
    if (t + cap < lim)
        lim = t + cap;
    uint64_t half = h - t < cap / 2 ? t + cap / 2 : h + cap / 8;
    if (half < lim)
        lim = half;
    r->lim = lim;
    if (h + max > lim) {
        r->lim = 0; // the next reserve decides again
        if (h + max - t > cap || max > cap - off)
            return NULL;
    }
    return r->data + off;
}

bool hp_tbuf_wait_slow(hp_ring_t *r, size_t n) {
    if (n > hp_config.ring_bytes || !drainer || !drainer->running()) {
        if (n <= hp_config.ring_bytes && before_pipeline() && make_room_before_pipeline(r, n))
            return true;
        // nobody will drain it (start-up past the largest ring, or the trace is gone): drop,
        // but count
        r->n_lost++;
        return false;
    }
    // Back-pressure: wait for a drainer that holds the ring (it is writing our records), then
    // drain what is left here. Never a spin, never a timeout that drops events: a thread
    // waits exactly as long as its own records take to write. The drain writes the trace:
    // no cancellation meanwhile (guard.h).
    uint64_t t0 = hp_clock_ns();
    int cancel = hp_nocancel_begin();
    pthread_mutex_lock(&r->drain);
    bool ok = true, grown = false;
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    // The ring filled before a worker got to it: the thread makes records faster than a worker
    // gets to them, so a bigger ring saves it the next waits. While it may grow it grows with
    // its records kept and they wait for a worker there: a copy into the larger mapping (49 us
    // for 64 KiB here, most of it the new mapping's page faults, which growth after a drain
    // paid too) instead of the thread's own drain (~600 us): a thread that starts allocating
    // fast filled its ring at 64, 128, 256 and 512 KiB and 1 MiB before a worker got to it (an
    // idle vCPU of the 2-vCPU VM wakes slowly) and drained ~2 MiB itself on the way, ~7 ms
    // (session 34). At the largest size, or past the rings' growth budget, it drains.
    if (h + n - atomic_load_explicit(&r->tail, memory_order_relaxed) > r->cap &&
        !(grown = grow_keeping(r, n))) {
        ok = drainer->drain(r);
        // drained either way (pipeline.h), and only this thread, the owner, moves the head
        HP_ASSERT(atomic_load_explicit(&r->tail, memory_order_relaxed) == h);
    }
    pthread_mutex_unlock(&r->drain);
    // and one more ring waiting for a drainer (another thread's): where threads outnumber the
    // CPUs the full rings' owners are who has the CPU (pipeline.c, help_one)
    if (!grown && ok && drainer->help_one)
        drainer->help_one();
    hp_nocancel_end(cancel);
    if (!grown) { // the time it waited for the lock, and its own drain
        r->wait_ns += hp_clock_ns() - t0;
        r->n_waits++;
    }
    if (!ok || !hp_state_is_on() || n > r->cap) {
        r->n_lost++;
        return false;
    }
    return true;
}
