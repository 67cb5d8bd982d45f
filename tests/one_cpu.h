// SPDX-License-Identifier: MIT
// Tests that need a process allowed a single CPU (the CPU counts heapprof derives from the
// affinity mask): pins the calling thread, and the processes it starts, to the first CPU of
// its mask, *saved getting the mask to give back with sched_setaffinity.
#pragma once

#include <criterion/criterion.h>
#include <sched.h>

static inline void pin_to_one_cpu(cpu_set_t *saved) {
    cpu_set_t one;
    cr_assert_eq(sched_getaffinity(0, sizeof *saved, saved), 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, saved)) {
            CPU_SET(c, &one);
            break;
        }
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
}
