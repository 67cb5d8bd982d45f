// SPDX-License-Identifier: MIT
// hp_pipeline_stress: drives the shim's whole recording pipeline in this process, from many
// threads at once, the way the entry points do (guard, frame, record before the real free,
// realloc bracketed), but linked against hp_core rather than preloaded: so that a sanitized
// build checks the pipeline itself (the rings, the drains on workers, the flusher's SYNCs and
// reaping, the owner's own drains when its ring is full, the exit flush). A preloaded shim is
// never sanitized (its runtime would fight the host's malloc); this is where ASan and TSan see
// that code run with threads (pipeline_check.cmake; scripts/tsan.sh).
//
// GENERATIONS times, THREADS threads start, each makes OPS allocations (malloc, calloc,
// aligned, some grown by realloc) from 14 call sites of different depths (pipeline_sites.c),
// frees most of them itself and hands the rest to a shared pile that every thread (and main,
// at the end) frees from, some after a realloc: cross-thread frees and reallocs, of blocks
// whose thread may have exited and whose ring the flusher may have reaped. The trace goes to
// $HEAPPROF_OUT, written by the shim's constructor and destructor as in a preloaded program.
// Prints the totals `heapprof stats --json` must report, as key=value (a.b: b inside a); in
// sampled mode (HEAPPROF_SAMPLE_BYTES) those of the blocks the shim sampled, as the entry
// points ask it (every sampled block's free recorded, no other). With $HP_STRESS_SITES, writes
// there each call site's blocks and bytes (write_sites); with $HP_STRESS_PAUSE_MS, pauses that
// long once, halfway through the generations; with $HP_STRESS_SOLO_US, one more thread stops
// and restarts the shim's threads every that many microseconds while the others record, as
// around an unshare (lifecycle.h, hp_lifecycle_solo_begin).
//
// usage: hp_pipeline_stress THREADS OPS [GENERATIONS]
#include "config.h"
#include "format/hpt_format.h"
#include "guard.h"
#include "lifecycle.h"
#include "pipeline_sites.h"
#include "record.h"
#include "sample.h"
#include "state.h"
#include "unwind.h"
#include "xorshift.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define KEEP 64        // blocks a thread keeps live at once
#define PILE 1024      // blocks handed to other threads, not yet freed

static pthread_mutex_t pile_lock = PTHREAD_MUTEX_INITIALIZER;
// A block and its call site (hp_stress_site_of: a realloc counts at its first block's site).
typedef struct held {
    void *p;
    unsigned site;
} held_t;
static held_t pile[PILE];
static size_t n_pile;

static _Atomic uint64_t n_blocks, n_bytes, n_frees, n_reallocs;
static _Atomic uint64_t n_rec_blocks, n_rec_bytes, n_rec_frees; // what was recorded
static _Atomic uint32_t n_threads, n_rec_threads; // threads that made / recorded an event

// What a thread did, added to the totals when it ends; rec_*: what the shim was asked to
// record, which sampled mode (HEAPPROF_SAMPLE_BYTES) decides block by block.
typedef struct tally {
    uint64_t blocks, bytes, frees, reallocs;
    uint64_t rec_blocks, rec_bytes, rec_frees;
    uint64_t site_blocks[HP_STRESS_SITES], site_bytes[HP_STRESS_SITES]; // by hp_stress_site_of
} tally_t;
static _Atomic uint64_t n_site_blocks[HP_STRESS_SITES], n_site_bytes[HP_STRESS_SITES];
static _Thread_local tally_t *tl_tally;
// Sampled mode: the shim decides inside realloc which halves to record, which this program
// cannot count, so it makes no reallocs then.
static bool sampled;

// The entry points' bracket: the guard (whose holder frame is this one) and recording on.
#define ENTER()                                                                                    \
    do {                                                                                           \
        if (hp_tls_guard)                                                                          \
            abort();                                                                               \
        hp_tls_guard = HP_GUARD_HERE();                                                            \
    } while (0)
#define LEAVE() (hp_tls_guard = 0)

