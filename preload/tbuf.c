// SPDX-License-Identifier: MIT
// Ring creation, the registry of rings, and the cold paths of appending (buffer full, waking
// the writer). Runs inside malloc: no stdio, no host allocation; locks only on cold paths.
#include "tbuf.h"

#include "config.h"
#include "mem.h"
#include "state.h"
#include "writer.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic uint32_t hp_tbuf_wake_word;

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static hp_ring_t *list_head;

hp_ring_t *hp_tbuf_new(uint32_t tid) {
    hp_ring_t *r = hp_mem_map(sizeof *r);
    if (!r)
        return NULL;
    r->cap = hp_config.ring_bytes;
    r->data = hp_mem_map(r->cap);
    if (!r->data) {
        hp_mem_unmap(r, sizeof *r);
        return NULL;
    }
    r->tid = tid;
    pthread_mutex_lock(&list_lock);
    r->next = list_head;
    list_head = r;
    pthread_mutex_unlock(&list_lock);
    return r;
}

hp_ring_t *hp_tbuf_list_lock(void) {
    pthread_mutex_lock(&list_lock);
    return list_head;
}

void hp_tbuf_list_unlock(void) {
    pthread_mutex_unlock(&list_lock);
}

static void ring_free(hp_ring_t *r) {
    hp_mem_unmap(r->stage, r->stage_cap);
    hp_mem_unmap(r->data, r->cap);
    hp_mem_unmap(r, sizeof *r);
}

void hp_tbuf_reap(bool (*dead)(hp_ring_t *)) {
    for (hp_ring_t **pp = &list_head; *pp;) {
        hp_ring_t *r = *pp;
        if (dead(r)) {
            *pp = r->next;
            ring_free(r);
        } else {
            pp = &r->next;
        }
    }
}

void hp_tbuf_forget_all(void) {
    for (hp_ring_t *r = list_head, *next; r; r = next) {
        next = r->next;
        ring_free(r);
    }
    list_head = NULL;
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    list_lock = fresh;
}

void hp_tbuf_wake_writer(void) {
    atomic_fetch_add_explicit(&hp_tbuf_wake_word, 1, memory_order_release);
    syscall(SYS_futex, &hp_tbuf_wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void hp_tbuf_nudge_slow(hp_ring_t *r) {
    atomic_store_explicit(&r->wake_pending, 1, memory_order_relaxed);
    hp_tbuf_wake_writer();
}

bool hp_tbuf_wait_slow(hp_ring_t *r, size_t n) {
    if (n > r->cap || !hp_writer_running()) {
        // nobody will drain it (start-up before the trace exists): drop, but count
        r->n_lost++;
        return false;
    }
    // The writer drains within microseconds unless it is stuck on the disk; two seconds of
    // waiting means it is, and the app must not hang on us.
    for (int i = 0; i < 20000; i++) {
        if (!hp_state_is_on()) {
            r->n_lost++;
            return false;
        }
        uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h + n - t <= r->cap)
            return true;
        if (i == 0 || !atomic_load_explicit(&r->wake_pending, memory_order_relaxed))
            hp_tbuf_nudge_slow(r);
        if (i < 50) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    r->n_lost++;
    hp_state_disable("the trace writer stalled for 2 s; profiling stopped");
    return false;
}
