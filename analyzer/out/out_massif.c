// SPDX-License-Identifier: MIT
// Valgrind Massif's output format (massif.out.PID, read by ms_print and massif-visualizer): the
// heap over time as snapshots of live bytes, and at the global peak a detailed snapshot whose
// tree splits the live bytes by call stack, from the allocator's caller outward. Times are
// milliseconds since the trace started (time_unit ms, with fractions); heapprof knows no
// allocator overhead or stack sizes, so mem_heap_extra_B and mem_stacks_B are 0.
#include "out/out.h"

#include "core/hmap.h"
#include "core/sort.h"
#include "core/xalloc.h"
#include "model/timeline.h"

#include <inttypes.h>
#include <string.h>

#define SNAPSHOTS 100 // of the curve, besides the peak: massif's default max-snapshots
#define DEPTH 30      // frames of a tree path at most, as massif's --depth default

// A node of the peak's tree: a frame reached from the root by one path of frames.
typedef struct node {
    const symbolize_frame_t *frame; // NULL for the root
    uint64_t bytes;
    size_t first_child, next_sibling; // indices into the node array; 0: none
} node_t;

typedef struct tree {
    node_t *v;
    size_t n, cap;
} tree_t;

static size_t add_node(tree_t *t, const symbolize_frame_t *f) {
    t->v = xgrow(t->v, &t->cap, t->n + 1, sizeof *t->v);
    t->v[t->n] = (node_t){.frame = f};
    return t->n++;
}

// The child of parent for frame f, made if new. Frames are the symbolizer's, one per
// (address, inline depth): the pointer is the identity.
static size_t child_of(tree_t *t, size_t parent, const symbolize_frame_t *f) {
    for (size_t c = t->v[parent].first_child; c; c = t->v[c].next_sibling)
        if (t->v[c].frame == f)
            return c;
    size_t c = add_node(t, f);
    t->v[c].next_sibling = t->v[parent].first_child;
    t->v[parent].first_child = c;
    return c;
}

static int cmp_bytes_desc(const void *a, const void *b) {
    const node_t *x = *(const node_t *const *)a, *y = *(const node_t *const *)b;
    return x->bytes != y->bytes ? (x->bytes > y->bytes ? -1 : 1) : 0;
}

static void print_frame(FILE *f, const symbolize_frame_t *fr) {
    char fn[1024], safe[2048], file[1024], mod[1024];
    if (fr->function)
        fmt_safe_text(sites_frame_function(fr, fn, sizeof fn), safe, sizeof safe);
    else
        snprintf(safe, sizeof safe, "???");
    fprintf(f, "0x%" PRIX64 ": %s", fr->pc, safe);
    if (fr->file && fr->line)
        fprintf(f, " (%s:%" PRIu32 ")\n", fmt_safe_text(fr->file, file, sizeof file), fr->line);
    else if (fr->module)
        fprintf(f, " (in %s)\n", fmt_safe_text(fr->module, mod, sizeof mod));
    else
        fputc('\n', f);
}

// Prints node i and its subtree, children by bytes, largest first (massif's order).
static void print_node(FILE *f, const tree_t *t, size_t i, unsigned depth) {
    size_t n = 0;
    for (size_t c = t->v[i].first_child; c; c = t->v[c].next_sibling)
        n++;
    const node_t **kids = xcalloc(n ? n : 1, sizeof *kids);
    n = 0;
    for (size_t c = t->v[i].first_child; c; c = t->v[c].next_sibling)
        kids[n++] = &t->v[c];
    sort_items(kids, n, sizeof *kids, cmp_bytes_desc);
    fprintf(f, "%*sn%zu: %" PRIu64 " ", (int)depth, "", n, t->v[i].bytes);
    if (i == 0)
        fprintf(f, "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n");
    else
        print_frame(f, t->v[i].frame);
    for (size_t k = 0; k < n; k++)
        print_node(f, t, (size_t)(kids[k] - t->v), depth + 1);
    free(kids);
}

