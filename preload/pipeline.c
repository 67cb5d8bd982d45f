// SPDX-License-Identifier: MIT
// Draining rings into chunks, and the pool of worker threads that does most of it. Runs on our
// workers, the flusher, and app threads whose ring is full (inside their malloc, with the
// recursion guard held; zstd's memory is the shim's own, zstd_ctx.h): no stdio; locks only per
// drain, never per event.
#include "pipeline.h"

#include "chunk.h"
#include "config.h"
#include "debug.h"
#include "format/hpt_columns.h"
#include "guard.h"
#include "mem.h"
#include "ringcols.h"
#include "state.h"
#include "thread.h"
#include "touch_live.h"
#include "traceout.h"
#include "zstd_ctx.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

// What one drain needs beyond the ring: a compression context, its buffers and the column
// coder's table (the stage is touched only by drains that wrap, the rows only where the columns
// cannot carry a chunk; the column buffer is mapped at its worst case, HPT_COLS regions, but only
// what a chunk's columns fill is ever touched). Kept in a pool, as many as drains run at once,
// never more than MAX_DRAINERS: threads beyond that wait for one (more would not run faster on
// the CPUs there are, and 1,000 threads with full rings must not make 1,000 contexts).
typedef struct drainer {
    ZSTD_CCtx *cctx;
    uint8_t *stage; // the ring's bytes, unwrapped
    uint8_t *out;   // one packed chunk
    uint8_t *cols;  // one chunk's records in columns (docs/trace-format.md#columns)
    uint8_t *rows;  // or as rows, where the columns cannot carry them (mapped, touched rarely)
    uint8_t *scratch; // one trace record moved to the rows' time base (ringcols.h)
    hpt_cols_enc_t *enc;
    size_t stage_cap, out_cap, cols_cap, rows_cap, chunk_max;
    struct drainer *next;
} drainer_t;

#define MAX_WORKERS 16
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static drainer_t *pool_free;
static unsigned n_drainers, max_drainers;

// The work list: rings over half full, and rings the flusher wants written before a watermark.
static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t drained_cond = PTHREAD_COND_INITIALIZER; // a worker finished a drain
static hp_ring_t *work_head, *work_tail;
static unsigned n_workers, n_idle, max_workers;
static bool stopping;
static pthread_t workers[MAX_WORKERS];

static _Atomic bool running;
static _Atomic uint64_t n_events, n_lost, workers_cpu_ns;
static unsigned most_workers;

// The CPUs the program may run on (its affinity mask: a container's cpuset, taskset), not the
// host's: workers and drainers beyond them only wait for one another.
static unsigned cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

static void help_one(void);

void hp_pipeline_attach(void) {
    static const hp_tbuf_drainer_t ops = {
        .running = hp_pipeline_running,
        .enqueue = hp_pipeline_enqueue,
        .drain = hp_pipeline_drain,
        .help_one = help_one,
    };
    hp_tbuf_set_drainer(&ops);
}

bool hp_pipeline_start(void) {
    unsigned c = cpus();
    max_workers = c / 2 ? c / 2 : 1;
    if (max_workers > MAX_WORKERS)
        max_workers = MAX_WORKERS;
    max_drainers = c + 2 > 8 ? c + 2 : 8;
    stopping = false;
    atomic_store(&n_events, 0);
    atomic_store(&n_lost, 0);
    atomic_store(&workers_cpu_ns, 0);
    most_workers = 0;
    atomic_store(&running, true);
    return true;
}

bool hp_pipeline_running(void) {
    return atomic_load_explicit(&running, memory_order_acquire);
}

