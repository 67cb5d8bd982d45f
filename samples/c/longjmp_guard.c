// SPDX-License-Identifier: MIT
// longjmp_guard: a signal handler (SA_NODEFER) that allocates and siglongjmps out, having
// interrupted the shim while it held its recursion guard (issue #17 item 9: recording then
// stopped for good, silently). Made deterministic with a fault: free() of a block whose pages
// were made PROT_NONE faults inside the shim (its bytes-touched measure reads the block's
// header; with HEAPPROF_TOUCH=0 the real free does). Exits 1 if a step misbehaved.
//
// Blocks made from this executable (the .expect counts), in each of ROUNDS rounds: one block
// of BIG bytes, freed once the handler jumped back and the pages are readable again (the free
// the fault interrupted never completed), then N_SMALL malloc/free pairs of 8 + i bytes. The
// handler's own malloc(24) runs while the shim is interrupted: it passes through unrecorded.
#include <malloc.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ROUNDS 50
#define N_SMALL 100
#define BIG (256 * 1024) // above the mmap threshold: a mapping of its own

static sigjmp_buf env;
static void *volatile sink;
static volatile sig_atomic_t faults;

static void on_fault(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)si;
    (void)uc;
    faults++;
    void *p = malloc(24); // the shim holds its guard: passes through
    sink = p;
    free(p);
    siglongjmp(env, 1);
}

// One round; nonzero if a step misbehaved. Its own function: nothing it keeps in a register
// changes between sigsetjmp and the jump.
static __attribute__((noinline)) int round_once(void) {
    char *big = malloc(BIG);
    if (!big)
        return 1;
    big[0] = 1;
    // the mapping starts at the chunk's header, 16 bytes before the block
    char *map = (char *)((uintptr_t)(big - 16) & ~(uintptr_t)4095);
    size_t len = (size_t)(big + BIG - map + 4095) & ~(size_t)4095;
    if (mprotect(map, len, PROT_NONE))
        return 1;
    int before = faults;
    if (sigsetjmp(env, 1) == 0) {
        free(big); // faults
        return 1;  // not reached
    }
    if (faults != before + 1 || mprotect(map, len, PROT_READ | PROT_WRITE))
        return 1;
    free(big);
    for (int i = 0; i < N_SMALL; i++) {
        void *p = malloc(8 + (size_t)i);
        sink = p;
        free(p);
    }
    return 0;
}

int main(void) {
    // a fixed threshold: glibc would raise it to BIG after the first free of a mapped block
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) || sigaction(SIGBUS, &sa, NULL))
        return 1;
    for (int r = 0; r < ROUNDS; r++)
        if (round_once())
            return 1;
    printf("blocks=%d\n", ROUNDS * (1 + N_SMALL));
    return 0;
}
