// SPDX-License-Identifier: MIT
// Module filter. The verdict per stack id is cached; it only depends on time when the frame's
// address was covered by different modules over the run (dlclose, then another dlopen at the
// same place), which is rare enough to resolve per event.
#include "model/filter.h"

#include "model/sites.h"

#include "core/hmap.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

enum verdict { V_UNKNOWN = 0, V_YES, V_NO, V_BY_TIME };

struct filter {
    const reader_t *defs;
    bool *matches; // per module: basename equals the name; NULL: no module criterion
    size_t n_matching;
    hmap_t verdicts; // stack id -> uint8_t verdict
    char *function;   // the function criterion, or NULL
    symbolize_t *sym; // with function: the defs' symbolizer
};

static const char *basename_of(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

filter_t *filter_new(const reader_t *defs, const char *module, const char *function) {
    filter_t *f = xcalloc(1, sizeof *f);
    f->defs = defs;
    size_t n;
    const reader_module_t *m = reader_modules(defs, &n);
    if (module) {
        f->matches = xcalloc(n ? n : 1, sizeof *f->matches);
        for (size_t i = 0; i < n; i++) {
            f->matches[i] = strcmp(basename_of(m[i].path), module) == 0;
            f->n_matching += f->matches[i];
        }
    }
    if (function) {
        f->function = xstrdup(function);
        f->sym = symbolize_new(defs);
    }
    hmap_init(&f->verdicts, 1);
    return f;
}

filter_t *filter_new_from_module(const reader_t *defs, const char *name) {
    return filter_new(defs, name, NULL);
}

void filter_free(filter_t *f) {
    if (!f)
        return;
    free(f->matches);
    free(f->function);
    symbolize_free(f->sym);
    hmap_fini(&f->verdicts);
    free(f);
}

size_t filter_n_matching_modules(const filter_t *f) { return f->n_matching; }

static bool contains(const reader_module_t *m, uint64_t pc) {
    return pc >= m->base && pc - m->base < m->size;
}

static bool through_function(const filter_t *f, uint64_t id) {
    size_t n;
    const symbolize_frame_t **frames = sites_expand_stack(f->defs, f->sym, id, &n, NULL);
    bool yes = false;
    for (size_t i = 0; i < n && !yes; i++)
        yes = sites_function_named(frames[i]->function, f->function, true);
    free(frames);
    return yes;
}

static enum verdict judge_stack(const filter_t *f, uint64_t id) {
    uint32_t n_frames;
    const uint64_t *frames = reader_stack(f->defs, id, &n_frames);
    if (!frames || n_frames == 0)
        return V_NO;
    if (f->function && !through_function(f, id))
        return V_NO;
    if (!f->matches)
        return V_YES;
    size_t n;
    const reader_module_t *m = reader_modules(f->defs, &n);
    bool any_yes = false, any_no = false;
    for (size_t i = 0; i < n; i++) {
        if (!contains(&m[i], frames[0]))
            continue;
        if (f->matches[i])
            any_yes = true;
        else
            any_no = true;
    }
    if (any_yes && any_no)
        return V_BY_TIME;
    return any_yes ? V_YES : V_NO;
}

// The module covering pc at time t: one loaded at t; failing that, the next one loaded after
// t (allocations from a library's constructors precede its load record); failing that, the
// last one unloaded before t.
static bool judge_at(const filter_t *f, uint64_t pc, uint64_t t) {
    size_t n;
    const reader_module_t *m = reader_modules(f->defs, &n);
    size_t next = SIZE_MAX, prev = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (!contains(&m[i], pc))
            continue;
        if (m[i].load_ns <= t && t < m[i].unload_ns)
            return f->matches[i];
        if (m[i].load_ns > t) {
            if (next == SIZE_MAX || m[i].load_ns < m[next].load_ns)
                next = i;
        } else if (prev == SIZE_MAX || m[i].unload_ns > m[prev].unload_ns) {
            prev = i;
        }
    }
    if (next != SIZE_MAX)
        return f->matches[next];
    return prev != SIZE_MAX && f->matches[prev];
}

bool filter_keep(void *ctx, const reader_event_t *ev) {
    filter_t *f = ctx;
    bool existed;
    uint8_t *v = hmap_put(&f->verdicts, ev->stack, &existed);
    if (!existed)
        *v = (uint8_t)judge_stack(f, ev->stack);
    if (*v != V_BY_TIME)
        return *v == V_YES;
    uint32_t n_frames;
    const uint64_t *frames = reader_stack(f->defs, ev->stack, &n_frames);
    return judge_at(f, frames[0], ev->time_ns);
}
