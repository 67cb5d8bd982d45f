// SPDX-License-Identifier: MIT
// Worker threads over a ring of chunk slots. Slots are handed out, claimed and given back in
// ring order: the submitter never blocks (it checks for room first), a worker claims the oldest
// unclaimed slot, and the consumer waits only for the slot it needs next. One mutex guards the
// three counters; a chunk's decode (tens of microseconds at least) dwarfs taking it.
//
// With workers the ring is deep (SLOTS chunks, RECORDS_IN_FLIGHT_MAX records): the reader
// applies chunks in bursts, one SYNC interval (~1 M events of the shim's) at a time, and decodes
// ahead while the caller is busy (reader_prefetch). On 16 cores a ring of workers + 2 slots left
// the 4 workers 60% busy and the caller waiting 0.78 s of 1.75 for the reader (docs/design.md).
// Buffers do not stay with their slot: a slot given back passes them to a short stack of spares
// (the next slot filled takes them), so a deep ring holds buffers only for the chunks in it.
#include "trace/decode_pool.h"

#include "core/cpus.h"
#include "core/stage_times.h"
#include "core/xalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_WORKERS 16u
// Records submitted and not yet given back, past which no other chunk is submitted (one always
// may be): a chunk of the shim's holds a few tens of thousands, so this never limits a real
// trace; a forged one whose chunks inflate to millions of records each is decoded one chunk at
// a time, as on one thread, instead of a ring of them at 200 MB apiece.
#define RECORDS_IN_FLIGHT_MAX (1u << 19)
// Chunks in flight at most, with workers: RECORDS_IN_FLIGHT_MAX is the bound for chunks of the
// shim's (~13 K records each); this one for a trace of small chunks (many threads').
#define SLOTS 128u
// A slot's buffer larger than this is freed when the slot is given back (a decoding thread's
// scratch, after the decode), not kept for reuse: a chunk of the shim's (1 MiB of records at
// most) makes up to ~30 MB of events, and a buffer freed and made again for every chunk cost
// the reader's thread 5% in page faults.
#define KEEP_BUFFER_BYTES (32u << 20)
// Workers by default at most: replay on one thread takes ~30 ns an event, decoding ~40 ns on
// one worker, so beyond 4 they would only wait (and hold memory).
#define DEFAULT_WORKERS_MAX 4u
#define WORKER_STACK_BYTES (256u << 10)

// A decoding thread's scratch: lent to the chunk it decodes, so that a deep ring does not hold a
// set per slot (a column chunk's allocation list is ~300 KB).
typedef struct scratch {
    uint8_t *rows;
    size_t rows_cap;
    hpt_cols_alloc_t *col_allocs;
    size_t col_allocs_cap;
} scratch_t;

struct decode_pool {
    pthread_mutex_t lock;
    pthread_cond_t work; // a slot was submitted, or stop
    pthread_cond_t done; // a slot was decoded
    dchunk_t *slots;
    bool *decoded;
    dchunk_t *spares; // buffers of slots given back (a slot's h and outputs mean nothing here)
    size_t n_spares, max_spares;
    size_t n_slots;
    uint64_t submitted, claimed, released; // counts since the start; slot = count % n_slots
    uint64_t records_in_flight;            // the caller's thread's alone
    bool stop;
    unsigned n_workers;
    pthread_t threads[MAX_WORKERS];
    ZSTD_DCtx *dctx; // the caller's, for decoding without workers
    scratch_t scratch; // the caller's, likewise
    // HEAPPROF_STAGE_TIMES=2 (decode_pool_waited_ns): the consumer's wait for chunks its workers
    // had not finished, and the most chunks in flight at a time (the consumer's alone)
    bool timing;
    uint64_t ns_waited;
    size_t most_in_flight;
};

// Frees *buf if it holds more than KEEP_BUFFER_BYTES.
static void drop_big(void **buf, size_t *cap, size_t elem_bytes) {
    if (*cap * elem_bytes > KEEP_BUFFER_BYTES) {
        free(*buf);
        *buf = NULL;
        *cap = 0;
    }
}

