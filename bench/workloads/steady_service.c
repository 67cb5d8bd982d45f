/* SPDX-License-Identifier: MIT */
/* steady_service: a service's allocation pattern at a steady rate, for the trace size of a long
 * sampled run (bench/sampled_service.sh). argv: seconds (default 30), allocations per second
 * (default 100000). Every millisecond it makes rate/1000 allocations from 8 call sites of
 * 32 B - 16 KiB (a request's buffers, strings and records), frees most of them at once and keeps
 * a rotating set of 4096 live blocks (a cache), so the heap stays flat as a service's does. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIVE 4096

static void *live[LIVE];
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#define SITE(name, lo, span)                                                                       \
    __attribute__((noinline)) static void *name(void) {                                            \
        void *p = malloc((lo) + next() % (span));                                                  \
        __asm__ volatile("" : : "r"(p) : "memory");                                                \
        return p;                                                                                  \
    }
SITE(req_header, 32, 96)
SITE(req_body, 512, 3584)
SITE(json_token, 16, 48)
SITE(json_tree, 256, 1792)
SITE(resp_buffer, 4096, 12288)
SITE(log_line, 64, 192)
SITE(cache_entry, 128, 896)
SITE(tmp_vec, 32, 992)

int main(int argc, char **argv) {
    long seconds = argc > 1 ? atol(argv[1]) : 30;
    long rate = argc > 2 ? atol(argv[2]) : 100000;
    void *(*const sites[])(void) = {req_header, req_body,  json_token, json_tree,
                                    resp_buffer, log_line, cache_entry, tmp_vec};
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long per_ms = rate / 1000;
    for (long ms = 0; ms < seconds * 1000; ms++) {
        for (long i = 0; i < per_ms; i++) {
            void *p = sites[next() % 8]();
            if (!p)
                return 2;
            *(volatile char *)p = 1;
            if (next() % 16 == 0) { /* into the cache, evicting the oldest */
                size_t k = next() % LIVE;
                free(live[k]);
                live[k] = p;
            } else {
                free(p);
            }
        }
        /* sleep until the next millisecond of the schedule */
        struct timespec due = start;
        due.tv_nsec += (ms + 1) % 1000 * 1000000;
        due.tv_sec += (ms + 1) / 1000 + due.tv_nsec / 1000000000;
        due.tv_nsec %= 1000000000;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL);
    }
    for (size_t k = 0; k < LIVE; k++)
        free(live[k]);
    return 0;
}
