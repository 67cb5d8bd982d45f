// SPDX-License-Identifier: MIT
// The dhat subcommand: options, then analyze (with DHAT's counting) -> out_dhat. With -o the
// JSON goes to the file through out_file.h, so a failed run never leaves a truncated file that
// the viewer would half-load.
#include "cmd/cmd_dhat.h"

#include "analyze/analyze.h"
#include "cmd/cmd_args.h"
#include "core/out_file.h"
#include "out/out.h"

#include <stdlib.h>
#include <string.h>

const char cmd_dhat_usage[] =
    "usage: heapprof dhat TRACE [-o FILE]\n"
    "\n"
    "Writes the trace's allocation sites in the JSON format of Valgrind's DHAT, for its viewer\n"
    "(dh_view.html, installed with valgrind, e.g. /usr/libexec/valgrind/dh_view.html).\n"
    "Counts as DHAT does: a realloc is a new block of the new size at the site of the block\n"
    "it grew from, malloc(0) is 1 byte. Times are microseconds since the program started.\n"
    "\n"
    "  -o, --output FILE   write to FILE instead of standard output\n"
    "  -h, --help          this help\n";

int cmd_dhat_parse(int argc, char **argv, cmd_dhat_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    return cmd_args_trace_out("dhat", argc, argv, &o->trace, &o->out, err);
}

int cmd_dhat_run(const cmd_dhat_opts_t *o, FILE *out, FILE *progress, errmsg_t *err) {
    analyze_t *a = analyze_open(o->trace, REPLAY_DHAT, progress, err);
    if (!a)
        return -1;
    if (analyze_refuse_sampled(a, "dhat", err) != 0) { // DHAT's figures are exact counts
        analyze_close(a);
        return -1;
    }
    out_file_t of;
    int rc = out_file_open(&of, "dhat", o->out, out, err);
    if (rc == 0)
        rc = out_file_close(&of, out_dhat_write(a, of.f, err), err);
    analyze_close(a);
    return rc;
}
