/* SPDX-License-Identifier: MIT */
/* realloc_chain: worst-case growth.  Part 1 grows buffers one byte at a
 * time with realloc (every append is a realloc call); part 2 grows buffers
 * by doubling (few reallocs, large copies).  Both build strings from a
 * deterministic byte stream and fold them into a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static uint64_t rng = 88172645463325252ull;
static inline uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static NOINLINE uint64_t byte_by_byte(size_t len)
{
    char *buf = NULL;
    for (size_t i = 0; i < len; i++) {
        char *nb = realloc(buf, i + 1);
        if (!nb) abort();
        buf = nb;
        buf[i] = (char)('a' + next() % 26);
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
    free(buf);
    return h;
}

static NOINLINE uint64_t doubling(size_t len)
{
    size_t cap = 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) abort();
    while (n < len) {
        if (n == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) abort();
            buf = nb;
        }
        buf[n++] = (char)('a' + next() % 26);
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i += 64) h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
    free(buf);
    return h;
}

/* Many short byte-by-byte strings (like a naive tokenizer), a few long ones,
 * then geometric doublers of growing length. */
static NOINLINE uint64_t run(int rounds)
{
    uint64_t h = 0;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 200; k++) h += byte_by_byte(16 + next() % 200);
        h += byte_by_byte(20000 + next() % 20000);
        for (int k = 0; k < 4; k++) h += doubling(1000 + next() % 200000);
    }
    return h;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    uint64_t h = run(rounds);
    printf("realloc_chain rounds=%d checksum=%llu\n", rounds, (unsigned long long)h);
    return 0;
}
