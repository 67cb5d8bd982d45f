// SPDX-License-Identifier: MIT
// Folding sites into flamegraph lines: one metric per site, the site's symbolized stack turned
// root first (an inlined call is its own frame, under the function it was inlined into), frame
// names made safe once so that both writers can trust them, then sorted and merged by text
// (two sites whose stacks symbolize alike, e.g. two return addresses on one line, are one line).
#include "analyze/flame.h"

#include "core/fmt.h"
#include "core/sort.h"
#include "core/xalloc.h"
#include "model/growth.h"
#include "model/sites.h"

#include <stdlib.h>
#include <string.h>

static const char *const metric_names[] = {
    [FLAME_BYTES] = "bytes",   [FLAME_BLOCKS] = "blocks",       [FLAME_PEAK] = "peak",
    [FLAME_LEAKED] = "leaked", [FLAME_TEMPORARY] = "temporary", [FLAME_GROWTH] = "growth",
    [FLAME_CPU] = "cpu",
};

int flame_metric_parse(const char *name, flame_metric_t *m, errmsg_t *err) {
    for (size_t i = 0; i < sizeof metric_names / sizeof *metric_names; i++) {
        if (strcmp(name, metric_names[i]) == 0) {
            *m = (flame_metric_t)i;
            return 0;
        }
    }
    errmsg_set(err, "unknown metric '%s' (bytes, blocks, peak, leaked, temporary, growth or cpu)",
               name);
    return -1;
}

const char *flame_metric_name(flame_metric_t m) { return metric_names[m]; }

bool flame_metric_is_bytes(flame_metric_t m) { return m != FLAME_BLOCKS && m != FLAME_CPU; }

uint64_t flame_site_value(const analyze_t *a, size_t i, flame_metric_t m) {
    const replay_site_t *g = sites_figures(a->sites, i);
    switch (m) {
    case FLAME_BYTES:
        return g->bytes;
    case FLAME_BLOCKS:
        return g->blocks;
    case FLAME_PEAK:
        return g->peak_bytes;
    case FLAME_LEAKED:
        return g->end_bytes;
    case FLAME_TEMPORARY:
        return g->temp_bytes;
    case FLAME_GROWTH: {
        const growth_site_t *gs = a->growth ? growth_site_of(a->growth, g->stack) : NULL;
        return gs ? gs->bytes_copied : 0;
    }
    default:
        return 0;
    }
}

// flame_frame_text's work: fmt_safe_text (visible escapes for control bytes, which XML 1.0
// forbids and a terminal obeys); fold: also ';', the folded format's frame separator
static char *safe_text(const char *name, char *buf, size_t cap, bool fold) {
    fmt_safe_text(name, buf, cap);
    if (!fold)
        return buf;
    for (char *c = buf; *c; c++)
        if (*c == ';')
            *c = ',';
    if (buf[0] == '\0')
        snprintf(buf, cap, "[unnamed]");
    return buf;
}

char *flame_frame_text(const char *name, char *buf, size_t cap) {
    return safe_text(name, buf, cap, true);
}

