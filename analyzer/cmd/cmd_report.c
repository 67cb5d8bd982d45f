// SPDX-License-Identifier: MIT
// The report subcommand: options, then analyze (stats' counting) -> out_report.
#include "cmd/cmd_report.h"

#include "analyze/analyze.h"
#include "analyze/suppress.h"
#include "cmd/cmd_args.h"
#include "core/xalloc.h"
#include "model/growth.h"
#include "out/out.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TOP 10
#define MAX_TOP 100000
#define MAX_SHORT_MS 86400000ull // a day

const char cmd_report_usage[] =
    "usage: heapprof report TRACE [--json] [--top N] [--short-ms N] [--alloc-fn NAME]...\n"
    "                       [--keep-wrappers] [--sizes] [--suppress FILE] [--filter FUNC]\n"
    "                       [--shim-cpu]\n"
    "\n"
    "Where the program allocates, by function and source line: totals, then the top\n"
    "allocation sites by bytes allocated, by blocks, by bytes live at the heap's peak, by\n"
    "bytes still live at exit (leaks), and by temporary blocks (freed before the thread\n"
    "that made them allocated anything else). A site is one distinct call stack, named by\n"
    "its first frame in the program's own code; a realloc stays with the site of the\n"
    "block it grew from.\n"
    "\n"
    "Growth hotspots: sites whose blocks keep being replaced by larger ones (realloc, or\n"
    "allocate-copy-free as std::vector and Rust's HashMap grow), by bytes copied, with the\n"
    "capacity to reserve up front (docs/growth.md). Short-lived: blocks freed within 1 ms\n"
    "or before their thread's next allocation (the temporary ones), by site.\n"
    "\n"
    "CPU samples (when the trace has them, HEAPPROF_CPU): how they were taken, the top\n"
    "functions by samples (self and total), and the allocator's CPU share: samples inside\n"
    "malloc/free, operator new/delete or Rust's alloc layer, charged to the user function\n"
    "that called the allocator. Samples taken in heapprof's own shim (recording the\n"
    "calls: the profiler's cost) are counted once and left out of the rankings.\n"
    "\n"
    "  --json       one JSON object with every site and its full stack (docs/report-json.md)\n"
    "  --top N      sites per ranking (default 10)\n"
    "  --short-ms N blocks freed within N milliseconds are short-lived (default 1; 0: only\n"
    "               the temporary ones)\n"
    "  --alloc-fn NAME  a function of the program's own that allocates for its callers\n"
    "               (xmalloc, a pool's alloc): its callers name the sites, as with\n"
    "               malloc itself (repeatable; as Valgrind's --alloc-fn). Functions that\n"
    "               only forward to the allocator (xmalloc, g_malloc: found in their\n"
    "               machine code, also in stripped programs) count as it without this\n"
    "  --keep-wrappers  such forwarding functions name sites like any other\n"
    "  --sizes      also a histogram of allocation sizes (power-of-two buckets)\n"
    "  --suppress FILE  known leaks, one `leak:PATTERN` a line (LeakSanitizer's format):\n"
    "               sites with a frame whose function, file or module matches are left\n"
    "               out of the leak ranking and counted apart\n"
    "  --filter FUNC  count only allocations with FUNC on their stack (its name, or without\n"
    "               parameters; '*' and '?' as in a shell): totals, peak and sites alike\n"
    "  --shim-cpu   keep heapprof's own samples in the CPU rankings\n"
    "  -h, --help   this help\n";

static int parse_top(const char *s, size_t *out, errmsg_t *err) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v == 0 || v > MAX_TOP) {
        errmsg_set(err, "report: --top needs a number from 1 to %d, not '%s'", MAX_TOP, s);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_short_ms(const char *s, uint64_t *ns, errmsg_t *err) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > MAX_SHORT_MS) {
        errmsg_set(err, "report: --short-ms needs a number from 0 to %llu, not '%s'",
                   MAX_SHORT_MS, s);
        return -1;
    }
    *ns = (uint64_t)v * 1000000ull;
    return 0;
}

