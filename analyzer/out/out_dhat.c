// SPDX-License-Identifier: MIT
// DHAT's JSON, version 2, heap mode, as Valgrind's dh_view.html reads it (docs/dhat-format.md).
// Lifetimes are recorded (bklt), accesses are not (bkacc false: a preload profiler cannot see
// loads and stores). Times are in microseconds of the monotonic clock since the trace started,
// as dhat-rs writes them; lifetimes are summed in nanoseconds and rounded once per site. Frames
// are strings "0xADDR: function (file:line)" written once each in ftbl; two sites whose frames
// print the same (only possible for stacks the trace never defined) are merged into one
// program point, because the viewer refuses repeated stacks.
#include "out/out.h"

#include "core/xalloc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define US(ns) (((ns) + 500) / 1000)

// short-lived threshold shown by the viewer's "Total (blocks), short-lived" sort: 10 µs
#define TUTH_US 10

typedef struct writer {
    json_t *ftbl;
    json_t *frame_index; // frame string -> index into ftbl
    json_t *pp_index;    // "i,j,k" (the fs) -> program point object
    json_t *pps;
} writer_t;

static size_t frame_ref(writer_t *w, const char *text) {
    json_t *idx = json_object_get(w->frame_index, text);
    if (idx)
        return (size_t)json_integer_value(idx);
    size_t i = json_array_size(w->ftbl);
    json_array_append_new(w->ftbl, fmt_json_str(text));
    json_object_set_new_nocheck(w->frame_index, text, json_integer((json_int_t)i));
    return i;
}

// Valgrind's frame format; "???" where the function is not known
static void frame_text(const symbolize_frame_t *f, char *buf, size_t cap) {
    const char *func = f->function ? f->function : "???";
    if (f->file && f->line)
        snprintf(buf, cap, "0x%" PRIX64 ": %s (%s:%" PRIu32 ")", f->pc, func,
                 symbolize_short_path(f->file, 3), f->line);
    else if (f->module)
        snprintf(buf, cap, "0x%" PRIX64 ": %s (in %s)", f->pc, func, f->module);
    else
        snprintf(buf, cap, "0x%" PRIX64 ": %s", f->pc, func);
}

static void add_fig(json_t *pp, const char *key, uint64_t v) {
    json_t *old = json_object_get(pp, key);
    uint64_t sum = v + (old ? (uint64_t)json_integer_value(old) : 0);
    json_object_set_new(pp, key, fmt_json_int(sum));
}

static void add_site(writer_t *w, const site_t *s, char *text, size_t text_cap) {
    json_t *fs = json_array();
    // the key that detects repeated stacks: the frame indexes, comma-separated
    size_t key_cap = 64, key_n = 0;
    char *key = xmalloc(key_cap);
    key[0] = '\0';
    size_t n = s->n_frames ? s->n_frames : 1; // an unknown stack still needs one frame
    for (size_t i = 0; i < n; i++) {
        if (s->n_frames == 0)
            snprintf(text, text_cap, "[unknown stack: unwinding failed or stack not in trace]");
        else
            frame_text(s->frames[i], text, text_cap);
        size_t idx = frame_ref(w, text);
        json_array_append_new(fs, json_integer((json_int_t)idx));
        char num[24];
        int len = snprintf(num, sizeof num, "%s%zu", key_n ? "," : "", idx);
        key = xgrow(key, &key_cap, key_n + (size_t)len + 1, 1);
        memcpy(key + key_n, num, (size_t)len + 1);
        key_n += (size_t)len;
    }
    const replay_site_t *g = &s->fig;
    json_t *pp = json_object_get(w->pp_index, key);
    if (pp) {
        json_decref(fs);
    } else {
        pp = json_object();
        json_object_set_new_nocheck(w->pp_index, key, pp); // the index holds the reference...
        json_array_append(w->pps, pp);             // ...and so does pps
    }
    add_fig(pp, "tb", g->bytes);
    add_fig(pp, "tbk", g->blocks);
    add_fig(pp, "tl", US(g->lifetime_ns));
    add_fig(pp, "mb", g->max_bytes); // a merged point's own maximum is at most the sum
    add_fig(pp, "mbk", g->max_blocks);
    add_fig(pp, "gb", g->peak_bytes);
    add_fig(pp, "gbk", g->peak_blocks);
    add_fig(pp, "eb", g->end_bytes);
    add_fig(pp, "ebk", g->end_blocks);
    // Not DHAT's rb/wb, which count every access: a heapprof extension the viewer ignores
    // (docs/dhat-format.md#bytes-touched).
    if (g->touch_blocks) {
        add_fig(pp, "heapprof_touched_bytes", g->touched_bytes);
        add_fig(pp, "heapprof_touch_measured_bytes", g->touch_bytes);
    }
    if (!json_object_get(pp, "fs"))
        json_object_set_new(pp, "fs", fs);
    free(key);
}

