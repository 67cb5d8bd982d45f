// SPDX-License-Identifier: MIT
// One-shot stderr lines for the shim. Runs inside malloc: no stdio, no locks, no allocation.
#include "diag.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

void hp_diag_line(const char *first, ...) {
    char buf[1024];
    size_t n = 0;
    int saved = errno;
    const char *prefix = "heapprof: ";
    va_list ap;
    va_start(ap, first);
    for (const char *s = prefix; s; s = (s == prefix) ? first : va_arg(ap, const char *)) {
        size_t l = strlen(s);
        if (l > sizeof buf - 1 - n)
            l = sizeof buf - 1 - n;
        memcpy(buf + n, s, l);
        n += l;
    }
    va_end(ap);
    buf[n++] = '\n';
    ssize_t r = write(STDERR_FILENO, buf, n);
    (void)r; // nothing sensible to do if stderr is gone
    errno = saved;
}

char *hp_diag_u64(char *buf, uint64_t v) {
    char tmp[21];
    int i = 20;
    tmp[i] = 0;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy(buf, tmp + i, (size_t)(21 - i));
    return buf;
}
