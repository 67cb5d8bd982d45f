// SPDX-License-Identifier: MIT
// CPU samples by stack and by function. The first frame of a sample stack is the interrupted
// instruction + 1 (docs/trace-format.md#cpu), so the symbolizer's "look up pc - 1" rule, made
// for return addresses, lands on the instruction itself. Function figures merge frames by
// display name, so a function inlined in several places is one row.
#include "model/cpu.h"

#include "core/fmt.h"
#include "core/hmap.h"
#include "core/sort.h"
#include "core/xalloc.h"
#include "model/sites.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cpu {
    const reader_t *r;
    symbolize_t *sym;
    uint64_t total;
    cpu_stack_t *stacks;
    size_t n_stacks;
    bool resolved;
    bool rank_shim; // cpu_rank_shim: heapprof's own samples stay in the rankings
    cpu_fn_t *fns, *callers;
    size_t n_fns, n_callers;
    uint64_t alloc_samples, shim_samples;
    char **strings; // names and locations the rows point at
    size_t n_strings, strings_cap;
    hmap_t kinds; // frame (address of its symbolize_frame_t) -> sites_frame_kind_t
};

#define NAME_CAP 4096

static const char *keep(cpu_t *c, const char *s) {
    c->strings = xgrow(c->strings, &c->strings_cap, c->n_strings + 1, sizeof *c->strings);
    return c->strings[c->n_strings++] = xstrdup(s);
}

cpu_t *cpu_new(const reader_t *r, symbolize_t *sym) {
    cpu_t *c = xcalloc(1, sizeof *c);
    hmap_init(&c->kinds, 1);
    c->r = r;
    c->sym = sym;
    const uint64_t *ids, *counts;
    size_t n = reader_cpu_stacks(r, &ids, &counts);
    c->stacks = xcalloc(n + 1, sizeof *c->stacks);
    c->n_stacks = n;
    for (size_t i = 0; i < n; i++) {
        c->stacks[i].id = ids[i];
        c->stacks[i].count = counts[i];
        c->total += counts[i];
    }
    return c;
}

void cpu_free(cpu_t *c) {
    if (!c)
        return;
    for (size_t i = 0; i < c->n_stacks; i++) {
        free(c->stacks[i].frames);
        free(c->stacks[i].kinds);
    }
    free(c->stacks);
    free(c->fns);
    free(c->callers);
    for (size_t i = 0; i < c->n_strings; i++)
        free(c->strings[i]);
    free(c->strings);
    hmap_fini(&c->kinds);
    free(c);
}

uint64_t cpu_total(const cpu_t *c) { return c->total; }

static const char *base_name(const char *module) {
    const char *b = module ? strrchr(module, '/') : NULL;
    return b ? b + 1 : module;
}

static bool is_shim(const char *module) {
    const char *b = base_name(module);
    return b && strncmp(b, "libheapprof", 11) == 0;
}

// The vDSO (clock_gettime, called by libc and by the shim) is system code, not the user's.
static bool is_vdso(const char *module) {
    const char *b = base_name(module);
    return b && (strncmp(b, "linux-vdso", 10) == 0 || strcmp(b, "[vdso]") == 0);
}

// A frame's kind, classified once per frame (frames are the symbolizer's, shared by every
// stack through the same address): sample stacks repeat the same frames thousands of times.
static uint8_t frame_kind(cpu_t *c, const symbolize_frame_t *f) {
    bool existed;
    uint8_t *k = hmap_put(&c->kinds, (uint64_t)(uintptr_t)f, &existed);
    if (!existed)
        *k = (uint8_t)(is_shim(f->module)   ? SITES_FRAME_ALLOCATOR
                       : is_vdso(f->module) ? SITES_FRAME_LIBRARY
                                            : sites_classify(f->function, f->file, f->module));
    return *k;
}

