// SPDX-License-Identifier: MIT
// The check subcommand: options, the run(s) through cmd_run.c, the figures through analyze and
// summary.c, budget.c's verdicts as one line each, and the files around them (summary JSON,
// JUnit, and on failure DHAT JSON and the viewer beside the trace). Prints only to the FILE
// passed in; errors go back to main.c.
#include "cmd/cmd_check.h"

#include "analyze/analyze.h"
#include "analyze/summary.h"
#include "cmd/cmd_dhat.h"
#include "cmd/cmd_run.h"
#include "cmd/cmd_view.h"
#include "core/out_file.h"
#include "core/xalloc.h"
#include "format/hpt_format.h"
#include "model/filter.h"
#include "model/growth.h"
#include "out/out.h"
#include "out/out_junit.h"
#include "symbols/perfmap.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char cmd_check_usage[] =
    "usage: heapprof check [BUDGETS] [OPTIONS] -- CMD [ARGS...]\n"
    "       heapprof check [BUDGETS] [OPTIONS] TRACE\n"
    "\n"
    "Holds a run's heap figures to budgets, for CI: runs CMD under libheapprof.so (or reads\n"
    "an existing TRACE), prints one line per budget, and exits 0 when every budget holds, 1\n"
    "when one is broken, 2 on an error (bad budget, unreadable baseline or trace, a damaged\n"
    "trace, or CMD failing: its status is reported and kept in the summary). On failure the\n"
    "trace, its DHAT JSON and its viewer page are left beside the summary (docs/check.md).\n"
    "\n"
    "Budgets (SIZE: 1048576, 512K, 1.5MiB, 10MB; N: 1000, 10k):\n"
    "  --peak SIZE        bytes live at the global peak of heap bytes (DHAT's t-gmax)\n"
    "  --total SIZE       bytes allocated\n"
    "  --blocks N         blocks allocated\n"
    "  --leaked SIZE      bytes still live at exit\n"
    "  --temporary N      blocks freed by their thread before it allocated anything else\n"
    "  --site 'PATTERN:METRIC<=VALUE'\n"
    "                     METRIC (peak, total, blocks, leaked, temporary) summed over the\n"
    "                     functions whose name matches the glob PATTERN (as report names sites)\n"
    "  --baseline FILE    an earlier trace or summary JSON: no whole-process figure may grow\n"
    "                     by more than --max-increase P% (default 0%) over it\n"
    "\n"
    "Options:\n"
    "  --summary-out FILE write the figures as JSON (totals and per function; small, stable,\n"
    "                     meant to be committed as a baseline)\n"
    "  --junit FILE       write JUnit XML, one test case per budget\n"
    "  --from-module NAME count only allocations made directly from the module whose file\n"
    "                     name is NAME (as heapprof stats --from-module), e.g. the program\n"
    "  --exclude FUNC     leave out the sites of functions matching the glob FUNC (repeatable)\n"
    "  --runs N           run CMD N times and take each figure's median (or --take min)\n"
    "  --budgets FILE     budgets from a YAML file (keys as the flags: peak: 64MiB, sites:\n"
    "                     [...], baseline:, max-increase:, exclude: [...], from-module:;\n"
    "                     docs/check.md)\n"
    "  -h, --help         this help\n";

#define DEFAULT_TRACE_NAME "heapprof-check.%p.hpt"

// "--name VALUE" or "--name=VALUE" at argv[*i]: 1 and *val set (and *i moved past VALUE), 0 if
// argv[*i] is another argument, -1 with err filled when VALUE is missing.
static int opt_value(int argc, char **argv, int *i, const char *name, const char **val,
                     errmsg_t *err) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
    } else if (a[n] == '\0') {
        if (*i + 1 >= argc) {
            errmsg_set(err, "check: %s needs a value (see heapprof check --help)", name);
            return -1;
        }
        *val = argv[++*i];
    } else {
        return 0;
    }
    if (!(*val)[0]) {
        errmsg_set(err, "check: %s needs a non-empty value", name);
        return -1;
    }
    return 1;
}

static int add_budget(cmd_check_opts_t *o, errmsg_t *err) {
    if (o->n_budgets >= CHECK_MAX_BUDGETS) {
        errmsg_set(err, "check: more than %d budgets", CHECK_MAX_BUDGETS);
        return -1;
    }
    return 0;
}

