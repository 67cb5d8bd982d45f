// SPDX-License-Identifier: MIT
#include "core/random.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint64_t random_u64(void) {
    uint64_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15u ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid();
}