// The allocator called through pointers, as the shim calls the real one: the compiler then
// takes a block for what it is to the record, a value (not memory it reads before it is
// written, nor a dead pointer after realloc).
static void *(*volatile real_malloc)(size_t) = malloc;
static void *(*volatile real_calloc)(size_t, size_t) = calloc;
static int (*volatile real_memalign)(void **, size_t, size_t) = posix_memalign;
static void *(*volatile real_realloc)(void *, size_t) = realloc;

// After the real call: records block p as the entry points' alloc_done does, from the caller
// of the function this is inlined into (its frame is the entry point's).
static inline __attribute__((always_inline)) void recorded(uint8_t tag, void *p, size_t n,
                                                           size_t align) {
    if (p && hp_state_is_on() && hp_sample_alloc(n)) {
        hp_frame_t from;
        HP_CALLER_FRAME(from);
        hp_record_alloc(tag, p, n, align, &from);
        tl_tally->rec_blocks++;
        tl_tally->rec_bytes += n;
    }
}

static NOINLINE void *rec_malloc(size_t n) {
    ENTER();
    void *p = real_malloc(n);
    recorded(HPT_REC_MALLOC, p, n, 0);
    LEAVE();
    return p;
}

static NOINLINE void *rec_calloc(size_t n) {
    ENTER();
    void *p = real_calloc(1, n);
    recorded(HPT_REC_CALLOC, p, n, 0);
    LEAVE();
    return p;
}

static NOINLINE void *rec_aligned(size_t align, size_t n) {
    ENTER();
    void *p = NULL;
    if (real_memalign(&p, align, n))
        p = NULL;
    recorded(HPT_REC_ALIGNED, p, n, align);
    LEAVE();
    return p;
}

static NOINLINE void *rec_realloc(void *old, size_t n) {
    ENTER();
    size_t old_usable;
    uint64_t t0 = hp_record_realloc_begin(old, n, &old_usable);
    void *p = real_realloc(old, n);
    hp_frame_t from;
    HP_CALLER_FRAME(from);
    hp_record_realloc_end(t0, old_usable, old, p, n, &from);
    tl_tally->rec_blocks++; // exact mode only (sampled mode makes no reallocs here)
    tl_tally->rec_bytes += n;
    LEAVE();
    return p;
}

static NOINLINE void rec_free(void *p) {
    ENTER();
    if (hp_state_is_on() && hp_sample_free(p)) {
        hp_record_free(p);
        tl_tally->rec_frees++;
    }
    free(p);
    LEAVE();
}

static void die(const char *what) {
    fprintf(stderr, "hp_pipeline_stress: %s\n", what);
    exit(1);
}

static void tally_add(const tally_t *t) {
    atomic_fetch_add(&n_blocks, t->blocks);
    atomic_fetch_add(&n_bytes, t->bytes);
    atomic_fetch_add(&n_frees, t->frees);
    atomic_fetch_add(&n_reallocs, t->reallocs);
    atomic_fetch_add(&n_rec_blocks, t->rec_blocks);
    atomic_fetch_add(&n_rec_bytes, t->rec_bytes);
    atomic_fetch_add(&n_rec_frees, t->rec_frees);
    for (unsigned k = 0; k < HP_STRESS_SITES; k++) {
        atomic_fetch_add(&n_site_blocks[k], t->site_blocks[k]);
        atomic_fetch_add(&n_site_bytes[k], t->site_bytes[k]);
    }
    if (t->blocks || t->frees)
        atomic_fetch_add(&n_threads, 1);
    if (t->rec_blocks || t->rec_frees)
        atomic_fetch_add(&n_rec_threads, 1);
}

// Grows h to n bytes: a new block at h's site (heapprof's as DHAT's: the site of the block it
// grew from).
static void grow(held_t *h, size_t n, tally_t *t) {
    void *q = rec_realloc(h->p, n);
    if (!q)
        die("realloc failed");
    h->p = q;
    t->site_blocks[h->site]++;
    t->site_bytes[h->site] += n;
    t->reallocs++;
    t->blocks++; // a realloc makes a new block and frees the old
    t->frees++;
    t->bytes += n;
    }

static void drop(void *p, tally_t *t) {
    rec_free(p);
    t->frees++;
}

