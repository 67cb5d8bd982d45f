// SPDX-License-Identifier: MIT
// hp_mktrace: writes a big synthetic trace to measure the analyzer's throughput:
// T threads of malloc/calloc/realloc/free churn around a steady live set, per-thread chunks of
// ~64 KiB of records (in columns, as the shim writes them; zstd), a SYNC after every 1 ms of
// simulated time. Prints the totals that
// `heapprof stats` must report for it.
// FREE_POLICY "random" frees a uniformly random live block (worst case for the live table);
// "recent" mostly frees one of the 16 newest blocks, as short-lived allocations do.
// usage: hp_mktrace OUT.hpt [N_EVENTS [THREADS [LIVE_PER_THREAD [random|recent]]]]
#include "trace_builder.h"
#include "xorshift.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_RAW (64u << 10)
#define N_STACKS 2000u
#define WINDOW_NS 1000000u
#define EXE_BASE 0x555555554000ull

typedef struct gen {
    uint32_t tid;
    uint64_t t;
    uint64_t *live; // addresses of live blocks
    uint64_t *live_size;
    size_t n_live;
    uint64_t *spare; // freed addresses to reuse (what malloc does)
    size_t n_spare;
    uint64_t next_addr;
    bool chunk_open;
} gen_t;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { return xorshift64(&rng); }

static bool *stack_defined;

static uint64_t pick_stack(tb_t *tb) {
    // skewed: a few hot sites, a long tail
    uint64_t id = 1 + (rnd() % N_STACKS) * (rnd() % 4 == 0 ? 1 : 0) + rnd() % 16;
    if (id > N_STACKS)
        id = N_STACKS;
    if (!stack_defined[id]) {
        uint64_t frames[8];
        for (int i = 0; i < 8; i++)
            frames[i] = EXE_BASE + 0x1000 + id * 64 + (uint64_t)i * 0x400;
        tb_rec_stack(tb, id, 8, frames);
        stack_defined[id] = true;
    }
    return id;
}

static uint64_t pick_size(void) { return 8 + (rnd() % (1u << (4 + rnd() % 8))); }

