// SPDX-License-Identifier: MIT
// Replay on shard threads. One round per batch: the caller's thread publishes a batch and every
// thread (the caller's too) applies its shards' events and writes their steps (totals) or what
// they found (sites). Totals: once all are done the caller's thread adds the steps up in order
// for the global peak, and the next round starts (lock-step: the scan is a few additions an
// event). Sites: the scans (replay_scan_order and replay_scan_peak side by side, then
// replay_scan_apply by part of the sites; growth_scan_links, then growth_scan_chains) run on
// threads of their own and overlap the shards' next round, so a round costs the slowest of
// them instead of their sum: round k uses buffers [k & 1] (its events, copied by the shards
// since a reader batch is valid only until the next one is read, the finds, the sites, the
// order's and the peak's per-event results and the verdicts), and round k starts once the
// scans of round k - 2 are done with them. Batches smaller than ROUND_MIN are copied together
// first so the hand-over (a few wake-ups a round) stays below a nanosecond an event. A thread works only on its own shards' tables; the batch, the steps, the verdicts and
// the rounds' buffers pass between threads through the mutex.
#include "model/replay_par.h"

#include "core/xalloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPLAY_PAR_THREADS_DEFAULT 4u // without HEAPPROF_REPLAY_THREADS: see replay_par_threads
#define ROUND_MIN 16384u      // events a round gathers before it starts, if batches are small
#define ROUND_MAX (1u << 20)  // events a round takes at most (its indexes are 32-bit)
#define WORKER_STACK_BYTES (256u << 10)

typedef struct shard_thread {
    struct replay_par *p;
    unsigned first, step; // it works on shards first, first + step, ... < n_shards
                          // and (sites) copies the step-th part `first` of the round's events
    uint32_t *idx;        // scratch for replay_shard_events, one per thread
    size_t idx_cap;
    pthread_t thread;
} shard_thread_t;

// One round's data for the scans (sites).
typedef struct round_buf {
    reader_event_t *ev; // the round's events, copied
    size_t n, ev_cap;
    uint64_t round;
    replay_found_t *found; // what the shards found, per event
    size_t found_cap;
    uint32_t *site_of; // the site of each counted allocation (the sites' scan writes it)
    size_t site_of_cap;
    replay_cwords_t *cw; // with growth: the words of the blocks the shards found
    size_t cw_cap;
    uint8_t *verdict; // with a filter: keep's answer per event
    size_t verdict_cap;
    uint32_t *site_found; // the order's per event: the site of the block found
    size_t site_found_cap;
    uint8_t *op; // the order's per event: what it does to sites (REPLAY_OP_*)
    size_t op_cap;
    uint32_t *epoch; // the peak's per event: its epoch
    size_t epoch_cap;
    replay_scan_round_t sr; // the above for the scans (the peak's epoch0 too)
} round_buf_t;

enum { SCAN_ORDER, SCAN_PEAK, SCAN_APPLY, SCAN_GROWTH, SCAN_GROWTH_CHAINS };

typedef struct scanner {
    struct replay_par *p;
    unsigned kind;   // replay_scan_order, _peak, _apply of `part`, growth_scan_links, _chains
    unsigned part;
    uint64_t done;   // rounds scanned
    bool threaded;   // on a thread of its own
    pthread_t thread;
} scanner_t;

struct replay_par {
    replay_t *into;
    replay_t *shards[REPLAY_PAR_THREADS_MAX];
    unsigned n_shards, shard_bits;
    shard_thread_t threads[REPLAY_PAR_THREADS_MAX]; // [0]: the caller's thread
    unsigned n_threads;                              // started, the caller's included

    pthread_mutex_t lock;
    pthread_cond_t start, done;
    uint64_t round;   // rounds started
    unsigned pending; // threads still working on the current round
    bool stop;

