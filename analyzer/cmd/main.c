// SPDX-License-Identifier: MIT
// The heapprof command: argv -> subcommand. The only file that prints errors and chooses exit
// codes: 0 ok, 2 usage or unreadable/invalid trace, 127/126 command not found/not runnable,
// for `run` the command's own status, for `check` 1 when a budget is broken.
#include "cmd/cmd_attach.h"
#include "cmd/cmd_check.h"
#include "cmd/cmd_dhat.h"
#include "cmd/cmd_flame.h"
#include "cmd/cmd_live.h"
#include "cmd/cmd_massif.h"
#include "cmd/cmd_pprof.h"
#include "cmd/cmd_report.h"
#include "cmd/cmd_run.h"
#include "cmd/cmd_stats.h"
#include "cmd/cmd_view.h"
#include "core/errmsg.h"
#include "core/sort.h"
#include "core/stage_times.h"
#include "core/xalloc.h"
#include "format/hpt_format.h"
#include "out/out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef HEAPPROF_VERSION
#define HEAPPROF_VERSION "unknown"
#endif

#define EXIT_USAGE 2

static const char usage[] =
    "usage: heapprof COMMAND [ARGS...]\n"
    "\n"
    "A heap allocation profiler: records every allocation with its stack, then analyzes it.\n"
    "\n"
    "commands:\n"
    "  run [-o TRACE] -- CMD ARGS...   run CMD under libheapprof.so and write a trace\n"
    "  stats TRACE [--json]            totals, peak, at end, and what was lost\n"
    "  report TRACE [--json]           top allocation sites by function and source line\n"
    "  dhat TRACE [-o FILE]            DHAT JSON for Valgrind's DHAT viewer\n"
    "  massif TRACE [-o FILE]          Valgrind Massif's format, for ms_print\n"
    "  flame TRACE [--metric M]        allocation flamegraph (SVG, or --folded stacks)\n"
    "  diff BEFORE AFTER [--metric M]  sites that changed most; -o FILE: differential SVG\n"
    "  view TRACE [-o FILE]            self-contained HTML viewer (open it in a browser)\n"
    "  pprof TRACE [-o FILE]           gzipped pprof profile (go tool pprof, Pyroscope, Parca)\n"
    "  check [BUDGETS] -- CMD ARGS...  heap budgets for CI (or check [BUDGETS] TRACE)\n"
    "  attach PID [-o TRACE]           record a running process (until Ctrl-C, --duration S)\n"
    "  detach PID                      end a recording started by attach\n"
    "  live TRACE                      watch a trace being written (q quits)\n"
    "\n"
    "  heapprof COMMAND --help         help for one command\n"
    "  heapprof --version\n";

typedef int (*cmd_fn)(int argc, char **argv);

// A message may quote the trace (a name, the CPU sampler's reason): fmt_safe_text.
static int fail(const errmsg_t *err) {
    char safe[4 * sizeof err->msg];
    fprintf(stderr, "heapprof: %s\n",
            err->is_set ? fmt_safe_text(err->msg, safe, sizeof safe) : "unknown error");
    return EXIT_USAGE;
}

static int finish_output(void) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "heapprof: cannot write the output\n");
        return EXIT_USAGE;
    }
    return 0;
}

static int do_stats(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_stats_opts_t o;
    if (cmd_stats_parse(argc, argv, &o, &err) != 0 || cmd_stats_run(&o, stdout, &err) != 0)
        return fail(&err);
    return finish_output();
}

// The progress line goes to stderr only when a person watches it.
static FILE *progress_stream(void) { return isatty(STDERR_FILENO) ? stderr : NULL; }

static int do_report(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_report_opts_t o;
    if (cmd_report_parse(argc, argv, &o, &err) != 0 ||
        cmd_report_run(&o, stdout, progress_stream(), &err) != 0)
        return fail(&err);
    return finish_output();
}

static int do_dhat(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_dhat_opts_t o;
    if (cmd_dhat_parse(argc, argv, &o, &err) != 0 ||
        cmd_dhat_run(&o, stdout, progress_stream(), &err) != 0)
        return fail(&err);
    return finish_output();
}

static int do_massif(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_massif_opts_t o;
    if (cmd_massif_parse(argc, argv, &o, &err) != 0 ||
        cmd_massif_run(&o, stdout, progress_stream(), &err) != 0)
        return fail(&err);
    return finish_output();
}

static int do_flame(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_flame_opts_t o;
    if (cmd_flame_parse(argc, argv, &o, &err) != 0 ||
        cmd_flame_run(&o, stdout, progress_stream(), &err) != 0)
        return fail(&err);
    return finish_output();
}

static int do_view(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_view_opts_t o;
    if (cmd_view_parse(argc, argv, &o, &err) != 0 ||
        cmd_view_run(&o, stdout, progress_stream(), &err) != 0)
        return fail(&err);
    if (strcmp(o.path, "-") != 0)
        fprintf(stderr, "heapprof: viewer written to %s\n", o.path);
    return finish_output();
}

