// SPDX-License-Identifier: MIT
// `heapprof live` on a trace being written by samples/c/server_loop.c under the preload: the
// plain lines when the output is a pipe, and the curses screen in a tmux pane (send-keys /
// capture-pane): the program's top site shows on screen while it runs, and `q` quits without
// disturbing it.
#include "spawn.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct server {
    pid_t pid;
    int in;
} server_t;

// server_loop 2 0 under the shim, writing trace; runs until its stdin closes.
static server_t start_server(const char *trace) {
    int in[2];
    cr_assert(pipe2(in, O_CLOEXEC) == 0); // no other child may hold its stdin open
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(in[0], 0);
        close(in[1]);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        setenv("LD_PRELOAD", E2E_LIB, 1);
        setenv("HEAPPROF_OUT", trace, 1);
        execl(E2E_SAMPLES "/server_loop", "server_loop", "2", "0", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    return (server_t){pid, in[1]};
}

static int stop_server(server_t *s) {
    close(s->in);
    int st;
    cr_assert_eq(waitpid(s->pid, &st, 0), s->pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// Runs a shell command; its output (caller frees) and exit status.
static int sh(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen %s", cmd);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - 1 - n, p)) > 0)
        n += got;
    buf[n] = '\0';
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(live, plain_lines_when_not_a_terminal, .timeout = 120) {
    char *dir = e2e_tmpdir("live_plain");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/live.hpt", dir);
    server_t s = start_server(trace);
    int outp[2];
    cr_assert(pipe(outp) == 0);
    pid_t live = fork();
    if (live == 0) {
        dup2(outp[1], 1);
        close(outp[0]);
        execl(E2E_HEAPPROF, E2E_HEAPPROF, "live", trace, (char *)NULL);
        _exit(127);
    }
    close(outp[1]);
    FILE *f = fdopen(outp[0], "r");
    char line[2048];
    bool seen = false;
    for (int i = 0; i < 30 && !seen && fgets(line, sizeof line, f); i++)
        seen = strstr(line, "top live: keep_session") != NULL;
    cr_expect(seen, "no line named the top live site: %s", line);
    // the program ends; live prints the complete trace's line and exits by itself
    cr_expect_eq(stop_server(&s), 0);
    bool complete = false;
    while (fgets(line, sizeof line, f))
        complete |= strstr(line, "trace complete") != NULL;
    fclose(f);
    int st;
    cr_assert_eq(waitpid(live, &st, 0), live);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_expect(complete, "no line said the trace is complete");
    free(dir);
}

// Killed (no TRAILER): live sees its writer's pid gone, reads the rest as it stands and exits
// by itself with the complete trace's line, instead of waiting for a TRAILER forever.
Test(live, killed_program_ends_the_plain_lines, .timeout = 120) {
    char *dir = e2e_tmpdir("live_killed");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/live.hpt", dir);
    server_t s = start_server(trace);
    int outp[2];
    cr_assert(pipe(outp) == 0);
    pid_t live = fork();
    if (live == 0) {
        dup2(outp[1], 1);
        close(outp[0]);
        execl(E2E_HEAPPROF, E2E_HEAPPROF, "live", trace, (char *)NULL);
        _exit(127);
    }
    close(outp[1]);
    FILE *f = fdopen(outp[0], "r");
    char line[2048];
    bool seen = false;
    for (int i = 0; i < 30 && !seen && fgets(line, sizeof line, f); i++)
        seen = strstr(line, "top live: keep_session") != NULL;
    cr_expect(seen, "no line named the top live site: %s", line);
    kill(s.pid, SIGKILL);
    int st;
    cr_assert_eq(waitpid(s.pid, &st, 0), s.pid);
    close(s.in);
    bool complete = false;
    while (fgets(line, sizeof line, f))
        complete |= strstr(line, "trace complete") != NULL;
    fclose(f);
    cr_assert_eq(waitpid(live, &st, 0), live);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_expect(complete, "no line said the trace is complete");
    free(dir);
}

Test(live, tmux_screen_shows_the_top_site_and_q_quits, .timeout = 120) {
    char *dir = e2e_tmpdir("live_tmux");
    char trace[4096], sock[64], cmd[8192];
    snprintf(trace, sizeof trace, "%s/live.hpt", dir);
    snprintf(sock, sizeof sock, "heapprof-live-test-%d", (int)getpid());
    // live first: it waits for the trace, as a user who starts it before the program would
    snprintf(cmd, sizeof cmd,
             "tmux -L %s new-session -d -s live -x 150 -y 45 '%s live %s; sleep 60' 2>&1", sock,
             E2E_HEAPPROF, trace);
    char *out = NULL;
    cr_assert_eq(sh(cmd, &out), 0, "tmux: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "tmux -L %s capture-pane -p -t live", sock);
    server_t s = start_server(trace);
    double t0 = now_s();
    bool shown = false;
    double shown_after = -1;
    for (int i = 0; i < 150 && !shown; i++) {
        sleep_ms(100);
        cr_assert_eq(sh(cmd, &out), 0);
        char *top = strstr(out, "Top sites by live bytes");
        shown = top && strstr(top, "keep_session");
        free(out);
        if (shown)
            shown_after = now_s() - t0;
    }
    cr_expect(shown, "the screen never showed keep_session as a top site");
    cr_log_info("keep_session on screen %.2f s after the program started", shown_after);
    snprintf(cmd, sizeof cmd, "tmux -L %s send-keys -t live q", sock);
    cr_expect_eq(sh(cmd, NULL), 0);
    // after q the pane runs `sleep`: the view is gone, the program runs on
    bool gone = false;
    snprintf(cmd, sizeof cmd, "tmux -L %s capture-pane -p -t live", sock);
    for (int i = 0; i < 50 && !gone; i++) {
        sleep_ms(100);
        cr_assert_eq(sh(cmd, &out), 0);
        gone = !strstr(out, "heapprof live");
        free(out);
    }
    cr_expect(gone, "q did not quit the view");
    cr_expect_eq(kill(s.pid, 0), 0, "the program did not run on");
    cr_expect_eq(stop_server(&s), 0);
    snprintf(cmd, sizeof cmd, "tmux -L %s kill-server", sock);
    sh(cmd, NULL);
    free(dir);
}
