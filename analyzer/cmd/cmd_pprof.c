// SPDX-License-Identifier: MIT
// The pprof subcommand: options, then analyze (report's counting, so the figures are the
// report's) -> out_pprof. With -o the profile goes through out_file.h: a temporary file renamed
// over FILE once complete, so a failed run never leaves half a profile. --follow follows the
// trace (analyze_follow_step): every interval it replays only what was written since the last
// one and writes a profile of replay's state, alloc_* as differences (docs/pprof.md).
#include "cmd/cmd_pprof.h"

#include "analyze/analyze.h"
#include "cmd/cmd_args.h"
#include "core/out_file.h"
#include "out/out.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char cmd_pprof_usage[] =
    "usage: heapprof pprof TRACE [-o FILE] [--at exit|peak] [--full-stacks]\n"
    "       heapprof pprof --follow TRACE [--every 10s] --out-dir DIR\n"
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
    "  --follow            read TRACE while the program writes it: every interval, one\n"
    "                      profile in DIR (alloc_* over the interval, inuse_* at its end),\n"
    "                      until the program exits; the profiles' alloc_* add up to the run's\n"
    "  --every T           the interval: 10s (default), 500ms, 2m, or seconds\n"
    "  --out-dir DIR       where --follow writes DIR/PROGRAM.PID.SEQ.TIME.pb.gz\n"
    "  -h, --help          this help\n";

#define MAX_EVERY_NS (24ull * 3600 * 1000000000ull)

// "10s", "500ms", "2m", "1h" or a number of seconds
static int parse_every(const char *v, uint64_t *ns, errmsg_t *err) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    uint64_t unit = 0;
    if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
        unit = 1000000000ull;
    else if (strcmp(end, "ms") == 0)
        unit = 1000000ull;
    else if (strcmp(end, "m") == 0)
        unit = 60ull * 1000000000ull;
    else if (strcmp(end, "h") == 0)
        unit = 3600ull * 1000000000ull;
    if (errno || end == v || v[0] == '-' || !unit || n == 0 || n > MAX_EVERY_NS / unit ||
        n * unit < 10000000ull) {
        errmsg_set(err, "pprof: --every takes an interval from 10ms to 24h such as 10s or 500ms, "
                        "not '%s'", v);
        return -1;
    }
    *ns = n * unit;
    return 0;
}

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
    o->every_ns = 10000000000ull;
    bool only_args = false, every = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && (strcmp(a, "--every") == 0 || strcmp(a, "--out-dir") == 0)) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                errmsg_set(err, "pprof: %s needs a %s", a, a[2] == 'e' ? "value" : "DIR");
                return -1;
            }
            if (a[2] == 'o')
                o->out_dir = argv[++i];
            else if (parse_every(argv[++i], &o->every_ns, err) != 0)
                return -1;
            every |= a[2] == 'e';
            continue;
        }
        if (!only_args && strcmp(a, "--follow") == 0) {
            o->follow = true;
            continue;
        }
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
    if (cmd_args_need_trace("pprof", o->trace, err) != 0)
        return -1;
    if (o->follow && (!o->out_dir || o->out || o->at_peak)) {
        errmsg_set(err, "pprof: --follow writes into --out-dir DIR (and takes no -o or --at peak)");
        return -1;
    }
    if (!o->follow && (o->out_dir || every)) {
        errmsg_set(err, "pprof: --every and --out-dir go with --follow");
        return -1;
    }
    return 0;
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

