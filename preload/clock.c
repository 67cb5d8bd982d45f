// SPDX-License-Identifier: MIT
#include "clock.h"

#include "config.h"
#include "debug.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

hp_tsc_clock_t hp_tsc_clock;
_Atomic bool hp_tsc_clock_on;

#if defined(__x86_64__)
typedef struct pair {
    uint64_t tsc, ns;
} pair_t;

// A (TSC, CLOCK_MONOTONIC) pair: the clock read between two TSC reads, the tightest of a few
// tries, so that the pair's error is a few tens of nanoseconds.
static pair_t take_pair(void) {
    pair_t best = {0};
    uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 7; i++) {
        uint64_t c1 = __rdtsc();
        uint64_t ns = hp_clock_mono_ns();
        uint64_t c2 = __rdtsc();
        if (c2 > c1 && c2 - c1 < best_gap) {
            best_gap = c2 - c1;
            best = (pair_t){c1 + (c2 - c1) / 2, ns};
        }
    }
    return best;
}

// The kernel keeps CLOCK_MONOTONIC on the TSC only when it found it invariant and synchronized
// between CPUs; otherwise (or if we cannot tell) event times stay on the vDSO.
static bool kernel_uses_tsc(void) {
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[16] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n >= 3 && !memcmp(buf, "tsc", 3) && (n == 3 || buf[3] == '\n');
}

static enum { FIRST, WAITING, DONE } phase = FIRST;
static pair_t first;

void hp_clock_start(void) {
    if (phase == FIRST && hp_config.clock_tsc) {
        first = take_pair();
        HP_ASSERT(!atomic_load(&hp_tsc_clock_on)); // published once, after the second pair
        phase = first.tsc ? WAITING : DONE;
    }
}

void hp_clock_calibrate(void) {
    static bool checked;
    if (phase != WAITING)
        return;
    if (!checked) {
        checked = true;
        if (!kernel_uses_tsc()) {
            phase = DONE;
            return;
        }
    }
    if (hp_clock_mono_ns() - first.ns < HP_CLOCK_CALIBRATE_NS)
        return;
    phase = DONE;
    pair_t b = take_pair();
    if (b.tsc <= first.tsc || b.ns <= first.ns)
        return;
    uint64_t ticks = b.tsc - first.tsc, ns = b.ns - first.ns;
    // 0.1 to 20 ticks a nanosecond (100 MHz to 20 GHz), or the pairs are nonsense
    if (ticks < ns / 10 || ticks > ns * 20 || ns >= (1ull << 31) * 8)
        return;
    uint64_t mult = (uint64_t)(((hp_u128)ns << 32) / ticks);
    // 0.05 to ~10 ns a tick: (tsc - base) * mult stays within hp_clock_ns's 128-bit product
    HP_ASSERT(mult >= (1ull << 32) / 20 && mult <= (11ull << 32));
    hp_tsc_clock = (hp_tsc_clock_t){
        .base_tsc = b.tsc, .base_ns = b.ns - HP_CLOCK_SWITCH_LAG_NS, .mult = mult};
    atomic_store_explicit(&hp_tsc_clock_on, true, memory_order_release);
}
#else
void hp_clock_start(void) {}
void hp_clock_calibrate(void) {}
#endif
