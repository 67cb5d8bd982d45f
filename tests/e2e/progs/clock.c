// SPDX-License-Identifier: MIT
// Blocks whose lives the program times itself with CLOCK_MONOTONIC, long enough to span the
// shim's switch from the vDSO clock to the TSC (clock.h: after ~10 ms) and many flushes. Prints
// "NAME INNER OUTER" per block, in ns: from just after its malloc returned to just before its
// free, and from just before the malloc to just after the free. The shim's times lie between.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *volatile sink;

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

// the store after the call keeps malloc from being a tail call: each is a frame of its own
__attribute__((noinline)) static void *made_first(void) {
    void *p = malloc(64);
    sink = p;
    return p;
}
__attribute__((noinline)) static void *made_second(void) {
    void *p = malloc(64);
    sink = p;
    return p;
}

// A block allocated, kept for ms while the program does small churn (events for the clock to
// stamp on both sides of the switch), then freed; prints its life as the program saw it.
static void one_block(const char *name, void *(*make)(void), long ms) {
    uint64_t before = mono_ns();
    void *p = make();
    uint64_t t0 = mono_ns();
    for (long i = 0; i < ms; i++) {
        sink = malloc(16);
        free(sink);
        nap_ms(1);
    }
    uint64_t t1 = mono_ns();
    free(p);
    uint64_t after = mono_ns();
    printf("%s %llu %llu\n", name, (unsigned long long)(t1 - t0),
           (unsigned long long)(after - before));
}

int main(void) {
    one_block("made_first", made_first, 200);
    one_block("made_second", made_second, 100);
    return 0;
}
