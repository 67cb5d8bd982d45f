// SPDX-License-Identifier: MIT
// The shim's clock: CLOCK_MONOTONIC nanoseconds, read from the CPU's time-stamp counter once the
// writer has measured its rate against CLOCK_MONOTONIC, from the vDSO before that and wherever
// the TSC is not the kernel's own clocksource. Two reads per malloc/free pair made the vDSO's
// clock_gettime (~22 ns here, a serialized rdtscp and the pvclock page) the largest single cost
// on the app threads after the stack walk; rdtsc plus one multiply is ~10 ns.
//
// The TSC clock is set slightly behind CLOCK_MONOTONIC at the switch (HP_CLOCK_SWITCH_LAG_NS),
// so a watermark taken with it never runs ahead of a time another thread read from the vDSO a
// moment before; callers that need times in order per thread clamp to their previous time.
#ifndef HEAPPROF_PRELOAD_CLOCK_H
#define HEAPPROF_PRELOAD_CLOCK_H

#include "compiler.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define HP_CLOCK_SWITCH_LAG_NS 2000u

__extension__ typedef __int128 hp_i128; // the tick count times the rate: 64 x 64 bits
__extension__ typedef unsigned __int128 hp_u128;

// Fixed once published: ns = base_ns + ((tsc - base_tsc) * mult) >> 32.
typedef struct hp_tsc_clock {
    uint64_t base_tsc;
    uint64_t base_ns;
    uint64_t mult; // nanoseconds per tick, 32.32 fixed point
} hp_tsc_clock_t;

extern hp_tsc_clock_t hp_tsc_clock;
extern _Atomic bool hp_tsc_clock_on;

static inline uint64_t hp_clock_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// CLOCK_MONOTONIC nanoseconds (from the TSC once calibrated). Hot path.
static inline uint64_t hp_clock_ns(void) {
#if defined(__x86_64__)
    if (HP_LIKELY(atomic_load_explicit(&hp_tsc_clock_on, memory_order_acquire))) {
        int64_t d = (int64_t)(__rdtsc() - hp_tsc_clock.base_tsc);
        int64_t ns = (int64_t)(((hp_i128)d * (hp_i128)hp_tsc_clock.mult) >> 32);
        return hp_tsc_clock.base_ns + (uint64_t)ns;
    }
#endif
    return hp_clock_mono_ns();
}

// Takes the first (TSC, CLOCK_MONOTONIC) pair: called once when recording starts, unless
// HEAPPROF_CLOCK=mono. Cheap (7 tries of ~30 ns).
void hp_clock_start(void);

// The writer calls this every round: the first round at least HP_CLOCK_CALIBRATE_NS after
// hp_clock_start takes a second pair and publishes the TSC clock. Never does when off x86-64 or
// when the kernel does not use the TSC as its clocksource (it then found it unstable or
// unsynchronized between CPUs; checked on the writer's first call). 10 ms: the pairs' error
// (half their ~30 ns bracket each) makes the rate good to ~3 ppm, and the app threads read the
// slower vDSO clock only that long. Cold.
#define HP_CLOCK_CALIBRATE_NS 10000000u
void hp_clock_calibrate(void);

// A fork child keeps the parent's calibration (same machine, same counter): nothing to do.

#endif