int cmd_report_parse(int argc, char **argv, cmd_report_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    o->top = DEFAULT_TOP;
    o->short_ns = GROWTH_DEFAULT_SHORT_NS;
    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (!only_args && strcmp(a, "--shim-cpu") == 0) {
            o->shim_cpu = true;
        } else if (!only_args && strcmp(a, "--sizes") == 0) {
            o->sizes = true;
        } else if (!only_args && strcmp(a, "--keep-wrappers") == 0) {
            o->keep_wrappers = true;
        } else if (!only_args && (strcmp(a, "--filter") == 0 || strncmp(a, "--filter=", 9) == 0)) {
            o->filter = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
            if (!o->filter || !*o->filter) {
                errmsg_set(err, "report: --filter needs a function name");
                return -1;
            }
        } else if (!only_args && (strcmp(a, "--suppress") == 0 || strncmp(a, "--suppress=", 11) == 0)) {
            o->suppress = a[10] == '=' ? a + 11 : (i + 1 < argc ? argv[++i] : NULL);
            if (!o->suppress || !*o->suppress) {
                errmsg_set(err, "report: --suppress needs a file");
                return -1;
            }
        } else if (!only_args && (strcmp(a, "--alloc-fn") == 0 || strncmp(a, "--alloc-fn=", 11) == 0)) {
            const char *name = a[10] == '=' ? a + 11 : (i + 1 < argc ? argv[++i] : NULL);
            if (!name || !*name) {
                errmsg_set(err, "report: --alloc-fn needs a function name");
                return -1;
            }
            if (o->n_alloc_fns == CMD_REPORT_MAX_ALLOC_FNS) {
                errmsg_set(err, "report: at most %d --alloc-fn", CMD_REPORT_MAX_ALLOC_FNS);
                return -1;
            }
            o->alloc_fns[o->n_alloc_fns++] = name;
        } else if (!only_args && (strcmp(a, "--top") == 0 || strcmp(a, "-n") == 0)) {
            if (i + 1 >= argc) {
                errmsg_set(err, "report: %s needs a number", a);
                return -1;
            }
            if (parse_top(argv[++i], &o->top, err) != 0)
                return -1;
        } else if (!only_args && strcmp(a, "--short-ms") == 0) {
            if (i + 1 >= argc) {
                errmsg_set(err, "report: %s needs a number", a);
                return -1;
            }
            if (parse_short_ms(argv[++i], &o->short_ns, err) != 0)
                return -1;
        } else if (!only_args && strncmp(a, "--short-ms=", 11) == 0) {
            if (parse_short_ms(a + 11, &o->short_ns, err) != 0)
                return -1;
        } else if (!only_args && strncmp(a, "--top=", 6) == 0) {
            if (parse_top(a + 6, &o->top, err) != 0)
                return -1;
        } else if (cmd_args_other("report", a, &only_args, &o->trace, err) != 0) {
            return -1;
        }
    }
    if (cmd_args_need_trace("report", o->trace, err) != 0)
        return -1;
    return 0;
}

int cmd_report_run(const cmd_report_opts_t *o, FILE *out, FILE *progress, errmsg_t *err) {
    suppress_t *sup = NULL;
    if (o->suppress && !(sup = suppress_load(o->suppress, err)))
        return -1; // before the trace is read: a typo costs nothing
    analyze_opts_t ao = {.mode = 0, .growth = true, .short_ns = o->short_ns,
                         .alloc_fns = o->alloc_fns, .n_alloc_fns = o->n_alloc_fns,
                         .through_function = o->filter, .keep_wrappers = o->keep_wrappers};
    analyze_t *a = analyze_open_opts(o->trace, &ao, progress, err);
    if (!a) {
        suppress_free(sup);
        return -1;
    }
    cpu_rank_shim(a->cpu, o->shim_cpu);
    bool *suppressed = NULL;
    if (sup) {
        // only sites still live at exit can be leaks: the others' stacks need not be resolved
        size_t n = sites_count(a->sites);
        suppressed = xcalloc(n ? n : 1, sizeof *suppressed);
        for (size_t i = 0; i < n; i++)
            if (sites_figures(a->sites, i)->end_bytes || sites_figures(a->sites, i)->end_blocks)
                suppressed[i] = suppress_matches(sup, sites_get(a->sites, i));
    }
    out_report_opts_t ro = {.top = o->top, .json = o->json, .sizes = o->sizes,
                            .suppressed = suppressed, .n_rules = suppress_count(sup),
                            .suppress_path = o->suppress, .filter_function = o->filter};
    int rc = out_report_write(a, &ro, out, err);
    free(suppressed);
    suppress_free(sup);
    analyze_close(a);
    return rc;
}
