// SPDX-License-Identifier: MIT
// One-shot stderr lines for the shim. Runs inside malloc: no stdio, no locks, no allocation.
#include "diag.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

// Appends the strings of ap to buf[n..cap - 1); returns the new length (buf not terminated).
static size_t join(char *buf, size_t n, size_t cap, const char *first, va_list ap) {
    for (const char *s = first; s; s = va_arg(ap, const char *)) {
        size_t l = strlen(s);
        if (l > cap - 1 - n)
            l = cap - 1 - n;
        memcpy(buf + n, s, l);
        n += l;
    }
    return n;
}

size_t hp_diag_join(char *buf, size_t cap, const char *first, ...) {
    va_list ap;
    va_start(ap, first);
    size_t n = join(buf, 0, cap, first, ap);
    va_end(ap);
    buf[n] = 0;
    return n;
}

void hp_diag_line(const char *first, ...) {
    char buf[1024];
    static const char prefix[] = "heapprof: ";
    int saved = errno;
    memcpy(buf, prefix, sizeof prefix - 1);
    va_list ap;
    va_start(ap, first);
    size_t n = join(buf, sizeof prefix - 1, sizeof buf, first, ap);
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