static drainer_t *drainer_new(void) {
    drainer_t *d = hp_mem_map(sizeof *d);
    if (!d)
        return NULL;
    d->chunk_max = (size_t)hp_config.chunk_kb * 1024;
    d->stage_cap = hp_config.ring_bytes;
    // a chunk's rows end at most one record (HPT_COLS_REC_MAX) past chunk_max
    d->rows_cap = d->chunk_max + HPT_COLS_REC_MAX;
    d->out_cap = hp_chunk_bound(d->rows_cap);
    d->cols_cap = hpt_cols_bound(d->rows_cap);
    d->stage = hp_mem_map_parent_only(d->stage_cap);
    d->out = hp_mem_map_parent_only(d->out_cap);
    d->cols = hp_mem_map_parent_only(d->cols_cap);
    d->rows = hp_mem_map_parent_only(d->rows_cap);
    d->scratch = hp_mem_map_parent_only(HP_RC_SCRATCH);
    d->enc = hp_mem_map_parent_only(sizeof *d->enc);
    d->cctx = hp_zstd_cctx_new(hp_config.zstd_level);
    if (!d->stage || !d->out || !d->cols || !d->rows || !d->scratch || !d->enc || !d->cctx) {
        hp_mem_unmap(d->stage, d->stage_cap);
        hp_mem_unmap(d->out, d->out_cap);
        hp_mem_unmap(d->cols, d->cols_cap);
        hp_mem_unmap(d->rows, d->rows_cap);
        hp_mem_unmap(d->scratch, HP_RC_SCRATCH);
        hp_mem_unmap(d->enc, sizeof *d->enc);
        hp_zstd_cctx_free(d->cctx);
        hp_mem_unmap(d, sizeof *d);
        return NULL;
    }
    return d;
}

static drainer_t *drainer_get(void) {
    pthread_mutex_lock(&pool_lock);
    while (!pool_free && n_drainers >= max_drainers)
        pthread_cond_wait(&pool_cond, &pool_lock);
    drainer_t *d = pool_free;
    HP_ASSERT(n_drainers <= max_drainers && (d || n_drainers < max_drainers));
    if (d) {
        pool_free = d->next;
    } else {
        n_drainers++;
        pthread_mutex_unlock(&pool_lock);
        d = drainer_new(); // outside the lock: zstd allocates
        if (d)
            return d;
        pthread_mutex_lock(&pool_lock);
        n_drainers--;
        pthread_cond_signal(&pool_cond);
    }
    pthread_mutex_unlock(&pool_lock);
    return d;
}

static void drainer_put(drainer_t *d) {
    pthread_mutex_lock(&pool_lock);
    d->next = pool_free;
    pool_free = d;
    pthread_cond_signal(&pool_cond);
    pthread_mutex_unlock(&pool_lock);
}

// The ring's entries are all read: the owner may write over them while the chunk is compressed.
static void publish_tail(hp_ring_t *r, uint64_t *release) {
    atomic_store_explicit(&r->tail, *release, memory_order_release);
    *release = 0;
}

// Writes [p, end) of r's unwrapped ring entries as chunks of at most chunk_max bytes of trace
// rows (a record is never split), each starting from the delta state reached before it: in
// columns, which compress to a third to a half of the rows (docs/design.md#the-pipeline), else
// as rows. Returns false if the entries do not read (an internal error) or the trace cannot be
// written; *events counts the events written.
// *release: where the entries are read in place in the ring, the tail to publish as soon as
// the last chunk is built, before it is compressed and written (0 once published).
static bool write_records(hp_ring_t *r, drainer_t *d, const uint8_t *p, const uint8_t *end,
                          uint64_t *events, uint64_t *release) {
    while (p < end) {
        hp_rc_pos_t pos = {r->wstate, r->raw_time, r->raw_hi};
        hp_rc_info_t ci;
        size_t cn = hp_rc_columns(p, (size_t)(end - p), d->chunk_max, d->cols, d->cols_cap, d->enc,
                                  d->scratch, &pos, &ci);
        bool ok = true;
        HP_ASSERT(cn <= d->cols_cap);
        if (cn && cn < ci.row_bytes) {
            HP_ASSERT(ci.in_bytes > 0 && ci.in_bytes <= (size_t)(end - p) &&
                      ci.n_events <= ci.n_records);
            if (*release && ci.in_bytes == (size_t)(end - p))
                publish_tail(r, release);
            ok = hp_traceout_chunk(HPT_CHUNK_EVENTS, HPT_CHUNK_COLUMNS, r->tid, d->cols, cn,
                                   ci.n_records, r->wstate, d->out, d->out_cap, d->cctx);
        } else {
            pos = (hp_rc_pos_t){r->wstate, r->raw_time, r->raw_hi};
            if (!hp_rc_rows(p, (size_t)(end - p), d->chunk_max, d->rows, d->rows_cap, d->scratch,
                            &pos, &ci))
                return false; // the ring was damaged: nothing after this point can be trusted
            // whole entries, and at least one: the loop moves on
            HP_ASSERT(ci.in_bytes > 0 && ci.in_bytes <= (size_t)(end - p));
            if (*release && ci.in_bytes == (size_t)(end - p))
                publish_tail(r, release);
            if (ci.n_records) // none: only a TBASE, whose records the next drain takes
                ok = hp_traceout_chunk(HPT_CHUNK_EVENTS, 0, r->tid, d->rows, ci.row_bytes,
                                       ci.n_records, r->wstate, d->out, d->out_cap, d->cctx);
        }
        if (!ok)
            return false;
        r->wstate = pos.w;
        r->raw_time = pos.raw_time;
        r->raw_hi = pos.t_hi;
        *events += ci.n_events;
        p += ci.in_bytes;
        hp_traceout_add_bytes(ci.row_bytes);
    }
    return true;
}