// ---- --follow ----

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
    uint64_t n = now_ns();
    if (t <= n)
        return;
    struct timespec ts = {(time_t)((t - n) / 1000000000ull), (long)((t - n) % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

// DIR/PROGRAM.PID.SEQ.YYYYmmddTHHMMSSZ.pb.gz: PROGRAM the executable's file name (what an
// upload script names the service by), with anything but [A-Za-z0-9._-] as '_' since it comes
// from the trace; the time is the end of the interval (UTC); SEQ keeps the names in order.
static char *profile_path(const char *dir, const analyze_t *a, unsigned seq) {
    const hpt_file_hdr_t *h = reader_header(a->r);
    time_t t = (time_t)((h->start_unix_ns + replay_totals(a->rp)->last_time_ns) / 1000000000ull);
    struct tm tm;
    char stamp[32] = "unknown", prog[64];
    if (gmtime_r(&t, &tm))
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    const char *exe = reader_exe(a->r), *slash = exe ? strrchr(exe, '/') : NULL;
    snprintf(prog, sizeof prog, "%s", slash ? slash + 1 : exe && *exe ? exe : "heapprof");
    for (char *c = prog; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '.' && *c != '_' && *c != '-')
            *c = '_';
    if (!prog[0])
        snprintf(prog, sizeof prog, "heapprof");
    if (prog[0] == '.') // never a hidden file
        prog[0] = '_';
    size_t n = strlen(dir) + sizeof prog + 96;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s.%u.%04u.%s.pb.gz", dir, prog, (unsigned)h->pid, seq, stamp);
    return p;
}

// The file stopped growing for this long while its writer's pid still answers (a trace from
// another pid namespace, or a writer stuck for good): the trace is read as ended.
#define STALL_NS (600ull * 1000000000ull)

int cmd_pprof_follow(const cmd_pprof_opts_t *o, void (*on_write)(const char *path, void *ctx),
                     void *ctx, errmsg_t *err) {
    struct stat st;
    if (stat(o->out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        errmsg_set(err, "pprof: --out-dir %s is not a directory", o->out_dir);
        return -1;
    }
    hmap_t since;
    hmap_init(&since, sizeof(out_pprof_alloc_t));
    uint64_t since_ns = 0, start = now_ns(), grew_ns = start;
    off_t last_size = -1;
    analyze_t *a = NULL;
    int rc = 0;
    for (unsigned seq = 1;; seq++) {
        sleep_until(start + seq * o->every_ns);
        off_t size = stat(o->trace, &st) == 0 ? st.st_size : -1;
        if (!a) {
            // The trace is followed, not read again: the reader stops at the chunk being
            // written and goes on from there at the next interval (analyze_follow_step).
            errmsg_t open_err;
            errmsg_init(&open_err);
            analyze_opts_t ao = {.mode = 0};
            a = analyze_follow_open(o->trace, &ao, &open_err);
            if (!a) {
                // nothing readable yet (the program has not created the file or written its
                // header): try at the next tick, unless the file did not grow since the last
                // try (then it is not a trace being written)
                if (size == last_size) {
                    errmsg_set(err, "%s", open_err.msg);
                    rc = -1;
                    break;
                }
                last_size = size;
                seq--;
                start += o->every_ns;
                continue;
            }
        }
        bool grew = size != last_size;
        if (grew)
            grew_ns = now_ns();
        last_size = size;
        // the pid alone is not enough: a writer in another pid namespace (a container writing
        // to a shared volume) has a pid that may not exist here, but its file grows
        bool gone = (!grew && reader_writer_gone(a->r)) || now_ns() - grew_ns >= STALL_NS;
        if (analyze_follow_step(a, gone, err) != 0) {
            rc = -1;
            break;
        }
        bool done = reader_ended(a->r);
        char *path = profile_path(o->out_dir, a, seq);
        out_file_t of;
        rc = path ? out_file_open(&of, "pprof", path, NULL, err) : -1;
        if (rc == 0) {
            out_pprof_opts_t po = {.at_peak = false,
                                   .full_stacks = o->full_stacks,
                                   .since = &since,
                                   .since_ns = since_ns};
            rc = out_file_close(&of, out_pprof_write(a, &po, of.f, err), err);
        }
        since_ns = replay_totals(a->rp)->last_time_ns;
        if (rc == 0 && on_write)
            on_write(path, ctx);
        free(path);
        if (rc != 0 || done)
            break;
    }
    analyze_close(a);
    hmap_fini(&since);
    return rc;
}
