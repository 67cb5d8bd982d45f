// SPDX-License-Identifier: MIT
// The stats subcommand: option parsing and the read -> replay loop; out_stats.c renders it.
#include "cmd/cmd_stats.h"

#include "cmd/cmd_args.h"
#include "out/out.h"

#include "model/filter.h"
#include "model/replay.h"
#include "trace/readahead.h"
#include "trace/reader.h"

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
    reader_t *defs = NULL, *r = NULL;
    filter_t *f = NULL;
    replay_t *rp = NULL;
    int rc = -1;
    if (o->from_module) {
        // first pass: stacks and modules, which may be defined after their first use
        if (!(defs = reader_open(o->trace, err)) || reader_load_defs(defs, err) != 0)
            goto done;
        f = filter_new_from_module(defs, o->from_module);
    }
    if (!(r = reader_open(o->trace, err)))
        goto done;
    rp = f ? replay_new(filter_keep, f) : replay_new(NULL, NULL);
    // in batches, so replay can prefetch its table ahead of the events
    const reader_event_t *batch;
    size_t n;
    int got;
    readahead_t *ra = readahead_new(r, NULL, NULL);
    while ((got = readahead_next(ra, &batch, &n, NULL, err)) == 1)
        replay_events(rp, batch, n);
    readahead_free(ra);
    if (got < 0)
        goto done;
    if (o->json) {
        if (out_stats_json_write(out, r, replay_totals(rp), o->from_module, f, err) != 0)
            goto done;
    } else {
        out_stats_text(out, o->trace, r, replay_totals(rp), o->from_module, f);
    }
    rc = 0;
done:
    replay_free(rp);
    filter_free(f);
    reader_close(r);
    reader_close(defs);
    return rc;
}
