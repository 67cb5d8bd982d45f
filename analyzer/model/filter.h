// SPDX-License-Identifier: MIT
// filter: decides which allocations count, from definitions gathered by a first reader pass
// (stacks may be defined after their first use, so a single pass cannot decide).
// "From module NAME": the innermost frame (the caller of malloc) lies in a module whose path's
// basename is NAME.
#ifndef HEAPPROF_ANALYZER_FILTER_H
#define HEAPPROF_ANALYZER_FILTER_H

#include "trace/reader.h"

#include <stdbool.h>

typedef struct filter filter_t;

// defs: a reader after reader_load_defs; it must outlive the filter. Copies name.
filter_t *filter_new_from_module(const reader_t *defs, const char *name);
void filter_free(filter_t *f);

// replay_keep_fn for an allocation event. Hot path: one hash probe per event after the first
// event of each stack.
bool filter_keep(void *f, const reader_event_t *ev);

// Number of loaded modules whose basename matched (0 usually means a misspelt name).
size_t filter_n_matching_modules(const filter_t *f);

#endif
