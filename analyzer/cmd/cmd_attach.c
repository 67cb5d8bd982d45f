// SPDX-License-Identifier: MIT
// The attach and detach subcommands (cmd_attach.h): argument parsing, the
// foreground wait and its end conditions. The injection itself is
// inject/inject.h's.
#include "cmd/cmd_attach.h"

#include "cmd/cmd_run.h"
#include "inject/inject.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char cmd_attach_usage[] =
    "usage: heapprof attach PID [-o TRACE] [--duration S]\n"
    "\n"
    "Loads libheapprof.so into the running process PID (ptrace, no gdb) and records its\n"
    "allocations from now on, until S seconds passed, Ctrl-C, `heapprof detach PID` or the\n"
    "program's exit; then every patched call slot is put back and the trace is finished. The\n"
    "program runs on; heapprof's library stays loaded in it, idle. Frees of blocks allocated\n"
    "before the attach are counted apart (\"frees of unknown addresses\").\n"
    "\n"
    "  -o, --output TRACE   trace file (default heapprof.PID.hpt; it must not exist)\n"
    "  --duration S         detach after S seconds (decimals allowed)\n"
    "\n"
    "Refused with exit status 2 and one line why: ptrace not permitted (ptrace_scope, another\n"
    "user), a process already traced, a statically linked program, another architecture.\n";

const char cmd_detach_usage[] =
    "usage: heapprof detach PID\n"
    "\n"
    "Ends a recording started by `heapprof attach PID`: puts back every patched call slot and\n"
    "finishes the trace; heapprof's library stays loaded in the program, idle.\n";

static int parse_pid(const char *cmd, const char *a, pid_t *pid, errmsg_t *err) {
    char *end;
    errno = 0;
    long v = strtol(a, &end, 10);
    if (errno || *end || v <= 0 || v > INT_MAX) {
        errmsg_set(err, "%s: '%s' is not a process id (see heapprof %s --help)", cmd, a, cmd);
        return -1;
    }
    *pid = (pid_t)v;
    return 0;
}

int cmd_attach_parse(int argc, char **argv, cmd_attach_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    const char *out = NULL, *pid = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc) {
                errmsg_set(err, "attach: %s needs a file name", a);
                return -1;
            }
            out = argv[i];
        } else if (!strcmp(a, "--duration")) {
            char *end;
            if (++i >= argc || (o->duration_s = strtod(argv[i], &end), *end) ||
                !(o->duration_s > 0) || o->duration_s > 1e7) {
                errmsg_set(err, "attach: --duration needs a number of seconds above 0");
                return -1;
            }
        } else if (a[0] == '-') {
            errmsg_set(err, "attach: unknown option '%s' (see heapprof attach --help)", a);
            return -1;
        } else if (pid) {
            errmsg_set(err, "attach: one PID only (see heapprof attach --help)");
            return -1;
        } else {
            pid = a;
        }
    }
    if (!pid) {
        errmsg_set(err, "attach: which process? (heapprof attach PID)");
        return -1;
    }
    if (parse_pid("attach", pid, &o->pid, err) != 0)
        return -1;
    char name[64];
    snprintf(name, sizeof name, "heapprof.%d.hpt", (int)o->pid);
    if (!out)
        out = name;
    // the target resolves the path from its own working directory: make it ours
    char cwd[PATH_MAX] = "";
    if (out[0] != '/' && !getcwd(cwd, sizeof cwd)) {
        errmsg_set(err, "attach: cannot tell the current directory for %s", out);
        return -1;
    }
    int n = snprintf(o->out, sizeof o->out, "%s%s%s", cwd, cwd[0] ? "/" : "", out);
    if (n < 0 || (size_t)n >= sizeof o->out) {
        errmsg_set(err, "attach: the trace path is too long");
        return -1;
    }
    return 0;
}

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int cmd_attach_run(const cmd_attach_opts_t *o, FILE *msg, errmsg_t *err) {
    char lib[PATH_MAX];
    if (cmd_run_find_preload(NULL, lib, sizeof lib) != 0) {
        errmsg_set(err, "attach: cannot find libheapprof.so beside the heapprof command");
        return -1;
    }
    // Ctrl-C during the attach sequence is noted and acted on once it is complete
    struct sigaction sa = {0};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    inject_result_t res;
    if (inject_attach(o->pid, lib, o->out, &res, err) != 0)
        return -1;
    double t0 = now_s();
    fprintf(msg, "heapprof: attached to process %d, recording to %s; ", (int)o->pid, res.trace);
    if (o->duration_s > 0)
        fprintf(msg, "detaching after %g s\n", o->duration_s);
    else
        fprintf(msg, "Ctrl-C or `heapprof detach %d` ends it\n", (int)o->pid);
    fflush(msg);
    const char *ended = NULL;
    while (!ended) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        long st = inject_state(o->pid, res.state_addr);
        if (st < 0)
            ended = "the program exited";
        else if (st != 1)
            ended = "detached by `heapprof detach`";
        else if (stop_signal || (o->duration_s > 0 && now_s() - t0 >= o->duration_s))
            break;
    }
    if (ended) {
        fprintf(msg, "heapprof: %s; trace %s\n", ended, res.trace);
        return 0;
    }
    long n = 0;
    if (inject_detach(o->pid, &n, err) != 0)
        return -1;
    fprintf(msg,
            "heapprof: detached from process %d after %.1f s (%ld call slots put back); trace %s\n",
            (int)o->pid, now_s() - t0, n, res.trace);
    return 0;
}

int cmd_detach_run(int argc, char **argv, FILE *msg, errmsg_t *err) {
    if (argc != 2) {
        errmsg_set(err, "detach: which process? (heapprof detach PID)");
        return -1;
    }
    pid_t pid;
    long n = 0;
    if (parse_pid("detach", argv[1], &pid, err) != 0 || inject_detach(pid, &n, err) != 0)
        return -1;
    fprintf(msg, "heapprof: detached from process %d (%ld call slots put back)\n", (int)pid, n);
    return 0;
}
