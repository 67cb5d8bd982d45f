// SPDX-License-Identifier: MIT
// Replay on shard threads. One round per batch: the caller's thread publishes a batch, every
// thread (the caller's too) applies its shards' events and writes their steps (totals) or what
// they found (sites), and once all are done the caller's thread scans them in order: for the
// global peak, or to apply every event to the sites (replay_scan_sites). Rounds are
// lock-step because a reader batch is valid only until the next one is read; batches smaller
// than ROUND_MIN are copied together first so the hand-over (two wake-ups a round) stays below
// a nanosecond an event. A thread works only on its own shards' tables; the batch, the steps
// and the filter verdicts pass between threads through the round's mutex.
#include "model/replay_par.h"

#include "core/xalloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUND_MIN 16384u      // events a round gathers before it starts, if batches are small
#define ROUND_MAX (1u << 20)  // events a round takes at most (its indexes are 32-bit)
#define WORKER_STACK_BYTES (256u << 10)

typedef struct shard_thread {
    struct replay_par *p;
    unsigned first, step; // it works on shards first, first + step, ... < n_shards
    uint32_t *idx;        // scratch for replay_shard_events, one per thread
    size_t idx_cap;
    pthread_t thread;
} shard_thread_t;

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
    uint8_t *verdict; // with a filter: keep's answer per event of the round
    size_t verdict_cap;
    replay_keep_fn keep;
    void *keep_ctx;
    bool sites;              // REPLAY_SITES: shards find, the scan applies (replay_scan_sites)
    replay_found_t *found;   // with sites: what the shards found, per event of the round
    size_t found_cap;
    uint32_t *site_of;       // with sites: the site of each counted allocation of the last round
    size_t site_of_cap;
    bool fix_ready;          // site_of holds a finished round (the shards' fix may read it)
    growth_t *growth;        // replay_par_set_growth: growth in the scan, its words in shards
    replay_cwords_t *cw;     // with growth: the words of the blocks the shards found
    size_t cw_cap;
    const replay_cfix_t *gfix; // with growth: the last round's changed words, for the shards
    size_t n_gfix;
    // growth_scan on a thread of its own, beside replay_scan_sites on the caller's: the two
    // share only what the shards found (read by both) and the round's events
    bool growth_threaded;
    pthread_t growth_thread;
    pthread_mutex_t glock;
    pthread_cond_t gstart, gdone;
    uint64_t gasked, gfinished; // rounds handed to the growth thread, and done by it
    bool gstop;
    const reader_event_t *gev;
    size_t gn;

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
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus <= 2 ? 0 : (unsigned)(cpus / 2);
        if (n > REPLAY_PAR_THREADS_MAX)
            n = REPLAY_PAR_THREADS_MAX;
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

