// SPDX-License-Identifier: MIT
// The flame and diff subcommands: options, then analyze (stats' counting, so folded totals are
// stats' totals) -> flame -> out_folded or out_svg; diff folds both traces, one after the other
// so only one is in memory at a time, and ranks the sites (named as the report names them,
// merged by that name across the two runs) by how much they changed. With -o the output goes
// through out_file.h (complete or not at all).
#include "cmd/cmd_flame.h"

#include "analyze/analyze.h"
#include "core/out_file.h"
#include "core/sort.h"
#include "core/xalloc.h"
#include "out/out.h"
#include "trace/reader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_TOP 20

const char cmd_flame_usage[] =
    "usage: heapprof flame TRACE [--metric M] [--folded] [--trim] [-o FILE]\n"
    "\n"
    "An allocation flamegraph: every allocation site's full stack (inlined calls expanded into\n"
    "frames of their own, allocator frames kept), root first, its width the metric M:\n"
    "  bytes      bytes allocated (default)      blocks     blocks allocated\n"
    "  peak       bytes live at the heap's peak   leaked     bytes still live at exit\n"
    "  temporary  bytes of temporary blocks (freed before their thread's next allocation)\n"
    "  growth     bytes copied when blocks grew (realloc or allocate-copy-free,\n"
    "             docs/growth.md), at the site of the growing block\n"
    "  cpu        CPU samples: every sampled stack, innermost frame where the time went\n"
    "             (HEAPPROF_CPU, on by default; --trim does not apply)\n"
    "Without --folded: a self-contained interactive SVG (hover, click to zoom, search).\n"
    "\n"
    "  --metric M          what the width shows (see above)\n"
    "  --folded            folded stacks instead (`frame;frame;frame value` per line, root\n"
    "                      first, sorted), as flamegraph.pl and inferno read them; ';' in a\n"
    "                      name becomes ',', control characters become \\xNN\n"
    "  --trim              cut each stack at its site's first frame of the program's own code\n"
    "                      (drops the allocator's and the standard library's frames under it)\n"
    "  -o, --output FILE   write to FILE instead of standard output\n"
    "  -h, --help          this help\n";

const char cmd_diff_usage[] =
    "usage: heapprof diff BEFORE AFTER [--metric M] [--folded] [--trim] [-o FILE]\n"
    "\n"
    "Compares two traces by metric M (as in heapprof flame; default bytes): prints the sites\n"
    "that changed most (named as the report names them) with their before, after and delta,\n"
    "and with -o writes a differential flamegraph SVG: widths are AFTER's values, red frames\n"
    "grew, blue frames shrank.\n"
    "\n"
    "  --metric M          bytes, blocks, peak, leaked, temporary, growth or cpu\n"
    "  --folded            instead of the table, the two-column folded diff\n"
    "                      (`stack before after` per line, as difffolded.pl writes)\n"
    "  --trim              cut stacks at the site's first frame of the program's own code\n"
    "  -o, --output FILE   the SVG (or with --folded the folded diff) goes to FILE\n"
    "  -h, --help          this help\n";

static int parse_metric(const char *cmd, const char *name, flame_metric_t *m, errmsg_t *err) {
    errmsg_t why;
    errmsg_init(&why);
    if (flame_metric_parse(name, m, &why) == 0)
        return 0;
    errmsg_set(err, "%s: %s", cmd, why.msg);
    return -1;
}

int cmd_flame_parse(int argc, char **argv, cmd_flame_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    o->is_diff = strcmp(argv[0], "diff") == 0;
    o->metric = FLAME_BYTES;
    const char *cmd = o->is_diff ? "diff" : "flame";
    size_t n_traces = 0, want = o->is_diff ? 2 : 1;
    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && strcmp(a, "--") == 0) {
            only_args = true;
        } else if (!only_args && (strcmp(a, "--metric") == 0 || strcmp(a, "-m") == 0)) {
            if (i + 1 >= argc) {
                errmsg_set(err, "%s: %s needs a metric (see heapprof %s --help)", cmd, a, cmd);
                return -1;
            }
            if (parse_metric(cmd, argv[++i], &o->metric, err) != 0)
                return -1;
        } else if (!only_args && strncmp(a, "--metric=", 9) == 0) {
            if (parse_metric(cmd, a + 9, &o->metric, err) != 0)
                return -1;
        } else if (!only_args && strcmp(a, "--folded") == 0) {
            o->folded = true;
        } else if (!only_args && strcmp(a, "--trim") == 0) {
            o->trim = true;
        } else if (!only_args && (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0)) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                errmsg_set(err, "%s: %s needs a FILE", cmd, a);
                return -1;
            }
            o->out = argv[++i];
        } else if (!only_args && strncmp(a, "--output=", 9) == 0 && a[9]) {
            o->out = a + 9;
        } else if (!only_args && a[0] == '-' && a[1] != '\0') {
            errmsg_set(err, "%s: unknown option '%s' (see heapprof %s --help)", cmd, a, cmd);
            return -1;
        } else if (n_traces < want) {
            o->trace[n_traces++] = a;
        } else {
            errmsg_set(err, "%s: unexpected argument '%s' (%s)", cmd, a,
                       o->is_diff ? "two traces: BEFORE AFTER" : "one TRACE only");
            return -1;
        }
    }
    if (n_traces < want) {
        errmsg_set(err, "%s: missing %s (see heapprof %s --help)", cmd,
                   o->is_diff ? "BEFORE and AFTER traces" : "TRACE", cmd);
        return -1;
    }
    return 0;
}