bool hp_pipeline_drain(hp_ring_t *r) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (h == t)
        return true;
    // the owner commits whole records and never more than the ring holds
    HP_ASSERT(t < h && h - t <= r->cap);
    drainer_t *d = hp_pipeline_running() ? drainer_get() : NULL;
    uint64_t events = 0;
    bool ok = d != NULL;
    if (ok) {
        size_t n = (size_t)(h - t);
        HP_ASSERT(n <= d->stage_cap); // stage_cap is the largest ring
        uint32_t off = (uint32_t)t & (r->cap - 1), first = r->cap - off;
        const uint8_t *in = r->data + off;
        uint64_t release = h; // the tail to publish once the entries are read (0: published)
        if (n > first) {
            // wrapped: unwrapped into the stage, and the bytes are ours now: the owner may go
            // on while they are compressed and written
            memcpy(d->stage, r->data + off, first);
            memcpy(d->stage + first, r->data, n - first);
            atomic_store_explicit(&r->tail, h, memory_order_release);
            in = d->stage;
            release = 0;
        }
        // else read in place (no copy): the owner writes only past the head, and the ring
        // changes size only under r->drain, which this thread holds
        if (hp_config.touch && hp_config.touch_live) // which blocks are live, for exit
            hp_touch_live_note(in, in + n);
        ok = write_records(r, d, in, in + n, &events, &release);
        if (release) // not yet published (an error)
            atomic_store_explicit(&r->tail, h, memory_order_release);
        // written (or given up): the flusher may count on the times of what is left
        atomic_store_explicit(&r->out_t, r->wstate.time_ns, memory_order_release);
        atomic_store_explicit(&r->out_head, h, memory_order_release);
        drainer_put(d);
        if (!ok)
            hp_state_disable("internal error: the trace cannot be written; profiling stopped");
    } else {
        atomic_store_explicit(&r->tail, h, memory_order_release);
        atomic_store_explicit(&r->out_head, h, memory_order_release); // given up
        if (hp_pipeline_running())
            hp_state_disable("out of memory for the trace pipeline; profiling stopped");
    }
    if (ok)
        atomic_fetch_add_explicit(&n_events, events, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&n_lost, events ? events : 1, memory_order_relaxed);
    return ok;
}

void hp_pipeline_enqueue(hp_ring_t *r) {
    if (atomic_exchange_explicit(&r->queued, 1, memory_order_acq_rel))
        return;
    pthread_mutex_lock(&work_lock);
    r->work_next = NULL;
    if (work_tail)
        work_tail->work_next = r;
    else
        work_head = r;
    work_tail = r;
    if (n_idle)
        pthread_cond_signal(&work_cond);
    pthread_mutex_unlock(&work_lock);
}