// --budgets FILE: its budgets and patterns join those given so far.
static int read_budgets_file(cmd_check_opts_t *o, const char *path, errmsg_t *err) {
    if (o->file.budgets || o->file.baseline || o->file.from_module || o->file.exclude ||
        o->file.has_max_increase) {
        errmsg_set(err, "check: --budgets may be given once");
        return -1;
    }
    if (budget_file_read(path, &o->file, err) != 0)
        return -1;
    if (o->n_budgets + o->file.n_budgets > CHECK_MAX_BUDGETS ||
        o->n_exclude + o->file.n_exclude > CHECK_MAX_EXCLUDES) {
        errmsg_set(err, "check: more than %d budgets or %d --exclude patterns", CHECK_MAX_BUDGETS,
                   CHECK_MAX_EXCLUDES);
        return -1;
    }
    for (size_t i = 0; i < o->file.n_budgets; i++)
        o->budgets[o->n_budgets++] = o->file.budgets[i];
    for (size_t i = 0; i < o->file.n_exclude; i++)
        o->exclude[o->n_exclude++] = o->file.exclude[i];
    return 0;
}

void cmd_check_opts_fini(cmd_check_opts_t *o) { budget_file_fini(&o->file); }

static const char *const total_flags[SUMMARY_N_METRICS] = {
    [SUMMARY_PEAK] = "--peak",           [SUMMARY_TOTAL] = "--total",
    [SUMMARY_BLOCKS] = "--blocks",       [SUMMARY_LEAKED] = "--leaked",
    [SUMMARY_TEMPORARY] = "--temporary",
};

// One option at argv[*i]: 1 taken, 0 not an option of check's, -1 error.
static int parse_option(int argc, char **argv, int *i, cmd_check_opts_t *o, bool *take_given,
                        bool *increase_given, errmsg_t *err) {
    const char *v;
    int got;
    for (int m = 0; m < SUMMARY_N_METRICS; m++) {
        if ((got = opt_value(argc, argv, i, total_flags[m], &v, err)) != 1)
            continue;
        if (add_budget(o, err) != 0 ||
            budget_total((summary_metric_t)m, v, &o->budgets[o->n_budgets], err) != 0)
            return -1;
        o->n_budgets++;
        return 1;
    }
    if (got < 0)
        return -1;
    if ((got = opt_value(argc, argv, i, "--site", &v, err)) != 0) {
        if (got < 0 || add_budget(o, err) != 0 ||
            budget_site(v, &o->budgets[o->n_budgets], err) != 0)
            return -1;
        o->n_budgets++;
        return 1;
    }
    if ((got = opt_value(argc, argv, i, "--max-increase", &v, err)) != 0) {
        *increase_given = true;
        return got < 0 ? -1 : budget_parse_percent(v, &o->max_increase_pct, err) == 0 ? 1 : -1;
    }
    if ((got = opt_value(argc, argv, i, "--exclude", &v, err)) != 0) {
        if (got < 0)
            return -1;
        if (o->n_exclude >= CHECK_MAX_EXCLUDES) {
            errmsg_set(err, "check: more than %d --exclude patterns", CHECK_MAX_EXCLUDES);
            return -1;
        }
        o->exclude[o->n_exclude++] = v;
        return 1;
    }
    if ((got = opt_value(argc, argv, i, "--runs", &v, err)) != 0) {
        if (got < 0)
            return -1;
        char *end;
        errno = 0;
        unsigned long n = strtoul(v, &end, 10);
        if (errno || *end || v[0] == '-' || n < 1 || n > CHECK_MAX_RUNS) {
            errmsg_set(err, "check: --runs needs a number from 1 to %d, not '%s'", CHECK_MAX_RUNS,
                       v);
            return -1;
        }
        o->runs = (unsigned)n;
        return 1;
    }
    if ((got = opt_value(argc, argv, i, "--take", &v, err)) != 0) {
        if (got < 0)
            return -1;
        if (strcmp(v, "min") != 0 && strcmp(v, "median") != 0) {
            errmsg_set(err, "check: --take is min or median, not '%s'", v);
            return -1;
        }
        o->median = strcmp(v, "median") == 0;
        *take_given = true;
        return 1;
    }
    if ((got = opt_value(argc, argv, i, "--budgets", &v, err)) != 0)
        return got < 0 || read_budgets_file(o, v, err) != 0 ? -1 : 1;
    static const struct {
        const char *name;
        size_t offset;
    } paths[] = {
        {"--baseline", offsetof(cmd_check_opts_t, baseline)},
        {"--summary-out", offsetof(cmd_check_opts_t, summary_out)},
        {"--junit", offsetof(cmd_check_opts_t, junit)},
        {"--from-module", offsetof(cmd_check_opts_t, from_module)},
    };
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
        if ((got = opt_value(argc, argv, i, paths[k].name, &v, err)) != 0) {
            if (got < 0)
                return -1;
            *(const char **)((char *)o + paths[k].offset) = v;
            return 1;
        }
    }
    return 0;
}

