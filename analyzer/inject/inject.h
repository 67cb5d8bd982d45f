// SPDX-License-Identifier: MIT
// `heapprof attach` / `detach` without gdb (docs/design.md#attach): loads
// libheapprof.so into a running process through its own libc's dlopen on a
// borrowed thread (remote.h), starts attached recording (preload/attach.c) and
// later ends it. Refuses what cannot work before touching the target (target.h)
// and undoes what it did when a later step fails: the target is never left
// stopped, and never with heapprof half started.
#ifndef HEAPPROF_ANALYZER_INJECT_INJECT_H
#define HEAPPROF_ANALYZER_INJECT_INJECT_H

#include "core/errmsg.h"

#include <stdint.h>
#include <sys/types.h>

typedef struct inject_result {
    uint64_t state_addr; // the shim's attach state word in the target (1 while
                         // recording)
    char trace[4096];    // where the trace is being written, as this process can
                         // open it
} inject_result_t;

// Loads lib_path (a path this process can read) into pid and starts recording
// into out_path (an absolute path as this process sees it; it must not exist).
// Returns 0, or -1 with err set.
int inject_attach(pid_t pid, const char *lib_path, const char *out_path, inject_result_t *res,
                  errmsg_t *err);

// Ends recording in pid: the slots put back, the trace finished; libheapprof
// stays loaded. *n_restored gets the number of slots put back. -1 with err set
// (not attached, ...).
int inject_detach(pid_t pid, long *n_restored, errmsg_t *err);

// The attach state word's value (1: recording), or -1 if it cannot be read
// (process gone).
long inject_state(pid_t pid, uint64_t state_addr);

#endif