static void swap_scratch(dchunk_t *c, scratch_t *s) {
    scratch_t t = {c->rows, c->rows_cap, c->col_allocs, c->col_allocs_cap};
    c->rows = s->rows;
    c->rows_cap = s->rows_cap;
    c->col_allocs = s->col_allocs;
    c->col_allocs_cap = s->col_allocs_cap;
    *s = t;
}

static void scratch_fini(scratch_t *s) {
    free(s->rows);
    free(s->col_allocs);
}

static void decode(dchunk_t *c, ZSTD_DCtx *dctx, scratch_t *s) {
    if (dctx) {
        swap_scratch(c, s);
        dchunk_decode(c, dctx);
        swap_scratch(c, s);
        drop_big((void **)&s->rows, &s->rows_cap, 1); // a forged chunk's, not kept
        drop_big((void **)&s->col_allocs, &s->col_allocs_cap, sizeof *s->col_allocs);
    } else {
        // no zstd context: as if damaged (once its crc is known), never a crash
        c->crc_ok = dchunk_crc_ok(&c->h, c->in);
        c->ok = false;
        c->n_ev = c->n_defs = c->n_cpu = 0;
    }
}

static void *worker(void *arg) {
    (void)pthread_setname_np(pthread_self(), "hp-decode"); // for HEAPPROF_STAGE_TIMES=2, perf
    decode_pool_t *p = arg;
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    scratch_t scratch = {0};
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->claimed == p->submitted)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->stop)
            break;
        size_t i = (size_t)(p->claimed++ % p->n_slots);
        pthread_mutex_unlock(&p->lock);
        decode(&p->slots[i], dctx, &scratch);
        pthread_mutex_lock(&p->lock);
        p->decoded[i] = true;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    ZSTD_freeDCtx(dctx);
    scratch_fini(&scratch);
    return NULL;
}

unsigned decode_pool_default_workers(void) {
    const char *env = getenv("HEAPPROF_DECODE_THREADS");
    if (env && *env) {
        char *end;
        unsigned long v = strtoul(env, &end, 10);
        if (!*end)
            return v > MAX_WORKERS ? MAX_WORKERS : (unsigned)v;
    }
    unsigned n = cpus_usable(); // a container's or taskset's CPUs, not the host's
    if (n <= 2)
        return 0;
    return n - 2 > DEFAULT_WORKERS_MAX ? DEFAULT_WORKERS_MAX : n - 2;
}

// HEAPPROF_DECODE_SLOTS (1-4096): chunks in flight with workers, for side-by-side measurement
// (workers + 2 is the ring of sessions 8-13).
static size_t slots_env(void) {
    const char *env = getenv("HEAPPROF_DECODE_SLOTS");
    if (env && *env) {
        char *end;
        unsigned long v = strtoul(env, &end, 10);
        if (!*end && v >= 1 && v <= 4096)
            return v;
    }
    return SLOTS;
}

decode_pool_t *decode_pool_new(unsigned workers) {
    if (workers > MAX_WORKERS)
        workers = MAX_WORKERS;
    decode_pool_t *p = xcalloc(1, sizeof *p);
    // without workers the one slot is decoded as it is submitted, on the caller's thread (a
    // deeper ring made report no faster on 2 CPUs, where that thread is the bound)
    p->n_slots = workers ? slots_env() : 1;
    p->slots = xcalloc(p->n_slots, sizeof *p->slots);
    // spare buffers for as many chunks as the workers decode at once, plus the one the reader
    // applies and one ready behind it: the ring of old
    p->max_spares = (size_t)workers + 2;
    p->spares = xcalloc(p->max_spares, sizeof *p->spares);
    p->decoded = xcalloc(p->n_slots, sizeof *p->decoded);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->dctx = ZSTD_createDCtx();
    p->timing = stage_times_level() >= 2;
    pthread_attr_t attr;
    bool attr_ok = pthread_attr_init(&attr) == 0;
    if (attr_ok)
        (void)pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES); // they need a few KiB
    for (unsigned i = 0; i < workers; i++) {
        if (pthread_create(&p->threads[i], attr_ok ? &attr : NULL, worker, p) != 0)
            break; // fewer workers (or none: the caller's thread decodes) is still right
        p->n_workers++;
    }
    if (attr_ok)
        pthread_attr_destroy(&attr);
    return p;
}