// Caller holds work_lock.
static hp_ring_t *work_pop(void) {
    hp_ring_t *r = work_head;
    HP_ASSERT(!r == !work_tail); // empty at both ends or neither
    if (r) {
        HP_ASSERT(atomic_load_explicit(&r->queued, memory_order_relaxed));
        work_head = r->work_next;
        if (!work_head)
            work_tail = NULL;
    }
    return r;
}

// Caller holds work_lock. The queued ring whose written records end earliest (out_t), among the
// first OLDEST_SCAN: the one that holds the merge watermark back longest.
#define OLDEST_SCAN 256
static hp_ring_t *work_pop_oldest(void) {
    hp_ring_t *best = NULL, *best_prev = NULL, *prev = NULL;
    uint64_t best_t = UINT64_MAX;
    unsigned seen = 0;
    for (hp_ring_t *r = work_head; r && seen < OLDEST_SCAN; prev = r, r = r->work_next, seen++) {
        uint64_t t = atomic_load_explicit(&r->out_t, memory_order_relaxed);
        if (t < best_t) {
            best_t = t;
            best = r;
            best_prev = prev;
        }
    }
    if (!best)
        return NULL;
    if (best_prev)
        best_prev->work_next = best->work_next;
    else
        work_head = best->work_next;
    if (work_tail == best)
        work_tail = best_prev;
    HP_ASSERT(!work_head == !work_tail);
    return best;
}

