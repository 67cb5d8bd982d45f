// SPDX-License-Identifier: MIT
// sig_owner: installs a counting handler on every real-time signal a program may use (SIGRTMAX
// and whichever the shim's CPU-time timer took among them) while the timer samples, burns CPU
// in burn_with_handlers, then sends each signal to itself once (issue #17 item 4: the timer's
// signals reached the program's handler 1-3 times a run). Prints "unsolicited=N forwarded=M";
// exits 0 when no handler ran before the signals were sent and each ran exactly once after,
// 2 otherwise. argv[1]: milliseconds of CPU work (default 600).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIGS 64

static volatile sig_atomic_t calls[MAX_SIGS + 1];
static volatile unsigned long long sink;

static void count(int s, siginfo_t *si, void *uc) {
    (void)si;
    (void)uc;
    if (s > 0 && s <= MAX_SIGS)
        calls[s]++;
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static __attribute__((noinline)) void burn_with_handlers(double ms) {
    double until = cpu_ms() + ms;
    unsigned long long x = 88172645463325252ull;
    while (cpu_ms() < until)
        for (int i = 0; i < 100000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    sink = x;
}

int main(int argc, char **argv) {
    double ms = argc > 1 ? atof(argv[1]) : 600;
    int lo = SIGRTMIN + 2, hi = SIGRTMAX < MAX_SIGS ? SIGRTMAX : MAX_SIGS;
    for (int s = lo; s <= hi; s++) {
        struct sigaction sa, back;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = count;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(s, &sa, NULL) != 0 || sigaction(s, NULL, &back) != 0 ||
            !(back.sa_flags & SA_SIGINFO) || back.sa_sigaction != count) {
            fprintf(stderr, "signal %d: the handler does not read back\n", s);
            return 2;
        }
    }
    burn_with_handlers(ms);
    int unsolicited = 0;
    for (int s = lo; s <= hi; s++)
        unsolicited += calls[s];
    int forwarded = 0;
    for (int s = lo; s <= hi; s++) {
        int before = calls[s];
        raise(s); // delivered before raise returns: the signal is not blocked
        forwarded += calls[s] == before + 1;
    }
    printf("unsolicited=%d forwarded=%d of %d\n", unsolicited, forwarded, hi - lo + 1);
    return unsolicited == 0 && forwarded == hi - lo + 1 ? 0 : 2;
}