int cmd_check_parse(int argc, char **argv, cmd_check_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    o->runs = 1;
    o->median = true;
    bool take_given = false, increase_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (i + 1 >= argc) {
                errmsg_set(err, "check: missing command after '--'");
                return -1;
            }
            o->cmd = argv + i + 1;
            break;
        }
        int got = parse_option(argc, argv, &i, o, &take_given, &increase_given, err);
        if (got < 0)
            return -1;
        if (got > 0)
            continue;
        if (a[0] == '-' && a[1] != '\0') {
            errmsg_set(err, "check: unknown option '%s' (see heapprof check --help)", a);
            return -1;
        }
        if (o->trace) {
            errmsg_set(err, "check: one TRACE only ('%s' is a second; a command goes after '--')",
                       a);
            return -1;
        }
        o->trace = a;
    }
    // the command line's baseline and increase win over the file's
    if (!o->baseline)
        o->baseline = o->file.baseline;
    if (!o->from_module)
        o->from_module = o->file.from_module;
    if (o->file.has_max_increase && !increase_given) {
        o->max_increase_pct = o->file.max_increase_pct;
        increase_given = true;
    }
    if (o->trace && o->cmd) {
        errmsg_set(err, "check: give a TRACE or '-- CMD ARGS...', not both");
        return -1;
    }
    if (!o->trace && !o->cmd) {
        errmsg_set(err, "check: missing TRACE or '-- CMD ARGS...' (see heapprof check --help)");
        return -1;
    }
    if (o->n_budgets == 0 && !o->baseline && !o->summary_out) {
        errmsg_set(err, "check: nothing to check: give a budget (--peak SIZE, ...), --budgets "
                        "FILE, --baseline FILE or --summary-out FILE");
        return -1;
    }
    if (increase_given && !o->baseline) {
        errmsg_set(err, "check: --max-increase needs --baseline FILE");
        return -1;
    }
    if (o->trace && (o->runs > 1 || take_given)) {
        errmsg_set(err, "check: --runs and --take need a command ('-- CMD ARGS...'), not a TRACE");
        return -1;
    }
    return 0;
}

// ---- figures ----

// cmd_run.c's error as check's: "run: cannot run X: ..." -> "check: cannot run X: ...".
static void as_check_error(const errmsg_t *from, errmsg_t *err) {
    const char *m = from->is_set ? from->msg : "cannot run the command";
    errmsg_set(err, "check: %s", strncmp(m, "run: ", 5) == 0 ? m + 5 : m);
}

// The summary of one trace; a damaged one is an error: its figures would fall short and a
// budget could pass on what was lost.
static summary_t *trace_summary(const cmd_check_opts_t *o, const char *path, FILE *progress,
                                errmsg_t *err) {
    analyze_opts_t ao = {.mode = 0, .growth = true, .short_ns = GROWTH_DEFAULT_SHORT_NS};
    errmsg_t why;
    errmsg_init(&why);
    analyze_t *a = NULL;
    summary_t *s = NULL;
    ao.from_module = o->from_module; // as `stats --from-module` counts (filter.h)
    if (!(a = analyze_open_opts(path, &ao, progress, &why)))
        goto done;
    if (analyze_refuse_sampled(a, "check", &why) != 0) // a budget holds or fails on exact figures
        goto done;
    if (a->filter && filter_n_matching_modules(a->filter) == 0) {
        // every figure would be 0 and every budget would hold: never what was meant
        errmsg_set(&why, "%s: --from-module %s matches no module of the trace", path,
                   o->from_module);
        goto done;
    }
    const reader_damage_t *d = reader_damage(a->r);
    const reader_trailer_t *tr = reader_trailer(a->r);
    if (d->chunks_damaged || d->seq_gaps || d->truncated || (tr && tr->n_lost_events)) {
        errmsg_set(err,
                   "check: %s is damaged (%llu chunks damaged, %llu missing%s, %llu events lost): "
                   "its figures would fall short, so no budget is checked against it",
                   path, (unsigned long long)d->chunks_damaged, (unsigned long long)d->seq_gaps,
                   d->truncated ? ", truncated" : "",
                   (unsigned long long)(tr ? tr->n_lost_events : 0));
        goto done;
    }
    s = summary_from_analyze(a, o->exclude, o->n_exclude);
done:
    if (!s && why.is_set)
        errmsg_set(err, "check: %s", why.msg);
    analyze_close(a);
    return s;
}

