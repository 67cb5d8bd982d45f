// SPDX-License-Identifier: MIT
// xorshift64, the tests' repeatable random stream: the same numbers on every run for the same
// seed. Header-only, no dependency: each test keeps its own state (`static uint64_t rng = SEED;`).
#ifndef HEAPPROF_TESTS_XORSHIFT_H
#define HEAPPROF_TESTS_XORSHIFT_H

#include <stdint.h>

static inline uint64_t xorshift64(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#endif