// Hands p to whichever thread frees from the pile later: once the pile holds PILE blocks, p
// takes the place of one of them (chosen by r), which this thread frees, some grown here first
// (a realloc of another thread's block, maybe of a thread that has exited).
static void swap_with_pile(held_t h, uint64_t r, tally_t *t) {
    held_t other = {0};
    pthread_mutex_lock(&pile_lock);
    if (n_pile < PILE) {
        pile[n_pile++] = h;
    } else {
        size_t k = (size_t)(r % PILE);
        other = pile[k];
        pile[k] = h;
    }
    pthread_mutex_unlock(&pile_lock);
    if (!other.p)
        return;
    if (!sampled && (r >> 20) % 4 == 0)
        grow(&other, 1 + (r >> 32) % 4096, t);
    drop(other.p, t);
}

static size_t pick_size(uint64_t r) {
    unsigned k = r & 31;
    if (k < 20)
        return 1 + (r >> 8) % 64;
    if (k < 28)
        return 64 + (r >> 8) % 960;
    if (k < 31)
        return 1024 + (r >> 8) % 15360;
    return 16384 + (r >> 8) % 245760; // past the fill's first lines: the sampled measure
}

typedef struct worker {
    uint32_t seed;
    long ops;
} worker_t;

// One of the allocation calls, chosen by r (hp_stress_site's function).
static void *alloc_one(size_t n, uint64_t r) {
    switch ((r >> 40) % 8) {
    case 0:
        return rec_calloc(n);
    case 1:
        return rec_aligned((size_t)64 << ((r >> 44) % 4), n);
    default:
        return rec_malloc(n);
    }
}

static void *run_worker(void *arg) {
    const worker_t *w = arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)w->seed << 17 | 1);
    held_t keep[KEEP] = {{0}};
    size_t size_of[KEEP] = {0};
    tally_t t = {0};
    tl_tally = &t;
    for (long i = 0; i < w->ops; i++) {
        uint64_t r = xorshift64(&rng);
        unsigned slot = (unsigned)(r >> 32) % KEEP;
        if (!sampled && keep[slot].p && (r >> 12) % 16 == 0) { // grown in place or moved
            size_of[slot] += 1 + (r >> 20) % 512;
            grow(&keep[slot], size_of[slot], &t);
            continue;
        }
        if (keep[slot].p) {
            if ((r >> 16) % 4 == 0)
                swap_with_pile(keep[slot], r >> 24, &t); // freed by another thread, later
            else
                drop(keep[slot].p, &t);
        }
        size_t n = pick_size(r);
        void *p = hp_stress_site(alloc_one, n, r);
        if (!p)
            die("allocation failed");
        memset(p, 0xa5, n / 3); // touches a third of it
        keep[slot] = (held_t){p, hp_stress_site_of(r)};
        size_of[slot] = n;
        t.blocks++;
        t.bytes += n;
        t.site_blocks[keep[slot].site]++;
        t.site_bytes[keep[slot].site] += n;
    }
    for (unsigned k = 0; k < KEEP; k++)
        if (keep[k].p)
            swap_with_pile(keep[k], xorshift64(&rng), &t);
    tally_add(&t);
    return NULL;
}

// Writes, for each call site, the end of its folded stack as `heapprof flame --folded` prints
// it (from hp_stress_site on: the frames of this program under it are the shim's module's,
// dropped) with the blocks, then the bytes, allocated there: "blocks SUFFIX N", "bytes SUFFIX
// N", a realloc's block at the site of the block it grew from, as heapprof counts it.
static void write_sites(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write the sites file");
    for (int metric = 0; metric < 2; metric++)
        for (unsigned k = 0; k < HP_STRESS_SITES; k++) {
            uint64_t v = atomic_load(metric ? &n_site_bytes[k] : &n_site_blocks[k]);
            if (!v)
                continue;
            fprintf(f, "%s hp_stress_site", metric ? "bytes" : "blocks");
            if (k == 0)
                fputs(";site_a", f);
            else {
                for (unsigned d = 1; k >= 2 && d <= k - 1; d++)
                    fputs(";site_deep", f);
                fputs(";site_b", f);
            }
            fprintf(f, " %" PRIu64 "\n", v);
        }
    if (fclose(f))
        die("cannot write the sites file");
}

