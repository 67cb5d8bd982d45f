// SPDX-License-Identifier: MIT
// The view subcommand: options, then analyze (stats' counting, with growth chains and the
// timeline) -> out_html, through out_file.h, so a failed run never leaves half a page where a
// good one was.
#include "cmd/cmd_view.h"

#include "analyze/analyze.h"
#include "cmd/cmd_args.h"
#include "core/out_file.h"
#include "model/growth.h"
#include "out/out.h"

#include <stdlib.h>
#include <string.h>

const char cmd_view_usage[] =
    "usage: heapprof view TRACE [-o FILE]\n"
    "\n"
    "Writes one self-contained HTML page (no network, no server) to look at the trace in a\n"
    "browser: the summary as `heapprof stats` gives it, an allocation flamegraph (metric\n"
    "switch, click to zoom, search, bottom-up), live bytes over time with the sites live at\n"
    "any moment, a sortable and filterable table of every site with its stack, and the\n"
    "growth hotspots of `heapprof report` (docs/viewer.md).\n"
    "\n"
    "  -o, --output FILE   the page (default: TRACE with .hpt replaced by .html, in the\n"
    "                      trace's directory; - for standard output)\n"
    "  -h, --help          this help\n";

int cmd_view_parse(int argc, char **argv, cmd_view_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    o->short_ns = GROWTH_DEFAULT_SHORT_NS;
    if (cmd_args_trace_out("view", argc, argv, &o->trace, &o->out, err) != 0)
        return -1;
    const char *src = o->out ? o->out : o->trace;
    size_t n = strlen(src);
    if (!o->out && n > 4 && strcmp(src + n - 4, ".hpt") == 0)
        n -= 4;
    int w = snprintf(o->path, sizeof o->path, "%.*s%s", (int)n, src, o->out ? "" : ".html");
    if (w < 0 || (size_t)w >= sizeof o->path) {
        errmsg_set(err, "view: output path too long");
        return -1;
    }
    return 0;
}

int cmd_view_run(const cmd_view_opts_t *o, FILE *out, FILE *progress, errmsg_t *err) {
    // opened before the (long) analysis, so an unwritable path fails at once
    out_file_t of;
    if (out_file_open(&of, "view", o->path, out, err) != 0)
        return -1;
    analyze_opts_t ao = {.mode = 0, .growth = true, .short_ns = o->short_ns, .timeline = true};
    analyze_t *a = analyze_open_opts(o->trace, &ao, progress, err);
    // the viewer's timeline, lifetimes and growth advice are the sampled blocks' own
    int rc = a && analyze_refuse_sampled(a, "view", err) == 0 ? out_html_write(a, of.f, err) : -1;
    analyze_close(a);
    return out_file_close(&of, rc, err);
}