static bool starts(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

flame_kind_t flame_classify(const char *function, const char *file, const char *module) {
    sites_frame_kind_t k = sites_classify(function, file, module);
    if (k == SITES_FRAME_ALLOCATOR)
        return FLAME_KIND_ALLOCATOR;
    if (k == SITES_FRAME_USER)
        return FLAME_KIND_USER;
    const char *base = module ? strrchr(module, '/') : NULL;
    base = base ? base + 1 : module;
    if (file &&
        (starts(file, "/rustc/") || starts(file, "/rust/deps/") || strstr(file, "library/std/") ||
         strstr(file, "library/core/") || strstr(file, "library/alloc/")))
        return FLAME_KIND_RUST_STD;
    if ((file && strstr(file, "/c++/")) ||
        (base && (starts(base, "libstdc++") || starts(base, "libc++"))))
        return FLAME_KIND_CXX_STD;
    if (function) {
        const char *f = function; // "<&dyn core::ops::Fn<..> as ..>::call_once" -> "core::..."
        while (*f == '<' || *f == '&' || starts(f, "dyn ") || starts(f, "mut "))
            f += *f == '<' || *f == '&' ? 1 : 4;
        // C++ names are demangled with their parameter lists, Rust names without
        if ((starts(f, "std::") || starts(f, "__gnu_cxx::") || starts(f, "__cxxabiv1::")) &&
            strchr(function, '('))
            return FLAME_KIND_CXX_STD;
        if (starts(f, "std::") || starts(f, "core::") || starts(f, "alloc::") ||
            starts(f, "hashbrown::") || starts(f, "panic_") || starts(f, "compiler_builtins::") ||
            starts(f, "std_detect::") || starts(f, "gimli::") || starts(f, "addr2line::") ||
            starts(f, "miniz_oxide::") || starts(f, "rustc_demangle::") || starts(f, "object::"))
            return FLAME_KIND_RUST_STD;
        if (starts(f, "std::") || starts(f, "__gnu_cxx::"))
            return FLAME_KIND_CXX_STD;
    }
    return FLAME_KIND_LIBC;
}

// ---- building ----

#define NAME_CAP 4096

typedef struct strbuf {
    char *p;
    size_t n, cap;
} strbuf_t;

static void sb_add(strbuf_t *b, const char *s, size_t n) {
    b->p = xgrow(b->p, &b->cap, b->n + n + 1, 1);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static int cmp_lines(const void *a, const void *b) {
    return strcmp(((const flame_line_t *)a)->stack, ((const flame_line_t *)b)->stack);
}

// Sorts v[0..n) and merges equal stacks (values summed); returns the new count.
static size_t sort_merge(flame_line_t *v, size_t n) {
    sort_items(v, n, sizeof *v, cmp_lines);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o > 0 && strcmp(v[o - 1].stack, v[i].stack) == 0) {
            v[o - 1].value[0] += v[i].value[0];
            v[o - 1].value[1] += v[i].value[1];
            free(v[i].stack);
            free(v[i].kinds);
        } else {
            v[o++] = v[i];
        }
    }
    return o;
}

static char *program_text(const reader_t *r) {
    size_t argc = 0;
    const char *const *argv = reader_argv(r, &argc);
    strbuf_t b = {0};
    char name[NAME_CAP];
    if (argc == 0 && reader_exe(r)) {
        safe_text(reader_exe(r), name, sizeof name, false);
        sb_add(&b, name, strlen(name));
    }
    for (size_t i = 0; i < argc && b.n < 1000; i++) {
        if (i)
            sb_add(&b, " ", 1);
        safe_text(argv[i], name, sizeof name, false);
        sb_add(&b, name, strlen(name));
    }
    if (!b.p)
        sb_add(&b, "", 0);
    return b.p;
}

// FLAME_CPU: every sample stack as it was taken, innermost frame the interrupted function.
// trim does not apply: it cuts at an allocation site's naming frame, and a sample has none.
static void cpu_lines(analyze_t *a, flame_t *f) {
    size_t n_stacks = 0, cap = 0;
    const cpu_stack_t *st = cpu_stacks(a->cpu, &n_stacks);
    strbuf_t b = {0};
    char fn[NAME_CAP], name[NAME_CAP];
    for (size_t i = 0; i < n_stacks; i++) {
        const cpu_stack_t *s = &st[i];
        if (s->count == 0)
            continue;
        b.n = 0;
        uint8_t *kinds = xmalloc(s->n_frames ? s->n_frames : 1);
        size_t nk = 0;
        if (s->n_frames == 0) {
            sb_add(&b, "[unknown stack]", 15);
            kinds[nk++] = FLAME_KIND_UNKNOWN;
        }
        for (size_t j = s->n_frames; j-- > 0;) {
            const symbolize_frame_t *fr = s->frames[j];
            flame_frame_text(sites_frame_function(fr, fn, sizeof fn), name, sizeof name);
            if (b.n)
                sb_add(&b, ";", 1);
            sb_add(&b, name, strlen(name));
            kinds[nk++] = s->kinds[j] == SITES_FRAME_ALLOCATOR
                              ? FLAME_KIND_ALLOCATOR
                              : (uint8_t)flame_classify(fr->function, fr->file, fr->module);
        }
        f->lines = xgrow(f->lines, &cap, f->n + 1, sizeof *f->lines);
        flame_line_t *l = &f->lines[f->n++];
        l->stack = xstrdup(b.p);
        l->kinds = kinds;
        l->n_frames = (uint32_t)nk;
        l->value[0] = s->count;
        l->value[1] = 0;
        f->total[0] += s->count;
    }
    free(b.p);
    f->n = sort_merge(f->lines, f->n);
}