// $HP_STRESS_SOLO_US: the shim's threads stopped and started again, over and over, while the
// workers record (their full rings drained by themselves meanwhile).
static _Atomic bool solo_stop;
static void *run_solo(void *arg) {
    long us = *(const long *)arg;
    while (!atomic_load(&solo_stop)) {
        if (hp_lifecycle_solo_begin()) {
            struct timespec held = {0, us * 250}; // a quarter of the period without them
            nanosleep(&held, NULL);
            hp_lifecycle_solo_end();
        }
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4)
        die("usage: hp_pipeline_stress THREADS OPS [GENERATIONS]");
    long threads = atol(argv[1]), ops = atol(argv[2]), gens = argc > 3 ? atol(argv[3]) : 1;
    if (threads < 1 || threads > 256 || ops < 1 || gens < 1)
        die("THREADS 1-256, OPS and GENERATIONS at least 1");
    if (!hp_state_is_on())
        die("the shim is not recording (HEAPPROF_OUT unset or not writable?)");
    sampled = hp_config.sample_bytes != 0;
    const char *pause = getenv("HP_STRESS_PAUSE_MS");
    long pause_ms = pause ? atol(pause) : 0;
    pthread_t tids[256];
    worker_t ws[256];
    const char *solo = getenv("HP_STRESS_SOLO_US");
    long solo_us = solo ? atol(solo) : 0;
    pthread_t solo_tid;
    if (solo_us > 0 && pthread_create(&solo_tid, NULL, run_solo, &solo_us))
        die("pthread_create failed");
    for (long g = 0; g < gens; g++) {
        for (long t = 0; t < threads; t++) {
            ws[t] = (worker_t){.seed = (uint32_t)(g * threads + t), .ops = ops};
            if (pthread_create(&tids[t], NULL, run_worker, &ws[t]))
                die("pthread_create failed");
        }
        for (long t = 0; t < threads; t++)
            pthread_join(tids[t], NULL);
        // $HP_STRESS_PAUSE_MS once, halfway: the ended threads' rings sit unused in tbuf.c's
        // pool that long (past a second, the flusher unmaps them) before the next generation
        if (g == gens / 2 && pause_ms > 0) {
            struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0)
                ;
        }
    }
    if (solo_us > 0) {
        atomic_store(&solo_stop, true);
        pthread_join(solo_tid, NULL);
    }
    // the pile's last blocks: freed by main, after every thread that made them has gone
    tally_t t = {0};
    tl_tally = &t;
    while (n_pile > 0)
        drop(pile[--n_pile].p, &t);
    tally_add(&t);
    uint64_t blocks = atomic_load(&n_blocks), frees = atomic_load(&n_frees);
    uint64_t reallocs = atomic_load(&n_reallocs);
    uint64_t rec_blocks = atomic_load(&n_rec_blocks), rec_frees = atomic_load(&n_rec_frees);
    uint64_t rec_bytes = atomic_load(&n_rec_bytes);
    if (frees != blocks)
        die("a block was not freed");
    // `heapprof stats` counts a realloc as one event and one block, not as a free
    if (!sampled && (rec_blocks != blocks || rec_frees != frees - reallocs ||
                     rec_bytes != atomic_load(&n_bytes)))
        die("not every event was handed to the shim");
    const char *sites = getenv("HP_STRESS_SITES");
    if (sites && !sampled)
        write_sites(sites);
    if (sampled) {
        // stats scales blocks and bytes up to estimates; events, and the bytes-touched
        // measures of the freed blocks (all of them, by free: no realloc), are what was recorded
        printf("events=%" PRIu64 " end_blocks=0 threads=%" PRIu32 " touch.blocks=%" PRIu64
               " touch.bytes=%" PRIu64 "\n",
               rec_blocks + rec_frees, atomic_load(&n_rec_threads), rec_frees, rec_bytes);
        return 0;
    }
    printf("blocks=%" PRIu64 " bytes=%" PRIu64 " frees=%" PRIu64 " end_blocks=0 events=%" PRIu64
           " threads=%" PRIu32 "\n",
           rec_blocks, rec_bytes, rec_frees, rec_blocks + rec_frees, atomic_load(&n_threads));
    return 0;
}
