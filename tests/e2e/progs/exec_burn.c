// SPDX-License-Identifier: MIT
// exec_burn: an exec that does not replace this image, then CPU work in burn_after_exec (issue
// #17 item 5: the timer sampler stopped for good there). Modes (argv[1]):
//   vfork  a vfork child execs /bin/true (it shares our memory: it must not stop our timers)
//   fail   execv of a path that does not exist (the image goes on: sampling must too)
// argv[2]: milliseconds of CPU work (default 600). Exits 1 if a step misbehaved.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long long sink;

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

// Spins until this process has used ms milliseconds of CPU in here.
static __attribute__((noinline)) void burn_after_exec(double ms) {
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
    const char *mode = argc > 1 ? argv[1] : "vfork";
    double ms = argc > 2 ? atof(argv[2]) : 600;
    void *volatile p = malloc(64); // recording is on before the exec
    free(p);
    if (strcmp(mode, "vfork") == 0) {
        pid_t pid = vfork();
        if (pid == 0) {
            char *args[] = {"/bin/true", NULL};
            execv(args[0], args);
            _exit(127);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 1;
    } else {
        char *args[] = {"/nonexistent/exec_burn", NULL};
        if (execv(args[0], args) != -1 || errno != ENOENT)
            return 1;
    }
    burn_after_exec(ms);
    return 0;
}