static json_t *command_line(const reader_t *r) {
    size_t argc = 0;
    const char *const *argv = reader_argv(r, &argc);
    if (!argv || argc == 0)
        return fmt_json_str(reader_exe(r) ? reader_exe(r) : "(unknown)");
    size_t n = 1;
    for (size_t i = 0; i < argc; i++)
        n += strlen(argv[i] ? argv[i] : "") + 1;
    char *cmd = xmalloc(n);
    cmd[0] = '\0';
    for (size_t i = 0; i < argc; i++) {
        if (i)
            strcat(cmd, " ");
        strcat(cmd, argv[i] ? argv[i] : "");
    }
    json_t *j = fmt_json_str(cmd);
    free(cmd);
    return j;
}

// One line per top-level field, program point and frame, like Valgrind's own files: greppable
// and diffable, and still plain JSON.
static int dump_value(const json_t *v, FILE *f) {
    return json_dumpf(v, f, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
}

static int dump(const json_t *root, FILE *f) {
    const char *key;
    json_t *v;
    bool first = true;
    if (fputc('{', f) == EOF)
        return -1;
    json_object_foreach((json_t *)root, key, v) {
        json_t *k = json_string(key);
        int rc = fputs(first ? "" : "\n,", f) == EOF || dump_value(k, f) || fputc(':', f) == EOF;
        json_decref(k);
        if (rc)
            return -1;
        first = false;
        if (!json_is_array(v) || json_array_size(v) == 0) {
            if (dump_value(v, f))
                return -1;
            continue;
        }
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (fputs(i ? "\n ," : "\n [", f) == EOF || dump_value(e, f))
                return -1;
        }
        if (fputs("\n ]", f) == EOF)
            return -1;
    }
    return fputs("\n}", f) == EOF ? -1 : 0;
}

int out_dhat_write(analyze_t *a, FILE *f, errmsg_t *err) {
    const replay_totals_t *t = replay_totals(a->rp);
    json_t *root = json_object();
    json_object_set_new(root, "dhatFileVersion", json_integer(2));
    json_object_set_new(root, "mode", json_string("heap"));
    json_object_set_new(root, "verb", json_string("Allocated"));
    json_object_set_new(root, "bklt", json_true());
    json_object_set_new(root, "bkacc", json_false());
    json_object_set_new(root, "tu", json_string("\xc2\xb5s"));
    json_object_set_new(root, "Mtu", json_string("s"));
    json_object_set_new(root, "tuth", json_integer(TUTH_US));
    json_object_set_new(root, "cmd", command_line(a->r));
    json_object_set_new(root, "pid", json_integer(reader_header(a->r)->pid));
    uint64_t te = US(t->last_time_ns);
    json_object_set_new(root, "te", fmt_json_int(te ? te : 1)); // rates divide by te
    json_object_set_new(root, "tg", fmt_json_int(US(t->peak_time_ns)));

    writer_t w = {json_array(), json_object(), json_object(), json_array()};
    json_array_append_new(w.ftbl, json_string("[root]"));
    size_t text_cap = 8192;
    char *text = xmalloc(text_cap);
    size_t n = sites_count(a->sites);
    analyze_resolve(a, NULL, n);
    for (size_t i = 0; i < n; i++)
        add_site(&w, sites_get(a->sites, i), text, text_cap);
    free(text);
    json_object_set_new(root, "pps", w.pps);
    json_object_set_new(root, "ftbl", w.ftbl);
    json_decref(w.frame_index);
    json_decref(w.pp_index);

    int rc = dump(root, f);
    json_decref(root);
    if (rc != 0 || fputc('\n', f) == EOF || fflush(f) != 0 || ferror(f)) {
        errmsg_set(err, "dhat: cannot write the output");
        return -1;
    }
    return 0;
}
