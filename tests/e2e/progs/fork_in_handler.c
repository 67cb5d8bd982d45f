// SPDX-License-Identifier: MIT
// fork() from a signal handler (fork is async-signal-safe) while the program allocates without
// pause: the signal often lands inside the shim, which the old shim's fork handler then waited
// on (it takes the shim's locks, one of which the interrupted frame may hold): half the runs
// hung. Sizes stay in glibc's per-thread cache, so the program's own calls never hold glibc's
// arena lock, which fork takes too (the shim's drains no longer allocate from glibc at all).
// A 2 ms one-shot timer's handler forks a child that allocates one block, frees it and _exits,
// and waits for it; main arms the timer again after each (a periodic timer whose handler takes
// longer than its period, as a child that starts and ends a trace of its own does, would starve
// main). After 50 forks main stops, prints "pairs N" (its malloc/free pairs) and exits 0.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKS 50

static volatile sig_atomic_t forks, handled;

static void on_alarm(int sig) {
    (void)sig;
    pid_t c = fork();
    if (c == 0) {
        void *volatile p = malloc(40);
        free(p);
        _exit(0);
    }
    if (c > 0)
        waitpid(c, NULL, 0);
    forks++;
    handled = 1;
}

static void arm(void) {
    struct itimerval it = {{0, 0}, {0, 2000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    arm();
    void *volatile p = NULL;
    long pairs = 0;
    while (forks < FORKS) {
        p = malloc(16u + ((unsigned)pairs & 63u) * 8u);
        free(p);
        pairs++;
        if (handled) {
            handled = 0;
            arm();
        }
    }
    char line[64];
    int n = snprintf(line, sizeof line, "pairs %ld\n", pairs);
    return write(1, line, (size_t)n) == n ? 0 : 1;
}