// The peak's tree: every site live at the peak, its stack from the frame after the allocator's
// own (the allocator's caller, as massif starts) outward, at most DEPTH frames.
static void peak_tree(analyze_t *a, tree_t *t) {
    add_node(t, NULL);
    size_t n_sites = sites_count(a->sites);
    for (size_t i = 0; i < n_sites; i++) {
        uint64_t bytes = sites_figures(a->sites, i)->peak_bytes;
        if (!bytes)
            continue;
        const site_t *s = sites_get(a->sites, i);
        t->v[0].bytes += bytes;
        size_t first = 0;
        while (first < s->n_frames && s->kinds[first] == SITES_FRAME_ALLOCATOR)
            first++;
        size_t node = 0;
        for (size_t k = first; k < s->n_frames && k - first < DEPTH; k++) {
            node = child_of(t, node, s->frames[k]);
            t->v[node].bytes += bytes;
        }
    }
}

static void snapshot(FILE *f, size_t num, uint64_t time_ns, uint64_t bytes, const char *tree) {
    fprintf(f, "#-----------\nsnapshot=%zu\n#-----------\n", num);
    fprintf(f, "time=%" PRIu64 ".%06" PRIu64 "\n", time_ns / 1000000, time_ns % 1000000);
    fprintf(f, "mem_heap_B=%" PRIu64 "\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=%s\n", bytes,
            tree);
}

int out_massif_write(analyze_t *a, FILE *f, errmsg_t *err) {
    const replay_totals_t *t = replay_totals(a->rp);
    char safe[4096];
    const char *exe = reader_exe(a->r);
    fprintf(f, "desc: heapprof massif %s\n", fmt_safe_text(a->path, safe, sizeof safe));
    fprintf(f, "cmd: %s", exe ? fmt_safe_text(exe, safe, sizeof safe) : "(unknown)");
    size_t argc = 0;
    const char *const *argv = reader_argv(a->r, &argc);
    for (size_t i = 1; i < argc; i++)
        fprintf(f, " %s", fmt_safe_text(argv[i], safe, sizeof safe));
    fprintf(f, "\ntime_unit: ms\n");

    // the curve, SNAPSHOTS moments evenly over the timeline's buckets, and the peak in its
    // place among them
    size_t n_points = 0;
    const timeline_point_t *pts = a->timeline ? timeline_points(a->timeline, &n_points) : NULL;
    uint64_t bucket = a->timeline ? timeline_bucket_ns(a->timeline) : 0;
    size_t step = n_points > SNAPSHOTS ? (n_points + SNAPSHOTS - 1) / SNAPSHOTS : 1, num = 0;
    bool peak_done = t->peak_bytes == 0;
    snapshot(f, num++, 0, 0, "empty");
    for (size_t i = 0; i < n_points; i += step) {
        size_t last = i + step - 1 < n_points ? i + step - 1 : n_points - 1;
        uint64_t at = pts[last].time_ns + bucket; // the end of the bucket
        if (!peak_done && t->peak_time_ns <= at) {
            tree_t tree = {0};
            peak_tree(a, &tree);
            snapshot(f, num++, t->peak_time_ns, t->peak_bytes, "peak");
            print_node(f, &tree, 0, 0);
            free(tree.v);
            peak_done = true;
        }
        if (at > t->last_time_ns)
            at = t->last_time_ns;
        snapshot(f, num++, at, pts[last].last_bytes, "empty");
    }
    if (!peak_done) {
        tree_t tree = {0};
        peak_tree(a, &tree);
        snapshot(f, num++, t->peak_time_ns, t->peak_bytes, "peak");
        print_node(f, &tree, 0, 0);
        free(tree.v);
    }
    if (ferror(f)) {
        errmsg_set(err, "massif: cannot write the output");
        return -1;
    }
    return 0;
}