static void pprof_written(const char *path, void *ctx) {
    (void)ctx;
    char safe[4 * 4096];
    fprintf(stderr, "heapprof: profile written to %s\n", fmt_safe_text(path, safe, sizeof safe));
}

static int do_pprof(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_pprof_opts_t o;
    cmd_pprof_warnings_t w;
    if (cmd_pprof_parse(argc, argv, &o, &err) != 0)
        return fail(&err);
    if (o.follow)
        return cmd_pprof_follow(&o, pprof_written, NULL, &err) != 0 ? fail(&err) : 0;
    if (cmd_pprof_run(&o, stdout, progress_stream(), &w, &err) != 0)
        return fail(&err);
    char safe[4 * sizeof w.damage];
    if (w.damage[0])
        fprintf(stderr, "heapprof: warning: %s\n", fmt_safe_text(w.damage, safe, sizeof safe));
    if (w.unfinished[0])
        fprintf(stderr, "heapprof: warning: %s\n", fmt_safe_text(w.unfinished, safe, sizeof safe));
    return finish_output();
}

// `heapprof run`'s summary of the traces of the processes the command started, past
// RUN_LIST_OTHERS_MAX of them: how many of each program, the commonest first, and where.
#define RUN_LIST_OTHERS_MAX 8u
#define RUN_TALLY_PROGRAMS 64u
typedef struct run_prog {
    char name[64];
    size_t count;
} run_prog_t;
typedef struct run_tally {
    run_prog_t prog[RUN_TALLY_PROGRAMS];
    size_t n_progs, n, n_unnamed; // n: traces in all; n_unnamed: of programs past the table
} run_tally_t;

static void run_tally_add(run_tally_t *t, const char *prog) {
    t->n++;
    for (size_t i = 0; i < t->n_progs; i++)
        if (!strncmp(t->prog[i].name, prog, sizeof t->prog[i].name - 1)) {
            t->prog[i].count++;
            return;
        }
    if (t->n_progs == RUN_TALLY_PROGRAMS) {
        t->n_unnamed++;
        return;
    }
    run_prog_t *e = &t->prog[t->n_progs++];
    size_t len = strnlen(prog, sizeof e->name - 1);
    memcpy(e->name, prog, len);
    e->name[len] = 0;
    e->count = 1;
}

static int cmp_run_prog(const void *a, const void *b) {
    const run_prog_t *x = a, *y = b;
    return x->count != y->count ? (x->count < y->count ? 1 : -1) : strcmp(x->name, y->name);
}

// dir: where the traces are (the directory of one of them)
static void run_tally_print(run_tally_t *t, const char *one_trace, FILE *f) {
    sort_items(t->prog, t->n_progs, sizeof *t->prog, cmp_run_prog);
    char dir[4096], safe[4 * sizeof dir], name[4 * 64];
    const char *slash = strrchr(one_trace, '/');
    size_t len = !slash ? 0 : slash == one_trace ? 1 : (size_t)(slash - one_trace);
    if (len >= sizeof dir)
        len = sizeof dir - 1;
    memcpy(dir, slash ? one_trace : ".", slash ? len : 1);
    dir[slash ? len : 1] = 0;
    fprintf(f, "heapprof: %zu more traces, of the processes it started, in %s:", t->n,
            fmt_safe_text(dir, safe, sizeof safe));
    size_t shown = t->n_progs < 6 ? t->n_progs : 6, rest = t->n_unnamed;
    for (size_t i = 0; i < shown; i++)
        fprintf(f, "%s %zu of %s", i ? "," : "", t->prog[i].count,
                fmt_safe_text(t->prog[i].name, name, sizeof name));
    for (size_t i = shown; i < t->n_progs; i++)
        rest += t->prog[i].count;
    if (rest)
        fprintf(f, ", %zu of other programs", rest);
    fputc('\n', f);
}

