// SPDX-License-Identifier: MIT
// The failure path of HP_ASSERT (debug.h): one stderr line through diag.c, then abort. Built
// into debug builds only; runs anywhere the shim runs, so it never allocates or uses stdio.
#include "debug.h"

#include "diag.h"

#include <stdlib.h>

#ifdef HEAPPROF_DEBUG
void hp_debug_fail(const char *file, int line, const char *expr) {
    char num[21];
    hp_diag_line("assertion failed: ", file, ":", hp_diag_u64(num, (uint64_t)line), ": ", expr,
                 (char *)NULL);
    abort();
}
#endif
