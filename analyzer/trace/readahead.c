// SPDX-License-Identifier: MIT
// A reader on its own thread, feeding a small ring of event batches. The ring holds the reader's
// own batches (reader_next_batch_keep), not copies: each stays valid until the caller is done
// with it and it is given back, so the reading thread touches no event on their way out (a
// copy of every 48-byte event into the ring cost it as much as all of its other work on a
// single-threaded trace). Batches keep the reader's order, so whatever the caller computes is
// the same as with reader_next_batch; only the time changes.
#include "trace/readahead.h"

#include "core/stage_times.h"
#include "core/xalloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

// Up to 128 x 8,192 (the reader's batches, READY_MAX) = 1 M events in flight (a batch handed out in
// place ends at its chunk's end, so a thread alone has ~6 K a batch). History: 32 x 16,384 when
// batches were copied into the ring, then 64 x 8,192. Batches of 4,096 (1.5 MiB, sized to stay in
// the second level cache) cost more in hand-overs than they saved: 16,384 made report 13% faster on
// c_churn and 18% on a 100 M-event trace, with no change in peak RSS. The reader decodes a whole
// chunk before it hands any of it out (150-230 K events of the heap stream then; ~13 K in the
// shim's chunks since), so the ring must hold more than a chunk or replay waits at every chunk:
// 131 K events left it idle 0.2 s of 2.7 on the 100 M-event trace; 512 K made report 8% faster
// there and on c_threads 8. 128 batches (session 14, 2 CPUs: c_churn's report 1.13 s -> 0.94,
// c_threads 8's 1.76 -> 1.48, medians of 5-7 runs side by side): the reader releases a SYNC
// interval (~1 M events) at a time, and a ring of half of one left each of the two threads waiting
// for the other in turn.
#define RA_SLOTS 128u

typedef struct slot {
    const reader_event_t *ev;
    size_t n;
    reader_batch_t *keep; // given back to the reader once the caller is done with it
    uint64_t offset;
} slot_t;

struct readahead {
    reader_t *r;
    readahead_idle_fn idle;
    void *idle_ctx;
    bool threaded;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t not_full, not_empty;
    slot_t slots[RA_SLOTS];
    uint64_t head, tail; // batches published / given back; guarded by lock
    bool holding;        // the caller holds slot tail (its last batch)
    bool done, stop;     // guarded by lock
    int status;          // with done: 0 end of trace, -1 error
    bool timing;         // HEAPPROF_STAGE_TIMES=2: the caller's wait for batches is timed
    uint64_t ns_waited;  // the caller's, for a batch the reading thread had not yet made
    errmsg_t err;        // the reader's error, written before done is published
};

// Fills s with the reader's next batch. Returns what reader_next_batch_keep returned.
static int fill(readahead_t *ra, slot_t *s) {
    s->n = 0;
    return reader_next_batch_keep(ra->r, &s->ev, &s->n, &s->keep, &ra->err);
}

static void *run(void *arg) {
    readahead_t *ra = arg;
    (void)pthread_setname_np(pthread_self(), "hp-read"); // for HEAPPROF_STAGE_TIMES=2, perf
    int got = 1;
    bool idle_work = ra->idle != NULL;
    while (got == 1) {
        pthread_mutex_lock(&ra->lock);
        bool prefetch = true;
        while (ra->head - ra->tail == RA_SLOTS && !ra->stop) {
            if (prefetch) {
                // a full ring: decode the next chunks meanwhile (first: they are what the
                // caller waits for next), then do the caller's spare work
                pthread_mutex_unlock(&ra->lock);
                prefetch = reader_prefetch(ra->r);
                pthread_mutex_lock(&ra->lock);
                continue;
            }
            if (idle_work) {
                // a full ring: do the caller's spare work instead of waiting
                pthread_mutex_unlock(&ra->lock);
                idle_work = ra->idle(ra->idle_ctx, ra->r);
                pthread_mutex_lock(&ra->lock);
                continue;
            }
            pthread_cond_wait(&ra->not_full, &ra->lock);
        }
        bool stop = ra->stop;
        pthread_mutex_unlock(&ra->lock);
        if (stop)
            return NULL;
        // the slot at head is free: the caller never reads past head
        slot_t *s = &ra->slots[ra->head % RA_SLOTS];
        got = fill(ra, s);
        s->offset = reader_offset(ra->r);
        pthread_mutex_lock(&ra->lock);
        if (s->n)
            ra->head++;
        idle_work = ra->idle != NULL; // new definitions may have come with the batch
        if (got != 1) {
            ra->done = true;
            ra->status = got;
        }
        pthread_cond_signal(&ra->not_empty);
        pthread_mutex_unlock(&ra->lock);
    }
    // The whole trace is read, and the caller still has up to a ring of batches to replay:
    // its spare work now (until done or readahead_free) rather than after replay on the
    // caller's thread (a report's symbols: the DWARF of every module its stacks pass through,
    // libc's too where its debug file is installed, ~0.1 s to inflate).
    while (got == 0 && idle_work) {
        pthread_mutex_lock(&ra->lock);
        bool stop = ra->stop;
        pthread_mutex_unlock(&ra->lock);
        if (stop)
            break;
        idle_work = ra->idle(ra->idle_ctx, ra->r);
    }
    return NULL;
}

