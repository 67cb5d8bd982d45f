// SPDX-License-Identifier: MIT
// hp_pipeline_sites: call sites for hp_pipeline_stress, in a module of their own. The shim drops
// the innermost frames of its own module (the stress program links hp_core), so sites there
// would all be the thread's start; frames here are kept, and the stacks vary by site and depth
// as a program's do (new stacks interned from many threads at once).
#include "pipeline_sites.h"

#define NOINLINE __attribute__((noipa)) // not inlined, cloned nor folded with its twin

// The empty asm after each call keeps every frame a real one (no tail call).
static NOINLINE void *site_a(hp_stress_alloc_fn fn, size_t n, uint64_t r) {
    void *p = fn(n, r);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}

static NOINLINE void *site_b(hp_stress_alloc_fn fn, size_t n, uint64_t r) {
    void *p = fn(n, r);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}

static NOINLINE void *site_deep(hp_stress_alloc_fn fn, size_t n, uint64_t r, unsigned depth) {
    void *p = depth ? site_deep(fn, n, r, depth - 1) : site_b(fn, n, r);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}

void *hp_stress_site(hp_stress_alloc_fn fn, size_t n, uint64_t r) {
    unsigned site = hp_stress_site_of(r);
    void *p = site == 0   ? site_a(fn, n, r)
              : site == 1 ? site_b(fn, n, r)
                          : site_deep(fn, n, r, site - 2);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}
