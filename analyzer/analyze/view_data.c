// SPDX-License-Identifier: MIT
// The viewer's embedded data, written straight to the FILE as it is built (no JSON tree in
// memory: 100,000 sites stay a few MiB). Frames and strings are interned once; stacks become a
// prefix tree whose nodes are (parent, frame) pairs numbered parent first, so the page can fold
// any metric over it in one backwards pass (docs/viewer.md#data-model).
#include "analyze/view_data.h"

#include "analyze/flame.h"
#include "core/fmt.h"
#include "core/hmap.h"
#include "core/xalloc.h"
#include "model/cpu.h"
#include "model/growth.h"
#include "model/sites.h"
#include "model/timeline.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 4096
#define GROWTH_TOP 100    // growth hotspots listed
#define UNTOUCHED_TOP 100 // reserved-but-untouched sites listed
#define KIND_INLINED 8    // frame kind bit: this call was inlined into its caller

void view_json_str(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    putc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t k = fmt_utf8_len(p);
        if (k == 0) {
            putc('?', f);
            p++;
        } else if (k == 3 && p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
            // U+2028/2029 end a line in older JavaScript parsers
            fprintf(f, "\\u%04x", p[2] == 0xa8 ? 0x2028 : 0x2029);
            p += 3;
        } else if (k > 1) {
            fwrite(p, 1, k, f);
            p += k;
        } else if (*p == '"' || *p == '\\') {
            putc('\\', f);
            putc(*p++, f);
        } else if (*p < 0x20 || *p == 0x7f || *p == '<' || *p == '>' || *p == '&') {
            // '<' as \u003c: no "</script>" or "<!--" can end the page's <script> element early
            fprintf(f, "\\u%04x", *p++);
        } else {
            putc(*p++, f);
        }
    }
    putc('"', f);
}

// ---- interning ----

typedef struct strtab {
    hmap_t idx; // hash (probed on collision) -> id + 1
    char **v;
    size_t n, cap;
} strtab_t;

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint32_t str_id(strtab_t *t, const char *s) {
    for (uint64_t h = fnv(s);; h++) {
        uint64_t *slot = hmap_put(&t->idx, h, NULL);
        if (*slot == 0) {
            t->v = xgrow(t->v, &t->cap, t->n + 1, sizeof *t->v);
            t->v[t->n] = xstrdup(s);
            *slot = ++t->n;
            return (uint32_t)(*slot - 1);
        }
        if (strcmp(t->v[*slot - 1], s) == 0)
            return (uint32_t)(*slot - 1);
    }
}

typedef struct frame {
    uint32_t fn, loc;
    uint8_t kind;
} frame_t;

typedef struct model {
    strtab_t str;
    hmap_t frame_idx; // fn | loc << 32 ... packed key -> id + 1
    hmap_t frame_of;  // symbolize_frame_t address -> id + 1: the symbolizer hands out one
                      // frame per address, so each is named and classified once
    frame_t *frames;
    size_t n_frames, frames_cap;
    hmap_t node_idx;                    // parent << 32 | frame -> node id + 1
    uint32_t *node_parent, *node_frame; // node 0 is the root
    size_t n_nodes, nodes_cap;
    uint32_t *site_node, *site_name; // per site: its leaf node, the node that names it
    uint32_t *cpu_node;              // per CPU sample stack with samples: its leaf node
    uint64_t *cpu_count;             // ... and its samples
    size_t n_cpu;
} model_t;

static uint32_t frame_id(model_t *m, uint32_t fn, uint32_t loc, uint8_t kind) {
    // fn and loc below 2^28 (a trace's strings are far fewer); kind below 16
    uint64_t key = ((uint64_t)fn << 32 | (uint64_t)loc << 4 | kind) + 1;
    uint64_t *slot = hmap_put(&m->frame_idx, key, NULL);
    if (*slot == 0) {
        m->frames = xgrow(m->frames, &m->frames_cap, m->n_frames + 1, sizeof *m->frames);
        m->frames[m->n_frames] = (frame_t){fn, loc, kind};
        *slot = ++m->n_frames;
    }
    return (uint32_t)(*slot - 1);
}

