// SPDX-License-Identifier: MIT
// pprof: the trace's allocation sites as a gzipped pprof profile (docs/pprof.md), one sample per
// site with the figures replay computed for it (alloc_* = bytes and blocks allocated, inuse_* =
// live at exit or at the global peak), never figures of its own. Frames are the sites' expanded
// stacks (sites.h), named as the report names them, so `go tool pprof -top` agrees with `heapprof
// report` function by function; inlined calls become the Lines of one Location. Mappings are the
// trace's modules, with build ids.
#include "out/out.h"

#include "core/hmap.h"
#include "core/xalloc.h"
#include "out/pprof_build.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 4096

enum { V_ALLOC_OBJECTS, V_ALLOC_SPACE, V_INUSE_OBJECTS, V_INUSE_SPACE, N_VALUES };

static const char *const sample_types[N_VALUES][2] = {
    [V_ALLOC_OBJECTS] = {"alloc_objects", "count"},
    [V_ALLOC_SPACE] = {"alloc_space", "bytes"},
    [V_INUSE_OBJECTS] = {"inuse_objects", "count"},
    [V_INUSE_SPACE] = {"inuse_space", "bytes"},
};

static int64_t sat(uint64_t v) { return v > INT64_MAX ? INT64_MAX : (int64_t)v; }

// now - before as a sample value: a site's figure as of this profile minus what earlier ones
// counted. Negative only if a later read merged events in another order (a realloc then joins
// another site); the values over all profiles still add up to the run's figures.
static int64_t delta(uint64_t now, uint64_t before) {
    return now >= before ? sat(now - before) : -sat(before - now);
}

const char *out_pprof_damage(const analyze_t *a, char *buf, size_t cap) {
    const reader_damage_t *d = reader_damage(a->r);
    if (!d->chunks_damaged && !d->seq_gaps && !d->truncated)
        return NULL;
    char b1[32], b2[32];
    // the report's "damage" line, word for word
    snprintf(buf, cap,
             "damage: %s damaged chunk%s skipped, %s missing%s: figures cover what could be read",
             fmt_grouped(d->chunks_damaged, b1), d->chunks_damaged == 1 ? "" : "s",
             fmt_grouped(d->seq_gaps, b2), d->truncated ? ", the file is truncated" : "");
    return buf;
}

const char *out_pprof_unfinished(const analyze_t *a) {
    if (reader_damage(a->r)->trailer)
        return NULL;
    return "unfinished: no trailer: the program did not exit cleanly; \"at exit\" is the state "
           "at its last recorded event";
}

// One Mapping per module of the trace, in the trace's order (the executable first); *index maps
// a module's path pointer (what symbolized frames carry) to its mapping id.
static void add_mappings(analyze_t *a, pprof_build_t *b, hmap_t *index) {
    size_t n_mods, n_status;
    const reader_module_t *mods = reader_modules(a->r, &n_mods);
    const symbolize_module_t *st = symbolize_modules(a->sym, &n_status);
    for (size_t i = 0; i < n_mods; i++) {
        symbolize_module_status_t s = i < n_status ? st[i].status : SYMBOLIZE_MODULE_UNUSED;
        // has_*: what we resolved, so pprof does not symbolize those modules again (and name
        // frames differently from the report); a missing or rebuilt module is left to it
        bool fn = s == SYMBOLIZE_MODULE_OK || s == SYMBOLIZE_MODULE_NO_DEBUG;
        bool lines = s == SYMBOLIZE_MODULE_OK;
        pprof_mapping_t m = {
            .start = mods[i].base,
            .limit = mods[i].base + mods[i].size,
            .file_offset = 0, // base is the load bias: address - start is the ELF address
            .file = mods[i].path,
            .build_id = mods[i].build_id,
            .build_id_len = mods[i].build_id_len,
            .has_functions = fn,
            .has_filenames = lines,
            .has_line_numbers = lines,
            .has_inline_frames = lines,
        };
        uint64_t id = pprof_build_mapping(b, &m);
        *(uint64_t *)hmap_put(index, (uint64_t)(uintptr_t)mods[i].path, NULL) = id;
    }
}

static uint64_t function_of(pprof_build_t *b, const symbolize_frame_t *f) {
    char buf[NAME_CAP];
    const char *name = sites_frame_function(f, buf, sizeof buf);
    // no system name: pprof then takes name as demangled already, instead of cutting C++
    // parameter and template lists off names it believes it demangled itself
    return pprof_build_function(b, name, NULL, f->file);
}

