// SPDX-License-Identifier: MIT
// The report: totals, then the top sites by bytes allocated, by blocks, by bytes live at the
// global peak, by bytes still live at exit, growth hotspots (growth.h) and short-lived blocks
// (which extend the temporary ones); as text for a terminal or as one JSON object
// (docs/report-json.md). Only the sites that are shown are symbolized in
// text mode; the JSON lists every site with its full stack.
#include "out/out.h"

#include "core/sort.h"
#include "core/xalloc.h"
#include "model/growth.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef enum ranking {
    RANK_BYTES,
    RANK_BLOCKS,
    RANK_PEAK,
    RANK_END,
    RANK_TEMP,
    RANK_UNTOUCHED,
    N_RANKINGS,
} ranking_t;

static const struct {
    const char *json_key;
    const char *title;
} rankings[N_RANKINGS] = {
    [RANK_BYTES] = {"bytes", "bytes allocated"},
    [RANK_BLOCKS] = {"blocks", "blocks allocated"},
    [RANK_PEAK] = {"peak_bytes", "bytes live at the peak"},
    [RANK_END] = {"end_bytes", "bytes still live at exit"},
    [RANK_TEMP] = {"temporary_blocks", "temporary blocks"},
    [RANK_UNTOUCHED] = {"untouched_bytes", "bytes reserved but never touched"},
};

typedef struct summary {
    uint64_t bytes, blocks, peak_bytes, peak_blocks, end_bytes, end_blocks;
    uint64_t suppressed_bytes, suppressed_blocks; // live at exit in sites --suppress matched
    uint64_t temp_blocks, temp_bytes;
    uint64_t touch_blocks, touch_bytes, touched_bytes, touch_resident_blocks, touch_sampled_blocks;
    const bool *suppressed; // out_report_opts_t.suppressed: what the figures left out; NULL: none
    uint64_t touch_pages_blocks;
} summary_t;

static uint64_t metric(const replay_site_t *g, ranking_t k) {
    switch (k) {
    case RANK_BYTES:
        return g->bytes;
    case RANK_BLOCKS:
        return g->blocks;
    case RANK_PEAK:
        return g->peak_bytes;
    case RANK_END:
        return g->end_bytes;
    case RANK_TEMP:
        return g->temp_blocks;
    case RANK_UNTOUCHED:
        return g->touch_bytes - g->touched_bytes;
    default:
        return 0;
    }
}

typedef struct sort_ctx {
    sites_t *sites;
    ranking_t k;
} sort_ctx_t;

static sort_ctx_t sort_by; // qsort has no context argument in C11
// Whether --suppress matched site i (suppressed: out_report_opts_t.suppressed, NULL: none): the
// leak ranking and its total leave it out.
static bool is_suppressed(const bool *suppressed, size_t i) { return suppressed && suppressed[i]; }

static int cmp_sites(const void *a, const void *b) {
    const replay_site_t *x = sites_figures(sort_by.sites, *(const size_t *)a);
    const replay_site_t *y = sites_figures(sort_by.sites, *(const size_t *)b);
    uint64_t mx = metric(x, sort_by.k), my = metric(y, sort_by.k);
    if (mx != my)
        return mx > my ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

// Site indexes best first by figure k, in *n; only those where it is non-zero (and, for the
// leaks, not suppressed) unless all.
static size_t *ranked_sites(sites_t *s, ranking_t k, bool all, const bool *suppressed,
                            size_t *n) {
    size_t total = sites_count(s), kept = 0;
    size_t *v = xcalloc(total ? total : 1, sizeof *v);
    for (size_t i = 0; i < total; i++)
        if (all ||
            (metric(sites_figures(s, i), k) > 0 && !(k == RANK_END && is_suppressed(suppressed, i))))
            v[kept++] = i;
    sort_by = (sort_ctx_t){s, k};
    sort_items(v, kept, sizeof *v, cmp_sites);
    *n = kept;
    return v;
}

static size_t *ranked(sites_t *s, ranking_t k, const bool *suppressed, size_t *n) {
    return ranked_sites(s, k, false, suppressed, n);
}

static summary_t summarize(sites_t *s, const bool *suppressed) {
    summary_t m = {.suppressed = suppressed};
    for (size_t i = 0; i < sites_count(s); i++) {
        const replay_site_t *g = sites_figures(s, i);
        m.bytes += g->bytes;
        m.blocks += g->blocks;
        m.peak_bytes += g->peak_bytes;
        m.peak_blocks += g->peak_blocks;
        if (is_suppressed(suppressed, i)) {
            m.suppressed_bytes += g->end_bytes;
            m.suppressed_blocks += g->end_blocks;
        } else {
            m.end_bytes += g->end_bytes;
            m.end_blocks += g->end_blocks;
        }
        m.temp_blocks += g->temp_blocks;
        m.temp_bytes += g->temp_bytes;
        m.touch_blocks += g->touch_blocks;
        m.touch_bytes += g->touch_bytes;
        m.touched_bytes += g->touched_bytes;
        m.touch_resident_blocks += g->touch_resident_blocks;
        m.touch_sampled_blocks += g->touch_sampled_blocks;
        m.touch_pages_blocks += g->touch_pages_blocks;
    }
    return m;
}

static const char *status_name(symbolize_module_status_t st) {
    switch (st) {
    case SYMBOLIZE_MODULE_OK:
        return "ok";
    case SYMBOLIZE_MODULE_NO_DEBUG:
        return "no_debug_info";
    case SYMBOLIZE_MODULE_MISSING:
        return "missing";
    case SYMBOLIZE_MODULE_CHANGED:
        return "changed";
    default:
        return "unused";
    }
}

// ---- text ----

#define FN_CAP 4096

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

// Names and paths come from the trace and the program's symbols: each goes through fmt_safe_text
// (docs/design.md, "Text outputs and terminal escapes").
static void print_frame_line(FILE *f, const char *lead, const symbolize_frame_t *fr) {
    char fn[FN_CAP], loc[FN_CAP], s1[FN_CAP], s2[FN_CAP];
    const char *name = sites_frame_function(fr, fn, sizeof fn);
    sites_frame_location(fr, loc, sizeof loc);
    if (strcmp(name, loc) == 0)
        fprintf(f, "%s%s\n", lead, fmt_safe_text(name, s1, sizeof s1));
    else
        fprintf(f, "%s%s  %s\n", lead, fmt_safe_text(name, s1, sizeof s1),
                fmt_safe_text(loc, s2, sizeof s2));
}

// The site's naming frame; the library function it called, if any (what distinguishes two
// sites on one line); then up to two callers in the user's code, with or without a source line
// (a stripped program's sites then differ by their callers' module+offset where their stacks
// differ).
static void print_site(FILE *f, const site_t *s) {
    if (s->n_frames == 0) {
        fprintf(f, "       [unknown stack: unwinding failed or the stack is not in the trace]\n");
        return;
    }
    print_frame_line(f, "       ", s->frames[s->name_frame]);
    if (s->name_frame > 0) {
        char fn[FN_CAP], safe[FN_CAP];
        fprintf(f, "         calls %s\n",
                fmt_safe_text(sites_frame_function(s->frames[s->name_frame - 1], fn, sizeof fn),
                              safe, sizeof safe));
    }
    size_t shown = 0;
    for (size_t i = s->name_frame + 1; i < s->n_frames && shown < 2; i++) {
        if (s->kinds[i] != SITES_FRAME_USER)
            continue;
        print_frame_line(f, "         from ", s->frames[i]);
        shown++;
    }
}

// Which measures a site's bytes-touched figure comes from (docs/trace-format.md#touch), into buf.
static const char *touch_method(const replay_site_t *g, char buf[96]) {
    uint64_t exact = g->touch_blocks - g->touch_resident_blocks - g->touch_sampled_blocks -
                     g->touch_pages_blocks;
    const char *names[] = {"pattern", "sampled pattern", "pattern on resident pages",
                           "resident pages"};
    const uint64_t n[] = {exact, g->touch_sampled_blocks, g->touch_pages_blocks,
                          g->touch_resident_blocks};
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof n / sizeof *n; i++)
        if (n[i])
            len += (size_t)snprintf(buf + len, 96 - len, "%s%s", len ? " + " : "", names[i]);
    return buf;
}

