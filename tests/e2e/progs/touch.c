// SPDX-License-Identifier: MIT
// Blocks with a known number of bytes touched, one function per case, for e2e_touch. Built -O0 so
// no allocation is optimised away; every write goes through a volatile pointer.
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static void write_bytes(char *p, size_t n, char v) {
    volatile char *q = p;
    for (size_t i = 0; i < n; i++)
        q[i] = v;
}

// 100 x malloc(1000), 100 bytes written: 10,000 of 100,000 touched (pattern)
static __attribute__((noinline, noclone)) void part_written(void) {
    for (int i = 0; i < 100; i++) {
        char *p = malloc(1000);
        write_bytes(p, 100, 1);
        free(p);
    }
}

// 50 x calloc(1, 512), 10 bytes set: 500 of 25,600 touched (not-zero count)
static __attribute__((noinline, noclone)) void calloc_part(void) {
    for (int i = 0; i < 50; i++) {
        char *p = calloc(1, 512);
        write_bytes(p + 100, 10, 7);
        free(p);
    }
}

// 20 x malloc(256) cleared to zero: all 5,120 bytes touched (zero is a write like any other)
static __attribute__((noinline, noclone)) void zeroed_by_hand(void) {
    for (int i = 0; i < 20; i++) {
        char *p = malloc(256);
        write_bytes(p, 256, 0);
        free(p);
    }
}

// one 4 MiB block, 64 KiB written: a fresh mapping, measured on its resident pages: 64-72 KiB
static __attribute__((noinline, noclone)) void big_reserve(void) {
    char *p = malloc(4u << 20);
    write_bytes(p, 64 * 1024, 3);
    free(p);
}

// malloc(100) all written, realloc to 1000, 50 more written: 100 + 150 touched of 1,100
static __attribute__((noinline, noclone)) void grown(void) {
    char *p = malloc(100);
    write_bytes(p, 100, 9);
    p = realloc(p, 1000);
    write_bytes(p + 100, 50, 9);
    free(p);
}

// memalign(64, 1000), every byte written: 1,000 of 1,000
static __attribute__((noinline, noclone)) void aligned_full(void) {
    char *p = memalign(64, 1000);
    write_bytes(p, 1000, 5);
    free(p);
}

// never freed: measured at exit, 300 of 300
static __attribute__((noinline, noclone)) void leaked(void) {
    char *p = malloc(300);
    write_bytes(p, 300, 1);
    (void)p;
}

int main(void) {
    part_written();
    calloc_part();
    zeroed_by_hand();
    big_reserve();
    grown();
    aligned_full();
    leaked();
    return 0;
}
