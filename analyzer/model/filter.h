// SPDX-License-Identifier: MIT
// filter: decides which allocations count, from definitions gathered by a first reader pass
// (stacks may be defined after their first use, so a single pass cannot decide).
// "From module NAME": the innermost frame (the caller of malloc) lies in a module whose path's
// basename is NAME. "Through function FUNC": a frame of the stack (inlined calls included) is
// of a function named FUNC (its whole name, or without return type and parameters; '*' and
// '?' match as in a shell). Both given: both must hold.
#ifndef HEAPPROF_ANALYZER_FILTER_H
#define HEAPPROF_ANALYZER_FILTER_H

#include "symbols/symbolize.h"
#include "trace/reader.h"

#include <stdbool.h>

typedef struct filter filter_t;

// defs: a reader after reader_load_defs; it must outlive the filter. Copies name.
filter_t *filter_new_from_module(const reader_t *defs, const char *name);
// The same for stacks through a function (name NULL: none); the filter symbolizes defs' stacks
// with a symbolizer of its own. module NULL: every module counts.
filter_t *filter_new(const reader_t *defs, const char *module, const char *function);
void filter_free(filter_t *f);

// replay_keep_fn for an allocation event. Hot path: one hash probe per event after the first
// event of each stack.
bool filter_keep(void *f, const reader_event_t *ev);

// Number of loaded modules whose basename matched (0 usually means a misspelt name).
size_t filter_n_matching_modules(const filter_t *f);

#endif
