// SPDX-License-Identifier: MIT
// touch_origins: blocks of 16 B to 64 MiB from every place glibc's malloc serves them (fresh
// mmap; the heap once its dynamic mmap threshold has risen, on pages an earlier block made
// resident and on fresh ones; realloc in place, by mremap and by copy; calloc; memalign; and
// blocks left live at exit), each
// written with a known number of bytes, for e2e_touch (issue #23). Prints one line a site,
// "<site> <bytes written> <written ranges> <bytes requested>", the truth the test compares
// heapprof's figures with. Every origin is checked (mallinfo2's mmapped bytes, mincore, block
// addresses), not assumed: a block served another way ends the program with status 1 and a line
// saying which.
//
// Where a block may sit on pages no one has written yet, its written ranges end on a page
// boundary: the measure counts a page the program faulted in whole, and the test wants exact
// figures from it.
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define PAGE ((size_t)4096)
#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

typedef struct tally {
    const char *site;
    size_t written, ranges, requested;
} tally_t;

static tally_t tallies[16];
static size_t n_tallies;

static tally_t *tally(const char *site) {
    for (size_t i = 0; i < n_tallies; i++)
        if (strcmp(tallies[i].site, site) == 0)
            return &tallies[i];
    tallies[n_tallies].site = site;
    return &tallies[n_tallies++];
}

static void fail(const char *what) {
    fprintf(stderr, "touch_origins: %s\n", what);
    exit(1);
}

// n bytes of a non-zero value written from p (the barrier keeps the stores from being dropped
// as dead before free)
static void put(const char *site, void *p, size_t n) {
    memset(p, 0x3c, n);
    __asm__ volatile("" : : "r"(p) : "memory");
    tally_t *t = tally(site);
    t->written += n;
    t->ranges++;
}

static void requested(const char *site, size_t n) {
    tally(site)->requested += n;
}