static uint32_t node_id(model_t *m, uint32_t parent, uint32_t frame) {
    uint64_t key = (uint64_t)parent << 32 | frame;
    uint64_t *slot = hmap_put(&m->node_idx, key, NULL);
    if (*slot == 0) {
        m->node_parent = xgrow(m->node_parent, &m->nodes_cap, m->n_nodes + 1, sizeof(uint32_t));
        size_t cap = m->nodes_cap;
        m->node_frame = xrealloc(m->node_frame, cap * sizeof(uint32_t));
        m->node_parent[m->n_nodes] = parent;
        m->node_frame[m->n_nodes] = frame;
        *slot = ++m->n_nodes;
    }
    return (uint32_t)(*slot - 1);
}

// Adds a symbolized stack (innermost first) to the tree; returns its leaf node, and in *named
// the node of frame name_frame (the unknown-stack node when there are no frames).
static uint32_t add_path(model_t *m, const symbolize_frame_t *const *frames, size_t n_frames,
                         size_t name_frame, uint32_t *named) {
    char fn[NAME_CAP], loc[NAME_CAP];
    uint32_t node = 0;
    if (n_frames == 0) {
        uint32_t f = frame_id(m, str_id(&m->str, "[unknown stack]"), 0, FLAME_KIND_UNKNOWN);
        node = *named = node_id(m, 0, f);
    }
    for (size_t j = n_frames; j-- > 0;) {
        const symbolize_frame_t *fr = frames[j];
        uint64_t *known = hmap_put(&m->frame_of, (uint64_t)(uintptr_t)fr, NULL);
        if (*known == 0) {
            const char *name = sites_frame_function(fr, fn, sizeof fn);
            const char *where = sites_frame_location(fr, loc, sizeof loc);
            uint32_t name_id = str_id(&m->str, name);
            uint32_t loc_id = strcmp(name, where) == 0 ? 0 : str_id(&m->str, where);
            uint8_t kind = (uint8_t)flame_classify(fr->function, fr->file, fr->module);
            if (fr->inlined)
                kind |= KIND_INLINED;
            uint32_t id = frame_id(m, name_id, loc_id, kind);
            known = hmap_put(&m->frame_of, (uint64_t)(uintptr_t)fr, NULL); // may have moved
            *known = (uint64_t)id + 1;
        }
        node = node_id(m, node, (uint32_t)(*known - 1));
        if (j == name_frame)
            *named = node;
    }
    return node;
}

// CPU sample stacks join the same tree (their frames are mostly the sites' frames), so the
// flamegraph's cpu metric is one more set of (leaf node, value) pairs.
static void cpu_paths(model_t *m, analyze_t *a) {
    size_t n = 0, cap = 0;
    const cpu_stack_t *st = a->cpu && cpu_total(a->cpu) ? cpu_stacks(a->cpu, &n) : NULL;
    for (size_t i = 0; i < n; i++) {
        if (st[i].count == 0)
            continue;
        m->cpu_node = xgrow(m->cpu_node, &cap, m->n_cpu + 1, sizeof *m->cpu_node);
        m->cpu_count = xrealloc(m->cpu_count, cap * sizeof *m->cpu_count);
        uint32_t named;
        m->cpu_node[m->n_cpu] = add_path(m, st[i].frames, st[i].n_frames, 0, &named);
        m->cpu_count[m->n_cpu++] = st[i].count;
    }
}

static void model_build(model_t *m, analyze_t *a) {
    memset(m, 0, sizeof *m);
    hmap_init(&m->str.idx, sizeof(uint64_t));
    hmap_init(&m->frame_idx, sizeof(uint64_t));
    hmap_init(&m->node_idx, sizeof(uint64_t));
    hmap_init(&m->frame_of, sizeof(uint64_t));
    str_id(&m->str, "");                // string 0
    node_id(m, UINT32_MAX, UINT32_MAX); // the root, node 0
    size_t n = sites_count(a->sites);
    m->site_node = xcalloc(n + 1, sizeof *m->site_node);
    m->site_name = xcalloc(n + 1, sizeof *m->site_name);
    analyze_resolve(a, NULL, n);
    for (size_t i = 0; i < n; i++) {
        const site_t *s = sites_get(a->sites, i);
        m->site_node[i] = add_path(m, s->frames, s->n_frames, s->name_frame, &m->site_name[i]);
    }
    cpu_paths(m, a);
}

