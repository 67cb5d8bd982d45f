// SPDX-License-Identifier: MIT
// Call sites in a module of their own for hp_pipeline_stress (pipeline_sites.c).
#ifndef HEAPPROF_TESTS_PIPELINE_SITES_H
#define HEAPPROF_TESTS_PIPELINE_SITES_H

#include <stddef.h>
#include <stdint.h>

typedef void *(*hp_stress_alloc_fn)(size_t n, uint64_t r);

// The call site r's top bits pick: 0 site_a, 1 site_b, 2 + d site_deep d + 1 frames deep (d
// below 12) over site_b.
#define HP_STRESS_SITES 14u
static inline unsigned hp_stress_site_of(uint64_t r) {
    unsigned kind = (unsigned)(r >> 48) % 4;
    return kind < 2 ? kind : 2 + (unsigned)(r >> 52) % 12;
}

// Calls fn(n, r) from the call site hp_stress_site_of(r) (2 to 14 frames of this module).
__attribute__((visibility("default"))) void *hp_stress_site(hp_stress_alloc_fn fn, size_t n,
                                                            uint64_t r);

#endif
