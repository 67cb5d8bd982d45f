// SPDX-License-Identifier: MIT
// Site table over replay's per-stack figures, lazy stack resolution, and the frame classifier
// that decides which frame names a site. The classifier works on demangled names: C++ names of
// template functions start with their return type ("void std::vector<...>::_M_realloc_insert"),
// Rust trait methods with "<Type as Trait>::", so both are peeled before the prefix tests.
#include "model/sites.h"

#include "core/hmap.h"
#include "core/xalloc.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sites {
    const reader_t *r;
    symbolize_t *sym;
    site_t *v;
    size_t n;
    const char *const *alloc_fns; // sites_set_alloc_fns: the program's own allocator functions
    size_t n_alloc_fns;
    bool keep_wrappers; // sites_keep_wrappers: no forwarder detection
    bool callers_counted;
    hmap_t n_callers; // function start -> distinct caller functions in the trace's stacks
};

// ---- classification ----

// The first characters are compared inline: a report classifies every frame of every distinct
// stack and CPU sample, and nearly every comparison fails at once (a libc call each made the
// string compares ~30% of report's time after the last event on the 100 M-event trace).
static bool starts(const char *s, const char *prefix) {
    return s[0] == prefix[0] && strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool any_prefix(const char *s, const char *const *list) {
    for (; *list; list++)
        if (starts(s, *list))
            return true;
    return false;
}

static bool any_equal(const char *s, const char *const *list) {
    for (; *list; list++)
        if (s[0] == (*list)[0] && strcmp(s, *list) == 0)
            return true;
    return false;
}

const char *sites_skip_return_type(const char *name) {
    const char *q = name;
    int depth = 0;
    for (const char *p = name; *p; p++) {
        if (*p == '<' || *p == '[')
            depth++;
        else if ((*p == '>' || *p == ']') && depth > 0)
            depth--;
        else if (*p == '(' && depth == 0)
            break;
        else if (*p == ' ' && depth == 0)
            q = p + 1;
    }
    return q;
}

// Rust "<alloc::vec::Vec<T> as core::Trait>::f" and "<&mut T>::f" -> the implementing type
static const char *skip_rust_impl(const char *name) {
    if (*name != '<')
        return name;
    name++;
    for (;;) {
        if (*name == '&')
            name++;
        else if (starts(name, "mut "))
            name += 4;
        else if (starts(name, "dyn "))
            name += 4;
        else if (starts(name, "const "))
            name += 6;
        else if (*name == '*')
            name++;
        else
            return name;
    }
}

static const char *const alloc_exact[] = {
    "malloc", "calloc", "realloc", "free", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "__libc_malloc", "__libc_calloc", "__libc_realloc",
    "__libc_memalign", "__libc_valloc", "__libc_pvalloc", "__posix_memalign", "_int_malloc",
    "_int_realloc", "_int_memalign", "strdup", "__strdup", "strndup", "__strndup", "wcsdup",
    "__rust_alloc", "__rust_alloc_zeroed", "__rust_realloc", "__rust_dealloc",
    "__rust_no_alloc_shim_is_unstable", NULL};

static const char *const alloc_prefix[] = {
    // Rust's global allocator shims and the alloc crate's allocation layer
    "__rdl_", "__rg_", "__rust_", "__rustc::", "alloc::alloc::", "alloc::raw_vec::", "std::alloc::",
    "hashbrown::raw::", "<std::alloc::System as core::alloc::global::GlobalAlloc>",
    // libstdc++'s allocators
    "std::__new_allocator", "__gnu_cxx::new_allocator", "std::allocator<",
    "std::allocator_traits<", "__gnu_cxx::__alloc_traits<", "std::_Vector_base<",
    "std::__detail::_Hashtable_alloc<", NULL};

// container helpers that only (re)allocate, found anywhere in a C++ name
static const char *const alloc_infix[] = {
    "::_M_realloc_insert", "::_M_realloc_append", "::_M_default_append", "::_M_allocate",
    "::_M_create", "::_M_allocate_buckets", "::_M_allocate_node", "::_M_rehash",
    "::_M_mutate", "::_M_reserve_map", "::_M_new_elements", NULL};

static const char *const lib_prefix[] = {
    "std::", "core::", "alloc::", "hashbrown::", "__gnu_cxx::", "__cxxabiv1::", "panic_unwind::",
    "panic_abort::", "compiler_builtins::", "std_detect::", "gimli::", "addr2line::",
    "miniz_oxide::", "rustc_demangle::", "object::", "__libc_start", NULL};

// process and thread entry points (in the executable itself when it is linked statically)
static const char *const lib_exact[] = {"_start", "start_thread", "clone", "__clone",
                                        "__clone3", "__clone_internal", NULL};

static const char *const lib_modules[] = {
    "libc.so", "libstdc++.so", "libm.so", "libgcc_s.so", "ld-linux", "libpthread.so",
    "libdl.so", "librt.so", "libc++.so", "libc++abi.so", "libunwind.so", NULL};

// Sources of the standard libraries: Rust's (rustc records /rustc/<commit>/library/..., or the
// path relative to it, and /rust/deps/ for its vendored crates) and the system's C and C++
// headers, whose inline functions land in the user's binary.
static const char *const lib_files[] = {"/rustc/", "/rust/deps/", "library/std/", "library/core/",
                                        "library/alloc/", "/usr/include/", NULL};

sites_frame_kind_t sites_classify(const char *function, const char *file, const char *module) {
    if (function) {
        if (strstr(function, "operator new") || strstr(function, "operator delete"))
            return SITES_FRAME_ALLOCATOR;
        const char *q = skip_rust_impl(sites_skip_return_type(function));
        if (any_equal(function, alloc_exact) || any_prefix(q, alloc_prefix))
            return SITES_FRAME_ALLOCATOR;
        if (strncmp(q, "std::", 5) == 0 || strncmp(q, "__gnu_cxx::", 11) == 0)
            for (const char *const *i = alloc_infix; *i; i++)
                if (strstr(q, *i))
                    return SITES_FRAME_ALLOCATOR;
        if (any_prefix(q, lib_prefix) || any_equal(function, lib_exact))
            return SITES_FRAME_LIBRARY;
    }
    if (file && any_prefix(file, lib_files))
        return SITES_FRAME_LIBRARY;
    if (module) {
        const char *base = strrchr(module, '/');
        base = base ? base + 1 : module;
        if (any_prefix(base, lib_modules))
            return SITES_FRAME_LIBRARY;
    }
    return SITES_FRAME_USER;
}

// ---- the table ----

void sites_set_alloc_fns(sites_t *s, const char *const *names, size_t n) {
    s->alloc_fns = names;
    s->n_alloc_fns = n;
}

void sites_keep_wrappers(sites_t *s, bool keep) { s->keep_wrappers = keep; }

bool sites_function_named(const char *function, const char *name, bool pattern) {
    if (!function)
        return false;
    if (strcmp(function, name) == 0 || (pattern && fnmatch(name, function, 0) == 0))
        return true;
    const char *q = sites_skip_return_type(function);
    const char *paren = strchr(q, '(');
    size_t len = paren ? (size_t)(paren - q) : strlen(q);
    char bare[1024];
    if (len >= sizeof bare)
        return false;
    memcpy(bare, q, len);
    bare[len] = '\0';
    return strcmp(bare, name) == 0 || (pattern && fnmatch(name, bare, 0) == 0);
}

// Whether function is one the user named with --alloc-fn.
static bool is_alloc_fn(const sites_t *s, const char *function) {
    for (size_t i = 0; function && i < s->n_alloc_fns; i++)
        if (sites_function_named(function, s->alloc_fns[i], false))
            return true;
    return false;
}

sites_t *sites_new(const reader_t *r, const replay_t *rp, symbolize_t *sym) {
    sites_t *s = xcalloc(1, sizeof *s);
    s->r = r;
    s->sym = sym;
    s->n = replay_n_sites(rp);
    s->v = xcalloc(s->n, sizeof *s->v);
    for (size_t i = 0; i < s->n; i++)
        replay_site(rp, i, &s->v[i].fig);
    return s;
}

void sites_free(sites_t *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].frames);
        free(s->v[i].kinds);
    }
    free(s->v);
    if (s->callers_counted)
        hmap_fini(&s->n_callers);
    free(s);
}