static void model_free(model_t *m) {
    for (size_t i = 0; i < m->str.n; i++)
        free(m->str.v[i]);
    free(m->str.v);
    hmap_fini(&m->str.idx);
    hmap_fini(&m->frame_idx);
    hmap_fini(&m->node_idx);
    hmap_fini(&m->frame_of);
    free(m->frames);
    free(m->node_parent);
    free(m->node_frame);
    free(m->site_node);
    free(m->site_name);
    free(m->cpu_node);
    free(m->cpu_count);
}

// ---- writing ----

static void key(FILE *f, const char *k, bool first) {
    fprintf(f, "%s\"%s\":", first ? "" : ",", k);
}

static void num(FILE *f, const char *k, uint64_t v) {
    key(f, k, false);
    fprintf(f, "%" PRIu64, v);
}

static void u32_array(FILE *f, const char *k, const uint32_t *v, size_t n, bool first) {
    key(f, k, first);
    putc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, i ? ",%" PRIu32 : "%" PRIu32, v[i]);
    putc(']', f);
}

static void write_summary(FILE *f, analyze_t *a) {
    const replay_totals_t *t = replay_totals(a->rp);
    const hpt_file_hdr_t *h = reader_header(a->r);
    const reader_damage_t *d = reader_damage(a->r);
    const reader_trailer_t *tr = reader_trailer(a->r);
    size_t argc = 0;
    const char *const *argv = reader_argv(a->r, &argc);
    key(f, "exe", true);
    view_json_str(f, reader_exe(a->r));
    key(f, "argv", false);
    putc('[', f);
    for (size_t i = 0; i < argc; i++) {
        if (i)
            putc(',', f);
        view_json_str(f, argv[i]);
    }
    putc(']', f);
    key(f, "trace", false);
    view_json_str(f, a->path);
    num(f, "pid", h->pid);
    fputs(",\"totals\":{", f);
    key(f, "blocks", true);
    fprintf(f, "%" PRIu64, t->n_blocks);
    num(f, "bytes", t->n_bytes);
    num(f, "frees", t->n_frees);
    num(f, "peak_bytes", t->peak_bytes);
    num(f, "peak_blocks", t->peak_blocks);
    num(f, "peak_time_ns", t->peak_time_ns);
    num(f, "end_bytes", t->live_bytes);
    num(f, "end_blocks", t->live_blocks);
    num(f, "threads", t->n_threads);
    num(f, "events", t->n_events);
    num(f, "stacks", reader_n_stacks(a->r));
    num(f, "duration_ns", t->last_time_ns);
    num(f, "sites", sites_count(a->sites));
    fputs("},\"damage\":{", f);
    key(f, "chunks_damaged", true);
    fprintf(f, "%" PRIu64, d->chunks_damaged);
    num(f, "chunks_missing", d->seq_gaps);
    num(f, "truncated_bytes", d->truncated ? d->truncated_bytes : 0);
    num(f, "clean_exit", d->trailer);
    num(f, "lost_events", tr ? tr->n_lost_events : 0);
    num(f, "unknown_frees", t->n_unknown_frees);
    // allocations by requested size, the non-empty power-of-two buckets (replay.h):
    // [min, blocks, bytes, ...], min 0 for size 0, else the bucket holds [min, 2 * min)
    fputs("},\"sizes\":[", f);
    bool first = true;
    for (unsigned k = 0; k < REPLAY_SIZE_BUCKETS; k++) {
        if (!t->size_blocks[k])
            continue;
        fprintf(f, "%s%" PRIu64 ",%" PRIu64 ",%" PRIu64, first ? "" : ",",
                replay_size_bucket_min(k), t->size_blocks[k], t->size_bytes[k]);
        first = false;
    }
    putc(']', f);
}

void view_cpu_summary(const analyze_t *a, view_cpu_t *out) {
    const reader_cpu_t *ci = reader_cpu(a->r);
    out->n_samples = ci->n_samples;
    cpu_describe(ci, out->source, sizeof out->source);
}

// "cpu": the summary, and the sample stacks as leaf nodes of the tree with their counts.
static void write_cpu(FILE *f, analyze_t *a, const model_t *m) {
    view_cpu_t cpu;
    view_cpu_summary(a, &cpu);
    fputs(",\"cpu\":{", f);
    key(f, "samples", true);
    fprintf(f, "%" PRIu64, cpu.n_samples);
    key(f, "source", false);
    view_json_str(f, cpu.source);
    u32_array(f, "node", m->cpu_node, m->n_cpu, false);
    key(f, "count", false);
    putc('[', f);
    for (size_t i = 0; i < m->n_cpu; i++)
        fprintf(f, i ? ",%" PRIu64 : "%" PRIu64, m->cpu_count[i]);
    fputs("]}", f);
}