static void print_ranking(FILE *f, analyze_t *a, ranking_t k, const summary_t *m, size_t top) {
    size_t n = 0;
    size_t *v = ranked(a->sites, k, m->suppressed, &n);
    char b1[32], b2[32], b3[32], b4[32], b5[32], p1[16], meth[96];
    if (k == RANK_UNTOUCHED) {
        fprintf(f, "\nReserved but untouched");
        if (!(reader_header(a->r)->flags & HPT_FILE_TOUCH))
            fprintf(f, " (not measured: the trace was recorded with HEAPPROF_TOUCH=0)\n");
        else
            fprintf(f, " (all: %s of %s in %s measured blocks never touched; blocks live at "
                       "exit are measured then)\n",
                    fmt_bytes(m->touch_bytes - m->touched_bytes, b1), fmt_bytes(m->touch_bytes, b2),
                    fmt_grouped(m->touch_blocks, b3));
    } else {
        fprintf(f, "\nTop sites by %s", rankings[k].title);
    }
    switch (k) {
    case RANK_UNTOUCHED:
        break;
    case RANK_BYTES:
        fprintf(f, " (all: %s in %s blocks)\n", fmt_bytes(m->bytes, b1),
                fmt_grouped(m->blocks, b2));
        break;
    case RANK_BLOCKS:
        fprintf(f, " (all: %s blocks)\n", fmt_grouped(m->blocks, b1));
        break;
    case RANK_PEAK:
        fprintf(f, " (all: %s in %s blocks)\n", fmt_bytes(m->peak_bytes, b1),
                fmt_grouped(m->peak_blocks, b2));
        break;
    case RANK_END:
        fprintf(f, " (all: %s in %s blocks", fmt_bytes(m->end_bytes, b1),
                fmt_grouped(m->end_blocks, b2));
        if (m->suppressed)
            fprintf(f, "; %s in %s blocks more are known leaks, suppressed", fmt_bytes(m->suppressed_bytes, b3),
                    fmt_grouped(m->suppressed_blocks, b4));
        fprintf(f, ")\n");
        break;
    default:
        fprintf(f, " (all: %s of %s blocks were freed before their thread's next allocation)\n",
                fmt_grouped(m->temp_blocks, b1), fmt_grouped(m->blocks, b2));
        break;
    }
    if (n == 0)
        fprintf(f, "  (none)\n");
    for (size_t r = 0; r < n && r < top; r++) {
        const site_t *s = sites_get(a->sites, v[r]);
        const replay_site_t *g = &s->fig;
        uint64_t avg = g->blocks ? g->bytes / g->blocks : 0;
        switch (k) {
        case RANK_BYTES:
            fprintf(f, "  %2zu. %10s %6s  in %s block%s, avg %s\n", r + 1,
                    fmt_bytes(g->bytes, b1), fmt_percent(g->bytes, m->bytes, p1),
                    fmt_grouped(g->blocks, b2), plural(g->blocks), fmt_bytes(avg, b3));
            break;
        case RANK_BLOCKS:
            fprintf(f, "  %2zu. %10s %6s  block%s, %s, avg %s\n", r + 1, fmt_grouped(g->blocks, b1),
                    fmt_percent(g->blocks, m->blocks, p1), plural(g->blocks), fmt_bytes(g->bytes, b2),
                    fmt_bytes(avg, b3));
            break;
        case RANK_PEAK:
            fprintf(f, "  %2zu. %10s %6s  in %s block%s at the peak\n", r + 1,
                    fmt_bytes(g->peak_bytes, b1), fmt_percent(g->peak_bytes, m->peak_bytes, p1),
                    fmt_grouped(g->peak_blocks, b2), plural(g->peak_blocks));
            break;
        case RANK_END:
            fprintf(f, "  %2zu. %10s %6s  in %s block%s never freed\n", r + 1,
                    fmt_bytes(g->end_bytes, b1), fmt_percent(g->end_bytes, m->end_bytes, p1),
                    fmt_grouped(g->end_blocks, b2), plural(g->end_blocks));
            break;
        case RANK_UNTOUCHED:
            fprintf(f, "  %2zu. %10s %6s  untouched of %s in %s block%s (by %s); avg %s touched of %s\n",
                    r + 1, fmt_bytes(g->touch_bytes - g->touched_bytes, b1),
                    fmt_percent(g->touch_bytes - g->touched_bytes, g->touch_bytes, p1),
                    fmt_bytes(g->touch_bytes, b2), fmt_grouped(g->touch_blocks, b3),
                    plural(g->touch_blocks), touch_method(g, meth),
                    fmt_bytes(g->touched_bytes / g->touch_blocks, b4),
                    fmt_bytes(g->touch_bytes / g->touch_blocks, b5));
            break;
        default:
            fprintf(f, "  %2zu. %10s %6s  of its %s block%s were temporary (%s)\n", r + 1,
                    fmt_grouped(g->temp_blocks, b1), fmt_percent(g->temp_blocks, g->blocks, p1),
                    fmt_grouped(g->blocks, b2), plural(g->blocks), fmt_bytes(g->temp_bytes, b3));
            break;
        }
        print_site(f, s);
    }
    if (n > top)
        fprintf(f, "  ... %zu more site%s\n", n - top, n - top == 1 ? "" : "s");
    free(v);
}

