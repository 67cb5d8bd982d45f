// SPDX-License-Identifier: MIT
// The check summary: figures per function out of the site table, taken as `report` takes them
// (totals from replay, temporary blocks summed over the sites as the report sums them), their
// minimum or median over runs, and the summary JSON (docs/check.md#summary-json). Never
// prints.
#include "analyze/summary.h"

#include "core/fmt.h"
#include "core/sort.h"
#include "core/xalloc.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    const char *meaning;
    bool bytes;
} metrics[SUMMARY_N_METRICS] = {
    [SUMMARY_PEAK] = {"peak", "bytes live at the global peak of heap bytes, DHAT's t-gmax", true},
    [SUMMARY_TOTAL] = {"total", "bytes allocated, a realloc counting its new size", true},
    [SUMMARY_BLOCKS] = {"blocks", "blocks allocated, a realloc counting as one", false},
    [SUMMARY_LEAKED] = {"leaked", "bytes still live at exit, DHAT's t-end", true},
    [SUMMARY_TEMPORARY] = {"temporary",
                           "blocks freed by their thread before it allocated anything else", false},
};

const char *summary_metric_name(summary_metric_t m) { return metrics[m].name; }
const char *summary_metric_meaning(summary_metric_t m) { return metrics[m].meaning; }
bool summary_metric_is_bytes(summary_metric_t m) { return metrics[m].bytes; }

int summary_metric_parse(const char *name, summary_metric_t *m) {
    for (int i = 0; i < SUMMARY_N_METRICS; i++)
        if (strcmp(name, metrics[i].name) == 0) {
            *m = (summary_metric_t)i;
            return 0;
        }
    return -1;
}

static void site_figures(const replay_site_t *g, uint64_t v[SUMMARY_N_METRICS]) {
    v[SUMMARY_PEAK] = g->peak_bytes;
    v[SUMMARY_TOTAL] = g->bytes;
    v[SUMMARY_BLOCKS] = g->blocks;
    v[SUMMARY_LEAKED] = g->end_bytes;
    v[SUMMARY_TEMPORARY] = g->temp_blocks;
}

static bool is_excluded(const char *fn, const char *const *exclude, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (fnmatch(exclude[i], fn, 0) == 0)
            return true;
    return false;
}

typedef struct named {
    char *function;
    size_t site;
} named_t;

static int cmp_named(const void *a, const void *b) {
    const named_t *x = a, *y = b;
    int c = strcmp(x->function, y->function);
    return c ? c : (x->site > y->site) - (x->site < y->site);
}

static int cmp_sites(const void *a, const void *b) {
    const summary_site_t *x = a, *y = b;
    if (x->v[SUMMARY_TOTAL] != y->v[SUMMARY_TOTAL])
        return x->v[SUMMARY_TOTAL] > y->v[SUMMARY_TOTAL] ? -1 : 1;
    return strcmp(x->function, y->function);
}

static const summary_site_t *sort_base; // qsort has no context argument in C11

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(sort_base[*(const size_t *)a].function, sort_base[*(const size_t *)b].function);
}

// Puts the sites in their stable order and indexes them by name.
static void sort_sites(summary_t *s) {
    if (s->n_sites)
        sort_items(s->sites, s->n_sites, sizeof *s->sites, cmp_sites);
    free(s->by_name);
    s->by_name = xcalloc(s->n_sites ? s->n_sites : 1, sizeof *s->by_name);
    for (size_t i = 0; i < s->n_sites; i++)
        s->by_name[i] = i;
    sort_base = s->sites;
    sort_items(s->by_name, s->n_sites, sizeof *s->by_name, cmp_by_name);
}

// The function naming site i, as the report prints it (out_report.c, name_json).
static char *site_function(analyze_t *a, size_t i) {
    const site_t *s = sites_get(a->sites, i);
    if (s->n_frames == 0)
        return xstrdup("[unknown stack]");
    char buf[4096];
    return xstrdup(sites_frame_function(s->frames[s->name_frame], buf, sizeof buf));
}

