// SPDX-License-Identifier: MIT
// shard_model: the memory traffic of replay's shard rounds (analyzer/model/replay_par.c) without
// the rest of replay, to ask a many-core machine which part of a round costs what and whether
// another layout would cost less (docs/design.md#replay-threads). Session 19 found each shard
// thread ~72 ns an event of its share at 8 replay threads on the 16-core Xeon, for ~20
// instructions: memory, not work. A round here is what it is there, in phases with barriers:
//   produce   W threads write the round's 48-byte events (the decode workers: the events reach
//             the shards from other cores' caches)
//   partition T threads each take a contiguous part of the round and list, by shard, its events'
//             indexes (and, by layout, pointers or compact copies)
//   shard     T threads each apply one shard's events from every part: a lookup in its own
//             small table, a 32-byte result per event
//   scan      one thread reads every event and its result in stream order (the ordered scans)
// Layouts (-l):
//   now      the shard follows each index's event pointer and writes found[i] (two events a
//            line, the neighbour usually another shard's): replay_par.c today
//   own      the same reads; results in the shard's own array, in its order; the scan takes
//            event i's result from its shard's cursor (shard of the address again)
//   compact  the partition copies (addr, kind, index) into 16-byte records by shard, so a shard
//            reads its events in a row from its parts; results as `own`
// Prints ns an event of each phase (its wall time: the slowest thread) and of the round.
// usage: shard_model [-t T] [-w W] [-n EVENTS] [-r ROUNDS] [-L LIVE] [-l now|own|compact]
// Build: cc -O2 -pthread bench/tools/shard_model.c -o shard_model
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_T 64
#define AHEAD 16 // replay.c's PREFETCH_AHEAD

typedef struct event { // reader_event_t's size and field places
    uint8_t kind;
    uint8_t sub;
    uint16_t flags;
    uint32_t tid;
    uint64_t time_ns, stack, addr, old_addr, size;
} event_t;
_Static_assert(sizeof(event_t) == 48, "reader_event_t is 48 bytes");

typedef struct found { // replay_found_t
    uint64_t size, time_ns, stack, had;
} found_t;

typedef struct compact {
    uint64_t addr;
    uint32_t index;
    uint32_t kind;
} compact_t;

typedef struct slot {
    uint64_t key, size, time_ns, stack;
} slot_t;

enum layout { NOW, OWN, COMPACT };

static unsigned T = 8, W = 4, ROUNDS = 40, LIVE = 4096;
static size_t N = 131072;
static enum layout LAYOUT = NOW;
static unsigned shard_bits;
static unsigned n_threads;