size_t sites_count(const sites_t *s) { return s->n; }

const replay_site_t *sites_figures(const sites_t *s, size_t i) { return &s->v[i].fig; }

const symbolize_frame_t **sites_expand_stack(const reader_t *r, symbolize_t *sym, uint64_t id,
                                             size_t *n_out, bool *known) {
    uint32_t n_pcs = 0;
    const uint64_t *pcs = id ? reader_stack(r, id, &n_pcs) : NULL;
    if (known)
        *known = pcs != NULL && n_pcs > 0;
    size_t cap = 0, n = 0;
    const symbolize_frame_t **frames = NULL;
    for (uint32_t i = 0; pcs && i < n_pcs; i++) {
        size_t k;
        const symbolize_frame_t *f = symbolize_addr(sym, pcs[i], &k);
        frames = xgrow(frames, &cap, n + k, sizeof *frames);
        for (size_t j = 0; j < k; j++)
            frames[n++] = &f[j];
    }
    *n_out = n;
    return frames ? frames : xmalloc(sizeof *frames);
}

// An allocator's entry point, as opposed to a helper that also allocates (C++'s
// _M_realloc_insert runs the element's copy constructors, which are the user's).
static bool is_alloc_entry(const char *function) {
    if (!function)
        return false;
    const char *q = skip_rust_impl(sites_skip_return_type(function));
    return any_equal(function, alloc_exact) || strncmp(q, "__rustc::", 9) == 0 ||
           strncmp(q, "__rdl_", 6) == 0 || strncmp(q, "__rg_", 5) == 0 ||
           strstr(function, " as core::alloc::global::GlobalAlloc>::") != NULL;
}