summary_t *summary_from_analyze(analyze_t *a, const char *const *exclude, size_t n_exclude) {
    summary_t *s = xcalloc(1, sizeof *s);
    const char *exe = reader_exe(a->r);
    if (exe) {
        const char *slash = strrchr(exe, '/');
        s->program = xstrdup(slash ? slash + 1 : exe);
    }
    const replay_totals_t *t = replay_totals_shown(a->rp); // estimates, as the sites' figures
    s->total[SUMMARY_PEAK] = t->peak_bytes;
    s->total[SUMMARY_TOTAL] = t->n_bytes;
    s->total[SUMMARY_BLOCKS] = t->n_blocks;
    s->total[SUMMARY_LEAKED] = t->live_bytes;

    size_t n = sites_count(a->sites);
    analyze_resolve(a, NULL, n);
    named_t *names = xcalloc(n ? n : 1, sizeof *names);
    for (size_t i = 0; i < n; i++) {
        names[i] = (named_t){site_function(a, i), i};
        uint64_t v[SUMMARY_N_METRICS];
        site_figures(sites_figures(a->sites, i), v);
        // the report's temporary total is the sum over its sites
        s->total[SUMMARY_TEMPORARY] += v[SUMMARY_TEMPORARY];
    }
    sort_items(names, n, sizeof *names, cmp_named);
    s->sites = xcalloc(n ? n : 1, sizeof *s->sites);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        bool excluded = is_excluded(names[i].function, exclude, n_exclude);
        summary_site_t *e = &s->sites[s->n_sites];
        uint64_t largest = 0;
        size_t largest_site = names[i].site;
        for (; j < n && strcmp(names[j].function, names[i].function) == 0; j++) {
            uint64_t v[SUMMARY_N_METRICS];
            site_figures(sites_figures(a->sites, names[j].site), v);
            for (int m = 0; m < SUMMARY_N_METRICS; m++) {
                if (excluded)
                    s->total[m] -= v[m] < s->total[m] ? v[m] : s->total[m];
                else
                    e->v[m] += v[m];
            }
            if (j == i || v[SUMMARY_TOTAL] > largest) {
                largest = v[SUMMARY_TOTAL];
                largest_site = names[j].site;
            }
        }
        if (!excluded) {
            e->function = xstrdup(names[i].function);
            const site_t *ls = sites_get(a->sites, largest_site);
            if (ls->n_frames) {
                char buf[4096];
                e->location =
                    xstrdup(sites_frame_location(ls->frames[ls->name_frame], buf, sizeof buf));
            }
            s->n_sites++;
        }
        for (size_t k = i; k < j; k++)
            free(names[k].function);
        i = j;
    }
    free(names);
    sort_sites(s);

    // growth advice: growth_site(i) comes by bytes copied, so the first one per function wins
    for (size_t i = 0; a->growth && i < growth_n_sites(a->growth); i++) {
        const growth_site_t *gs = growth_site(a->growth, i);
        size_t si = analyze_site_of(a, gs->stack);
        if (si == SIZE_MAX)
            continue;
        char *fn = site_function(a, si);
        summary_site_t *e = (summary_site_t *)summary_find(s, fn);
        free(fn);
        if (e && !e->advice) {
            char buf[1024];
            e->advice = xstrdup(growth_advice(gs, sites_get(a->sites, si), buf, sizeof buf));
        }
    }
    return s;
}