// Refuses the metrics whose data the trace cannot have, after checking the trace is a trace.
static int check_metric(const char *cmd, const char *trace, flame_metric_t m, errmsg_t *err) {
    if (m != FLAME_CPU)
        return 0;
    reader_t *r = reader_open(trace, err);
    if (!r)
        return -1;
    if (reader_load_defs(r, err) != 0) {
        reader_close(r);
        return -1;
    }
    const reader_cpu_t *ci = reader_cpu(r);
    if (ci->n_samples) {
        reader_close(r);
        return 0;
    }
    char why[512];
    errmsg_set(err, "%s: this trace has no CPU samples (cpu: %s): %s", cmd,
               cpu_describe(ci, why, sizeof why), trace);
    reader_close(r);
    return -1;
}

// ---- the changed-sites table ----

typedef struct named {
    char *name;
    uint64_t v;
} named_t;

static int cmp_named(const void *a, const void *b) {
    return strcmp(((const named_t *)a)->name, ((const named_t *)b)->name);
}

// Sites by name ("function  file:line", as the report prints them), values summed, sorted.
static named_t *site_values(analyze_t *a, flame_metric_t m, size_t *n_out) {
    size_t n = 0, cap = 0;
    named_t *v = NULL;
    char fn[4096], loc[4096], text[8200], safe[8200];
    if (m == FLAME_CPU) {
        // samples are not per site: compare functions by their self samples
        size_t nf = 0;
        const cpu_fn_t *fns = cpu_functions(a->cpu, &nf);
        for (size_t i = 0; i < nf; i++) {
            if (fns[i].self == 0)
                continue;
            snprintf(text, sizeof text, "%s", fns[i].name);
            v = xgrow(v, &cap, n + 1, sizeof *v);
            v[n].name = xstrdup(flame_frame_text(text, safe, sizeof safe));
            v[n++].v = fns[i].self;
        }
        sort_items(v, n, sizeof *v, cmp_named);
        *n_out = n;
        return v;
    }
    for (size_t i = 0; i < sites_count(a->sites); i++) {
        uint64_t x = flame_site_value(a, i, m);
        if (x == 0)
            continue;
        const site_t *s = sites_get(a->sites, i);
        if (s->n_frames == 0) {
            snprintf(text, sizeof text, "[unknown stack]");
        } else {
            const symbolize_frame_t *f = s->frames[s->name_frame];
            const char *name = sites_frame_function(f, fn, sizeof fn);
            sites_frame_location(f, loc, sizeof loc);
            if (strcmp(name, loc) == 0)
                snprintf(text, sizeof text, "%s", name);
            else
                snprintf(text, sizeof text, "%s  %s", name, loc);
        }
        v = xgrow(v, &cap, n + 1, sizeof *v);
        v[n].name = xstrdup(flame_frame_text(text, safe, sizeof safe));
        v[n++].v = x;
    }
    sort_items(v, n, sizeof *v, cmp_named);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o > 0 && strcmp(v[o - 1].name, v[i].name) == 0) {
            v[o - 1].v += v[i].v;
            free(v[i].name);
        } else {
            v[o++] = v[i];
        }
    }
    *n_out = o;
    return v;
}

typedef struct change {
    const char *name;
    uint64_t before, after;
} change_t;

static uint64_t abs_delta(const change_t *c) {
    return c->after > c->before ? c->after - c->before : c->before - c->after;
}

