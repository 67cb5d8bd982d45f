// SPDX-License-Identifier: MIT
// Everything a host program may do around the shim: malloc in a signal handler, in a destructor
// that runs after the shim's exit flush, posix_spawn, system(), vfork + exec, and a daemon that
// double-forks. Exits 0 when every step worked; the test checks the traces afterwards.
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static void *volatile sink;
static volatile sig_atomic_t handled;

static void on_signal(int sig) {
    (void)sig;
    // not async-signal-safe in general, but programs do it; the shim must survive it
    void *p = malloc(48);
    sink = p;
    free(p);
    handled++;
}

__attribute__((destructor)) static void late(void) {
    // runs after main returned; the shim must record it or pass it through, never crash
    for (int i = 0; i < 100; i++) {
        void *p = malloc(16);
        sink = p;
        free(p);
    }
}

static int wait_ok(pid_t pid) {
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child")) {
        for (int i = 0; i < 3; i++)
            sink = malloc(8);
        return 0;
    }
    signal(SIGALRM, on_signal);
    for (int i = 0; i < 200; i++) {
        raise(SIGALRM);
        void *p = malloc(32);
        sink = p;
        free(p);
    }
    if (handled != 200)
        return 10;

    char *args[] = {argv[0], "child", NULL};
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, args, environ) || !wait_ok(pid))
        return 11;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s child", argv[0]);
    if (system(cmd) != 0)
        return 12;
    pid = vfork();
    if (pid == 0) {
        execv(argv[0], args);
        _exit(99);
    }
    if (pid < 0 || !wait_ok(pid))
        return 13;
    // daemon: fork, setsid, fork again; the grandchild allocates and exits on its own
    pid = fork();
    if (pid == 0) {
        setsid();
        pid_t g = fork();
        if (g == 0) {
            for (int i = 0; i < 5; i++)
                sink = malloc(24);
            exit(0);
        }
        exit(g > 0 ? 0 : 1);
    }
    if (pid < 0 || !wait_ok(pid))
        return 14;
    usleep(200 * 1000); // let the grandchild finish
    return 0;
}