// A forwarder is a wrapper only when the trace shows it serving several functions: this many
// call it in the trace's stacks. With one caller, naming the site by the caller gains nothing
// and a function that decides what to allocate for its one caller (a factory such as
// `make_request`, which returns malloc(64)) would lose its name. A function that passes the
// loose rule only (it hands the block to bookkeeping, as sqlite3Malloc does) needs more
// evidence, as the machine code no longer tells it from a constructor that calls an init().
#define WRAPPER_MIN_CALLERS 2
#define LOOSE_WRAPPER_MIN_CALLERS 4

// n_callers from every site's stack: each pair of adjacent frames' functions counted once.
static void count_callers(sites_t *s) {
    s->callers_counted = true;
    hmap_init(&s->n_callers, sizeof(uint32_t));
    hmap_t pairs;
    hmap_init(&pairs, 1);
    for (size_t i = 0; i < s->n; i++) {
        uint32_t n_pcs = 0;
        const uint64_t *pcs = s->v[i].fig.stack ? reader_stack(s->r, s->v[i].fig.stack, &n_pcs)
                                                : NULL;
        uint64_t callee = pcs && n_pcs ? symbolize_function_start(s->sym, pcs[0]) : 0;
        for (uint32_t k = 1; pcs && k < n_pcs; k++) {
            uint64_t caller = symbolize_function_start(s->sym, pcs[k]);
            bool seen = true;
            if (callee && caller)
                hmap_put(&pairs, callee * 0x9e3779b97f4a7c15ull ^ caller, &seen);
            if (!seen)
                (*(uint32_t *)hmap_put(&s->n_callers, callee, NULL))++;
            callee = caller;
        }
    }
    hmap_fini(&pairs);
}

// Whether the function holding return address pc is a wrapper: a forwarder by the strict rule
// called from WRAPPER_MIN_CALLERS functions, or by the loose one called from
// LOOSE_WRAPPER_MIN_CALLERS (the trace's evidence that it serves the program, not one caller).
static bool is_wrapper(sites_t *s, uint64_t pc) {
    unsigned need;
    if (symbolize_forwards_to_allocator(s->sym, pc, false))
        need = WRAPPER_MIN_CALLERS;
    else if (symbolize_forwards_to_allocator(s->sym, pc, true))
        need = LOOSE_WRAPPER_MIN_CALLERS;
    else
        return false;
    if (!s->callers_counted)
        count_callers(s);
    const uint32_t *n = hmap_get(&s->n_callers, symbolize_function_start(s->sym, pc));
    return n && *n >= need;
}

