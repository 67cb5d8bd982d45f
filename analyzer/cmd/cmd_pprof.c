// SPDX-License-Identifier: MIT
// The pprof subcommand: options, then analyze (report's counting, so the figures are the
// report's) -> out_pprof. With -o the profile goes through out_file.h: a temporary file renamed
// over FILE once complete, so a failed run never leaves half a profile.
#include "cmd/cmd_pprof.h"

#include "analyze/analyze.h"
#include "cmd/cmd_args.h"
#include "core/out_file.h"
#include "out/out.h"

#include <string.h>
#include <unistd.h>

const char cmd_pprof_usage[] =
    "usage: heapprof pprof TRACE [-o FILE] [--at exit|peak] [--full-stacks]\n"
    "\n"
    "Writes the trace's allocation sites as a gzipped pprof profile (profile.proto), for\n"
    "`go tool pprof`, Grafana Pyroscope and Parca (docs/pprof.md). Sample types:\n"
    "  alloc_objects, alloc_space   blocks and bytes allocated over the whole run\n"
    "  inuse_objects, inuse_space   blocks and bytes live at exit (default) or at the peak\n"
    "Figures are exact (every allocation was recorded) and equal `heapprof report`'s: each\n"
    "stack starts at the frame that names its site in the report, so a function's flat\n"
    "figure in `go tool pprof -top` is the report's bytes for that function.\n"
    "\n"
    "  -o, --output FILE   write to FILE (default: standard output, unless a terminal)\n"
    "  --at exit|peak      inuse_* at exit (leaks) or at the global peak of live bytes\n"
    "  --full-stacks       keep the allocator's and libraries' frames below each site\n"
    "  -h, --help          this help\n";

static int parse_at(const char *v, cmd_pprof_opts_t *o, errmsg_t *err) {
    if (strcmp(v, "exit") == 0) {
        o->at_peak = false;
    } else if (strcmp(v, "peak") == 0) {
        o->at_peak = true;
    } else {
        errmsg_set(err, "pprof: --at takes exit or peak, not '%s'", v);
        return -1;
    }
    return 0;
}

int cmd_pprof_parse(int argc, char **argv, cmd_pprof_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                           strcmp(a, "--at") == 0)) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                errmsg_set(err, "pprof: %s needs a %s", a, a[2] == 'a' ? "value" : "FILE");
                return -1;
            }
            if (a[2] == 'a') {
                if (parse_at(argv[++i], o, err) != 0)
                    return -1;
            } else {
                o->out = argv[++i];
            }
        } else if (!only_args && strncmp(a, "--output=", 9) == 0 && a[9]) {
            o->out = a + 9;
        } else if (!only_args && strncmp(a, "--at=", 5) == 0) {
            if (parse_at(a + 5, o, err) != 0)
                return -1;
        } else if (!only_args && strcmp(a, "--full-stacks") == 0) {
            o->full_stacks = true;
        } else if (cmd_args_other("pprof", a, &only_args, &o->trace, err) != 0) {
            return -1;
        }
    }
    return cmd_args_need_trace("pprof", o->trace, err);
}

int cmd_pprof_run(const cmd_pprof_opts_t *o, FILE *out, FILE *progress, cmd_pprof_warnings_t *w,
                  errmsg_t *err) {
    memset(w, 0, sizeof *w);
    bool to_stream = !o->out || strcmp(o->out, "-") == 0;
    if (to_stream && isatty(fileno(out))) {
        errmsg_set(err, "pprof: not writing a binary profile to a terminal (use -o FILE)");
        return -1;
    }
    analyze_opts_t ao = {.mode = 0};
    analyze_t *a = analyze_open_opts(o->trace, &ao, progress, err);
    if (!a)
        return -1;
    out_file_t of;
    int rc = out_file_open(&of, "pprof", o->out, out, err);
    if (rc == 0) {
        out_pprof_opts_t po = {.at_peak = o->at_peak, .full_stacks = o->full_stacks};
        rc = out_file_close(&of, out_pprof_write(a, &po, of.f, err), err);
    }
    if (rc == 0) {
        out_pprof_damage(a, w->damage, sizeof w->damage);
        const char *u = out_pprof_unfinished(a);
        snprintf(w->unfinished, sizeof w->unfinished, "%s", u ? u : "");
    }
    analyze_close(a);
    return rc;
}
