// SPDX-License-Identifier: MIT
// The stats subcommand: options, then analyze's pass for totals alone -> out_stats.c.
#include "cmd/cmd_stats.h"

#include "analyze/analyze.h"
#include "cmd/cmd_args.h"
#include "out/out.h"

#include <string.h>

const char cmd_stats_usage[] =
    "usage: heapprof stats TRACE [--json] [--from-module NAME]\n"
    "\n"
    "Prints the totals of a trace: allocated blocks and bytes, frees, the peak of live\n"
    "bytes, what is live at the end, threads, stacks, duration, CPU samples (how many, and\n"
    "how they were taken, or why not), bytes touched of the freed blocks, and any data lost.\n"
    "\n"
    "  --json               one JSON object instead of text\n"
    "  --from-module NAME   count only allocations made directly from the module whose file\n"
    "                       name is NAME (e.g. libfoo.so.1): its code called malloc\n"
    "  -h, --help           this help\n";

int cmd_stats_parse(int argc, char **argv, cmd_stats_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (!only_args && strcmp(a, "--from-module") == 0) {
            if (i + 1 >= argc) {
                errmsg_set(err, "stats: --from-module needs a NAME");
                return -1;
            }
            o->from_module = argv[++i];
        } else if (!only_args && strncmp(a, "--from-module=", 14) == 0) {
            o->from_module = a + 14;
        } else if (cmd_args_other("stats", a, &only_args, &o->trace, err) != 0) {
            return -1;
        }
    }
    if (cmd_args_need_trace("stats", o->trace, err) != 0)
        return -1;
    if (o->from_module && !o->from_module[0]) {
        errmsg_set(err, "stats: --from-module needs a non-empty NAME");
        return -1;
    }
    return 0;
}

int cmd_stats_run(const cmd_stats_opts_t *o, FILE *out, errmsg_t *err) {
    analyze_opts_t ao = {.mode = 0, .totals_only = true, .from_module = o->from_module};
    analyze_t *a = analyze_open_opts(o->trace, &ao, NULL, err);
    if (!a)
        return -1;
    const replay_totals_t *t = replay_totals_shown(a->rp);
    int rc = 0;
    if (o->json)
        rc = out_stats_json_write(out, a->r, t, o->from_module, a->filter, err);
    else
        out_stats_text(out, o->trace, a->r, t, o->from_module, a->filter);
    analyze_close(a);
    return rc;
}
