// SPDX-License-Identifier: MIT
// qsort for arrays that may be empty. An empty array's pointer is often NULL here (an xgrow'd
// list nothing was added to), and qsort's pointer is declared never NULL, whatever the count:
// UBSan reports the call (found by bench/par_fuzz.py on a trace with no blocks, `flame`).
#ifndef HEAPPROF_ANALYZER_SORT_H
#define HEAPPROF_ANALYZER_SORT_H

#include <stddef.h>
#include <stdlib.h>

static inline void sort_items(void *base, size_t n, size_t size,
                              int (*cmp)(const void *, const void *)) {
    if (n > 1)
        qsort(base, n, size, cmp);
}

#endif