static void write_model(FILE *f, const model_t *m) {
    fputs(",\"strings\":[", f);
    for (size_t i = 0; i < m->str.n; i++) {
        if (i)
            putc(',', f);
        view_json_str(f, m->str.v[i]);
    }
    fputs("],\"frames\":[", f);
    for (size_t i = 0; i < m->n_frames; i++)
        fprintf(f, "%s%" PRIu32 ",%" PRIu32 ",%u", i ? "," : "", m->frames[i].fn, m->frames[i].loc,
                m->frames[i].kind);
    // nodes: (parent, frame) pairs from node 1 on; node 0 is the root
    fputs("],\"nodes\":[", f);
    for (size_t i = 1; i < m->n_nodes; i++)
        fprintf(f, "%s%" PRIu32 ",%" PRIu32, i > 1 ? "," : "", m->node_parent[i], m->node_frame[i]);
    putc(']', f);
}

static const char *const site_columns[] = {"bytes",  "blocks",    "peak",
                                           "leaked", "temporary", "growth"};
static const flame_metric_t site_metrics[] = {FLAME_BYTES,  FLAME_BLOCKS,    FLAME_PEAK,
                                              FLAME_LEAKED, FLAME_TEMPORARY, FLAME_GROWTH};

static void write_sites(FILE *f, analyze_t *a, const model_t *m) {
    size_t n = sites_count(a->sites);
    fputs(",\"sites\":{", f);
    u32_array(f, "node", m->site_node, n, true);
    u32_array(f, "name", m->site_name, n, false);
    for (size_t c = 0; c < sizeof site_columns / sizeof *site_columns; c++) {
        key(f, site_columns[c], false);
        putc('[', f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, i ? ",%" PRIu64 : "%" PRIu64, flame_site_value(a, i, site_metrics[c]));
        putc(']', f);
    }
    // figures beyond the flamegraph's metrics, for the table
    static const char *const extra[] = {"temp_blocks", "max_bytes", "lifetime_us", "peak_blocks",
                                        "leaked_blocks"};
    for (size_t c = 0; c < sizeof extra / sizeof *extra; c++) {
        key(f, extra[c], false);
        putc('[', f);
        for (size_t i = 0; i < n; i++) {
            const replay_site_t *g = sites_figures(a->sites, i);
            uint64_t v = c == 0   ? g->temp_blocks
                         : c == 1 ? g->max_bytes
                         : c == 2 ? (g->blocks ? g->lifetime_ns / g->blocks / 1000u : 0)
                         : c == 3 ? g->peak_blocks
                                  : g->end_blocks;
            fprintf(f, i ? ",%" PRIu64 : "%" PRIu64, v);
        }
        putc(']', f);
    }
    putc('}', f);
}

static void write_timeline(FILE *f, const analyze_t *a) {
    size_t n = 0, ns = 0;
    const timeline_point_t *p = a->timeline ? timeline_points(a->timeline, &n) : NULL;
    const timeline_snap_t *s = a->timeline ? timeline_snaps(a->timeline, &ns) : NULL;
    fputs(",\"timeline\":{", f);
    key(f, "bucket_ns", true);
    fprintf(f, "%" PRIu64, a->timeline ? timeline_bucket_ns(a->timeline) : 0);
    static const char *const cols[] = {"t", "max", "last"};
    for (size_t c = 0; c < 3; c++) {
        key(f, cols[c], false);
        putc('[', f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, i ? ",%" PRIu64 : "%" PRIu64,
                    c == 0   ? p[i].time_ns
                    : c == 1 ? p[i].max_bytes
                             : p[i].last_bytes);
        putc(']', f);
    }
    // snapshots: [time, live, site, bytes, site, bytes, ...]
    key(f, "snaps", false);
    putc('[', f);
    for (size_t i = 0; i < ns; i++) {
        fprintf(f, "%s[%" PRIu64 ",%" PRIu64, i ? "," : "", s[i].time_ns, s[i].live_bytes);
        for (uint32_t k = 0; k < s[i].n_top; k++)
            fprintf(f, ",%" PRIu32 ",%" PRIu64, s[i].site[k], s[i].bytes[k]);
        putc(']', f);
    }
    fputs("],\"top\":", f);
    fprintf(f, "%d", TIMELINE_TOP);
    // the process's resident set as the shim sampled it (reader_rss_t): [time, bytes] pairs
    const reader_rss_t *rss = reader_rss(a->r);
    key(f, "rss", false);
    putc('[', f);
    for (size_t i = 0; i < rss->n_points; i++)
        fprintf(f, "%s%" PRIu64 ",%" PRIu64, i ? "," : "", rss->time_ns[i], rss->bytes[i]);
    fprintf(f, "],\"rss_peak\":%" PRIu64 "}", rss->peak_bytes);
}