    // the current round
    const reader_event_t *ev;
    size_t n;
    replay_step_t *steps;
    size_t steps_cap;
    uint8_t *verdict; // totals with a filter: keep's answer per event of the round
    size_t verdict_cap;
    replay_keep_fn keep;
    void *keep_ctx;
    bool sites;        // REPLAY_SITES: shards find, the scans apply (replay_scan_order)
    round_buf_t buf[2]; // with sites: round k's in buf[k & 1]
    growth_t *growth;  // replay_par_set_growth: growth in a scan, its words in shards
    const replay_cfix_t *gfix; // with growth: the changed words of round - 2, for the shards
    size_t n_gfix;

    // with sites, the scans of the rounds the shards finished, each on a thread of its own
    // (scan_main; the caller's thread runs them in turn when none could be made)
    pthread_cond_t scan_go, scanned; // a round is ready for the scans; a scan finished one
    uint64_t ready;                  // rounds the shards finished
    // [0]: replay_scan_order, [1]: replay_scan_peak, then replay_scan_apply of each part, then
    // growth's links and chains (with growth)
    scanner_t scanners[4 + REPLAY_SCAN_PARTS_MAX];
    unsigned growth_links; // the index of growth's links scanner
    unsigned n_scanners;
    bool scan_stop;
    reader_event_t *held; // small batches gathered for the next round
    size_t n_held, held_cap;

    size_t round_min, round_max; // ROUND_MIN, ROUND_MAX unless a test set others

    // the scan
    uint64_t live_bytes, live_blocks, peak_bytes, peak_blocks, peak_time_ns;
};

unsigned replay_par_threads(void) {
    unsigned n;
    const char *env = getenv("HEAPPROF_REPLAY_THREADS");
    char *end;
    unsigned long v = env && *env ? strtoul(env, &end, 10) : 0;
    if (env && *env && !*end) {
        n = v > REPLAY_PAR_THREADS_MAX ? REPLAY_PAR_THREADS_MAX : (unsigned)v;
    } else {
        // Half the CPUs, at most REPLAY_PAR_THREADS_DEFAULT: with the scans' own threads
        // (order, growth, the apply parts), the reader and its decode workers beside them,
        // more shards cost more than they give. On 16 cores (session 10, `report` on 100 M
        // c_churn events) 4 took 2.95 and 3.15 s, 16 took 3.55 and 3.76 s (CPU 23 -> 33 s):
        // every shard thread walks every event of a round.
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus <= 2 ? 0 : (unsigned)(cpus / 2);
        if (n > REPLAY_PAR_THREADS_DEFAULT)
            n = REPLAY_PAR_THREADS_DEFAULT;
    }
    while (n & (n - 1))
        n &= n - 1; // shards are picked by address bits: a power of two
    return n;
}

// The filter's verdict, decided on the caller's thread before the round (filter_keep keeps a
// cache that is not shared safely) and read here by the shard that owns the block.
static bool verdict_keep(void *ctx, const reader_event_t *ev) {
    const replay_par_t *p = ctx;
    return p->verdict[ev - p->ev];
}

static void scanner_start(replay_par_t *p, unsigned kind, unsigned part);

static void work(replay_par_t *p, shard_thread_t *th) {
    if (th->idx_cap < p->n)
        th->idx = xgrow(th->idx, &th->idx_cap, p->n, sizeof *th->idx);
    if (!p->sites) {
        for (unsigned s = th->first; s < p->n_shards; s += th->step)
            replay_shard_events(p->shards[s], p->ev, p->n, s, th->idx, p->steps, p->round);
        return;
    }
    // this thread's part of the copy the scans will read after the batch is gone
    round_buf_t *b = &p->buf[p->round & 1];
    size_t lo = p->n * th->first / th->step, hi = p->n * (th->first + 1) / th->step;
    memcpy(b->ev + lo, p->ev + lo, (hi - lo) * sizeof *b->ev);
    for (unsigned s = th->first; s < p->n_shards; s += th->step) {
        // round - 2's sites and words: b's site_of still holds them, and gfix
        replay_shard_fix(p->shards[s], b->site_of, p->round);
        if (p->growth)
            replay_shard_fix_words(p->shards[s], s, p->gfix, p->n_gfix);
        replay_shard_find(p->shards[s], p->ev, p->n, s, th->idx, p->keep ? b->verdict : NULL,
                          b->found, p->round, b->cw);
    }
}