static void work(replay_par_t *p, shard_thread_t *th) {
    if (th->idx_cap < p->n)
        th->idx = xgrow(th->idx, &th->idx_cap, p->n, sizeof *th->idx);
    for (unsigned s = th->first; s < p->n_shards; s += th->step) {
        if (p->sites) {
            replay_shard_fix(p->shards[s], p->fix_ready ? p->site_of : NULL);
            if (p->growth)
                replay_shard_fix_words(p->shards[s], s, p->gfix, p->n_gfix);
            replay_shard_find(p->shards[s], p->ev, p->n, s, th->idx, p->keep ? p->verdict : NULL,
                              p->found, p->round, p->cw);
        } else {
            replay_shard_events(p->shards[s], p->ev, p->n, s, th->idx, p->steps, p->round);
        }
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
    return p;
}

static void *growth_main(void *arg) {
    replay_par_t *p = arg;
    pthread_mutex_lock(&p->glock);
    for (;;) {
        while (!p->gstop && p->gasked == p->gfinished)
            pthread_cond_wait(&p->gstart, &p->glock);
        if (p->gstop)
            break;
        uint64_t round = p->round; // written before this round was handed over
        pthread_mutex_unlock(&p->glock);
        growth_scan(p->growth, p->gev, p->gn, p->found, p->cw, round);
        pthread_mutex_lock(&p->glock);
        p->gfinished = p->gasked;
        pthread_cond_signal(&p->gdone);
    }
    pthread_mutex_unlock(&p->glock);
    return NULL;
}

// One round over ev[0..n): all shards in parallel, then the ordered scan for the peak.
static void run_round(replay_par_t *p, const reader_event_t *ev, size_t n) {
    if (p->sites) {
        if (p->found_cap < n)
            p->found = xgrow(p->found, &p->found_cap, n, sizeof *p->found);
        if (p->site_of_cap < n)
            p->site_of = xgrow(p->site_of, &p->site_of_cap, n, sizeof *p->site_of);
        if (p->growth && p->cw_cap < n)
            p->cw = xgrow(p->cw, &p->cw_cap, n, sizeof *p->cw);
    } else if (p->steps_cap < n) {
        p->steps = xgrow(p->steps, &p->steps_cap, n, sizeof *p->steps);
    }
    if (p->keep) {
        if (p->verdict_cap < n)
            p->verdict = xgrow(p->verdict, &p->verdict_cap, n, sizeof *p->verdict);
        for (size_t i = 0; i < n; i++)
            p->verdict[i] = ev[i].kind == READER_ALLOC && p->keep(p->keep_ctx, &ev[i]);
    }
    pthread_mutex_lock(&p->lock);
    p->ev = ev;
    p->n = n;
    p->pending = p->n_threads - 1;
    p->round++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    work(p, &p->threads[0]);
    pthread_mutex_lock(&p->lock);
    while (p->pending)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);

    if (p->sites) {
        // every figure in stream order with what the shards found; site_of for their next fix
        if (p->growth_threaded) { // growth's scan beside the sites' (they share found, read-only)
            pthread_mutex_lock(&p->glock);
            p->gev = ev;
            p->gn = n;
            p->gasked++;
            pthread_cond_signal(&p->gstart);
            pthread_mutex_unlock(&p->glock);
        }
        replay_scan_sites(p->into, ev, n, p->found, p->keep ? p->verdict : NULL, p->site_of);
        if (p->growth_threaded) {
            pthread_mutex_lock(&p->glock);
            while (p->gfinished != p->gasked)
                pthread_cond_wait(&p->gdone, &p->glock);
            pthread_mutex_unlock(&p->glock);
        } else if (p->growth) {
            growth_scan(p->growth, ev, n, p->found, p->cw, p->round);
        }
        if (p->growth)
            p->gfix = growth_scan_fixes(p->growth, &p->n_gfix);
        p->fix_ready = true;
        return;
    }
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
    // its scan on a thread of its own; if none can be made, the caller's thread does it after
    // the sites' scan (slower, the same figures)
    pthread_mutex_init(&p->glock, NULL);
    pthread_cond_init(&p->gstart, NULL);
    pthread_cond_init(&p->gdone, NULL);
    pthread_attr_t attr;
    bool attr_ok = pthread_attr_init(&attr) == 0;
    if (attr_ok)
        (void)pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
    p->growth_threaded =
        pthread_create(&p->growth_thread, attr_ok ? &attr : NULL, growth_main, p) == 0;
    if (attr_ok)
        pthread_attr_destroy(&attr);
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
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 1; i < p->n_threads; i++)
        pthread_join(p->threads[i].thread, NULL);
    if (p->growth) {
        if (p->growth_threaded) {
            pthread_mutex_lock(&p->glock);
            p->gstop = true;
            pthread_cond_signal(&p->gstart);
            pthread_mutex_unlock(&p->glock);
            pthread_join(p->growth_thread, NULL);
        }
        pthread_mutex_destroy(&p->glock);
        pthread_cond_destroy(&p->gstart);
        pthread_cond_destroy(&p->gdone);
    }
    for (unsigned s = 0; s < p->n_shards; s++) {
        if (!p->sites)
            replay_merge_shard(p->into, p->shards[s]);
        replay_free(p->shards[s]);
    }
    if (!p->sites) // with sites the scan kept every figure in `into` itself
        replay_set_peak(p->into, p->peak_bytes, p->peak_blocks, p->peak_time_ns);
    for (unsigned i = 0; i < p->n_threads; i++)
        free(p->threads[i].idx);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p->steps);
    free(p->found);
    free(p->site_of);
    free(p->cw);
    free(p->verdict);
    free(p->held);
    free(p);
}