static void resolve_stack(cpu_t *c, cpu_stack_t *s) {
    size_t n;
    const symbolize_frame_t **frames = sites_expand_stack(c->r, c->sym, s->id, &n, NULL);
    s->frames = frames;
    s->kinds = xcalloc(n ? n : 1, 1);
    s->n_frames = n;
    s->user_frame = n;
    s->in_allocator = false;
    for (size_t i = 0; i < n; i++)
        s->kinds[i] = frame_kind(c, frames[i]);
    // inside the allocator: an allocator frame below the first user frame
    for (size_t i = 0; i < n; i++) {
        if (s->kinds[i] == SITES_FRAME_USER) {
            if (s->in_allocator)
                s->user_frame = i;
            break;
        }
        if (s->kinds[i] == SITES_FRAME_ALLOCATOR)
            s->in_allocator = true;
    }
    // the shim's own work: everything inside its innermost frame (what it called: the clock,
    // memset, zstd when a full ring makes the thread compress its own records), unless the real
    // allocator is among it (the shim's entry points call it: that is the allocator's time)
    size_t k = 0;
    while (k < n && !is_shim(frames[k]->module))
        k++;
    if (k < n) {
        s->in_shim = true;
        for (size_t i = 0; i < k; i++)
            if (s->kinds[i] == SITES_FRAME_ALLOCATOR)
                s->in_shim = false;
        if (s->in_shim && !s->in_allocator) {
            // the shim is part of the allocator as the program sees it: charged to the first
            // user frame above it
            s->in_allocator = true;
            for (size_t i = k; i < n; i++)
                if (s->kinds[i] == SITES_FRAME_USER) {
                    s->user_frame = i;
                    break;
                }
        }
    }
}

// Where a function is, for its row: the source file (no line: the rows merge many lines), else
// the module's file name.
static const char *fn_location(const symbolize_frame_t *f, char *buf, size_t cap) {
    if (f->file)
        snprintf(buf, cap, "%s", symbolize_short_path(f->file, 3));
    else if (f->module)
        snprintf(buf, cap, "%s", base_name(f->module));
    else
        buf[0] = '\0';
    return buf;
}

typedef struct name_count {
    const char *name;
    const char *location; // of the first frame that had this name
    uint64_t self, total;
} name_count_t;

// Rows by display name. A report resolves thousands of sample stacks of tens of frames each:
// rows are found through a hash of the name (two names with one hash probe on from it), not
// by sorting every frame's name and merging equal neighbours.
typedef struct name_rows {
    hmap_t index; // name hash (+ probe) -> row index
    name_count_t *v;
    size_t n, cap;
} name_rows_t;

static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

// The row of name, added with no counts if new; its location is f's (f NULL: none).
static size_t row_of(name_rows_t *t, const char *name, const symbolize_frame_t *f) {
    for (uint64_t key = name_hash(name);; key++) {
        bool existed;
        size_t *idx = hmap_put(&t->index, key, &existed);
        if (existed) {
            if (strcmp(t->v[*idx].name, name) == 0)
                return *idx;
            continue;
        }
        char loc[NAME_CAP];
        t->v = xgrow(t->v, &t->cap, t->n + 1, sizeof *t->v);
        const char *where = f ? fn_location(f, loc, sizeof loc) : "";
        t->v[t->n] = (name_count_t){xstrdup(name), xstrdup(where), 0, 0};
        *idx = t->n;
        return t->n++;
    }
}

static void rows_free(name_rows_t *t) {
    for (size_t i = 0; i < t->n; i++) {
        free((char *)t->v[i].name);
        free((char *)t->v[i].location);
    }
    free(t->v);
    hmap_fini(&t->index);
}

static int cmp_rank(const void *a, const void *b) {
    const cpu_fn_t *x = a, *y = b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->name, y->name);
}

// The rows (distinct names) ranked, into out (allocated). Returns the count.
static size_t rank(cpu_t *c, const name_rows_t *t, cpu_fn_t **out) {
    cpu_fn_t *f = xcalloc(t->n + 1, sizeof *f);
    for (size_t i = 0; i < t->n; i++) {
        f[i].name = keep(c, t->v[i].name);
        f[i].location = keep(c, t->v[i].location);
        f[i].self = t->v[i].self;
        f[i].total = t->v[i].total;
    }
    sort_items(f, t->n, sizeof *f, cmp_rank);
    *out = f;
    return t->n;
}