// A baseline is a trace (it starts with the trace magic) or a summary JSON.
static summary_t *baseline_summary(const cmd_check_opts_t *o, FILE *progress, errmsg_t *err) {
    FILE *f = fopen(o->baseline, "rb");
    if (!f) {
        errmsg_set(err, "check: cannot read the baseline %s: %s", o->baseline, strerror(errno));
        return NULL;
    }
    char magic[8] = {0};
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    if (got == sizeof magic && memcmp(magic, HPT_MAGIC, sizeof magic) == 0)
        return trace_summary(o, o->baseline, progress, err);
    return summary_read(o->baseline, err);
}

// ---- lines ----

#define LINE_CAP 4096

// "1,048,577 bytes (1.0 MiB)", "1,001 bytes", "12 blocks"
static const char *figure_text(summary_metric_t m, uint64_t v, char *buf, size_t cap) {
    char g[32], b[32];
    if (!summary_metric_is_bytes(m))
        snprintf(buf, cap, "%s block%s", fmt_grouped(v, g), v == 1 ? "" : "s");
    else if (v < 1024)
        snprintf(buf, cap, "%s byte%s", fmt_grouped(v, g), v == 1 ? "" : "s");
    else
        snprintf(buf, cap, "%s bytes (%s)", fmt_grouped(v, g), fmt_bytes(v, b));
    return buf;
}

static size_t append(char *buf, size_t cap, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t cap, size_t at, const char *fmt, ...) {
    if (at >= cap)
        return at;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + at, cap - at, fmt, ap);
    va_end(ap);
    return w < 0 ? at : at + (size_t)w;
}

// The verdict of one budget in one line (without "ok"/"FAIL"), names made printable.
static void verdict_line(const budget_t *b, const budget_result_t *r, const summary_t *cur,
                         char *buf, size_t cap) {
    char f1[96], f2[96], f3[96], safe[LINE_CAP];
    summary_metric_t m = b->metric;
    size_t at = append(buf, cap, 0, "%s: %s", b->name, figure_text(m, r->figure, f1, sizeof f1));
    if (!r->broken) {
        at = append(buf, cap, at, ", limit %s", figure_text(m, r->limit, f2, sizeof f2));
        if (b->kind == BUDGET_BASELINE)
            at = append(buf, cap, at, " (baseline %s)", figure_text(m, r->base, f3, sizeof f3));
        append(buf, cap, at, " [%s: %s]", summary_metric_name(m), summary_metric_meaning(m));
        return;
    }
    at = append(buf, cap, at, ", %s over the limit of %s",
                figure_text(m, r->figure - r->limit, f2, sizeof f2),
                figure_text(m, r->limit, f3, sizeof f3));
    if (b->kind == BUDGET_BASELINE)
        at = append(buf, cap, at, " (baseline %s + %g%%)", figure_text(m, r->base, f1, sizeof f1),
                    b->max_increase_pct);
    at = append(buf, cap, at, " [%s: %s]", summary_metric_name(m), summary_metric_meaning(m));
    if (r->n_culprits)
        at = append(buf, cap, at, "; %s", b->kind == BUDGET_BASELINE ? "grew most" : "most from");
    for (size_t k = 0; k < r->n_culprits; k++) {
        const summary_site_t *s = &cur->sites[r->culprit[k]];
        at = append(buf, cap, at, "%s %s", k ? "," : ":",
                    fmt_safe_text(s->function, safe, sizeof safe));
        if (s->location)
            at = append(buf, cap, at, " (%s)", fmt_safe_text(s->location, safe, sizeof safe));
        at = append(buf, cap, at, " %s%s", b->kind == BUDGET_BASELINE ? "+" : "",
                    figure_text(m, r->culprit_value[k], f1, sizeof f1));
        if (s->advice)
            at = append(buf, cap, at, " [growth: %s]", fmt_safe_text(s->advice, safe, sizeof safe));
    }
}