void decode_pool_free(decode_pool_t *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n_workers; i++)
        pthread_join(p->threads[i], NULL);
    for (size_t i = 0; i < p->n_slots; i++)
        dchunk_fini(&p->slots[i]);
    for (size_t i = 0; i < p->n_spares; i++)
        dchunk_fini(&p->spares[i]);
    free(p->slots);
    free(p->spares);
    scratch_fini(&p->scratch);
    free(p->decoded);
    ZSTD_freeDCtx(p->dctx);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

unsigned decode_pool_workers(const decode_pool_t *p) { return p->n_workers; }

uint64_t decode_pool_waited_ns(const decode_pool_t *p) { return p->ns_waited; }

size_t decode_pool_most_in_flight(const decode_pool_t *p) { return p->most_in_flight; }

size_t decode_pool_in_flight(const decode_pool_t *p) {
    return (size_t)(p->submitted - p->released); // both written by the caller's thread only
}

bool decode_pool_has_room(const decode_pool_t *p) {
    size_t n = decode_pool_in_flight(p);
    return n == 0 || (n < p->n_slots && p->records_in_flight < RECORDS_IN_FLIGHT_MAX);
}

dchunk_t *decode_pool_next(decode_pool_t *p) {
    dchunk_t *c = &p->slots[p->submitted % p->n_slots];
    // a slot given back holds nothing: the last spare's buffers, still warm (not twice: a slot
    // asked for again before its submit has them already)
    if (p->n_spares && !c->in && !c->ev && !c->raw)
        *c = p->spares[--p->n_spares];
    return c;
}

void decode_pool_submit(decode_pool_t *p) {
    size_t i = (size_t)(p->submitted % p->n_slots);
    p->records_in_flight += p->slots[i].h.n_records;
    if (p->submitted + 1 - p->released > p->most_in_flight)
        p->most_in_flight = (size_t)(p->submitted + 1 - p->released);
    if (p->n_workers == 0) {
        decode(&p->slots[i], p->dctx, &p->scratch);
        p->decoded[i] = true;
        p->submitted++;
        p->claimed++;
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->decoded[i] = false;
    p->submitted++;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
}

dchunk_t *decode_pool_oldest(decode_pool_t *p) {
    if (p->released == p->submitted)
        return NULL;
    size_t i = (size_t)(p->released % p->n_slots);
    if (p->n_workers) {
        pthread_mutex_lock(&p->lock);
        if (!p->decoded[i]) {
            uint64_t t0 = p->timing ? stage_clock_ns() : 0;
            while (!p->decoded[i])
                pthread_cond_wait(&p->done, &p->lock);
            if (p->timing)
                p->ns_waited += stage_clock_ns() - t0;
        }
        pthread_mutex_unlock(&p->lock);
    }
    return &p->slots[i];
}

void decode_pool_release(decode_pool_t *p) {
    dchunk_t *c = &p->slots[p->released % p->n_slots];
    p->records_in_flight -= c->h.n_records;
    drop_big((void **)&c->in, &c->in_cap, 1);
    drop_big((void **)&c->ev, &c->ev_cap, sizeof *c->ev);
    drop_big((void **)&c->raw, &c->raw_cap, 1);
    if (p->n_spares < p->max_spares)
        p->spares[p->n_spares++] = *c;
    else
        dchunk_fini(c);
    *c = (dchunk_t){0};
    p->released++;
}