// Location ids of site s's frames from its naming frame outward (all of them with full), leaf
// first, into *ids (grown as needed); returns how many.
static size_t site_locations(pprof_build_t *b, const hmap_t *mappings, const site_t *s, bool full,
                             uint64_t **ids, size_t *cap, pprof_line_t **lines, size_t *lcap) {
    if (s->n_frames == 0) {
        pprof_line_t l = {pprof_build_function(b, "[unknown stack]", NULL, NULL), 0};
        *ids = xgrow(*ids, cap, 1, sizeof **ids);
        (*ids)[0] = pprof_build_location(b, 0, 0, &l, 1);
        return 1;
    }
    size_t n = 0;
    for (size_t i = full ? 0 : s->name_frame; i < s->n_frames;) {
        // a run of inlined calls and the function they were inlined into share one address
        size_t j = i;
        while (j + 1 < s->n_frames && s->frames[j]->inlined &&
               s->frames[j + 1]->pc == s->frames[i]->pc)
            j++;
        *lines = xgrow(*lines, lcap, j - i + 1, sizeof **lines);
        for (size_t k = i; k <= j; k++)
            (*lines)[k - i] = (pprof_line_t){function_of(b, s->frames[k]), s->frames[k]->line};
        const symbolize_frame_t *f = s->frames[i];
        const uint64_t *mid = f->module ? hmap_get(mappings, (uint64_t)(uintptr_t)f->module) : NULL;
        // a return address: the call is the byte before it (as symbolize.h looks lines up)
        uint64_t addr = f->pc ? f->pc - 1 : 0;
        *ids = xgrow(*ids, cap, n + 1, sizeof **ids);
        (*ids)[n++] = pprof_build_location(b, mid ? *mid : 0, addr, *lines, j - i + 1);
        i = j + 1;
    }
    return n;
}

int out_pprof_write(analyze_t *a, const out_pprof_opts_t *o, FILE *f, errmsg_t *err) {
    const replay_totals_t *t = replay_totals(a->rp);
    const hpt_file_hdr_t *h = reader_header(a->r);
    pprof_build_t *b = pprof_build_new(sample_types, N_VALUES);
    size_t n = sites_count(a->sites);
    analyze_resolve(a, NULL, n);

    hmap_t mappings;
    hmap_init(&mappings, sizeof(uint64_t));
    add_mappings(a, b, &mappings);

    uint64_t *ids = NULL;
    pprof_line_t *lines = NULL;
    size_t cap = 0, lcap = 0;
    uint64_t interval = replay_sample_interval(a->rp);
    for (size_t i = 0; i < n; i++) {
        const site_t *s = sites_get(a->sites, i);
        const replay_site_t *g = &s->fig; // estimates for a sampled trace (replay.h)
        int64_t v[N_VALUES] = {
            [V_ALLOC_OBJECTS] = sat(g->blocks),
            [V_ALLOC_SPACE] = sat(g->bytes),
            [V_INUSE_OBJECTS] = sat(o->at_peak ? g->peak_blocks : g->end_blocks),
            [V_INUSE_SPACE] = sat(o->at_peak ? g->peak_bytes : g->end_bytes),
        };
        if (o->since) {
            out_pprof_alloc_t *before = hmap_put(o->since, g->stack, NULL); // zeroed if new
            v[V_ALLOC_OBJECTS] = delta(g->blocks, before->blocks);
            v[V_ALLOC_SPACE] = delta(g->bytes, before->bytes);
            *before = (out_pprof_alloc_t){g->blocks, g->bytes};
            if (!v[V_ALLOC_OBJECTS] && !v[V_ALLOC_SPACE] && !v[V_INUSE_OBJECTS] &&
                !v[V_INUSE_SPACE])
                continue;
        }
        size_t k = site_locations(b, &mappings, s, o->full_stacks, &ids, &cap, &lines, &lcap);
        pprof_build_sample(b, ids, k, v);
    }
    free(ids);
    free(lines);
    hmap_fini(&mappings);

    pprof_build_set_period(b, "space", "bytes", interval ? sat(interval) : 1);
    pprof_build_set_default_type(b, "inuse_space");
    uint64_t from = o->since && o->since_ns <= t->last_time_ns ? o->since_ns : 0;
    pprof_build_set_time(b, sat(h->start_unix_ns + t->last_time_ns), sat(t->last_time_ns - from));
    char line[1024], d[32], d2[32];
    const char *exe = reader_exe(a->r);
    if (interval)
        snprintf(line, sizeof line,
                 "heapprof: %s (pid %" PRIu32 "), sampled every %" PRIu64
                 " bytes on average: every value is an estimate (docs/sampling.md)",
                 exe ? exe : "(unknown program)", h->pid, interval);
    else
        snprintf(line, sizeof line, "heapprof: %s (pid %" PRIu32 "), every allocation recorded",
                 exe ? exe : "(unknown program)", h->pid);
    pprof_build_add_comment(b, line);
    if (o->since) {
        snprintf(line, sizeof line, "alloc_*: allocated from %s to %s after the start",
                 fmt_duration((double)from, d), fmt_duration((double)t->last_time_ns, d2));
        pprof_build_add_comment(b, line);
    }
    if (o->at_peak)
        snprintf(line, sizeof line, "inuse_*: live at the global peak, %s after the start",
                 fmt_duration((double)t->peak_time_ns, d));
    else
        snprintf(line, sizeof line, "%s",
                 o->since && !reader_damage(a->r)->trailer
                     ? "inuse_*: live at the end of the interval"
                     : "inuse_*: live at exit (leaked, or left for the kernel)");
    pprof_build_add_comment(b, line);
    // a trace still being written ends inside a chunk: that is no damage until it is finished
    if ((!o->since || reader_damage(a->r)->trailer) && out_pprof_damage(a, line, sizeof line))
        pprof_build_add_comment(b, line);
    if (out_pprof_unfinished(a) && !o->since)
        pprof_build_add_comment(b, out_pprof_unfinished(a));

    int rc = pprof_build_write(b, f, err);
    pprof_build_free(b);
    return rc;
}
