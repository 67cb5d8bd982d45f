// SPDX-License-Identifier: MIT
// The massif subcommand: options, then analyze (with the heap over time) -> out_massif.
#include "cmd/cmd_massif.h"

#include "analyze/analyze.h"
#include "cmd/cmd_args.h"
#include "core/out_file.h"
#include "out/out.h"

#include <string.h>

const char cmd_massif_usage[] =
    "usage: heapprof massif TRACE [-o FILE]\n"
    "\n"
    "Writes the heap over time in the format of Valgrind's Massif (massif.out), for ms_print\n"
    "and massif-visualizer: 100 snapshots of the live bytes spread over the run, and at the\n"
    "global peak (the moment live bytes were highest, as in `heapprof report`) a detailed\n"
    "snapshot whose tree splits them by call stack. Times are milliseconds since the program\n"
    "started; allocator overhead and stacks are not known, so they are 0.\n"
    "\n"
    "  -o, --output FILE   write to FILE instead of standard output\n"
    "  -h, --help          this help\n";

int cmd_massif_parse(int argc, char **argv, cmd_massif_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    return cmd_args_trace_out("massif", argc, argv, &o->trace, &o->out, err);
}

int cmd_massif_run(const cmd_massif_opts_t *o, FILE *out, FILE *progress, errmsg_t *err) {
    analyze_opts_t ao = {.mode = 0, .timeline = true};
    analyze_t *a = analyze_open_opts(o->trace, &ao, progress, err);
    if (!a)
        return -1;
    if (analyze_refuse_sampled(a, "massif", err) != 0) { // snapshots of the sampled heap mislead
        analyze_close(a);
        return -1;
    }
    out_file_t of;
    int rc = out_file_open(&of, "massif", o->out, out, err);
    if (rc == 0)
        rc = out_file_close(&of, out_massif_write(a, of.f, err), err);
    analyze_close(a);
    return rc;
}