readahead_t *readahead_new(reader_t *r, readahead_idle_fn idle, void *idle_ctx) {
    readahead_t *ra = xcalloc(1, sizeof *ra);
    ra->r = r;
    ra->idle = idle;
    ra->idle_ctx = idle_ctx;
    errmsg_init(&ra->err);
    pthread_mutex_init(&ra->lock, NULL);
    pthread_cond_init(&ra->not_full, NULL);
    pthread_cond_init(&ra->not_empty, NULL);
    ra->timing = stage_times_level() >= 2;
    ra->threaded = pthread_create(&ra->thread, NULL, run, ra) == 0;
    return ra;
}

static void copy_err(const readahead_t *ra, errmsg_t *err) {
    if (ra->err.is_set)
        errmsg_set(err, "%s", ra->err.msg);
}

// readahead_next, and with keep the batch's reference goes to the caller.
static int next(readahead_t *ra, const reader_event_t **evs, size_t *n, uint64_t *offset,
                reader_batch_t **keep, errmsg_t *err) {
    *n = 0;
    if (!ra->threaded) {
        int got = keep ? reader_next_batch_keep(ra->r, evs, n, keep, err)
                       : reader_next_batch(ra->r, evs, n, err);
        if (offset)
            *offset = reader_offset(ra->r);
        return got;
    }
    reader_batch_t *done = NULL; // the last batch, given back outside the lock
    pthread_mutex_lock(&ra->lock);
    if (ra->holding) {
        done = ra->slots[ra->tail % RA_SLOTS].keep;
        ra->tail++;
        ra->holding = false;
        pthread_cond_signal(&ra->not_full);
    }
    const bool wait = ra->tail == ra->head && !ra->done;
    const uint64_t t0 = wait && ra->timing ? stage_clock_ns() : 0;
    while (ra->tail == ra->head && !ra->done)
        pthread_cond_wait(&ra->not_empty, &ra->lock);
    if (wait && ra->timing)
        ra->ns_waited += stage_clock_ns() - t0;
    int rc;
    if (ra->tail < ra->head) {
        slot_t *s = &ra->slots[ra->tail % RA_SLOTS];
        *evs = s->ev;
        *n = s->n;
        if (offset)
            *offset = s->offset;
        if (keep) {
            *keep = s->keep;
            s->keep = NULL; // the caller's now: the next call gives nothing back
        }
        ra->holding = true;
        rc = 1;
    } else {
        rc = ra->status;
        if (rc < 0)
            copy_err(ra, err);
    }
    pthread_mutex_unlock(&ra->lock);
    reader_batch_done(ra->r, done);
    return rc;
}

int readahead_next(readahead_t *ra, const reader_event_t **evs, size_t *n, uint64_t *offset,
                   errmsg_t *err) {
    return next(ra, evs, n, offset, NULL, err);
}

int readahead_next_keep(readahead_t *ra, const reader_event_t **evs, size_t *n,
                        uint64_t *offset, reader_batch_t **keep, errmsg_t *err) {
    *keep = NULL;
    return next(ra, evs, n, offset, keep, err);
}

uint64_t readahead_waited_ns(const readahead_t *ra) { return ra->ns_waited; }

void readahead_free(readahead_t *ra) {
    if (!ra)
        return;
    if (ra->threaded) {
        pthread_mutex_lock(&ra->lock);
        ra->stop = true;
        pthread_cond_signal(&ra->not_full);
        pthread_mutex_unlock(&ra->lock);
        pthread_join(ra->thread, NULL);
    }
    pthread_cond_destroy(&ra->not_empty);
    pthread_cond_destroy(&ra->not_full);
    pthread_mutex_destroy(&ra->lock);
    // the batches published and not yet given back (the caller's last one among them)
    for (uint64_t i = ra->tail; i < ra->head; i++)
        reader_batch_done(ra->r, ra->slots[i % RA_SLOTS].keep);
    free(ra);
}
