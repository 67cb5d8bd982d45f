// SPDX-License-Identifier: MIT
// sites: allocation sites (one per distinct stack) with their DHAT figures from replay, their
// stacks symbolized and expanded (inlined calls become frames), and the frame that names them:
// the first frame of the user's code, past the allocator's internals (malloc's wrappers,
// operator new, Rust's __rust_alloc / alloc::raw_vec / hashbrown growth, libstdc++'s
// realloc-insert helpers) and the standard libraries that called it. The full stack is kept.
#ifndef HEAPPROF_ANALYZER_SITES_H
#define HEAPPROF_ANALYZER_SITES_H

#include "model/replay.h"
#include "symbols/symbolize.h"
#include "trace/reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum sites_frame_kind {
    SITES_FRAME_USER = 0,  // the program's own code (or a library we do not know)
    SITES_FRAME_LIBRARY,   // language runtime and standard library: libc, libstdc++, std/core
    SITES_FRAME_ALLOCATOR, // the allocation machinery itself
} sites_frame_kind_t;

// What a frame is, from its demangled function name, source file and module path (each NULL
// if unknown). Pure; used for every frame of a site and by tests.
sites_frame_kind_t sites_classify(const char *function, const char *file, const char *module);

typedef struct site {
    replay_site_t fig;
    const symbolize_frame_t **frames; // expanded stack, innermost first; NULL until resolved
    uint8_t *kinds;                   // sites_frame_kind_t of each frame
    size_t n_frames;
    size_t name_frame; // index of the frame that names the site (valid when n_frames > 0)
    bool known_stack;  // the stack id was defined in the trace (0 = unwinding failed)
} site_t;

typedef struct sites sites_t;

// All sites of rp (which must have run with REPLAY_SITES). Stacks are resolved lazily by
// sites_get. r, rp and sym must outlive the result. May allocate.
sites_t *sites_new(const reader_t *r, const replay_t *rp, symbolize_t *sym);
void sites_free(sites_t *s);
// Functions of the program's own that allocate for their callers (`--alloc-fn`, as DHAT's): a
// frame of one is part of the allocator, so its callers name the sites. names must outlive s;
// call before the first sites_get.
void sites_set_alloc_fns(sites_t *s, const char *const *names, size_t n);
// With keep, functions that only forward to the allocator (xmalloc, g_malloc: detected from
// their machine code, docs/design.md#allocator-wrappers) name sites like any other; by default
// they count as the allocator's. Call before the first sites_get.
void sites_keep_wrappers(sites_t *s, bool keep);
size_t sites_count(const sites_t *s);

// Figures of site i, without resolving its stack.
const replay_site_t *sites_figures(const sites_t *s, size_t i);

// Site i with its stack symbolized (done once, on first access). May allocate.
const site_t *sites_get(sites_t *s, size_t i);

// Stack id expanded into symbolized frames, innermost first, inlined calls as frames of their own
// (stack 0 or an undefined id: none). *known: the id was defined and non-empty (may be NULL).
// Returns a malloc'd array (never NULL) of *n frames owned by sym.
const symbolize_frame_t **sites_expand_stack(const reader_t *r, symbolize_t *sym, uint64_t id,
                                             size_t *n, bool *known);

// "void std::vector<int>::push_back(int const&)" -> "std::vector<int>::push_back(int const&)":
// skips a return type, i.e. everything up to the last space at bracket depth 0 before the
// parameter list. Returns a pointer into name.
const char *sites_skip_return_type(const char *name);

// Whether a frame's function is the one name says: its whole name, or the name without a return
// type and parameter list ("xmalloc" names "void *xmalloc(size_t)" as well); with pattern, name
// may also be a shell pattern ('*', '?', [...]). NULL function: false.
bool sites_function_named(const char *function, const char *name, bool pattern);

// Display name of a frame's function: the demangled name, else "MODULE+0xOFFSET" (module file
// name only), else "0xADDRESS". Writes into buf when it has to compose; returns buf or a
// string owned by the symbolizer.
const char *sites_frame_function(const symbolize_frame_t *f, char *buf, size_t cap);

// Display location of a frame: "path:line" with the path cut to its last 3 components, else
// the module's file name and offset as above. Writes into buf and returns it.
const char *sites_frame_location(const symbolize_frame_t *f, char *buf, size_t cap);

#endif
