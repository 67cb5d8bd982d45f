// SPDX-License-Identifier: MIT
// Worker threads over a ring of chunk slots. Slots are handed out, claimed and given back in
// ring order: the submitter never blocks (it checks for room first), a worker claims the oldest
// unclaimed slot, and the consumer waits only for the slot it needs next. One mutex guards the
// three counters; a chunk's decode (tens of microseconds at least) dwarfs taking it.
#include "trace/decode_pool.h"

#include "core/xalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_WORKERS 16u
// Records submitted and not yet given back, past which no other chunk is submitted (one always
// may be): a chunk of the shim's holds a few tens of thousands, so this never limits a real
// trace; a forged one whose chunks inflate to millions of records each is decoded one chunk at
// a time, as on one thread, instead of a ring of them at 200 MB apiece.
#define RECORDS_IN_FLIGHT_MAX (1u << 20)
// A slot's buffer larger than this is freed when the slot is given back, not kept for reuse: a
// chunk of the shim's (1 MiB of records at most) makes up to ~30 MB of events, and a buffer
// freed and made again for every chunk cost the reader's thread 5% in page faults.
#define KEEP_BUFFER_BYTES (32u << 20)
// Workers by default at most: replay on one thread takes ~30 ns an event, decoding ~40 ns on
// one worker, so beyond 4 they would only wait (and hold memory).
#define DEFAULT_WORKERS_MAX 4u
#define WORKER_STACK_BYTES (256u << 10)

struct decode_pool {
    pthread_mutex_t lock;
    pthread_cond_t work; // a slot was submitted, or stop
    pthread_cond_t done; // a slot was decoded
    dchunk_t *slots;
    bool *decoded;
    size_t n_slots;
    uint64_t submitted, claimed, released; // counts since the start; slot = count % n_slots
    uint64_t records_in_flight;            // the caller's thread's alone
    bool stop;
    unsigned n_workers;
    pthread_t threads[MAX_WORKERS];
    ZSTD_DCtx *dctx; // the caller's, for decoding without workers
};

static void decode(dchunk_t *c, ZSTD_DCtx *dctx) {
    if (dctx) {
        dchunk_decode(c, dctx);
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
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->claimed == p->submitted)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->stop)
            break;
        size_t i = (size_t)(p->claimed++ % p->n_slots);
        pthread_mutex_unlock(&p->lock);
        decode(&p->slots[i], dctx);
        pthread_mutex_lock(&p->lock);
        p->decoded[i] = true;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    ZSTD_freeDCtx(dctx);
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
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 2)
        return 0;
    return n - 2 > (long)DEFAULT_WORKERS_MAX ? DEFAULT_WORKERS_MAX : (unsigned)(n - 2);
}

decode_pool_t *decode_pool_new(unsigned workers) {
    if (workers > MAX_WORKERS)
        workers = MAX_WORKERS;
    decode_pool_t *p = xcalloc(1, sizeof *p);
    // one slot per worker, one the consumer holds and one ready behind it; without workers the
    // one slot is decoded as it is submitted
    p->n_slots = workers ? (size_t)workers + 2 : 1;
    p->slots = xcalloc(p->n_slots, sizeof *p->slots);
    p->decoded = xcalloc(p->n_slots, sizeof *p->decoded);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->dctx = ZSTD_createDCtx();
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
    free(p->slots);
    free(p->decoded);
    ZSTD_freeDCtx(p->dctx);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

size_t decode_pool_in_flight(const decode_pool_t *p) {
    return (size_t)(p->submitted - p->released); // both written by the caller's thread only
}

bool decode_pool_has_room(const decode_pool_t *p) {
    size_t n = decode_pool_in_flight(p);
    return n == 0 || (n < p->n_slots && p->records_in_flight < RECORDS_IN_FLIGHT_MAX);
}

dchunk_t *decode_pool_next(decode_pool_t *p) {
    return &p->slots[p->submitted % p->n_slots];
}

void decode_pool_submit(decode_pool_t *p) {
    size_t i = (size_t)(p->submitted % p->n_slots);
    p->records_in_flight += p->slots[i].h.n_records;
    if (p->n_workers == 0) {
        decode(&p->slots[i], p->dctx);
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
        while (!p->decoded[i])
            pthread_cond_wait(&p->done, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
    return &p->slots[i];
}

// Frees *buf if it holds more than KEEP_BUFFER_BYTES.
static void drop_big(void **buf, size_t *cap, size_t elem_bytes) {
    if (*cap * elem_bytes > KEEP_BUFFER_BYTES) {
        free(*buf);
        *buf = NULL;
        *cap = 0;
    }
}

void decode_pool_release(decode_pool_t *p) {
    dchunk_t *c = &p->slots[p->released % p->n_slots];
    p->records_in_flight -= c->h.n_records;
    drop_big((void **)&c->in, &c->in_cap, 1);
    drop_big((void **)&c->ev, &c->ev_cap, sizeof *c->ev);
    drop_big((void **)&c->raw, &c->raw_cap, 1);
    drop_big((void **)&c->rows, &c->rows_cap, 1);
    drop_big((void **)&c->col_allocs, &c->col_allocs_cap, sizeof *c->col_allocs);
    p->released++;
}