static uint64_t fresh_addr(gen_t *g) {
    if (g->n_spare && rnd() % 8)
        return g->spare[--g->n_spare];
    uint64_t a = g->next_addr;
    g->next_addr += 4096;
    return a;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: hp_mktrace OUT.hpt [N_EVENTS [THREADS [LIVE_PER_THREAD "
                        "[random|recent]]]]\n");
        return 2;
    }
    uint64_t n_events = argc > 2 ? strtoull(argv[2], NULL, 10) : 20000000ull;
    unsigned n_threads = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 4;
    size_t target_live = argc > 4 ? strtoull(argv[4], NULL, 10) : 50000;
    bool recent = argc > 5 && strcmp(argv[5], "recent") == 0;
    if (n_threads == 0 || target_live == 0)
        return 2;
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    stack_defined = calloc(N_STACKS + 1, sizeof *stack_defined);
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *args[] = {"bench", "--synthetic"};
    tb_rec_process(tb, "/usr/bin/bench", 2, args);
    tb_rec_module_load(tb, 0, EXE_BASE, 0x200000, "/usr/bin/bench", (const uint8_t *)"\x12\x34", 2);
    tb_rec_module_load(tb, 0, 0x7ffff7c00000ull, 0x1c0000, "/lib/x86_64-linux-gnu/libc.so.6", NULL,
                       0);
    tb_end(tb, true);

    gen_t *g = calloc(n_threads, sizeof *g);
    for (unsigned i = 0; i < n_threads; i++) {
        g[i].tid = 1000 + i;
        g[i].t = 1000 + i * 7;
        g[i].live = malloc(sizeof(uint64_t) * (target_live * 2 + 16));
        g[i].live_size = malloc(sizeof(uint64_t) * (target_live * 2 + 16));
        g[i].spare = malloc(sizeof(uint64_t) * (target_live * 4 + 16));
        g[i].next_addr = 0x7f0000000000ull + ((uint64_t)i << 36);
    }
    uint64_t done = 0, blocks = 0, bytes = 0, frees = 0;
    uint64_t window_end = WINDOW_NS;
    while (done < n_events) {
        for (unsigned i = 0; i < n_threads && done < n_events; i++) {
            gen_t *x = &g[i];
            while (x->t < window_end && done < n_events) {
                if (!x->chunk_open) {
                    tb_begin(tb, HPT_CHUNK_EVENTS, x->tid, x->t, x->next_addr);
                    x->chunk_open = true;
                }
                uint64_t r = rnd() % 100;
                bool grow = x->n_live < target_live;
                if (x->n_live == 0 || (r < 50 && grow) || (r < 40 && !grow)) {
                    uint64_t a = fresh_addr(x);
                    uint64_t st = pick_stack(tb), size = pick_size();
                    if (r % 10 == 0)
                        tb_rec_calloc(tb, x->t, st, a, size);
                    else
                        tb_rec_malloc(tb, x->t, st, a, size);
                    x->live_size[x->n_live] = size;
                    x->live[x->n_live++] = a;
                    blocks++;
                    bytes += size;
                } else if (r < 95) {
                    size_t k = rnd() % x->n_live;
                    if (recent && x->n_live > 16 && rnd() % 10)
                        k = x->n_live - 1 - rnd() % 16;
                    uint64_t a = x->live[k];
                    // keep the newest at the end: move the tail down instead of swapping
                    if (recent && x->n_live - k <= 16) {
                        size_t tail = x->n_live - k - 1;
                        memmove(&x->live[k], &x->live[k + 1], tail * sizeof *x->live);
                        memmove(&x->live_size[k], &x->live_size[k + 1], tail * sizeof *x->live);
                        x->n_live--;
                    } else {
                        x->n_live--;
                        x->live[k] = x->live[x->n_live];
                        x->live_size[k] = x->live_size[x->n_live];
                    }
                    tb_rec_free(tb, x->t, a);
                    frees++;
                    if (x->n_spare < target_live * 4)
                        x->spare[x->n_spare++] = a;
                } else {
                    size_t k = rnd() % x->n_live;
                    uint64_t old = x->live[k];
                    uint64_t a = rnd() % 2 ? old : fresh_addr(x);
                    uint64_t st = pick_stack(tb), size = pick_size() * 2;
                    tb_rec_realloc(tb, x->t, x->t + 20, st, old, a, size);
                    x->live_size[k] = size;
                    blocks++;
                    bytes += size;
                    x->t += 20;
                    if (a != old && x->n_spare < target_live * 4)
                        x->spare[x->n_spare++] = old;
                    x->live[k] = a;
                }
                done++;
                x->t += 10 + rnd() % 90;
                if (tb_chunk_bytes(tb) >= CHUNK_RAW) {
                    tb_end(tb, true);
                    x->chunk_open = false;
                    if (tb_flush(tb, f) != 0)
                        return 1;
                }
            }
            if (x->chunk_open) {
                tb_end(tb, true);
                x->chunk_open = false;
            }
        }
        // every thread is past window_end: nothing later can be timestamped below it
        tb_sync(tb, window_end);
        window_end += WINDOW_NS;
        if (tb_flush(tb, f) != 0)
            return 1;
    }
    tb_begin(tb, HPT_CHUNK_TRAILER, 0, 0, 0);
    tb_rec_trailer(tb, done, 0, N_STACKS, 0);
    tb_end(tb, false);
    if (tb_flush(tb, f) != 0 || fclose(f) != 0)
        return 1;
    uint64_t end_blocks = 0, end_bytes = 0;
    for (unsigned i = 0; i < n_threads; i++) {
        end_blocks += g[i].n_live;
        for (size_t k = 0; k < g[i].n_live; k++)
            end_bytes += g[i].live_size[k];
    }
    // what `heapprof stats --json` must report
    printf("events=%llu blocks=%llu bytes=%llu frees=%llu end_blocks=%llu end_bytes=%llu "
           "threads=%u\n",
           (unsigned long long)done, (unsigned long long)blocks, (unsigned long long)bytes,
           (unsigned long long)frees, (unsigned long long)end_blocks, (unsigned long long)end_bytes,
           n_threads);
    for (unsigned i = 0; i < n_threads; i++) {
        free(g[i].live_size);
        free(g[i].live);
        free(g[i].spare);
    }
    free(g);
    free(stack_defined);
    tb_free(tb);
    return 0;
}