static int do_run(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_run_opts_t o;
    if (cmd_run_parse(argc, argv, &o, &err) != 0)
        return fail(&err);
    cmd_run_result_t res;
    if (cmd_run_exec(&o, &res, &err) != 0) {
        fail(&err);
        cmd_run_result_fini(&res);
        return res.exec_failed ? res.exit_status : EXIT_USAGE;
    }
    // -o /dev/null: the shim wrote the trace into the device, as asked; no file to point at
    struct stat st;
    bool to_device = stat(res.expected, &st) == 0 && S_ISCHR(st.st_mode);
    if (res.n_traces == 0 && !to_device)
        fprintf(stderr, "heapprof: no trace was written (expected %s; was %s loaded?)\n",
                res.expected, res.preload);
    // The command's own traces (its pid: it and the images it exec'd) one line each, then the
    // processes it started: each where they are few, else one line of counts by program. Each
    // trace's first chunk is read once.
    typedef struct {
        char prog[256];
        uint32_t pid;
        bool named, other;
    } seen_t;
    seen_t *seen = xcalloc(res.n_traces ? res.n_traces : 1, sizeof *seen);
    size_t others = 0;
    for (size_t i = 0; i < res.n_traces; i++) {
        seen_t *e = &seen[i];
        e->named = cmd_run_trace_program(res.traces[i], e->prog, sizeof e->prog, &e->pid) == 0;
        e->other = e->named && (pid_t)e->pid != res.pid;
        others += e->other;
    }
    run_tally_t tally = {0};
    const char *one_other = NULL;
    for (size_t i = 0; i < res.n_traces; i++) {
        const seen_t *e = &seen[i];
        char safe[512], path[4096 + 64];
        fmt_safe_text(res.traces[i], path, sizeof path);
        if (e->other && others > RUN_LIST_OTHERS_MAX) {
            run_tally_add(&tally, e->prog);
            one_other = res.traces[i];
        } else if (e->named) {
            fprintf(stderr, "heapprof: trace of %s (pid %u) written to %s\n",
                    fmt_safe_text(e->prog, safe, sizeof safe), e->pid, path);
        } else {
            fprintf(stderr, "heapprof: trace written to %s\n", path);
        }
    }
    if (tally.n)
        run_tally_print(&tally, one_other, stderr);
    if (res.n_perf_maps)
        fprintf(stderr, "heapprof: %zu perf map%s of JIT code names kept beside %s trace%s "
                        "(TRACE.perf.map)\n",
                res.n_perf_maps, res.n_perf_maps == 1 ? "" : "s",
                res.n_perf_maps == 1 ? "its" : "their", res.n_perf_maps == 1 ? "" : "s");
    free(seen);
    cmd_run_result_fini(&res);
    return res.exit_status;
}

// Status 0 when every budget held, 1 when one broke, 2 on an error (the command's own failure
// included: its status is in the summary and the JUnit file).
static int do_check(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_check_opts_t *o = malloc(sizeof *o);
    if (!o) {
        fprintf(stderr, "heapprof: out of memory\n");
        return EXIT_USAGE;
    }
    int cmd_status, rc = EXIT_USAGE;
    if (cmd_check_parse(argc, argv, o, &err) != 0) {
        fail(&err);
    } else {
        int broken = cmd_check_run(o, stdout, progress_stream(), &cmd_status, &err);
        if (broken < 0)
            fail(&err);
        else
            rc = broken ? 1 : 0;
        if (finish_output() != 0)
            rc = EXIT_USAGE;
    }
    cmd_check_opts_fini(o);
    free(o);
    return rc;
}

static int do_attach(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    cmd_attach_opts_t o;
    if (cmd_attach_parse(argc, argv, &o, &err) != 0 || cmd_attach_run(&o, stderr, &err) != 0)
        return fail(&err);
    return 0;
}

static int do_detach(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    if (cmd_detach_run(argc, argv, stderr, &err) != 0)
        return fail(&err);
    return 0;
}

static int do_live(int argc, char **argv) {
    errmsg_t err;
    errmsg_init(&err);
    if (cmd_live_run(argc, argv, stdout, &err) != 0)
        return fail(&err);
    return finish_output();
}

static const struct {
    const char *name;
    cmd_fn fn;
    const char *usage;
} commands[] = {
    {"run", do_run, cmd_run_usage},
    {"stats", do_stats, cmd_stats_usage},
    {"report", do_report, cmd_report_usage},
    {"dhat", do_dhat, cmd_dhat_usage},
    {"massif", do_massif, cmd_massif_usage},
    {"flame", do_flame, cmd_flame_usage},
    {"diff", do_flame, cmd_diff_usage},
    {"view", do_view, cmd_view_usage},
    {"pprof", do_pprof, cmd_pprof_usage},
    {"check", do_check, cmd_check_usage},
    {"attach", do_attach, cmd_attach_usage},
    {"detach", do_detach, cmd_detach_usage},
    {"live", do_live, cmd_live_usage},
};

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (is_help(cmd) || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return finish_output();
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("heapprof %s (trace format %u)\n", HEAPPROF_VERSION, HPT_VERSION);
        return finish_output();
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        if (strcmp(cmd, commands[i].name) != 0)
            continue;
        // --help anywhere before the command's own arguments ("--" or, for run, CMD)
        for (int a = 2; a < argc && strcmp(argv[a], "--") != 0; a++) {
            if (is_help(argv[a])) {
                fputs(commands[i].usage, stdout);
                return finish_output();
            }
            if (commands[i].fn == do_run && argv[a][0] != '-')
                break;
            if (commands[i].fn == do_run &&
                (strcmp(argv[a], "-o") == 0 || strcmp(argv[a], "--output") == 0))
                a++;
        }
        stage_mark("start");
        int rc = commands[i].fn(argc - 1, argv + 1);
        stage_mark("output+close");
        return rc;
    }
    fprintf(stderr, "heapprof: unknown command '%s' (see heapprof --help)\n", cmd);
    return EXIT_USAGE;
}
