// SPDX-License-Identifier: MIT
// errmsg_t: the analyzer's error message, filled by fallible functions and printed by main.c.
// First error wins: a later errmsg_set on a filled message is ignored, so the root cause survives
// the unwinding of its callers. Never allocates.
#ifndef HEAPPROF_ANALYZER_ERRMSG_H
#define HEAPPROF_ANALYZER_ERRMSG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct errmsg {
    bool is_set;
    char msg[512];
} errmsg_t;

static inline void errmsg_init(errmsg_t *e) {
    e->is_set = false;
    e->msg[0] = '\0';
}

// printf-style; err may be NULL (the caller does not care why).
__attribute__((format(printf, 2, 3))) static inline void errmsg_set(errmsg_t *e, const char *fmt,
                                                                    ...) {
    if (!e || e->is_set)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->is_set = true;
}

#endif