const summary_site_t *summary_find(const summary_t *s, const char *function) {
    if (!s->by_name) {
        for (size_t i = 0; i < s->n_sites; i++)
            if (strcmp(s->sites[i].function, function) == 0)
                return &s->sites[i];
        return NULL;
    }
    size_t lo = 0, hi = s->n_sites;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->sites[s->by_name[mid]].function, function);
        if (c == 0)
            return &s->sites[s->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

// min or lower median of v[0..n); sorts v
static uint64_t pick(uint64_t *v, size_t n, bool median) {
    sort_items(v, n, sizeof *v, cmp_u64);
    return median ? v[(n - 1) / 2] : v[0];
}

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

summary_t *summary_combine(summary_t *const *runs, size_t n, bool median) {
    summary_t *s = xcalloc(1, sizeof *s);
    s->program = dup_or_null(runs[0]->program);
    uint64_t *v = xcalloc(n, sizeof *v);
    for (int m = 0; m < SUMMARY_N_METRICS; m++) {
        for (size_t r = 0; r < n; r++)
            v[r] = runs[r]->total[m];
        s->total[m] = pick(v, n, median);
    }
    // every function of any run, once
    size_t cap = 0, n_names = 0;
    for (size_t r = 0; r < n; r++)
        cap += runs[r]->n_sites;
    const char **names = xcalloc(cap ? cap : 1, sizeof *names);
    const summary_site_t **in = xcalloc(n, sizeof *in); // the function's entry in each run
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < runs[r]->n_sites; i++)
            names[n_names++] = runs[r]->sites[i].function;
    sort_items(names, n_names, sizeof *names, cmp_str);
    s->sites = xcalloc(cap ? cap : 1, sizeof *s->sites);
    for (size_t i = 0; i < n_names; i++) {
        if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
            continue;
        summary_site_t *e = &s->sites[s->n_sites++];
        e->function = xstrdup(names[i]);
        for (size_t k = 0; k < n; k++) {
            in[k] = summary_find(runs[k], names[i]);
            if (in[k] && !e->location && in[k]->location)
                e->location = xstrdup(in[k]->location);
            if (in[k] && !e->advice && in[k]->advice)
                e->advice = xstrdup(in[k]->advice);
        }
        for (int m = 0; m < SUMMARY_N_METRICS; m++) {
            for (size_t k = 0; k < n; k++)
                v[k] = in[k] ? in[k]->v[m] : 0;
            e->v[m] = pick(v, n, median);
        }
    }
    free(in);
    free(names);
    free(v);
    sort_sites(s);
    return s;
}

void summary_free(summary_t *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n_sites; i++) {
        free(s->sites[i].function);
        free(s->sites[i].location);
        free(s->sites[i].advice);
    }
    free(s->sites);
    free(s->by_name);
    free(s->program);
    free(s);
}

// ---- JSON ----

static json_t *figures_json(const uint64_t v[SUMMARY_N_METRICS]) {
    json_t *j = json_object();
    for (int m = 0; m < SUMMARY_N_METRICS; m++)
        json_object_set_new(j, metrics[m].name, fmt_json_int(v[m]));
    return j;
}

static summary_metric_t keep_metric; // qsort has no context argument in C11

// by the figure, largest first; ties in the stable order
static int cmp_figure(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    uint64_t vx = sort_base[x].v[keep_metric], vy = sort_base[y].v[keep_metric];
    if (vx != vy)
        return vx > vy ? -1 : 1;
    return (x > y) - (x < y);
}

// The sites that rank in the top SUMMARY_KEEP by some non-zero figure.
static bool *kept_sites(const summary_t *s) {
    bool *keep = xcalloc(s->n_sites ? s->n_sites : 1, sizeof *keep);
    size_t *order = xcalloc(s->n_sites ? s->n_sites : 1, sizeof *order);
    for (int m = 0; m < SUMMARY_N_METRICS; m++) {
        for (size_t i = 0; i < s->n_sites; i++)
            order[i] = i;
        sort_base = s->sites;
        keep_metric = (summary_metric_t)m;
        sort_items(order, s->n_sites, sizeof *order, cmp_figure);
        for (size_t r = 0; r < s->n_sites && r < SUMMARY_KEEP; r++)
            if (s->sites[order[r]].v[m])
                keep[order[r]] = true;
    }
    free(order);
    return keep;
}