// ---- growth and short-lived (a->growth) ----

typedef struct short_row {
    size_t site;
    growth_short_t sh;
} short_row_t;

static int cmp_short(const void *a, const void *b) {
    const short_row_t *x = a, *y = b;
    if (x->sh.blocks != y->sh.blocks)
        return x->sh.blocks > y->sh.blocks ? -1 : 1;
    if (x->sh.bytes != y->sh.bytes)
        return x->sh.bytes > y->sh.bytes ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

// Sites with short-lived blocks, most first, in *n.
static short_row_t *short_rows(analyze_t *a, size_t *n) {
    size_t total = sites_count(a->sites), kept = 0;
    short_row_t *v = xcalloc(total ? total : 1, sizeof *v);
    for (size_t i = 0; i < total; i++) {
        growth_short_t sh = growth_short_of(a->growth, sites_figures(a->sites, i)->stack);
        if (sh.blocks)
            v[kept++] = (short_row_t){i, sh};
    }
    sort_items(v, kept, sizeof *v, cmp_short);
    *n = kept;
    return v;
}

static growth_short_t short_total(analyze_t *a) {
    growth_short_t t = {0, 0};
    for (size_t i = 0; i < sites_count(a->sites); i++) {
        growth_short_t sh = growth_short_of(a->growth, sites_figures(a->sites, i)->stack);
        t.blocks += sh.blocks;
        t.bytes += sh.bytes;
    }
    return t;
}

// "within 1.0 ms or " (nothing with --short-ms 0), to go before "before their thread's ..."
static const char *short_rule(analyze_t *a, char buf[64]) {
    char d[32];
    buf[0] = '\0';
    if (growth_short_ns(a->growth))
        snprintf(buf, 64, "within %s or ", fmt_duration((double)growth_short_ns(a->growth), d));
    return buf;
}

static void print_site(FILE *f, const site_t *s);

// Index of pc in the raw stack (innermost first), or n.
static size_t raw_index(const uint64_t *frames, uint32_t n, uint64_t pc) {
    size_t i = 0;
    while (i < n && frames[i] != pc)
        i++;
    return i;
}

// CPU samples spent growing site s: samples taken in the allocator (malloc, realloc, the copy,
// Rust's RawVec and hashbrown's rehash: cpu.h's in_allocator) on behalf of the very call that
// names the site, i.e. whose stack from its first user frame outward is the site's stack from its
// naming frame outward, return address for return address. So a realloc step counts although
// its stack below the user's call differs from the first allocation's. This includes the
// chain's first allocation, and leaves out samples in heapprof's own shim.
static uint64_t growth_cpu_samples(analyze_t *a, const site_t *s) {
    if (cpu_total(a->cpu) == 0 || s->n_frames == 0)
        return 0;
    uint32_t nf;
    const uint64_t *f = reader_stack(a->r, s->fig.stack, &nf);
    if (!f)
        return 0;
    size_t kf = raw_index(f, nf, s->frames[s->name_frame]->pc);
    if (kf == nf)
        return 0;
    size_t n;
    const cpu_stack_t *cs = cpu_stacks(a->cpu, &n);
    uint64_t samples = 0;
    for (size_t i = 0; i < n; i++) {
        // heapprof's own recording is not the program's growth cost
        if (!cs[i].in_allocator || cs[i].in_shim || cs[i].user_frame >= cs[i].n_frames)
            continue;
        uint32_t ns;
        const uint64_t *sf = reader_stack(a->r, cs[i].id, &ns);
        if (!sf)
            continue;
        size_t ks = raw_index(sf, ns, cs[i].frames[cs[i].user_frame]->pc);
        if (ks < ns && ns - ks == nf - kf &&
            memcmp(sf + ks, f + kf, (nf - kf) * sizeof *f) == 0)
            samples += cs[i].count;
    }
    return samples;
}

static void print_growth(FILE *f, analyze_t *a, size_t top) {
    growth_t *g = a->growth;
    size_t n = growth_n_sites(g);
    uint64_t steps = 0, copied = 0, chains = 0;
    for (size_t i = 0; i < n; i++) {
        steps += growth_site(g, i)->n_steps;
        copied += growth_site(g, i)->bytes_copied;
        chains += growth_site(g, i)->n_chains;
    }
    char b1[32], b2[32], b3[32], b4[32], b5[32], p1[16], adv[1024];
    fprintf(f, "\nGrowth hotspots (all: %s copied in %s growth steps of %s chains)\n",
            fmt_bytes(copied, b1), fmt_grouped(steps, b2), fmt_grouped(chains, b3));
    if (n == 0)
        fprintf(f, "  (none)\n");
    for (size_t r = 0; r < n && r < top; r++) {
        const growth_site_t *gs = growth_site(g, r);
        size_t si = analyze_site_of(a, gs->stack);
        const site_t *s = si == SIZE_MAX ? NULL : sites_get(a->sites, si);
        fprintf(f, "  %2zu. %10s copied  %s step%s in %s chain%s, final size max %s, median %s\n",
                r + 1, fmt_bytes(gs->bytes_copied, b1), fmt_grouped(gs->n_steps, b2),
                plural(gs->n_steps), fmt_grouped(gs->n_chains, b3), plural(gs->n_chains),
                fmt_bytes(gs->final_max, b4), fmt_bytes(gs->final_median, b5));
        fprintf(f, "       %s\n", growth_advice(gs, s, adv, sizeof adv));
        uint64_t cpu = s ? growth_cpu_samples(a, s) : 0;
        if (cpu)
            fprintf(f, "       %s CPU sample%s (%s of all) in the allocator for this call\n",
                    fmt_grouped(cpu, b1), plural(cpu), fmt_percent(cpu, cpu_total(a->cpu), p1));
        if (s)
            print_site(f, s);
    }
    if (n > top)
        fprintf(f, "  ... %zu more site%s\n", n - top, n - top == 1 ? "" : "s");
}

static void print_short(FILE *f, analyze_t *a, const summary_t *m, size_t top) {
    size_t n = 0;
    short_row_t *v = short_rows(a, &n);
    growth_short_t t = short_total(a);
    char b1[32], b2[32], b3[32], p1[16], rule[64];
    fprintf(f, "\nTop sites by short-lived blocks (all: %s of %s blocks were freed %sbefore "
               "their thread's next allocation; %s of them temporary)\n",
            fmt_grouped(t.blocks, b1), fmt_grouped(m->blocks, b2), short_rule(a, rule),
            fmt_grouped(m->temp_blocks, b3));
    if (n == 0)
        fprintf(f, "  (none)\n");
    for (size_t r = 0; r < n && r < top; r++) {
        const site_t *s = sites_get(a->sites, v[r].site);
        const replay_site_t *g = &s->fig;
        fprintf(f, "  %2zu. %10s %6s  of its %s block%s were short-lived (%s), %s temporary\n",
                r + 1, fmt_grouped(v[r].sh.blocks, b1), fmt_percent(v[r].sh.blocks, g->blocks, p1),
                fmt_grouped(g->blocks, b2), plural(g->blocks), fmt_bytes(v[r].sh.bytes, b3),
                fmt_grouped(g->temp_blocks, rule));
        print_site(f, s);
    }
    if (n > top)
        fprintf(f, "  ... %zu more site%s\n", n - top, n - top == 1 ? "" : "s");
    free(v);
}

// The smallest and largest size of a replay_size_bucket.
static void bucket_range(unsigned k, uint64_t *lo, uint64_t *hi) {
    *lo = replay_size_bucket_min(k);
    *hi = k == 0 ? 0 : k == 64 ? UINT64_MAX : 2 * *lo - 1;
}

// Counted allocations by requested size, in power-of-two buckets, with a bar for the blocks.
static void write_sizes_text(const replay_totals_t *t, FILE *f) {
    uint64_t most = 0;
    for (unsigned k = 0; k < REPLAY_SIZE_BUCKETS; k++)
        most = t->size_blocks[k] > most ? t->size_blocks[k] : most;
    fprintf(f, "\nAllocation sizes (requested bytes, a realloc counting its new size; all: %" PRIu64
               " blocks)\n",
            t->n_blocks);
    fprintf(f, "  %24s %12s %6s %12s %6s\n", "size", "blocks", "", "bytes", "");
    if (!most)
        fprintf(f, "  (none)\n");
    for (unsigned k = 0; k < REPLAY_SIZE_BUCKETS; k++) {
        if (!t->size_blocks[k])
            continue;
        uint64_t lo, hi;
        bucket_range(k, &lo, &hi);
        char range[48], b1[32], b2[32], p1[16], p2[16], l1[32], h1[32], bar[41];
        if (k <= 1) // 0 and 1 byte: one size each
            snprintf(range, sizeof range, "%s", fmt_bytes(lo, l1));
        else if (k == 64)
            snprintf(range, sizeof range, "[%s, 16.0 EiB)", fmt_bytes(lo, l1));
        else // half-open: the upper bound is the next bucket's first size
            snprintf(range, sizeof range, "[%s, %s)", fmt_bytes(lo, l1), fmt_bytes(hi + 1, h1));
        size_t w = (size_t)((t->size_blocks[k] * 40 + most - 1) / most);
        memset(bar, '#', w);
        bar[w] = '\0';
        fprintf(f, "  %24s %12s %6s %12s %6s  %s\n", range, fmt_grouped(t->size_blocks[k], b1),
                fmt_percent(t->size_blocks[k], t->n_blocks, p1), fmt_bytes(t->size_bytes[k], b2),
                fmt_percent(t->size_bytes[k], t->n_bytes, p2), bar);
    }
}

static json_t *sizes_json(const replay_totals_t *t) {
    json_t *arr = json_array();
    for (unsigned k = 0; k < REPLAY_SIZE_BUCKETS; k++) {
        if (!t->size_blocks[k])
            continue;
        uint64_t lo, hi;
        bucket_range(k, &lo, &hi);
        json_t *b = json_object();
        json_object_set_new(b, "min", fmt_json_int(lo));
        json_object_set_new(b, "max", fmt_json_int(hi));
        json_object_set_new(b, "blocks", fmt_json_int(t->size_blocks[k]));
        json_object_set_new(b, "bytes", fmt_json_int(t->size_bytes[k]));
        json_array_append_new(arr, b);
    }
    return arr;
}

static void write_text(analyze_t *a, const out_report_opts_t *o, FILE *f) {
    const reader_t *r = a->r;
    const replay_totals_t *t = replay_totals_shown(a->rp);
    summary_t m = summarize(a->sites, o->suppressed);
    char b1[32], b2[32], b3[32], b4[32], p1[16];
    const char *exe = reader_exe(r);
    char safe[FN_CAP];
    fprintf(f, "heapprof report of %s\n", fmt_safe_text(a->path, safe, sizeof safe));
    fprintf(f, "program    %s (pid %u)\n",
            exe ? fmt_safe_text(exe, safe, sizeof safe) : "(unknown)", reader_header(r)->pid);
    out_stats_sampled_line(f, r);
    if (o->filter_function)
        fprintf(f, "filter     only allocations with %s on their stack (--filter)\n",
                fmt_safe_text(o->filter_function, safe, sizeof safe));
    fprintf(f, "duration   %s, %" PRIu64 " thread%s, %s events\n",
            fmt_duration((double)t->last_time_ns, b1), t->n_threads,
            t->n_threads == 1 ? "" : "s", fmt_grouped(t->n_events, b2));
    fprintf(f, "allocated  %s (%s bytes) in %s blocks, from %s sites\n", fmt_bytes(t->n_bytes, b1),
            fmt_grouped(t->n_bytes, b2), fmt_grouped(t->n_blocks, b3),
            fmt_grouped(sites_count(a->sites), b4));
    fprintf(f, "freed      %s blocks\n", fmt_grouped(t->n_frees, b1));
    fprintf(f, "peak       %s (%s bytes) in %s blocks at %s\n", fmt_bytes(t->peak_bytes, b1),
            fmt_grouped(t->peak_bytes, b2), fmt_grouped(t->peak_blocks, b3),
            fmt_duration((double)t->peak_time_ns, b4));
    fprintf(f, "at exit    %s (%s bytes) in %s block%s still live\n",
            fmt_bytes(t->live_bytes, b1), fmt_grouped(t->live_bytes, b2),
            fmt_grouped(t->live_blocks, b3), plural(t->live_blocks));
    fprintf(f, "temporary  %s blocks (%s of all) freed before their thread's next allocation\n",
            fmt_grouped(m.temp_blocks, b1), fmt_percent(m.temp_blocks, m.blocks, p1));
    if (reader_header(r)->flags & HPT_FILE_TOUCH) {
        fprintf(f, "touched    %s of the %s in %s measured blocks (%s)", fmt_bytes(m.touched_bytes, b1),
                fmt_bytes(m.touch_bytes, b2), fmt_grouped(m.touch_blocks, b3),
                fmt_percent(m.touched_bytes, m.touch_bytes, p1));
        out_touch_unmeasured(f, t->n_frees, m.touch_blocks);
        fputc('\n', f);
    }
    if (a->growth) {
        growth_short_t st = short_total(a);
        char rule[64];
        fprintf(f, "short-lived %s blocks (%s of all) freed %sbefore their thread's next "
                   "allocation\n",
                fmt_grouped(st.blocks, b1), fmt_percent(st.blocks, m.blocks, p1),
                short_rule(a, rule));
    }

    out_allocators_text(f, r);
    const reader_damage_t *d = reader_damage(r);
    if (d->chunks_damaged || d->seq_gaps || d->truncated)
        fprintf(f, "damage     %s damaged chunk%s skipped, %s missing%s: figures cover what "
                   "could be read\n",
                fmt_grouped(d->chunks_damaged, b1), d->chunks_damaged == 1 ? "" : "s",
                fmt_grouped(d->seq_gaps, b2), d->truncated ? ", the file is truncated" : "");
    if (!d->trailer)
        fprintf(f, "unfinished no trailer: the program did not exit cleanly; \"at exit\" is the "
                   "state at its last recorded event\n");
    const reader_trailer_t *tr = reader_trailer(r);
    if (tr && tr->n_lost_events)
        fprintf(f, "lost       %s events heapprof could not record: figures are short by them\n",
                fmt_grouped(tr->n_lost_events, b1));
    if (tr && tr->n_waits)
        fprintf(f, "waited     %.1f ms: the program's threads waited %s times for heapprof to "
                   "write their full buffers\n",
                tr->wait_ns / 1e6, fmt_grouped(tr->n_waits, b1));
    out_stats_unknown_frees(f, r, t, "at exit");
    if (t->n_sized_mismatches)
        fprintf(f,
                "sized      %s of %s sized frees named a size other than their block's (the "
                "first: a %s-byte block freed as %s bytes, at %.3f s): a Rust Layout or sized "
                "delete that does not match the allocation\n",
                fmt_grouped(t->n_sized_mismatches, b1), fmt_grouped(t->n_sized_frees, b2),
                fmt_grouped(t->mismatch_block_size, b3), fmt_grouped(t->mismatch_freed_size, b4),
                t->mismatch_time_ns / 1e9);

    // resolve what the rankings will show, with progress, before printing them
    for (int k = 0; k < N_RANKINGS; k++) {
        size_t n = 0;
        size_t *v = ranked(a->sites, (ranking_t)k, m.suppressed, &n);
        analyze_resolve(a, v, n < o->top ? n : o->top);
        free(v);
    }
    size_t n_mods;
    const symbolize_module_t *mods = symbolize_modules(a->sym, &n_mods);
    for (size_t i = 0; i < n_mods; i++) {
        if (mods[i].status == SYMBOLIZE_MODULE_MISSING && mods[i].n_addresses)
            fprintf(f, "symbols    %s: file not found or unreadable; its frames show as "
                       "module+offset\n",
                    fmt_safe_text(mods[i].path, safe, sizeof safe));
        else if (mods[i].status == SYMBOLIZE_MODULE_CHANGED && mods[i].n_addresses)
            fprintf(f, "symbols    %s: rebuilt since the trace was recorded (build id differs); "
                       "its frames show as module+offset\n",
                    fmt_safe_text(mods[i].path, safe, sizeof safe));
    }
    // with growth, the short-lived ranking extends (and stands in for) the temporary one
    for (int k = 0; k < N_RANKINGS; k++)
        if (!(a->growth && k == RANK_TEMP) && k != RANK_UNTOUCHED)
            print_ranking(f, a, (ranking_t)k, &m, o->top);
    if (a->growth)
        print_growth(f, a, o->top);
    print_ranking(f, a, RANK_UNTOUCHED, &m, o->top);
    if (a->growth)
        print_short(f, a, &m, o->top);
    if (o->sizes)
        write_sizes_text(replay_totals(a->rp), f);
    out_report_cpu_text(a, o->top, f);
    // after every frame shown was looked up (the CPU section's too)
    size_t n_outside, n_named;
    const char *jit_map = symbolize_jit(a->sym, &n_outside, &n_named);
    if (n_outside && jit_map)
        fprintf(f, "symbols    JIT code: %s of %s addresses outside every module named from %s\n",
                fmt_grouped(n_named, b1), fmt_grouped(n_outside, b2),
                fmt_safe_text(jit_map, safe, sizeof safe));
    else if (n_outside)
        fprintf(f, "symbols    %s addresses lie outside every module (JIT code?): a perf map names "
                   "them (node --perf-basic-prof, the JVM's perf-map-agent: /tmp/perf-PID.map, "
                   "or HEAPPROF_PERF_MAP=FILE)\n",
                fmt_grouped(n_outside, b1));
}

// ---- JSON ----

static json_t *frame_json(const symbolize_frame_t *fr, uint8_t kind) {
    static const char *const kinds[] = {"user", "library", "allocator"};
    char fn[FN_CAP], loc[FN_CAP], addr[24];
    json_t *j = json_object();
    snprintf(addr, sizeof addr, "0x%" PRIx64, fr->pc);
    json_object_set_new(j, "address", json_string(addr));
    json_object_set_new(j, "function", fmt_json_str(sites_frame_function(fr, fn, sizeof fn)));
    json_object_set_new(j, "location", fmt_json_str(sites_frame_location(fr, loc, sizeof loc)));
    json_object_set_new(j, "file", fmt_json_str(fr->file));
    json_object_set_new(j, "line", fr->line ? json_integer(fr->line) : json_null());
    json_object_set_new(j, "module", fmt_json_str(fr->module));
    json_object_set_new(j, "module_offset", fr->module ? fmt_json_int(fr->module_offset)
                                                       : json_null());
    json_object_set_new(j, "inlined", json_boolean(fr->inlined));
    json_object_set_new(j, "kind", json_string(kinds[kind < 3 ? kind : 0]));
    return j;
}

static json_t *site_json(analyze_t *a, const site_t *s) {
    const replay_site_t *g = &s->fig;
    json_t *j = json_object();
    char fn[FN_CAP], loc[FN_CAP];
    const symbolize_frame_t *nf = s->n_frames ? s->frames[s->name_frame] : NULL;
    json_object_set_new(j, "function",
                        nf ? fmt_json_str(sites_frame_function(nf, fn, sizeof fn))
                           : json_string("[unknown stack]"));
    json_object_set_new(j, "location",
                        nf ? fmt_json_str(sites_frame_location(nf, loc, sizeof loc)) : json_null());
    json_object_set_new(j, "file", fmt_json_str(nf ? nf->file : NULL));
    json_object_set_new(j, "line", nf && nf->line ? json_integer(nf->line) : json_null());
    json_object_set_new(j, "stack_id", fmt_json_int(g->stack));
    json_t *st = json_array();
    for (size_t i = 0; i < s->n_frames; i++)
        json_array_append_new(st, frame_json(s->frames[i], s->kinds[i]));
    json_object_set_new(j, "stack", st);
    json_object_set_new(j, "name_frame", s->n_frames ? json_integer((json_int_t)s->name_frame)
                                                     : json_null());
    json_object_set_new(j, "blocks", fmt_json_int(g->blocks));
    json_object_set_new(j, "bytes", fmt_json_int(g->bytes));
    json_object_set_new(j, "avg_size", fmt_json_int(g->blocks ? g->bytes / g->blocks : 0));
    json_object_set_new(j, "avg_lifetime_ns",
                        fmt_json_int(g->blocks ? g->lifetime_ns / g->blocks : 0));
    json_object_set_new(j, "lifetime_ns", fmt_json_int(g->lifetime_ns));
    json_object_set_new(j, "max_live_bytes", fmt_json_int(g->max_bytes));
    json_object_set_new(j, "max_live_blocks", fmt_json_int(g->max_blocks));
    json_object_set_new(j, "peak_bytes", fmt_json_int(g->peak_bytes));
    json_object_set_new(j, "peak_blocks", fmt_json_int(g->peak_blocks));
    json_object_set_new(j, "end_bytes", fmt_json_int(g->end_bytes));
    json_object_set_new(j, "end_blocks", fmt_json_int(g->end_blocks));
    json_object_set_new(j, "temporary_blocks", fmt_json_int(g->temp_blocks));
    json_object_set_new(j, "temporary_bytes", fmt_json_int(g->temp_bytes));
    json_object_set_new(j, "touched_bytes", fmt_json_int(g->touched_bytes));
    json_object_set_new(j, "touch_measured_blocks", fmt_json_int(g->touch_blocks));
    json_object_set_new(j, "touch_measured_bytes", fmt_json_int(g->touch_bytes));
    char meth[96];
    json_object_set_new(j, "touch_method",
                        g->touch_blocks ? json_string(touch_method(g, meth)) : json_null());
    if (a->growth) {
        growth_short_t sh = growth_short_of(a->growth, g->stack);
        json_object_set_new(j, "short_lived_blocks", fmt_json_int(sh.blocks));
        json_object_set_new(j, "short_lived_bytes", fmt_json_int(sh.bytes));
    }
    return j;
}

// "function" and "location" of a naming frame nf (NULL: unknown stack), as in site_json
static void name_json(json_t *j, const symbolize_frame_t *nf) {
    char fn[FN_CAP], loc[FN_CAP];
    json_object_set_new(j, "function",
                        nf ? fmt_json_str(sites_frame_function(nf, fn, sizeof fn))
                           : json_string("[unknown stack]"));
    json_object_set_new(j, "location",
                        nf ? fmt_json_str(sites_frame_location(nf, loc, sizeof loc)) : json_null());
}

// growth[] and short_lived[] (docs/report-json.md); pos maps a site index to its place in sites[]
static void growth_json(analyze_t *a, json_t *root, const size_t *pos) {
    growth_t *g = a->growth;
    json_t *arr = json_array();
    char buf[1024];
    for (size_t i = 0; i < growth_n_sites(g); i++) {
        const growth_site_t *gs = growth_site(g, i);
        size_t si = analyze_site_of(a, gs->stack);
        const site_t *s = si == SIZE_MAX ? NULL : sites_get(a->sites, si);
        const symbolize_frame_t *nf = s && s->n_frames ? s->frames[s->name_frame] : NULL;
        json_t *j = json_object();
        json_object_set_new(j, "site",
                            si == SIZE_MAX ? json_null() : json_integer((json_int_t)pos[si]));
        name_json(j, nf);
        json_object_set_new(j, "stack_id", fmt_json_int(gs->stack));
        json_object_set_new(j, "chains", fmt_json_int(gs->n_chains));
        json_object_set_new(j, "steps", fmt_json_int(gs->n_steps));
        json_object_set_new(j, "realloc_steps", fmt_json_int(gs->n_realloc_steps));
        json_object_set_new(j, "copy_steps", fmt_json_int(gs->n_steps - gs->n_realloc_steps));
        json_object_set_new(j, "moves", fmt_json_int(gs->n_moves));
        json_object_set_new(j, "bytes_copied", fmt_json_int(gs->bytes_copied));
        json_t *fs = json_object();
        json_object_set_new(fs, "max", fmt_json_int(gs->final_max));
        json_object_set_new(fs, "median", fmt_json_int(gs->final_median));
        // the smallest size at least cover_percent% of the chains ended at or below
        json_object_set_new(fs, "cover", fmt_json_int(gs->final_cover));
        json_object_set_new(fs, "cover_percent", fmt_json_int(GROWTH_COVER_PCT));
        json_object_set_new(j, "advised_size", fmt_json_int(growth_advised_size(gs)));
        json_object_set_new(j, "final_size", fs);
        json_object_set_new(j, "first_size_min", fmt_json_int(gs->first_min));
        json_object_set_new(j, "api", json_string(growth_api(gs, s)));
        json_object_set_new(j, "advice", fmt_json_str(growth_advice(gs, s, buf, sizeof buf)));
        json_object_set_new(j, "cpu_samples", fmt_json_int(s ? growth_cpu_samples(a, s) : 0));
        json_array_append_new(arr, j);
    }
    json_object_set_new(root, "growth", arr);

    size_t n = 0;
    short_row_t *v = short_rows(a, &n);
    json_t *sl = json_array();
    for (size_t i = 0; i < n; i++) {
        const site_t *s = sites_get(a->sites, v[i].site);
        const symbolize_frame_t *nf = s->n_frames ? s->frames[s->name_frame] : NULL;
        json_t *j = json_object();
        json_object_set_new(j, "site", json_integer((json_int_t)pos[v[i].site]));
        name_json(j, nf);
        json_object_set_new(j, "blocks", fmt_json_int(v[i].sh.blocks));
        json_object_set_new(j, "bytes", fmt_json_int(v[i].sh.bytes));
        json_object_set_new(j, "site_blocks", fmt_json_int(s->fig.blocks));
        json_object_set_new(j, "temporary_blocks", fmt_json_int(s->fig.temp_blocks));
        json_array_append_new(sl, j);
    }
    free(v);
    json_object_set_new(root, "short_lived", sl);
}

static int write_json(analyze_t *a, const out_report_opts_t *o, FILE *f, errmsg_t *err) {
    const replay_totals_t *t = replay_totals_shown(a->rp);
    summary_t m = summarize(a->sites, o->suppressed);
    json_t *root = json_object();
    json_object_set_new(root, "trace", fmt_json_str(a->path));
    json_t *totals = out_stats_json(a->r, t, NULL, NULL);
    json_object_set_new(totals, "sites", fmt_json_int(sites_count(a->sites)));
    json_object_set_new(totals, "temporary_blocks", fmt_json_int(m.temp_blocks));
    json_object_set_new(totals, "temporary_bytes", fmt_json_int(m.temp_bytes));
    if (a->growth) {
        growth_short_t st = short_total(a);
        json_object_set_new(totals, "short_lived_blocks", fmt_json_int(st.blocks));
        json_object_set_new(totals, "short_lived_bytes", fmt_json_int(st.bytes));
        json_object_set_new(totals, "short_lived_ns", fmt_json_int(growth_short_ns(a->growth)));
    }
    json_object_set_new(root, "totals", totals);

    // every site, by bytes allocated; "top" lists indexes into this array
    size_t n = 0;
    size_t *by_bytes = ranked_sites(a->sites, RANK_BYTES, true, NULL, &n);
    size_t *pos = xcalloc(sites_count(a->sites) + 1, sizeof *pos);
    analyze_resolve(a, by_bytes, n);
    json_t *sites = json_array();
    for (size_t i = 0; i < n; i++) {
        pos[by_bytes[i]] = i;
        json_t *sj = site_json(a, sites_get(a->sites, by_bytes[i]));
        if (is_suppressed(m.suppressed, by_bytes[i]))
            json_object_set_new(sj, "suppressed", json_true());
        json_array_append_new(sites, sj);
    }
    json_t *top = json_object();
    for (int k = 0; k < N_RANKINGS; k++) {
        size_t nk = 0;
        size_t *v = ranked(a->sites, (ranking_t)k, m.suppressed, &nk);
        json_t *arr = json_array();
        for (size_t i = 0; i < nk && i < o->top; i++)
            json_array_append_new(arr, json_integer((json_int_t)pos[v[i]]));
        json_object_set_new(top, rankings[k].json_key, arr);
        free(v);
    }
    if (a->growth) {
        size_t ns = 0;
        short_row_t *sv = short_rows(a, &ns);
        json_t *arr = json_array();
        for (size_t i = 0; i < ns && i < o->top; i++)
            json_array_append_new(arr, json_integer((json_int_t)pos[sv[i].site]));
        json_object_set_new(top, "short_lived_blocks", arr);
        free(sv);
    }
    free(by_bytes);

    json_t *sym = json_object();
    json_object_set_new(sym, "addresses", fmt_json_int(symbolize_n_addresses(a->sym)));
    json_t *mods = json_array();
    size_t n_mods;
    const symbolize_module_t *mv = symbolize_modules(a->sym, &n_mods);
    for (size_t i = 0; i < n_mods; i++) {
        json_t *jm = json_object();
        json_object_set_new(jm, "path", fmt_json_str(mv[i].path));
        json_object_set_new(jm, "status", json_string(status_name(mv[i].status)));
        json_object_set_new(jm, "addresses", fmt_json_int(mv[i].n_addresses));
        json_array_append_new(mods, jm);
    }
    json_object_set_new(sym, "modules", mods);
    json_object_set_new(root, "top", top);
    if (o->filter_function) // every figure counts only allocations with it on their stack
        json_object_set_new(root, "filter_function", fmt_json_str(o->filter_function));
    if (o->suppressed) {
        json_t *sup = json_object();
        json_object_set_new(sup, "file", fmt_json_str(o->suppress_path));
        json_object_set_new(sup, "rules", fmt_json_int(o->n_rules));
        json_object_set_new(sup, "end_bytes", fmt_json_int(m.suppressed_bytes));
        json_object_set_new(sup, "end_blocks", fmt_json_int(m.suppressed_blocks));
        json_object_set_new(root, "suppressions", sup);
    }
    json_object_set_new(root, "symbols", sym);
    json_object_set_new(root, "sites", sites);
    if (a->growth)
        growth_json(a, root, pos);
    json_object_set_new(root, "cpu", out_report_cpu_json(a, o->top));
    if (o->sizes)
        json_object_set_new(root, "sizes", sizes_json(replay_totals(a->rp)));
    free(pos);

    int rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (rc != 0 || fputc('\n', f) == EOF) {
        errmsg_set(err, "report: cannot write the JSON output");
        return -1;
    }
    return 0;
}

int out_report_write(analyze_t *a, const out_report_opts_t *o, FILE *f, errmsg_t *err) {
    if (o->json)
        return write_json(a, o, f, err);
    write_text(a, o, f);
    if (fflush(f) != 0 || ferror(f)) {
        errmsg_set(err, "report: cannot write the output");
        return -1;
    }
    return 0;
}
