// SPDX-License-Identifier: MIT
// Formatting shared by every output (fmt.h): thousands separators, binary byte units, durations,
// percentages, JSON values that jansson always accepts, and text safe to print (fmt_safe_text).
#include "core/fmt.h"

#include "core/xalloc.h"

#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fmt_grouped(uint64_t v, char buf[32]) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    int o = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

const char *fmt_bytes(uint64_t v, char buf[32]) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double d = (double)v;
    unsigned u = 0;
    while (d >= 1024 && u + 1 < sizeof units / sizeof *units) {
        d /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, 32, "%" PRIu64 " B", v);
    else
        snprintf(buf, 32, "%.1f %s", d, units[u]);
    return buf;
}

const char *fmt_duration(double ns, char buf[32]) {
    if (ns < 1e3)
        snprintf(buf, 32, "%.0f ns", ns);
    else if (ns < 1e6)
        snprintf(buf, 32, "%.1f \xc2\xb5s", ns / 1e3);
    else if (ns < 1e9)
        snprintf(buf, 32, "%.1f ms", ns / 1e6);
    else
        snprintf(buf, 32, "%.2f s", ns / 1e9);
    return buf;
}

const char *fmt_percent(uint64_t part, uint64_t whole, char buf[16]) {
    if (whole == 0)
        snprintf(buf, 16, "-");
    else
        snprintf(buf, 16, "%.1f%%", 100.0 * (double)part / (double)whole);
    return buf;
}

size_t fmt_utf8_len(const unsigned char *s) {
    if (s[0] < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if ((s[0] & 0xE0) == 0xC0) {
        n = 2;
        cp = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        n = 3;
        cp = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        n = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    // overlong forms, surrogates and values past U+10FFFF are invalid too; so are U+FFFE and
    // U+FFFF, which XML (the SVG flamegraphs) does not allow
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
        return 0;
    return n;
}

char *fmt_safe_text(const char *s, char *buf, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t o = 0;
    while (*p) {
        size_t k = fmt_utf8_len(p);
        bool control = k == 0 || (k == 1 && (*p < 0x20 || *p == 0x7f)) ||
                       (k == 2 && p[0] == 0xc2 && p[1] < 0xa0);
        if (!control) {
            if (o + k >= cap)
                break;
            memcpy(buf + o, p, k);
            o += k;
            p += k;
            continue;
        }
        size_t n = k ? k : 1; // an invalid byte alone: what follows may be valid again
        if (o + 4 * n >= cap)
            break;
        for (size_t i = 0; i < n; i++, p++) {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

json_t *fmt_json_str(const char *s) {
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    size_t n = strlen(s);
    char *clean = xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = fmt_utf8_len((const unsigned char *)s + i);
        if (k == 0) {
            clean[o++] = '?';
            i++;
        } else {
            memcpy(clean + o, s + i, k);
            o += k;
            i += k;
        }
    }
    clean[o] = '\0';
    j = json_string(clean);
    free(clean);
    return j ? j : json_string("?");
}

json_t *fmt_json_int(uint64_t v) { return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v); }
