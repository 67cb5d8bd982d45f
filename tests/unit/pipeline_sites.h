// SPDX-License-Identifier: MIT
// Call sites in a module of their own for hp_pipeline_stress (pipeline_sites.c).
#ifndef HEAPPROF_TESTS_PIPELINE_SITES_H
#define HEAPPROF_TESTS_PIPELINE_SITES_H

#include <stddef.h>
#include <stdint.h>

typedef void *(*hp_stress_alloc_fn)(size_t n, uint64_t r);

// Calls fn(n, r) from one of a few call sites and depths (1 to 13 frames of this module),
// chosen by r's top bits.
__attribute__((visibility("default"))) void *hp_stress_site(hp_stress_alloc_fn fn, size_t n,
                                                            uint64_t r);

#endif