static void *shard_main(void *arg) {
    shard_thread_t *th = arg;
    replay_par_t *p = th->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->round == seen)
            pthread_cond_wait(&p->start, &p->lock);
        if (p->stop)
            break;
        seen = p->round;
        pthread_mutex_unlock(&p->lock);
        work(p, th);
        pthread_mutex_lock(&p->lock);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

replay_par_t *replay_par_new(replay_t *into, unsigned mode, unsigned n_threads,
                             replay_keep_fn keep, void *keep_ctx) {
    replay_par_t *p = xcalloc(1, sizeof *p);
    if (n_threads < 1)
        n_threads = 1;
    if (n_threads > REPLAY_PAR_THREADS_MAX)
        n_threads = REPLAY_PAR_THREADS_MAX;
    while (n_threads & (n_threads - 1))
        n_threads &= n_threads - 1;
    p->into = into;
    p->n_shards = n_threads;
    while ((1u << p->shard_bits) < p->n_shards)
        p->shard_bits++;
    p->keep = keep;
    p->keep_ctx = keep_ctx;
    p->round_min = ROUND_MIN;
    p->round_max = ROUND_MAX;
    p->sites = mode & (REPLAY_SITES | REPLAY_DHAT);
    for (unsigned s = 0; s < p->n_shards; s++) {
        // with sites the shards never ask keep: replay_shard_find reads the verdicts itself
        p->shards[s] = keep && !p->sites ? replay_new(verdict_keep, p) : replay_new(NULL, NULL);
        replay_set_mode(p->shards[s], mode);
        replay_set_shard(p->shards[s], p->shard_bits);
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    pthread_cond_init(&p->scan_go, NULL);
    pthread_cond_init(&p->scanned, NULL);
    pthread_attr_t attr;
    bool attr_ok = pthread_attr_init(&attr) == 0;
    if (attr_ok)
        (void)pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
    p->n_threads = 1; // the caller's
    for (unsigned i = 1; i < p->n_shards; i++) {
        p->threads[i].p = p;
        if (pthread_create(&p->threads[i].thread, attr_ok ? &attr : NULL, shard_main,
                           &p->threads[i]) != 0)
            break;
        p->n_threads++;
    }
    if (attr_ok)
        pthread_attr_destroy(&attr);
    // thread i works on shards i, i + n_threads, ...: with fewer threads than shards the
    // caller's thread and the others share the rest (set before the first round starts)
    p->threads[0].p = p; // the others' was set before they started, and they read it at once
    pthread_mutex_lock(&p->lock);
    for (unsigned i = 0; i < p->n_threads; i++) {
        p->threads[i].first = i;
        p->threads[i].step = p->n_threads;
    }
    pthread_mutex_unlock(&p->lock);
    if (p->sites) {
        // the sites' figures on half as many threads as the shards, at least one and at most
        // 4 (each part walks every event of the round to pick its sites'): 2 at 4 shards,
        // where one part cost as much as growth's links (c_churn, 83 instructions an event
        // against 78)
        unsigned parts = p->n_shards / 2 ? p->n_shards / 2 : 1;
        if (parts > 4)
            parts = 4;
        replay_scan_split(into, parts);
        scanner_start(p, SCAN_ORDER, 0);
        scanner_start(p, SCAN_PEAK, 0);
        for (unsigned k = 0; k < replay_scan_parts(into); k++)
            scanner_start(p, SCAN_APPLY, k);
    }
    return p;
}

// One scan of round k, from buf[k & 1] (and the last round's site_of).
static void scan_round(replay_par_t *p, const scanner_t *sc, uint64_t k) {
    round_buf_t *b = &p->buf[k & 1];
    if (sc->kind == SCAN_GROWTH) {
        growth_scan_links(p->growth, b->ev, b->n, b->found, b->cw, k);
    } else if (sc->kind == SCAN_GROWTH_CHAINS) {
        growth_scan_chains(p->growth, b->ev, b->n, b->found, b->cw, k);
    } else if (sc->kind == SCAN_APPLY) {
        replay_scan_apply(p->into, sc->part, &b->sr);
    } else if (sc->kind == SCAN_PEAK) {
        replay_scan_peak(p->into, &b->sr);
    } else {
        replay_scan_order(p->into, &b->sr, p->buf[(k - 1) & 1].site_of);
    }
}

// Round k of sc is scanned: wakes whoever waits for it, and after an order, peak or growth's
// links pass the scans after them, whose turn it may be. Called with p->lock held.
static void scan_mark_done(replay_par_t *p, scanner_t *sc, uint64_t k) {
    sc->done = k;
    pthread_cond_broadcast(&p->scanned);
    if (sc->kind == SCAN_ORDER || sc->kind == SCAN_PEAK || sc->kind == SCAN_GROWTH)
        pthread_cond_broadcast(&p->scan_go);
}

// The rounds both the order and the peak finished. Call with the lock held.
static uint64_t ordered_done(const replay_par_t *p) {
    uint64_t a = p->scanners[SCAN_ORDER].done, b = p->scanners[SCAN_PEAK].done;
    return a < b ? a : b;
}

// The rounds a scanner may scan: those the shards finished, or for the sites' apply those the
// order and the peak finished, for growth's chains those its links finished. Call with the
// lock held.
static uint64_t scan_avail(const replay_par_t *p, const scanner_t *sc) {
    return sc->kind == SCAN_APPLY            ? ordered_done(p)
           : sc->kind == SCAN_GROWTH_CHAINS ? p->scanners[p->growth_links].done
                                            : p->ready;
}

static void *scan_main(void *arg) {
    scanner_t *sc = arg;
    replay_par_t *p = sc->p;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        // the order's rounds come to the apply threads before the stop (growth's links' to its
        // chains): they stop after them
        while (!p->scan_stop && sc->done == scan_avail(p, sc))
            pthread_cond_wait(&p->scan_go, &p->lock);
        if (sc->done == scan_avail(p, sc) && scan_avail(p, sc) == p->ready)
            break; // stopped, and every round scanned
        if (sc->done == scan_avail(p, sc)) { // the scan before it is still at work
            pthread_cond_wait(&p->scan_go, &p->lock);
            continue;
        }
        uint64_t k = sc->done + 1;
        pthread_mutex_unlock(&p->lock);
        scan_round(p, sc, k);
        pthread_mutex_lock(&p->lock);
        scan_mark_done(p, sc, k);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

// Starts a scanner on a thread of its own; if none can be made, the caller's thread runs its
// scans after each round (slower, the same figures).
static void scanner_start(replay_par_t *p, unsigned kind, unsigned part) {
    scanner_t *sc = &p->scanners[p->n_scanners++];
    *sc = (scanner_t){.p = p, .kind = kind, .part = part};
    pthread_attr_t attr;
    bool attr_ok = pthread_attr_init(&attr) == 0;
    if (attr_ok)
        (void)pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
    sc->threaded = pthread_create(&sc->thread, attr_ok ? &attr : NULL, scan_main, sc) == 0;
    if (attr_ok)
        pthread_attr_destroy(&attr);
}

// Waits until every scan has finished round `upto`. Call with the lock held.
static void wait_scans(replay_par_t *p, uint64_t upto) {
    for (unsigned i = 0; i < p->n_scanners; i++)
        while (p->scanners[i].done < upto)
            pthread_cond_wait(&p->scanned, &p->lock);
}

// Publishes round `round` over ev[0..n), works on the caller's share and waits for the other
// shard threads. The round's number is what they wait on: it changes under the lock only.
static void run_shards(replay_par_t *p, const reader_event_t *ev, size_t n, uint64_t round) {
    pthread_mutex_lock(&p->lock);
    p->ev = ev;
    p->n = n;
    p->round = round;
    p->pending = p->n_threads - 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    work(p, &p->threads[0]);
    pthread_mutex_lock(&p->lock);
    while (p->pending)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

// One round over ev[0..n) with sites: the shards find round k while the scans of round k - 1
// may still run; then the scans get round k, and the caller's thread goes on.
static void run_sites_round(replay_par_t *p, const reader_event_t *ev, size_t n) {
    uint64_t k = p->round + 1;
    round_buf_t *b = &p->buf[k & 1];
    bool grow = b->ev_cap < n || b->found_cap < n || b->site_of_cap < n ||
                b->site_found_cap < n || b->op_cap < n || b->epoch_cap < n ||
                (p->growth && b->cw_cap < n) || (p->keep && b->verdict_cap < n);
    // b was round k - 2's: its scans must be done with it. To grow it, every scan must be done
    // (the scan of round k - 1 reads b's site_of); rounds grow rarely, at the start.
    pthread_mutex_lock(&p->lock);
    wait_scans(p, grow ? k - 1 : k >= 2 ? k - 2 : 0);
    pthread_mutex_unlock(&p->lock);
    if (grow) {
        if (b->ev_cap < n)
            b->ev = xgrow(b->ev, &b->ev_cap, n, sizeof *b->ev);
        if (b->found_cap < n)
            b->found = xgrow(b->found, &b->found_cap, n, sizeof *b->found);
        if (b->site_of_cap < n)
            b->site_of = xgrow(b->site_of, &b->site_of_cap, n, sizeof *b->site_of);
        if (p->growth && b->cw_cap < n)
            b->cw = xgrow(b->cw, &b->cw_cap, n, sizeof *b->cw);
        if (p->keep && b->verdict_cap < n)
            b->verdict = xgrow(b->verdict, &b->verdict_cap, n, sizeof *b->verdict);
        if (b->site_found_cap < n)
            b->site_found = xgrow(b->site_found, &b->site_found_cap, n, sizeof *b->site_found);
        if (b->op_cap < n)
            b->op = xgrow(b->op, &b->op_cap, n, sizeof *b->op);
        if (b->epoch_cap < n)
            b->epoch = xgrow(b->epoch, &b->epoch_cap, n, sizeof *b->epoch);
    }
    b->n = n;
    b->round = k;
    b->sr = (replay_scan_round_t){.ev = b->ev, .n = n, .round = k, .found = b->found,
                                  .verdict = p->keep ? b->verdict : NULL,
                                  .site_of = b->site_of, .site_found = b->site_found,
                                  .op = b->op, .epoch = b->epoch};
    if (p->keep)
        for (size_t i = 0; i < n; i++)
            b->verdict[i] = ev[i].kind == READER_ALLOC && p->keep(p->keep_ctx, &ev[i]);
    if (p->growth) // round k - 2's, which growth keeps until its scan of round k
        p->gfix = growth_scan_fixes(p->growth, k, &p->n_gfix);
    run_shards(p, ev, n, k);
    pthread_mutex_lock(&p->lock);
    p->ready = k;
    pthread_cond_broadcast(&p->scan_go);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n_scanners; i++) {
        scanner_t *sc = &p->scanners[i];
        if (sc->threaded)
            continue;
        pthread_mutex_lock(&p->lock);
        while (scan_avail(p, sc) < k) // an apply after an order on its own thread
            pthread_cond_wait(&p->scanned, &p->lock);
        pthread_mutex_unlock(&p->lock);
        scan_round(p, sc, k);
        pthread_mutex_lock(&p->lock);
        scan_mark_done(p, sc, k);
        pthread_mutex_unlock(&p->lock);
    }
}

// One round over ev[0..n): all shards in parallel, then the ordered scan for the peak (totals)
// or the scans' turn (sites).
static void run_round(replay_par_t *p, const reader_event_t *ev, size_t n) {
    if (p->sites) {
        run_sites_round(p, ev, n);
        return;
    }
    if (p->steps_cap < n)
        p->steps = xgrow(p->steps, &p->steps_cap, n, sizeof *p->steps);
    if (p->keep) {
        if (p->verdict_cap < n)
            p->verdict = xgrow(p->verdict, &p->verdict_cap, n, sizeof *p->verdict);
        for (size_t i = 0; i < n; i++)
            p->verdict[i] = ev[i].kind == READER_ALLOC && p->keep(p->keep_ctx, &ev[i]);
    }
    run_shards(p, ev, n, p->round + 1);

    // the live totals event by event, in stream order: a peak is taken where a counted
    // allocation strictly exceeds it, as replay.c does, so it is the first moment of the maximum
    uint64_t live = p->live_bytes, blocks = p->live_blocks, peak = p->peak_bytes;
    for (size_t i = 0; i < n; i++) {
        const replay_step_t *s = &p->steps[i];
        live += s->live_bytes;
        blocks += (uint64_t)(int64_t)(int32_t)s->live_blocks;
        if (s->counted_alloc && live > peak) {
            peak = live;
            p->peak_blocks = blocks;
            p->peak_time_ns = ev[i].time_ns;
        }
    }
    p->live_bytes = live;
    p->live_blocks = blocks;
    p->peak_bytes = peak;
}

static void flush_held(replay_par_t *p) {
    for (size_t done = 0; done < p->n_held;) {
        size_t k = p->n_held - done < p->round_max ? p->n_held - done : p->round_max;
        run_round(p, p->held + done, k);
        done += k;
    }
    p->n_held = 0;
}

void replay_par_events(replay_par_t *p, const reader_event_t *ev, size_t n) {
    while (n >= p->round_min) {
        flush_held(p); // in order: what was held back goes first
        size_t k = n < p->round_max ? n : p->round_max;
        run_round(p, ev, k);
        ev += k;
        n -= k;
    }
    if (n == 0)
        return;
    p->held = xgrow(p->held, &p->held_cap, p->n_held + n, sizeof *p->held);
    memcpy(p->held + p->n_held, ev, n * sizeof *ev);
    p->n_held += n;
    if (p->n_held >= p->round_min)
        flush_held(p);
}

void replay_par_set_growth(replay_par_t *p, growth_t *g) {
    p->growth = g;
    growth_scan_start(g);
    for (unsigned s = 0; s < p->n_shards; s++)
        replay_shard_keep_words(p->shards[s]);
    // beside the sites' scans: they share what the shards found
    p->growth_links = p->n_scanners;
    scanner_start(p, SCAN_GROWTH, 0);
    scanner_start(p, SCAN_GROWTH_CHAINS, 0);
}

void replay_par_set_round(replay_par_t *p, size_t min_events, size_t max_events) {
    p->round_max = max_events ? max_events : 1;
    if (p->round_max > ROUND_MAX)
        p->round_max = ROUND_MAX;
    p->round_min = min_events < p->round_max ? min_events : p->round_max;
}

void replay_par_finish(replay_par_t *p) {
    flush_held(p);
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    p->scan_stop = true; // the scans finish the rounds they were given first
    pthread_cond_broadcast(&p->start);
    pthread_cond_broadcast(&p->scan_go);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 1; i < p->n_threads; i++)
        pthread_join(p->threads[i].thread, NULL);
    for (unsigned i = 0; i < p->n_scanners; i++)
        if (p->scanners[i].threaded)
            pthread_join(p->scanners[i].thread, NULL);
    for (unsigned s = 0; s < p->n_shards; s++) {
        if (!p->sites)
            replay_merge_shard(p->into, p->shards[s]);
        replay_free(p->shards[s]);
    }
    if (!p->sites) // with sites the scans kept every figure in `into` itself
        replay_set_peak(p->into, p->peak_bytes, p->peak_blocks, p->peak_time_ns);
    else
        replay_scan_merge(p->into);
    for (unsigned i = 0; i < p->n_threads; i++)
        free(p->threads[i].idx);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->scan_go);
    pthread_cond_destroy(&p->scanned);
    for (unsigned k = 0; k < 2; k++) {
        round_buf_t *b = &p->buf[k];
        free(b->ev);
        free(b->found);
        free(b->site_of);
        free(b->cw);
        free(b->verdict);
        free(b->site_found);
        free(b->op);
        free(b->epoch);
    }
    free(p->steps);
    free(p->verdict);
    free(p->held);
    free(p);
}