static void resolve(cpu_t *c) {
    if (c->resolved)
        return;
    c->resolved = true;
    name_rows_t rows = {0}, calls = {0};
    hmap_init(&rows.index, sizeof(size_t));
    hmap_init(&calls.index, sizeof(size_t));
    char fn[NAME_CAP];
    // per stack: each distinct name once for total, the innermost for self; the rows this
    // stack already counted are listed so recursion is not counted twice
    size_t *seen = NULL, seen_cap = 0;
    for (size_t i = 0; i < c->n_stacks; i++) {
        cpu_stack_t *s = &c->stacks[i];
        resolve_stack(c, s);
        if (s->in_allocator) {
            c->alloc_samples += s->count;
            c->shim_samples += s->in_shim ? s->count : 0;
        }
        // a sample in the shim's own work is the profiler's cost, not the program's: it stays
        // out of the rankings (its share is printed once) unless asked for
        if (s->in_shim && !c->rank_shim)
            continue;
        if (s->in_allocator) {
            size_t r;
            if (s->user_frame < s->n_frames) {
                const symbolize_frame_t *f = s->frames[s->user_frame];
                r = row_of(&calls, sites_frame_function(f, fn, sizeof fn), f);
            } else {
                r = row_of(&calls, "[no user frame]", NULL);
            }
            calls.v[r].self += s->count;
            calls.v[r].total += s->count;
        }
        if (s->n_frames == 0) {
            size_t r = row_of(&rows, "[unknown stack]", NULL);
            rows.v[r].self += s->count;
            rows.v[r].total += s->count;
            continue;
        }
        size_t n_seen = 0;
        for (size_t j = 0; j < s->n_frames; j++) {
            // the shim's entry points above a sample in the real allocator: its frames too
            if (!c->rank_shim && is_shim(s->frames[j]->module))
                continue;
            size_t r = row_of(&rows, sites_frame_function(s->frames[j], fn, sizeof fn),
                              s->frames[j]);
            bool dup = false;
            for (size_t k = 0; k < n_seen && !dup; k++)
                dup = seen[k] == r;
            if (dup)
                continue;
            seen = xgrow(seen, &seen_cap, n_seen + 1, sizeof *seen);
            seen[n_seen++] = r;
            rows.v[r].self += j == 0 ? s->count : 0;
            rows.v[r].total += s->count;
        }
    }
    free(seen);
    c->n_fns = rank(c, &rows, &c->fns);
    c->n_callers = rank(c, &calls, &c->callers);
    rows_free(&rows);
    rows_free(&calls);
}

void cpu_rank_shim(cpu_t *c, bool on) { c->rank_shim = on; }

bool cpu_ranks_shim(const cpu_t *c) { return c->rank_shim; }

const cpu_stack_t *cpu_stacks(cpu_t *c, size_t *n) {
    resolve(c);
    *n = c->n_stacks;
    return c->stacks;
}

const cpu_fn_t *cpu_functions(cpu_t *c, size_t *n) {
    resolve(c);
    *n = c->n_fns;
    return c->fns;
}

uint64_t cpu_allocator_samples(cpu_t *c) {
    resolve(c);
    return c->alloc_samples;
}

uint64_t cpu_shim_samples(cpu_t *c) {
    resolve(c);
    return c->shim_samples;
}

const cpu_fn_t *cpu_allocator_callers(cpu_t *c, size_t *n) {
    resolve(c);
    *n = c->n_callers;
    return c->callers;
}

const char *cpu_source_name(unsigned source) {
    switch (source) {
    case HPT_CPU_OFF:
        return "off";
    case HPT_CPU_PERF:
        return "perf";
    case HPT_CPU_TIMER:
        return "timer";
    default:
        return "unknown";
    }
}

const char *cpu_describe(const reader_cpu_t *ci, char *buf, size_t cap) {
    char a[32], b[32];
    if (!ci->has_info && ci->n_samples == 0)
        snprintf(buf, cap, "not recorded (trace made without CPU sampling)");
    else if (ci->source == HPT_CPU_OFF)
        snprintf(buf, cap, "off: %s", ci->reason[0] ? ci->reason : "no reason recorded");
    else
        snprintf(buf, cap, "%s samples at %" PRIu32 " Hz (%s), %s lost%s%s",
                 fmt_grouped(ci->n_samples, a), ci->hz,
                 ci->source == HPT_CPU_PERF ? "perf_event cpu-clock" : "CPU-time timer",
                 fmt_grouped(ci->n_lost, b), ci->reason[0] ? "; " : "", ci->reason);
    return buf;
}

json_t *cpu_info_json(const reader_cpu_t *ci) {
    json_t *j = json_object();
    json_object_set_new(j, "source",
                        json_string(ci->has_info ? cpu_source_name(ci->source) : "not recorded"));
    json_object_set_new(j, "hz", fmt_json_int(ci->hz));
    json_object_set_new(j, "samples", fmt_json_int(ci->n_samples));
    json_object_set_new(j, "lost", fmt_json_int(ci->n_lost));
    json_object_set_new(j, "reason", fmt_json_str(ci->reason));
    return j;
}
