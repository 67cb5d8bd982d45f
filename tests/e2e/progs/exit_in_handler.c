// SPDX-License-Identifier: MIT
// A signal handler that calls exit(), as many programs' SIGTERM or SIGALRM handlers do, while the
// program allocates without pause: the signal often lands inside malloc, inside the shim. The
// old shim then ended its trace from the handler and waited for its own threads, which waited
// for a lock the interrupted frame held: the program hung (1 run in 4).
// Allocates and frees in a loop until a 30 ms timer's handler calls exit(0); an exit handler
// writes "bye" (with write: the interrupted malloc may hold glibc's arena lock, so nothing on
// the way out may allocate, the shim's exit path included). Exits 0.
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static void on_alarm(int sig) {
    (void)sig;
    exit(0);
}

static void bye(void) {
    static const char msg[] = "bye\n";
    (void)!write(1, msg, sizeof msg - 1);
}

int main(void) {
    atexit(bye);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 0}, {0, 30000}};
    setitimer(ITIMER_REAL, &it, NULL);
    void *volatile p = NULL;
    for (unsigned i = 0;; i++) {
        p = malloc(16u + (i & 63u) * 8u);
        free(p);
    }
}