json_t *summary_json(const summary_t *s, int exit_status) {
    json_t *j = json_object();
    json_object_set_new(j, "heapprof_check_summary", json_integer(1));
    json_object_set_new(j, "program", fmt_json_str(s->program));
    json_object_set_new(j, "exit_status",
                        exit_status >= 0 ? json_integer(exit_status) : json_null());
    json_t *meaning = json_object();
    for (int m = 0; m < SUMMARY_N_METRICS; m++)
        json_object_set_new(meaning, metrics[m].name, json_string(metrics[m].meaning));
    json_object_set_new(j, "meaning", meaning);
    json_object_set_new(j, "totals", figures_json(s->total));
    bool *keep = kept_sites(s);
    json_t *arr = json_array();
    size_t omitted = s->n_omitted;
    for (size_t i = 0; i < s->n_sites; i++) {
        if (!keep[i]) {
            omitted++;
            continue;
        }
        json_t *e = figures_json(s->sites[i].v);
        // name first: a person reads the file
        json_t *site = json_object();
        json_object_set_new(site, "function", fmt_json_str(s->sites[i].function));
        json_object_set_new(site, "location", fmt_json_str(s->sites[i].location));
        json_object_update(site, e);
        json_decref(e);
        json_array_append_new(arr, site);
    }
    free(keep);
    json_object_set_new(j, "sites", arr);
    json_object_set_new(j, "sites_omitted", fmt_json_int(omitted));
    return j;
}

static int get_figures(json_t *obj, uint64_t v[SUMMARY_N_METRICS]) {
    if (!json_is_object(obj))
        return -1;
    for (int m = 0; m < SUMMARY_N_METRICS; m++) {
        json_t *x = json_object_get(obj, metrics[m].name);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return -1;
        v[m] = (uint64_t)json_integer_value(x);
    }
    return 0;
}

summary_t *summary_read(const char *path, errmsg_t *err) {
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        errmsg_set(err, "check: %s: not a trace nor a summary JSON (%s, line %d)", path, je.text,
                   je.line);
        return NULL;
    }
    summary_t *s = xcalloc(1, sizeof *s);
    json_t *ver = json_object_get(j, "heapprof_check_summary");
    json_t *sites = json_object_get(j, "sites");
    const char *why = NULL;
    if (!json_is_integer(ver))
        why = "no \"heapprof_check_summary\" version: not written by heapprof check";
    else if (json_integer_value(ver) != 1)
        why = "summary version not supported (this heapprof reads version 1)";
    else if (get_figures(json_object_get(j, "totals"), s->total) != 0)
        why = "\"totals\" lacks a figure or has one that is not a non-negative integer";
    else if (!json_is_array(sites))
        why = "\"sites\" is not an array";
    if (!why) {
        json_t *p = json_object_get(j, "program");
        s->program = json_is_string(p) ? xstrdup(json_string_value(p)) : NULL;
        json_t *om = json_object_get(j, "sites_omitted");
        s->n_omitted = json_is_integer(om) ? (size_t)json_integer_value(om) : 0;
        s->sites = xcalloc(json_array_size(sites) + 1, sizeof *s->sites);
        for (size_t i = 0; i < json_array_size(sites) && !why; i++) {
            json_t *e = json_array_get(sites, i);
            json_t *fn = json_object_get(e, "function"), *loc = json_object_get(e, "location");
            summary_site_t *d = &s->sites[s->n_sites];
            if (!json_is_string(fn) || get_figures(e, d->v) != 0) {
                why = "a site lacks \"function\" or a figure";
                break;
            }
            d->function = xstrdup(json_string_value(fn));
            d->location = json_is_string(loc) ? xstrdup(json_string_value(loc)) : NULL;
            s->n_sites++;
        }
    }
    json_decref(j);
    if (why) {
        errmsg_set(err, "check: %s: %s", path, why);
        summary_free(s);
        return NULL;
    }
    sort_sites(s);
    return s;
}