static int cmp_change(const void *a, const void *b) {
    const change_t *x = a, *y = b;
    uint64_t dx = abs_delta(x), dy = abs_delta(y);
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static const char *value_cell(flame_metric_t m, uint64_t v, char buf[32]) {
    return flame_metric_is_bytes(m) ? fmt_bytes(v, buf) : fmt_grouped(v, buf);
}

static const char *delta_cell(flame_metric_t m, uint64_t before, uint64_t after, char buf[40]) {
    char t[32];
    uint64_t d = after > before ? after - before : before - after;
    snprintf(buf, 40, "%s%s", d == 0 ? "" : after > before ? "+" : "-", value_cell(m, d, t));
    return buf;
}

static const char *pct_cell(uint64_t before, uint64_t after, char buf[24]) {
    if (before == 0)
        snprintf(buf, 24, after ? "new" : "0.0%%");
    else
        snprintf(buf, 24, "%+.1f%%", 100.0 * ((double)after - (double)before) / (double)before);
    return buf;
}

static void write_table(FILE *out, const cmd_flame_opts_t *o, const flame_t *d, named_t *bv,
                        size_t bn, named_t *av, size_t an) {
    change_t *c = xcalloc(bn + an + 1, sizeof *c);
    size_t n = 0, i = 0, j = 0, n_changed = 0;
    while (i < bn || j < an) {
        int k = i == bn ? 1 : j == an ? -1 : strcmp(bv[i].name, av[j].name);
        change_t *x = &c[n++];
        if (k <= 0) {
            x->name = bv[i].name;
            x->before = bv[i++].v;
        }
        if (k >= 0) {
            x->name = av[j].name;
            x->after = av[j++].v;
        }
        if (x->before != x->after)
            n_changed++;
    }
    sort_items(c, n, sizeof *c, cmp_change);
    char b1[32], b2[32], b3[40], p[24];
    fprintf(out, "heapprof diff by %s: %s -> %s\n", flame_metric_name(o->metric), o->trace[0],
            o->trace[1]);
    fprintf(out, "total %s -> %s, %s (%s)\n", value_cell(o->metric, d->total[0], b1),
            value_cell(o->metric, d->total[1], b2),
            delta_cell(o->metric, d->total[0], d->total[1], b3),
            pct_cell(d->total[0], d->total[1], p));
    if (n_changed == 0) {
        fprintf(out, "no site changed (%zu site%s compared)\n", n, n == 1 ? "" : "s");
    } else {
        fprintf(out, "\nSites that changed most (%zu of %zu changed)\n", n_changed, n);
        fprintf(out, "  %12s %12s %13s %8s  %s\n", "before", "after", "delta", "%", "site");
        for (size_t r = 0; r < n && r < TABLE_TOP && abs_delta(&c[r]) > 0; r++)
            fprintf(out, "  %12s %12s %13s %8s  %s\n", value_cell(o->metric, c[r].before, b1),
                    value_cell(o->metric, c[r].after, b2),
                    delta_cell(o->metric, c[r].before, c[r].after, b3),
                    pct_cell(c[r].before, c[r].after, p), c[r].name);
        if (n_changed > TABLE_TOP)
            fprintf(out, "  ... %zu more changed site%s\n", n_changed - TABLE_TOP,
                    n_changed - TABLE_TOP == 1 ? "" : "s");
    }
    free(c);
}

static void free_named(named_t *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

// ---- output ----

static int write_one(const flame_t *f, bool folded, FILE *out, errmsg_t *err) {
    if (folded)
        return out_folded_write(f, out, err);
    out_svg_opts_t so = {.width_px = 1200, .min_width_px = 1.2};
    return out_svg_write(f, &so, out, err);
}

static int emit(const char *cmd, const flame_t *f, bool folded, const char *path, FILE *dflt,
                errmsg_t *err) {
    out_file_t of;
    if (out_file_open(&of, cmd, path, dflt, err) != 0)
        return -1;
    return out_file_close(&of, write_one(f, folded, of.f, err), err);
}

// Folds one trace; with sv, also its sites by name for the diff table.
static flame_t *fold(const cmd_flame_opts_t *o, const char *trace, FILE *progress, named_t **sv,
                     size_t *sn, errmsg_t *err) {
    analyze_opts_t ao = {
        .mode = 0, .growth = o->metric == FLAME_GROWTH, .short_ns = GROWTH_DEFAULT_SHORT_NS};
    analyze_t *a = analyze_open_opts(trace, &ao, progress, err);
    if (!a)
        return NULL;
    flame_t *f = flame_new(a, o->metric, o->trim);
    if (sv)
        *sv = site_values(a, o->metric, sn);
    analyze_close(a);
    return f;
}

int cmd_flame_run(const cmd_flame_opts_t *o, FILE *out, FILE *progress, errmsg_t *err) {
    const char *cmd = o->is_diff ? "diff" : "flame";
    for (int i = 0; i < (o->is_diff ? 2 : 1); i++)
        if (check_metric(cmd, o->trace[i], o->metric, err) != 0)
            return -1;
    if (!o->is_diff) {
        flame_t *f = fold(o, o->trace[0], progress, NULL, NULL, err);
        if (!f)
            return -1;
        int rc = emit(cmd, f, o->folded, o->out, out, err);
        flame_free(f);
        return rc;
    }
    named_t *bv = NULL, *av = NULL;
    size_t bn = 0, an = 0;
    flame_t *before = fold(o, o->trace[0], progress, &bv, &bn, err);
    if (!before)
        return -1;
    flame_t *after = fold(o, o->trace[1], progress, &av, &an, err);
    if (!after) {
        flame_free(before);
        free_named(bv, bn);
        return -1;
    }
    flame_t *d = flame_diff(before, after);
    flame_free(before);
    flame_free(after);
    int rc = 0;
    if (o->folded) {
        rc = emit(cmd, d, true, o->out, out, err);
    } else {
        if (o->out)
            rc = emit(cmd, d, false, o->out, out, err);
        if (rc == 0)
            write_table(out, o, d, bv, bn, av, an);
        if (rc == 0 && (fflush(out) != 0 || ferror(out))) {
            errmsg_set(err, "diff: cannot write the output");
            rc = -1;
        }
    }
    flame_free(d);
    free_named(bv, bn);
    free_named(av, an);
    return rc;
}