// The program's own functions that only forward to the allocator (xmalloc, jv_mem_alloc; the
// rule is docs/design.md#allocator-wrappers) become allocator frames: from the innermost frame,
// which called the allocator, outwards while each machine function (the frames of one return
// address: a call with the calls inlined into it) is a wrapper, so chains of them go too.
static void mark_forwarders(sites_t *s, site_t *site) {
    size_t i = 0, n = site->n_frames;
    while (i < n && site->kinds[i] == SITES_FRAME_ALLOCATOR)
        i++;
    while (i < n && site->kinds[i] == SITES_FRAME_USER) {
        size_t last = i;
        while (last + 1 < n && site->frames[last + 1]->pc == site->frames[i]->pc)
            last++;
        if (!is_wrapper(s, site->frames[i]->pc))
            return;
        for (size_t k = i; k <= last; k++)
            site->kinds[k] = SITES_FRAME_ALLOCATOR;
        i = last + 1;
    }
}

static void resolve(sites_t *s, site_t *site) {
    size_t n;
    const symbolize_frame_t **frames =
        sites_expand_stack(s->r, s->sym, site->fig.stack, &n, &site->known_stack);
    site->frames = frames;
    site->kinds = xcalloc(n ? n : 1, 1);
    site->n_frames = n;
    for (size_t i = 0; i < n; i++)
        site->kinds[i] =
            is_alloc_fn(s, frames[i]->function)
                ? SITES_FRAME_ALLOCATOR
                : (uint8_t)sites_classify(frames[i]->function, frames[i]->file, frames[i]->module);
    // Whatever an allocator's entry point calls is the allocator's: a #[global_allocator]'s
    // code inlined into __rust_alloc, a program's own malloc's helpers (issue #21: hooked at
    // their entry, their blocks are recorded from inside them).
    for (size_t i = n; i-- > 1;)
        if (is_alloc_entry(frames[i]->function)) {
            memset(site->kinds, SITES_FRAME_ALLOCATOR, i);
            break;
        }
    if (!s->keep_wrappers)
        mark_forwarders(s, site);
    size_t first_lib = n, first_user = n, first_user_src = n;
    for (size_t i = 0; i < n; i++) {
        if (site->kinds[i] == SITES_FRAME_USER && first_user == n)
            first_user = i;
        if (site->kinds[i] == SITES_FRAME_USER && frames[i]->file && first_user_src == n)
            first_user_src = i;
        if (site->kinds[i] == SITES_FRAME_LIBRARY && first_lib == n)
            first_lib = i;
    }
    // the user's first frame with a source line (a frame without one is usually a runtime
    // shim such as the C `main` rustc generates); without any, the user's first frame (a
    // stripped binary); for allocations the runtime makes on its own, the runtime's
    site->name_frame = first_user_src < n ? first_user_src
                       : first_user < n   ? first_user
                       : first_lib < n    ? first_lib
                                          : 0;
}

const site_t *sites_get(sites_t *s, size_t i) {
    site_t *site = &s->v[i];
    if (!site->frames)
        resolve(s, site);
    return site;
}

// ---- display ----

static const char *module_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

const char *sites_frame_function(const symbolize_frame_t *f, char *buf, size_t cap) {
    if (f->function)
        return f->function;
    if (f->module)
        snprintf(buf, cap, "%s+0x%" PRIx64, module_name(f->module), f->module_offset);
    else
        snprintf(buf, cap, "0x%" PRIx64, f->pc);
    return buf;
}

const char *sites_frame_location(const symbolize_frame_t *f, char *buf, size_t cap) {
    if (f->file && f->line)
        snprintf(buf, cap, "%s:%" PRIu32, symbolize_short_path(f->file, 3), f->line);
    else if (f->file)
        snprintf(buf, cap, "%s", symbolize_short_path(f->file, 3));
    else if (f->module)
        snprintf(buf, cap, "%s+0x%" PRIx64, module_name(f->module), f->module_offset);
    else
        snprintf(buf, cap, "0x%" PRIx64, f->pc);
    return buf;
}