flame_t *flame_new(analyze_t *a, flame_metric_t m, bool trim) {
    flame_t *f = xcalloc(1, sizeof *f);
    f->metric = m;
    f->title_program = program_text(a->r);
    if (m == FLAME_CPU) {
        cpu_lines(a, f);
        return f;
    }
    size_t n_sites = sites_count(a->sites), cap = 0;
    strbuf_t b = {0};
    uint8_t *kinds = NULL;
    size_t kinds_cap = 0;
    char fn[NAME_CAP], name[NAME_CAP];
    // symbolize what will be shown first, with analyze's progress line
    size_t *shown = xcalloc(n_sites + 1, sizeof *shown), n_shown = 0;
    for (size_t i = 0; i < n_sites; i++)
        if (flame_site_value(a, i, m))
            shown[n_shown++] = i;
    analyze_resolve(a, shown, n_shown);
    for (size_t k = 0; k < n_shown; k++) {
        size_t i = shown[k];
        uint64_t v = flame_site_value(a, i, m);
        const site_t *s = sites_get(a->sites, i);
        b.n = 0;
        size_t nk = 0;
        if (s->n_frames == 0) {
            sb_add(&b, "[unknown stack]", 15);
            kinds = xgrow(kinds, &kinds_cap, 1, 1);
            kinds[nk++] = FLAME_KIND_UNKNOWN;
        } else {
            size_t stop = trim ? s->name_frame : 0;
            kinds = xgrow(kinds, &kinds_cap, s->n_frames, 1);
            for (size_t j = s->n_frames; j-- > stop;) {
                const symbolize_frame_t *fr = s->frames[j];
                flame_frame_text(sites_frame_function(fr, fn, sizeof fn), name, sizeof name);
                if (b.n)
                    sb_add(&b, ";", 1);
                sb_add(&b, name, strlen(name));
                kinds[nk++] = (uint8_t)flame_classify(fr->function, fr->file, fr->module);
            }
        }
        f->lines = xgrow(f->lines, &cap, f->n + 1, sizeof *f->lines);
        flame_line_t *l = &f->lines[f->n++];
        l->stack = xstrdup(b.p);
        l->kinds = xmalloc(nk);
        memcpy(l->kinds, kinds, nk);
        l->n_frames = (uint32_t)nk;
        l->value[0] = v;
        l->value[1] = 0;
        f->total[0] += v;
    }
    free(b.p);
    free(kinds);
    free(shown);
    f->n = sort_merge(f->lines, f->n);
    return f;
}

static void copy_line(flame_line_t *dst, const flame_line_t *src) {
    dst->stack = xstrdup(src->stack);
    dst->kinds = xmalloc(src->n_frames ? src->n_frames : 1);
    memcpy(dst->kinds, src->kinds, src->n_frames);
    dst->n_frames = src->n_frames;
}

flame_t *flame_diff(const flame_t *before, const flame_t *after) {
    flame_t *f = xcalloc(1, sizeof *f);
    f->metric = after->metric;
    f->is_diff = true;
    f->title_program = xstrdup(after->title_program);
    f->lines = xcalloc(before->n + after->n + 1, sizeof *f->lines);
    size_t i = 0, j = 0;
    while (i < before->n || j < after->n) {
        int c = i == before->n  ? 1
                : j == after->n ? -1
                                : strcmp(before->lines[i].stack, after->lines[j].stack);
        flame_line_t *l = &f->lines[f->n++];
        if (c < 0) {
            copy_line(l, &before->lines[i]);
            l->value[0] = before->lines[i++].value[0];
        } else if (c > 0) {
            copy_line(l, &after->lines[j]);
            l->value[1] = after->lines[j++].value[0];
        } else {
            copy_line(l, &after->lines[j]);
            l->value[0] = before->lines[i++].value[0];
            l->value[1] = after->lines[j++].value[0];
        }
    }
    f->total[0] = before->total[0];
    f->total[1] = after->total[0];
    return f;
}

void flame_free(flame_t *f) {
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        free(f->lines[i].stack);
        free(f->lines[i].kinds);
    }
    free(f->lines);
    free(f->title_program);
    free(f);
}