// ---- files ----

// snprintf of a path: 0, or -1 with err filled when it does not fit.
static int path_fmt(char *buf, size_t cap, errmsg_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int path_fmt(char *buf, size_t cap, errmsg_t *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= cap) {
        errmsg_set(err, "check: a path is too long (%.60s...)", buf);
        return -1;
    }
    return 0;
}

static int write_summary(const char *path, const summary_t *s, int cmd_status, errmsg_t *err) {
    out_file_t of;
    if (out_file_open(&of, "check", path, stdout, err) != 0)
        return -1;
    json_t *j = summary_json(s, cmd_status);
    int rc =
        json_dumpf(j, of.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 && fputc('\n', of.f) != EOF
            ? 0
            : -1;
    json_decref(j);
    if (rc != 0)
        errmsg_set(err, "check: cannot write the summary %s", path);
    return out_file_close(&of, rc, err);
}

// dir of path ("." when it has none) into buf
static void dir_of(const char *path, char *buf, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, cap, ".");
    else if (slash == path)
        snprintf(buf, cap, "/");
    else
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

// The DHAT JSON and viewer page of trace, named after it, in dir. Their paths into dhat/html.
static int write_artifacts(const char *trace, const char *dir, FILE *progress, char *dhat,
                           char *html, size_t cap, errmsg_t *err) {
    const char *base = strrchr(trace, '/');
    base = base ? base + 1 : trace;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".hpt") == 0)
        n -= 4;
    if (path_fmt(dhat, cap, err, "%s/%.*s.dhat.json", dir, (int)n, base) != 0 ||
        path_fmt(html, cap, err, "%s/%.*s.html", dir, (int)n, base) != 0)
        return -1;
    cmd_dhat_opts_t d = {.trace = trace, .out = dhat};
    if (cmd_dhat_run(&d, stdout, progress, err) != 0)
        return -1;
    cmd_view_opts_t v = {.trace = trace, .out = html, .short_ns = GROWTH_DEFAULT_SHORT_NS};
    snprintf(v.path, sizeof v.path, "%s", html);
    return cmd_view_run(&v, stdout, progress, err);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// A trace check made and needs no more, with the perf map `heapprof run` kept beside it.
static void drop_trace(const char *path) {
    unlink(path);
    perfmap_remove_beside(path);
}

// Runs the command o->runs times; the summary of each run into runs[], the last run's own
// trace into trace (the others' and every descendant's trace removed).
static int run_command(const cmd_check_opts_t *o, const char *dir, FILE *progress, summary_t **runs,
                       char *trace, size_t cap, int *cmd_status, errmsg_t *err) {
    char pattern[4096];
    if (path_fmt(pattern, sizeof pattern, err, "%s/%s", dir, DEFAULT_TRACE_NAME) != 0)
        return -1;
    for (unsigned k = 0; k < o->runs; k++) {
        cmd_run_opts_t ro = {.out = pattern, .cmd = o->cmd};
        cmd_run_result_t res;
        errmsg_t why;
        errmsg_init(&why);
        if (cmd_run_exec(&ro, &res, &why) != 0) {
            as_check_error(&why, err);
            if (res.exec_failed)
                *cmd_status = res.exit_status;
            cmd_run_result_fini(&res);
            return -1;
        }
        if (res.exit_status != 0 || *cmd_status < 0)
            *cmd_status = res.exit_status;
        if (res.n_traces == 0) {
            errmsg_set(err, "check: the command wrote no trace (expected %s; was %s loaded?)",
                       res.expected, res.preload);
            cmd_run_result_fini(&res);
            return -1;
        }
        for (size_t i = 1; i < res.n_traces; i++)
            drop_trace(res.traces[i]);
        if (k > 0)
            drop_trace(trace);
        snprintf(trace, cap, "%s", res.traces[0]);
        cmd_run_result_fini(&res);
        if (!(runs[k] = trace_summary(o, trace, progress, err)))
            return -1;
    }
    return 0;
}