static void write_growth(FILE *f, analyze_t *a) {
    fputs(",\"growth\":[", f);
    size_t n = a->growth ? growth_n_sites(a->growth) : 0, shown = 0;
    char advice[1024];
    for (size_t i = 0; i < n && shown < GROWTH_TOP; i++) {
        const growth_site_t *g = growth_site(a->growth, i);
        size_t site = analyze_site_of(a, g->stack);
        if (site == SIZE_MAX)
            continue;
        growth_advice(g, sites_get(a->sites, site), advice, sizeof advice);
        fprintf(f,
                "%s[%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",",
                shown ? "," : "", site, g->n_chains, g->n_steps, g->n_realloc_steps, g->n_moves,
                g->bytes_copied, g->final_max, g->final_median);
        view_json_str(f, advice);
        putc(']', f);
        shown++;
    }
    putc(']', f);
}

static uint64_t untouched_of(const analyze_t *a, size_t i) {
    const replay_site_t *g = sites_figures(a->sites, i);
    return g->touch_bytes - g->touched_bytes;
}

static int cmp_untouched(const void *x, const void *y, void *ctx) {
    uint64_t a = untouched_of(ctx, *(const size_t *)x), b = untouched_of(ctx, *(const size_t *)y);
    return a != b ? (a > b ? -1 : 1) : (*(const size_t *)x < *(const size_t *)y ? -1 : 1);
}

// Reserved but untouched: the sites whose freed blocks were least written, by bytes never
// touched (the report's ranking, docs/trace-format.md#touch); null when the trace was recorded
// without the measure ("not measured").
static void write_untouched(FILE *f, analyze_t *a) {
    if (!(reader_header(a->r)->flags & HPT_FILE_TOUCH)) {
        fputs(",\"untouched\":null", f);
        return;
    }
    size_t n = sites_count(a->sites), k = 0;
    size_t *v = xcalloc(n + 1, sizeof *v);
    uint64_t blocks = 0, bytes = 0, touched = 0;
    for (size_t i = 0; i < n; i++) {
        const replay_site_t *g = sites_figures(a->sites, i);
        blocks += g->touch_blocks;
        bytes += g->touch_bytes;
        touched += g->touched_bytes;
        if (untouched_of(a, i) > 0)
            v[k++] = i;
    }
    qsort_r(v, k, sizeof *v, cmp_untouched, a);
    fprintf(f,
            ",\"untouched\":{\"blocks\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"touched\":%" PRIu64
            ",\"sites\":[",
            blocks, bytes, touched);
    // per site: index, blocks measured, their bytes, bytes touched, blocks measured by pages
    // (resident pages, or since issue #23 the pattern on resident pages)
    for (size_t r = 0; r < k && r < UNTOUCHED_TOP; r++) {
        const replay_site_t *g = sites_figures(a->sites, v[r]);
        fprintf(f, "%s[%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", r ? "," : "", v[r],
                g->touch_blocks, g->touch_bytes, g->touched_bytes,
                g->touch_resident_blocks + g->touch_pages_blocks);
    }
    fputs("]}", f);
    free(v);
}

int view_data_write(analyze_t *a, FILE *f, errmsg_t *err) {
    model_t m;
    model_build(&m, a);
    fputs("{\"version\":1,", f);
    write_summary(f, a);
    fputs(",\"kinds\":[\"user\",\"Rust std\",\"C++ std\",\"libc\",\"allocator\",\"unknown\"]", f);
    write_model(f, &m);
    write_sites(f, a, &m);
    write_cpu(f, a, &m);
    write_timeline(f, a);
    write_growth(f, a);
    write_untouched(f, a);
    fputs("}", f);
    model_free(&m);
    if (ferror(f)) {
        errmsg_set(err, "view: cannot write the report");
        return -1;
    }
    return 0;
}
