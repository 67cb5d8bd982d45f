// SPDX-License-Identifier: MIT
// The live subcommand (cmd_live.h): the refresh loop, keys and signals. The figures are
// analyze/live.h's, the drawing out/out_live.h's.
#include "cmd/cmd_live.h"

#include "analyze/live.h"
#include "out/out_live.h"

#include <curses.h>
#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char cmd_live_usage[] =
    "usage: heapprof live TRACE\n"
    "\n"
    "Watches TRACE while the program writes it (HEAPPROF_OUT, heapprof run, heapprof attach),\n"
    "refreshed every second: live heap bytes over time, the top sites by live bytes and by\n"
    "allocation rate, growth hotspots. On a terminal a full-screen view (q quits, the program\n"
    "runs on); otherwise one line a second until the trace is complete.\n";

#define WAIT_FOR_FILE_S 30 // how long to wait for a trace file that does not exist yet

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run_plain(const char *trace, FILE *out, errmsg_t *err) {
    live_t *l = live_new(trace);
    double start = now_s();
    int rc = 0;
    while (!interrupted) {
        live_snapshot_t s;
        errmsg_t why;
        errmsg_init(&why);
        if (live_refresh(l, &s, &why)) {
            out_live_line(out, &s);
            if (s.finished)
                break;
        } else if (now_s() - start > WAIT_FOR_FILE_S) {
            errmsg_set(err, "%s", why.msg);
            rc = -1;
            break;
        }
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    live_free(l);
    return rc;
}

static int run_screen(const char *trace) {
    setlocale(LC_ALL, "");
    initscr();
    cbreak();
    noecho();
    curs_set(0);
    keypad(stdscr, TRUE);
    timeout(100); // getch waits at most 100 ms: keys are answered at once, refreshes every second
    live_t *l = live_new(trace);
    live_snapshot_t s;
    bool have = false;
    double next = 0;
    errmsg_t why;
    errmsg_init(&why);
    while (!interrupted) {
        if (now_s() >= next) {
            errmsg_init(&why);
            live_snapshot_t fresh;
            if (live_refresh(l, &fresh, &why)) {
                s = fresh;
                have = true;
            }
            size_t n;
            const uint64_t *hist = live_history(l, &n);
            out_live_screen(trace, have ? &s : NULL, why.msg, hist, n);
            next = now_s() + 1.0;
        }
        int c = getch();
        if (c == 'q' || c == 'Q')
            break;
        if (c == KEY_RESIZE)
            next = 0;
    }
    live_free(l);
    endwin();
    return 0;
}

int cmd_live_run(int argc, char **argv, FILE *out, errmsg_t *err) {
    if (argc != 2 || argv[1][0] == '-') {
        errmsg_set(err, "live: one TRACE (see heapprof live --help)");
        return -1;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (isatty(fileno(out)) && isatty(STDIN_FILENO))
        return run_screen(argv[1]);
    return run_plain(argv[1], out, err);
}