int cmd_check_run(const cmd_check_opts_t *o, FILE *out, FILE *progress, int *cmd_status,
                  errmsg_t *err) {
    *cmd_status = -1;
    double start = now_s();
    summary_t *base = NULL, *cur = NULL;
    summary_t *runs[CHECK_MAX_RUNS] = {0};
    budget_t *all = xcalloc(CHECK_MAX_BUDGETS + SUMMARY_N_METRICS, sizeof *all);
    budget_result_t *res = xcalloc(CHECK_MAX_BUDGETS + SUMMARY_N_METRICS, sizeof *res);
    out_junit_case_t *cases = xcalloc(CHECK_MAX_BUDGETS + SUMMARY_N_METRICS, sizeof *cases);
    char **lines = xcalloc(CHECK_MAX_BUDGETS + SUMMARY_N_METRICS, sizeof *lines);
    char trace[4096], dir[4096], safe[LINE_CAP];
    int rc = -1, broken = 0;
    size_t n = 0;

    if (o->baseline && !(base = baseline_summary(o, progress, err)))
        goto done;
    dir_of(o->summary_out ? o->summary_out : o->trace ? o->trace : "./x", dir, sizeof dir);
    if (o->cmd) {
        // the shim would run the command unprofiled rather than fail it
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            errmsg_set(err, "check: %s is not a directory: the trace, summary and files go there",
                       dir);
            goto done;
        }
        if (run_command(o, dir, progress, runs, trace, sizeof trace, cmd_status, err) != 0)
            goto done;
        cur = summary_combine(runs, o->runs, o->median);
    } else {
        snprintf(trace, sizeof trace, "%s", o->trace);
        if (!(cur = trace_summary(o, trace, progress, err)))
            goto done;
    }

    for (size_t i = 0; i < o->n_budgets; i++)
        all[n++] = o->budgets[i];
    for (int m = 0; base && m < SUMMARY_N_METRICS; m++)
        budget_baseline((summary_metric_t)m, o->max_increase_pct, &all[n++]);
    for (size_t i = 0; i < n; i++) {
        budget_eval(&all[i], cur, base, &res[i]);
        lines[i] = xmalloc(LINE_CAP);
        verdict_line(&all[i], &res[i], cur, lines[i], LINE_CAP);
        cases[i] = (out_junit_case_t){all[i].name, res[i].broken ? lines[i] : NULL};
        broken += res[i].broken;
        fprintf(out, "%-4s %s\n", res[i].broken ? "FAIL" : "ok", lines[i]);
    }

    bool cmd_failed = o->cmd && *cmd_status != 0;
    char cmd_error[512] = "";
    if (cmd_failed)
        snprintf(cmd_error, sizeof cmd_error, "check: the command exited with status %d",
                 *cmd_status);
    if (o->summary_out && write_summary(o->summary_out, cur, *cmd_status, err) != 0)
        goto done;
    if (o->junit) {
        out_file_t of;
        if (out_file_open(&of, "check", o->junit, stdout, err) != 0 ||
            out_file_close(&of,
                           out_junit_write(of.f, "heapprof check", cases, n,
                                           cmd_failed ? cmd_error : NULL, now_s() - start, err),
                           err) != 0)
            goto done;
    }
    if (broken || cmd_failed) {
        char dhat[4096], html[4096];
        if (!o->cmd)
            dir_of(o->summary_out ? o->summary_out : o->trace, dir, sizeof dir);
        if (write_artifacts(trace, dir, progress, dhat, html, sizeof dhat, err) != 0)
            goto done;
        char s2[LINE_CAP], s3[LINE_CAP];
        fprintf(out, "heapprof check: %d of %zu budget%s broken; to look into: %s %s %s\n", broken,
                n, n == 1 ? "" : "s", fmt_safe_text(trace, safe, sizeof safe),
                fmt_safe_text(dhat, s2, sizeof s2), fmt_safe_text(html, s3, sizeof s3));
    } else {
        if (o->cmd)
            drop_trace(trace); // nothing to look into
        if (n == 0)
            fprintf(out, "heapprof check: no budgets; figures written to %s\n",
                    fmt_safe_text(o->summary_out, safe, sizeof safe));
        else
            fprintf(out, "heapprof check: %s%zu budget%s held\n", n == 1 ? "" : "all ", n,
                    n == 1 ? "" : "s");
    }
    if (cmd_failed) {
        errmsg_set(err, "%s", cmd_error);
        goto done;
    }
    rc = broken;
done:
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    free(cases);
    free(res);
    free(all);
    for (unsigned k = 0; k < CHECK_MAX_RUNS; k++)
        summary_free(runs[k]);
    summary_free(cur);
    summary_free(base);
    return rc;
}