// bytes from p to the first page boundary at or after p + n
static size_t to_page_end(const void *p, size_t n) {
    uintptr_t e = ((uintptr_t)p + n + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    return e - (uintptr_t)p;
}

static void *page_up(void *p) {
    return (void *)(((uintptr_t)p + PAGE - 1) & ~(uintptr_t)(PAGE - 1));
}

static size_t mmapped_bytes(void) {
    return mallinfo2().hblkhd;
}

// Whether the allocation that took mmapped bytes from `before` to now was mmapped as `want`.
static void check_mmapped(const char *what, size_t before, int want) {
    int mmapped = mmapped_bytes() > before;
    if (mmapped != want) {
        char line[200];
        snprintf(line, sizeof line, "%s was %s", what,
                 mmapped ? "mmapped" : "served from the heap");
        fail(line);
    }
}

// Whether every page wholly inside [p, p + n) is resident.
static void check_resident(const char *what, void *p, size_t n) {
    uintptr_t a = (uintptr_t)page_up(p), e = ((uintptr_t)p + n) & ~(uintptr_t)(PAGE - 1);
    static unsigned char vec[64 * MiB / 4096];
    size_t pages = (e - a) / PAGE;
    if (pages > sizeof vec || mincore((void *)a, pages * PAGE, vec) != 0)
        fail("mincore");
    for (size_t i = 0; i < pages; i++)
        if (!(vec[i] & 1)) {
            char line[200];
            snprintf(line, sizeof line, "%s: page %zu of %zu was not resident", what, i, pages);
            fail(line);
        }
}

static void *must(void *p) {
    if (!p)
        fail("out of memory");
    return p;
}

// 16 B to 64 KiB from the heap, before any large block: every byte measured by the pattern.
static __attribute__((noinline)) void small_blocks(void) {
    static const size_t sizes[] = {16, 100, 1000, 4000, 64 * KiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char *p = must(malloc(sizes[i]));
        requested(__func__, sizes[i]);
        put(__func__, p + sizes[i] / 4, sizes[i] / 2);
        free(p);
    }
}

// 256 KiB to 64 MiB, each above the mmap threshold of its time: fresh mappings. Freeing each
// (up to glibc's 32 MiB cap) raises the threshold to its size, which the next sites rely on.
static __attribute__((noinline)) void fresh_mmap(void) {
    static const size_t sizes[] = {256 * KiB, 1 * MiB, 4 * MiB, 64 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t before = mmapped_bytes();
        char *p = must(malloc(sizes[i]));
        check_mmapped("a fresh_mmap block", before, 1);
        requested(__func__, sizes[i]);
        put(__func__, p, to_page_end(p, sizes[i] / 3));
        char *mid = page_up(p + sizes[i] / 2);
        put(__func__, mid, 3 * PAGE);
        free(p);
    }
}

// After the threshold rose to ~4 MiB: 1 and 2 MiB blocks come from the heap's top, on fresh
// pages, written whole and freed back into the top (below the 8 MiB trim threshold, so their
// pages stay resident for heap_reuse).
static __attribute__((noinline)) void heap_prior(void) {
    size_t before = mmapped_bytes();
    char *a = must(malloc(1 * MiB));
    char *b = must(malloc(2 * MiB));
    check_mmapped("a 1 or 2 MiB block after the threshold rose", before, 0);
    requested(__func__, 3 * MiB);
    put(__func__, a, 1 * MiB);
    put(__func__, b, 2 * MiB);
    free(b);
    free(a);
}

// The case: a 1 MiB block holding 1 KiB, and a 2 MiB one holding 100,000 bytes, on
// pages heap_prior made resident.
static __attribute__((noinline)) void heap_reuse(void) {
    size_t before = mmapped_bytes();
    char *p = must(malloc(1 * MiB));
    check_mmapped("heap_reuse's 1 MiB block", before, 0);
    check_resident("heap_reuse's 1 MiB block", p, 1 * MiB);
    requested(__func__, 1 * MiB);
    put(__func__, p, 1 * KiB);
    free(p);
    char *q = must(malloc(2 * MiB));
    check_mmapped("heap_reuse's 2 MiB block", before, 0);
    check_resident("heap_reuse's 2 MiB block", q, 2 * MiB);
    requested(__func__, 2 * MiB);
    put(__func__, q + 5000, 100000);
    free(q);
}

// A heap block larger than what the top has resident: part recycled pages, part fresh.
static __attribute__((noinline)) void heap_fresh(void) {
    size_t before = mmapped_bytes();
    size_t n = 3 * MiB + 512 * KiB;
    char *p = must(malloc(n));
    check_mmapped("heap_fresh's block", before, 0);
    requested(__func__, n);
    put(__func__, p + 1000, to_page_end(p + 1000, 3 * MiB + 256 * KiB));
    free(p);
}

// realloc that keeps the address: a heap block grown into the top, and an mmapped block grown
// by mremap. What realloc carried over was written whole; the new tails get known writes.
// Freeing the 12 MiB block raises the threshold to 12 MiB: the later sites' mapped blocks are
// larger.
static __attribute__((noinline)) void realloc_in_place(void) {
    size_t before = mmapped_bytes();
    char *p = must(malloc(1 * MiB));
    check_mmapped("realloc_in_place's heap block", before, 0);
    size_t old = malloc_usable_size(p);
    put(__func__, p, old);
    uintptr_t was = (uintptr_t)p; // p itself may not be read after realloc
    char *q = must(realloc(p, 2 * MiB));
    if ((uintptr_t)q != was)
        fail("realloc_in_place's heap block moved");
    requested(__func__, 2 * MiB);
    put(__func__, q + old + 100, 5000);
    free(q);

    char *m = must(malloc(6 * MiB));
    check_mmapped("realloc_in_place's 6 MiB block", before, 1);
    old = malloc_usable_size(m);
    put(__func__, m, old);
    char *m2 = must(realloc(m, 12 * MiB)); // mremap: the pages move, nothing is copied
    check_mmapped("realloc_in_place's 12 MiB block", before, 1);
    requested(__func__, 12 * MiB);
    put(__func__, page_up(m2 + old), 2 * PAGE);
    free(m2);
}

// realloc that copies: a heap block with a neighbour in the way, moved within the heap; and a
// heap block grown above the threshold, moved into a fresh mapping.
static __attribute__((noinline)) void realloc_moved(void) {
    size_t before = mmapped_bytes();
    char *p = must(malloc(1 * MiB));
    check_mmapped("realloc_moved's heap block", before, 0);
    size_t old = malloc_usable_size(p);
    // a block in use right after p, so that it cannot grow in place: glibc places the next
    // chunk's block at p + usable + 8; blocks that land elsewhere (free chunks before p) are
    // kept until one does
    char *guards[64];
    size_t n_guards = 0;
    do {
        if (n_guards == sizeof guards / sizeof *guards)
            fail("no block could be placed after realloc_moved's heap block");
        guards[n_guards] = must(malloc(100000));
        requested(__func__, 100000);
    } while (guards[n_guards++] != p + old + 8);
    put(__func__, p, old);
    uintptr_t was = (uintptr_t)p;
    char *q = must(realloc(p, 3 * MiB));
    if ((uintptr_t)q == was)
        fail("realloc_moved's heap block did not move");
    check_mmapped("realloc_moved's 3 MiB block", before, 0);
    requested(__func__, 3 * MiB);
    put(__func__, q + old, to_page_end(q + old, 20000));
    free(q);
    for (size_t i = 0; i < n_guards; i++)
        free(guards[i]);

    p = must(malloc(2 * MiB));
    check_mmapped("realloc_moved's 2 MiB block", before, 0);
    old = malloc_usable_size(p);
    put(__func__, p, old);
    q = must(realloc(p, 40 * MiB)); // above glibc's 32 MiB cap of the threshold
    check_mmapped("realloc_moved's 40 MiB block", before, 1);
    requested(__func__, 40 * MiB);
    put(__func__, q + old, to_page_end(q + old, 3 * PAGE));
    free(q);
}

// calloc from the heap (small; large on recycled pages, which glibc clears) and from a fresh
// mapping (which it does not): its figure is the non-zero bytes, exact on any page.
static __attribute__((noinline)) void calloc_blocks(void) {
    static const size_t sizes[] = {100, 64 * KiB, 1 * MiB, 40 * MiB};
    static const int mmapped[] = {0, 0, 0, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t before = mmapped_bytes();
        char *p = must(calloc(1, sizes[i]));
        check_mmapped("a calloc block", before, mmapped[i]);
        requested(__func__, sizes[i]);
        put(__func__, p + 17, sizes[i] / 5);
        put(__func__, p + sizes[i] / 2 + 3, 33);
        free(p);
    }
}

// memalign and posix_memalign, from the heap and from a fresh mapping.
static __attribute__((noinline)) void aligned_blocks(void) {
    size_t before = mmapped_bytes();
    char *p = must(memalign(64, 1000));
    requested(__func__, 1000);
    put(__func__, p, 1000);
    free(p);

    p = must(memalign(4096, 256 * KiB));
    check_mmapped("a 256 KiB memalign block", before, 0);
    requested(__func__, 256 * KiB);
    put(__func__, p, to_page_end(p, 100000));
    free(p);

    void *v;
    if (posix_memalign(&v, 64, 300 * KiB) != 0)
        fail("posix_memalign");
    check_mmapped("a 300 KiB posix_memalign block", before, 0);
    requested(__func__, 300 * KiB);
    put(__func__, v, to_page_end(v, 150000));
    free(v);

    p = must(memalign(4096, 16 * MiB));
    check_mmapped("a 16 MiB memalign block", before, 1);
    requested(__func__, 16 * MiB);
    put(__func__, p + 3 * PAGE, 5 * PAGE);
    free(p);
}

// Left live at exit (issue #23): measured then, from the shim's table of live blocks. A small
// block, a calloc block, a large heap block on recycled pages and a fresh mapping.
static __attribute__((noinline)) void live_at_exit(void) {
    size_t before = mmapped_bytes();
    char *p = must(malloc(100));
    requested(__func__, 100);
    put(__func__, p + 10, 60);
    char *c = must(calloc(1, 5000));
    requested(__func__, 5000);
    put(__func__, c + 4000, 999);
    char *h = must(malloc(2 * MiB));
    check_mmapped("live_at_exit's 2 MiB block", before, 0);
    check_resident("live_at_exit's 2 MiB block", h, 2 * MiB);
    requested(__func__, 2 * MiB);
    put(__func__, h + 12345, 54321);
    char *m = must(malloc(40 * MiB));
    check_mmapped("live_at_exit's 40 MiB block", before, 1);
    requested(__func__, 40 * MiB);
    put(__func__, page_up(m + 5 * MiB), 7 * PAGE);
    // kept where the compiler cannot see them die
    __asm__ volatile("" : : "r"(p), "r"(c), "r"(h), "r"(m) : "memory");
}

int main(void) {
    // Transparent huge pages would make a whole 2 MiB resident for one write: off for this
    // process, so that the figures of fresh pages are the program's own.
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        fail("PR_SET_THP_DISABLE");
    small_blocks();
    fresh_mmap();
    heap_prior();
    heap_reuse();
    heap_fresh();
    realloc_in_place();
    realloc_moved();
    calloc_blocks();
    aligned_blocks();
    live_at_exit();
    for (size_t i = 0; i < n_tallies; i++)
        printf("%s %zu %zu %zu\n", tallies[i].site, tallies[i].written, tallies[i].ranges,
               tallies[i].requested);
    return 0;
}