static event_t *ev;
static found_t *found;          // NOW
static found_t *res[MAX_T];     // OWN, COMPACT: by shard
static uint32_t *idx[MAX_T];    // by part: indexes by shard, stride N / T + 1 each
static const event_t **evp[MAX_T];
static compact_t *cmp[MAX_T];
static size_t count[MAX_T][MAX_T]; // [part][shard]
static size_t stride;
static slot_t *table[MAX_T];
static uint64_t table_mask;
static pthread_barrier_t bar;
static double phase_ns[4]; // summed over rounds, by the thread that reached the barrier last
static _Atomic uint64_t sink;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline unsigned shard_of(uint64_t addr) {
    return shard_bits ? (unsigned)(((addr >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - shard_bits)) : 0;
}

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static void produce(unsigned w, unsigned round) {
    size_t lo = N * w / W, hi = N * (w + 1) / W;
    for (size_t i = lo; i < hi; i++) {
        uint64_t r = mix((uint64_t)round * N + i + 1);
        event_t *e = &ev[i];
        e->kind = (uint8_t)(1 + (i & 1)); // 1 alloc, 2 free
        e->tid = 1;
        e->time_ns = (uint64_t)round * N + i;
        e->stack = r & 63;
        e->addr = 0x10000000u + (r % LIVE) * 64;
        e->size = 16 + (r & 4095);
    }
}

static void partition(unsigned part) {
    size_t lo = N * part / T, hi = N * (part + 1) / T;
    size_t c[MAX_T] = {0};
    for (size_t i = lo; i < hi; i++)
        c[shard_of(ev[i].addr)]++;
    size_t at[MAX_T], sum = 0;
    for (unsigned s = 0; s < T; s++) {
        at[s] = sum;
        sum += c[s];
        count[part][s] = c[s];
    }
    for (size_t i = lo; i < hi; i++) {
        unsigned s = shard_of(ev[i].addr);
        size_t k = at[s]++;
        if (LAYOUT == COMPACT) {
            cmp[part][k] = (compact_t){ev[i].addr, (uint32_t)i, ev[i].kind};
        } else {
            idx[part][k] = (uint32_t)i;
            evp[part][k] = &ev[i];
        }
    }
}

static inline slot_t *lookup(slot_t *t, uint64_t key) {
    for (uint64_t h = mix(key) & table_mask;; h = (h + 1) & table_mask) {
        if (t[h].key == key || t[h].key == 0)
            return &t[h];
    }
}

static void apply_shard(unsigned s) {
    slot_t *t = table[s];
    found_t *out = res[s];
    size_t k_out = 0;
    for (unsigned part = 0; part < T; part++) {
        size_t start = 0;
        for (unsigned q = 0; q < s; q++)
            start += count[part][q];
        size_t m = count[part][s];
        for (size_t k = start; k < start + m; k++) {
            uint64_t addr, i, kind, size = 0, time_ns = 0, stack = 0;
            // as replay_shard_find: the event two distances ahead, its table slot one ahead
            if (LAYOUT == COMPACT) {
                const compact_t *c = &cmp[part][k];
                if (k + AHEAD < start + m)
                    __builtin_prefetch(&t[mix(cmp[part][k + AHEAD].addr) & table_mask]);
                addr = c->addr, i = c->index, kind = c->kind;
            } else {
                if (k + 2 * AHEAD < start + m)
                    __builtin_prefetch(evp[part][k + 2 * AHEAD]);
                if (k + AHEAD < start + m)
                    __builtin_prefetch(&t[mix(evp[part][k + AHEAD]->addr) & table_mask]);
                const event_t *e = evp[part][k];
                addr = e->addr, i = idx[part][k], kind = e->kind;
                size = e->size, time_ns = e->time_ns, stack = e->stack;
            }
            slot_t *sl = lookup(t, addr);
            found_t f = {sl->size, sl->time_ns, sl->stack, sl->key != 0};
            if (kind == 1) {
                *sl = (slot_t){addr, size | 1, time_ns, stack};
            } else {
                sl->size = 0; // a free: the block stays keyed, emptied (no delete in a model)
            }
            if (LAYOUT == NOW)
                found[i] = f;
            else
                out[k_out++] = f;
        }
    }
}

static void scan(void) {
    uint64_t acc = 0;
    size_t cur[MAX_T] = {0};
    for (size_t i = 0; i < N; i++) {
        const event_t *e = &ev[i];
        const found_t *f;
        if (LAYOUT == NOW)
            f = &found[i];
        else {
            unsigned s = shard_of(e->addr);
            f = &res[s][cur[s]++];
        }
        acc += f->size + f->had + e->kind;
    }
    atomic_fetch_add(&sink, acc);
}

static uint64_t phase_t0; // when the phase under way started (written by one thread a phase)

// The end of phase ph: once every thread is there, one of them adds the phase's wall time and
// starts the next; the second barrier holds the others until it has.
static void phase_done(int ph) {
    if (pthread_barrier_wait(&bar) == PTHREAD_BARRIER_SERIAL_THREAD) {
        uint64_t t = now_ns();
        if (ph >= 0)
            phase_ns[ph] += (double)(t - phase_t0);
        phase_t0 = t;
    }
    pthread_barrier_wait(&bar);
}

static void *worker(void *arg) {
    unsigned id = (unsigned)(uintptr_t)arg;
    for (unsigned r = 0; r < ROUNDS; r++) {
        phase_done(-1); // the round starts
        if (id < W)
            produce(id, r);
        phase_done(0);
        if (id < T)
            partition(id);
        phase_done(1);
        if (id < T)
            apply_shard(id);
        phase_done(2);
        if (id == n_threads - 1) // a thread of its own, as the ordered scans have
            scan();
        phase_done(3);
    }
    return NULL;
}

static void usage(void) {
    fprintf(stderr, "usage: shard_model [-t T] [-w W] [-n EVENTS] [-r ROUNDS] [-L LIVE] "
                    "[-l now|own|compact]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int o;
    while ((o = getopt(argc, argv, "t:w:n:r:L:l:")) != -1) {
        switch (o) {
        case 't': T = (unsigned)atoi(optarg); break;
        case 'w': W = (unsigned)atoi(optarg); break;
        case 'n': N = (size_t)atol(optarg); break;
        case 'r': ROUNDS = (unsigned)atoi(optarg); break;
        case 'L': LIVE = (unsigned)atoi(optarg); break;
        case 'l':
            LAYOUT = !strcmp(optarg, "now") ? NOW : !strcmp(optarg, "own") ? OWN
                     : !strcmp(optarg, "compact") ? COMPACT : (usage(), NOW);
            break;
        default: usage();
        }
    }
    if (T < 1 || T > MAX_T || (T & (T - 1)) || W < 1 || W > MAX_T || N < 1024 || !ROUNDS ||
        LIVE < 16)
        usage();
    while ((1u << shard_bits) < T)
        shard_bits++;
    ev = aligned_alloc(64, N * sizeof *ev);
    found = aligned_alloc(64, N * sizeof *found);
    stride = N / T + 1;
    uint64_t per_shard = (uint64_t)LIVE / T + 1, cap = 16;
    while (cap < per_shard * 4)
        cap <<= 1;
    table_mask = cap - 1;
    for (unsigned s = 0; s < T; s++) {
        res[s] = aligned_alloc(64, (N + 64) * sizeof(found_t)); // a shard may get most events
        idx[s] = malloc(stride * sizeof(uint32_t));
        evp[s] = malloc(stride * sizeof(void *));
        cmp[s] = malloc(stride * sizeof(compact_t));
        table[s] = calloc(cap, sizeof(slot_t));
    }
    memset(ev, 0, N * sizeof *ev);
    memset(found, 0, N * sizeof *found);
    n_threads = (T > W ? T : W) + 1; // the scan's the last
    pthread_barrier_init(&bar, NULL, n_threads);
    pthread_t th[MAX_T + 1];
    for (unsigned i = 0; i < n_threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < n_threads; i++)
        pthread_join(th[i], NULL);
    double per = (double)ROUNDS * (double)N;
    static const char *names[] = {"now", "own", "compact"};
    printf("layout %s T %u W %u events %zu rounds %u live %u: ns an event: produce %.2f partition "
           "%.2f shard %.2f scan %.2f; round %.2f\n",
           names[LAYOUT], T, W, N, ROUNDS, LIVE, phase_ns[0] / per, phase_ns[1] / per,
           phase_ns[2] / per, phase_ns[3] / per,
           (phase_ns[0] + phase_ns[1] + phase_ns[2] + phase_ns[3]) / per);
    return (int)(atomic_load(&sink) == 42); // keeps the scan's reads
}
