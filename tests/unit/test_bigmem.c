// SPDX-License-Identifier: MIT
// bigmem: contents kept through growth (in place, moved, across the 8 MiB threshold both ways),
// big blocks at 2 MiB boundaries and asked for 2 MiB pages, shrinking, freeing.
#include "core/bigmem.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

// Word i of a block holds i ^ seed.
static void fill(uint64_t *p, size_t bytes, uint64_t seed) {
    for (size_t i = 0; i < bytes / 8; i++)
        p[i] = i ^ seed;
}

static bool holds(const uint64_t *p, size_t bytes, uint64_t seed) {
    for (size_t i = 0; i < bytes / 8; i++)
        if (p[i] != (i ^ seed))
            return false;
    return true;
}

// Whether [p, p + bytes) lies in one mapping advised MADV_HUGEPAGE (its "hg" VmFlag).
static bool advised_huge(const void *p, size_t bytes) {
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert(f);
    char line[512];
    uintptr_t lo = 0, hi = 0;
    bool in = false, huge = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s ", &a, &b, perms) == 3) { // a mapping's first line
            in = a <= (uintptr_t)p && (uintptr_t)p + bytes <= b;
            if (in)
                lo = a, hi = b;
            continue;
        }
        if (in && !strncmp(line, "VmFlags:", 8))
            huge = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return lo && hi && huge;
}

// Makes sure the page at `at` is mapped, so that a mapping ending there cannot grow in place:
// maps it (*ours true, to be unmapped after) unless something is there already.
static void take_page(void *at, bool *ours) {
    void *b = mmap(at, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    *ours = b == at;
    if (b != MAP_FAILED && b != at)
        munmap(b, 4096); // a kernel without MAP_FIXED_NOREPLACE took it as a hint
    cr_assert(*ours || (b == MAP_FAILED && errno == EEXIST), "page at %p: %s", at,
              strerror(errno));
}

Test(bigmem, small_blocks_are_malloc_sized) {
    uint64_t *p = big_alloc(4096);
    fill(p, 4096, 7);
    p = big_realloc(p, 4096, 1 * MIB);
    cr_assert(holds(p, 4096, 7));
    fill(p, MIB, 9);
    p = big_realloc(p, MIB, 64);
    cr_assert(holds(p, 64, 9));
    big_free(p, 64);
    big_free(NULL, 12345);
}

Test(bigmem, big_blocks_are_aligned_and_advised) {
    size_t bytes = 9 * MIB + 123;
    uint64_t *p = big_alloc(bytes);
    cr_assert_eq((uintptr_t)p % (2 * MIB), 0);
    fill(p, bytes & ~(size_t)7, 1);
    cr_assert(holds(p, bytes & ~(size_t)7, 1));
    cr_assert(advised_huge(p, bytes));
    big_free(p, bytes);
}

Test(bigmem, growth_keeps_contents_and_advice) {
    // small -> big (a copy), then doubling, sometimes with the next pages taken so that the
    // mapping has to move
    size_t bytes = 4 * MIB;
    uint64_t *p = big_alloc(bytes);
    fill(p, bytes, 42);
    for (int round = 0; round < 4; round++) {
        // rounds 1 and 3: the page right after the mapping taken, so that it has to move
        bool blocked = round % 2, ours = false;
        uint8_t *after = (uint8_t *)p + ((bytes + 2 * MIB - 1) & ~(2 * MIB - 1));
        if (blocked)
            take_page(after, &ours);
        uint64_t *q = big_realloc(p, bytes, 2 * bytes);
        cr_assert(holds(q, bytes, 42), "round %d", round);
        cr_assert_eq((uintptr_t)q % (2 * MIB), 0);
        cr_assert(advised_huge(q, 2 * bytes), "round %d", round);
        if (blocked)
            cr_assert_neq(q, p, "round %d grew into a page that was taken", round);
        if (ours)
            munmap(after, 4096);
        p = q;
        bytes *= 2;
        fill(p, bytes, 42);
    }
    // big -> smaller big (the tail given back), then below the threshold (a copy)
    p = big_realloc(p, bytes, 10 * MIB);
    cr_assert(holds(p, 10 * MIB, 42));
    p = big_realloc(p, 10 * MIB, 3 * MIB);
    cr_assert(holds(p, 3 * MIB, 42));
    big_free(p, 3 * MIB);
}

// Pages of address space the process has mapped (/proc/self/statm's first field).
static size_t vm_pages(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert(f);
    size_t pages = 0;
    cr_assert_eq(fscanf(f, "%zu", &pages), 1);
    fclose(f);
    return pages;
}

Test(bigmem, an_address_space_limit_costs_the_alignment_not_the_table) {
    // a limit that leaves room for the table and its growth, but not for a second copy of its
    // address range (the aligned move reserves the new range before the old one goes)
    size_t bytes = 64 * MIB;
    uint64_t *p = big_alloc(bytes);
    fill(p, bytes, 5);
    bool ours;
    take_page((uint8_t *)p + bytes, &ours); // growth in place impossible: the table must move
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct rlimit lim = {.rlim_cur = vm_pages() * page + 80 * MIB, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0);
    uint64_t *q = big_realloc(p, bytes, 2 * bytes); // +64 MiB fits, +130 does not
    cr_assert(holds(q, bytes, 5));
    fill(q, 2 * bytes, 6);
    cr_assert(holds(q, 2 * bytes, 6));
    big_free(q, 2 * bytes);
    // and a fresh table that fits only without the alignment's margin
    lim.rlim_cur = vm_pages() * page + 64 * MIB + MIB;
    cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0);
    uint64_t *r = big_alloc(64 * MIB);
    fill(r, 64 * MIB, 7);
    cr_assert(holds(r, 64 * MIB, 7));
    big_free(r, 64 * MIB);
    if (ours)
        munmap((uint8_t *)p + bytes, 4096);
}