static void test_delay(void) {
    if (hp_config.test_drain_delay_ms) {
        struct timespec ts = {hp_config.test_drain_delay_ms / 1000,
                              (long)(hp_config.test_drain_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

// Drains a ring taken from the work list. queued stays set until the drain is over, so the
// flusher never reaps a ring a worker still holds.
static void drain_taken(hp_ring_t *r) {
    HP_ASSERT(atomic_load_explicit(&r->queued, memory_order_relaxed));
    test_delay();
    pthread_mutex_lock(&r->drain);
    hp_pipeline_drain(r);
    pthread_mutex_unlock(&r->drain);
    atomic_store_explicit(&r->queued, 0, memory_order_release);
}

// drain_taken, then a word to the flusher, which may wait for that ring (hp_pipeline_settle).
static void drain_and_tell(hp_ring_t *r) {
    drain_taken(r);
    pthread_mutex_lock(&work_lock);
    pthread_cond_broadcast(&drained_cond);
    pthread_mutex_unlock(&work_lock);
}

// One ring from the work list, drained here (a thread that has just drained its own full
// ring): where app threads outnumber the CPUs the workers get a thread's share of them, and a
// queued ring whose owner waits for the CPU holds the merge watermark back until someone drains
// it (many_threads 1000 x 20,000 on 2 CPUs: 52 SYNCs in 3 s, the watermark stuck for 3 s). The
// oldest, not the first: that is the one the watermark waits for.
static void help_one(void) {
    pthread_mutex_lock(&work_lock);
    hp_ring_t *r = work_pop_oldest();
    pthread_mutex_unlock(&work_lock);
    if (r)
        drain_and_tell(r);
}

void hp_pipeline_help(void) {
    for (;;) {
        pthread_mutex_lock(&work_lock);
        hp_ring_t *r = work_pop();
        pthread_mutex_unlock(&work_lock);
        if (!r)
            return;
        drain_taken(r);
    }
}

uint64_t hp_pipeline_thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker_main(void *arg) {
    (void)arg;
    hp_tls_guard = 1;
    prctl(PR_SET_NAME, "heapprof-drain", 0, 0, 0);
    pthread_mutex_lock(&work_lock);
    for (;;) {
        hp_ring_t *r = work_pop();
        if (r) {
            pthread_mutex_unlock(&work_lock);
            drain_and_tell(r);
            pthread_mutex_lock(&work_lock);
            continue;
        }
        if (stopping)
            break;
        n_idle++;
        pthread_cond_wait(&work_cond, &work_lock);
        n_idle--;
    }
    pthread_mutex_unlock(&work_lock);
    atomic_fetch_add(&workers_cpu_ns, hp_pipeline_thread_cpu_ns());
    return NULL;
}

bool hp_pipeline_has_workers(void) {
    pthread_mutex_lock(&work_lock);
    bool have = n_workers > 0;
    pthread_mutex_unlock(&work_lock);
    return have;
}

unsigned hp_pipeline_worker_count(void) {
    pthread_mutex_lock(&work_lock);
    unsigned n = n_workers;
    pthread_mutex_unlock(&work_lock);
    return n;
}

void hp_pipeline_settle(hp_ring_t *head) {
    pthread_mutex_lock(&work_lock);
    bool have_workers = n_workers > 0;
    pthread_mutex_unlock(&work_lock);
    if (!have_workers) {
        hp_pipeline_help();
        return;
    }
    // The workers drain; this thread only waits for each ring it asked for. A ring its owner
    // queues again meanwhile costs one more drain's wait, never an unbounded one.
    pthread_mutex_lock(&work_lock);
    for (hp_ring_t *r = head; r; r = r->next)
        while (atomic_load_explicit(&r->queued, memory_order_acquire) && n_workers > 0)
            pthread_cond_wait(&drained_cond, &work_lock);
    pthread_mutex_unlock(&work_lock);
}

void hp_pipeline_grow(void) {
    pthread_mutex_lock(&work_lock);
    bool want = work_head && !n_idle && n_workers < max_workers && !stopping;
    pthread_mutex_unlock(&work_lock);
    if (!want)
        return;
    pthread_t t;
    if (hp_thread_spawn(&t, worker_main) != 0)
        return; // the flusher and full rings' owners still drain: slower, nothing lost
    pthread_mutex_lock(&work_lock);
    HP_ASSERT(n_workers < max_workers && max_workers <= MAX_WORKERS); // only the flusher grows
    workers[n_workers++] = t;
    if (n_workers > most_workers)
        most_workers = n_workers;
    pthread_mutex_unlock(&work_lock);
}

unsigned hp_pipeline_stop(void) {
    pthread_mutex_lock(&work_lock);
    stopping = true;
    pthread_cond_broadcast(&work_cond);
    unsigned n = n_workers;
    pthread_mutex_unlock(&work_lock);
    for (unsigned i = 0; i < n; i++)
        pthread_join(workers[i], NULL);
    pthread_mutex_lock(&work_lock);
    n_workers = 0;
    pthread_cond_broadcast(&drained_cond);
    pthread_mutex_unlock(&work_lock);
    return n;
}

void hp_pipeline_resume(void) {
    pthread_mutex_lock(&work_lock);
    stopping = false;
    pthread_mutex_unlock(&work_lock);
}

void hp_pipeline_end(void) {
    atomic_store_explicit(&running, false, memory_order_release);
}

uint64_t hp_pipeline_events(void) {
    return atomic_load(&n_events);
}

uint64_t hp_pipeline_lost(void) {
    return atomic_load(&n_lost);
}

uint64_t hp_pipeline_workers_cpu_ns(void) {
    return atomic_load(&workers_cpu_ns);
}

unsigned hp_pipeline_most_workers(void) {
    return most_workers;
}

void hp_pipeline_fork_prepare(void) {
    pthread_mutex_lock(&work_lock);
    pthread_mutex_lock(&pool_lock);
}

void hp_pipeline_fork_parent(void) {
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&work_lock);
}

void hp_pipeline_fork_child(void) {
    // The parent's contexts and work list stay the parent's (a context may have been in use
    // on another thread); the child starts with none, and the copies are never touched.
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    work_lock = m;
    pool_lock = m;
    work_cond = c;
    pool_cond = c;
    drained_cond = c;
    pool_free = NULL;
    n_drainers = 0;
    work_head = work_tail = NULL;
    n_workers = n_idle = 0;
    stopping = false;
    atomic_store(&running, false);
    hp_touch_live_fork_child();
}
