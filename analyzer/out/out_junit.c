// SPDX-License-Identifier: MIT
// The JUnit writer. Attribute and text values go through fmt_safe_text first (no control bytes,
// which XML 1.0 forbids, and valid UTF-8), then XML's five escapes.
#include "out/out_junit.h"

#include "out/out.h"

#include <stdlib.h>
#include <string.h>

static void put_xml(FILE *f, const char *s) {
    size_t cap = 4 * strlen(s) + 1;
    char *safe = malloc(cap);
    if (!safe) {
        fputs("?", f);
        return;
    }
    fmt_safe_text(s, safe, cap);
    for (const char *p = safe; *p; p++) {
        switch (*p) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            fputc(*p, f);
        }
    }
    free(safe);
}

int out_junit_write(FILE *f, const char *suite, const out_junit_case_t *cases, size_t n,
                    const char *error, double time_s, errmsg_t *err) {
    size_t failures = 0;
    for (size_t i = 0; i < n; i++)
        failures += cases[i].failure != NULL;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites tests=\"%zu\" failures=\"%zu\" errors=\"%d\" time=\"%.3f\">\n",
            n + (error != NULL), failures, error != NULL, time_s);
    fputs("  <testsuite name=\"", f);
    put_xml(f, suite);
    fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%d\" skipped=\"0\" time=\"%.3f\">\n",
            n + (error != NULL), failures, error != NULL, time_s);
    for (size_t i = 0; i < n; i++) {
        fputs("    <testcase classname=\"heapprof.check\" name=\"", f);
        put_xml(f, cases[i].name);
        if (!cases[i].failure) {
            fputs("\" time=\"0\"/>\n", f);
            continue;
        }
        fputs("\" time=\"0\">\n      <failure type=\"budget\" message=\"", f);
        put_xml(f, cases[i].failure);
        fputs("\">", f);
        put_xml(f, cases[i].failure);
        fputs("</failure>\n    </testcase>\n", f);
    }
    if (error) {
        fputs("    <testcase classname=\"heapprof.check\" name=\"check\" time=\"0\">\n"
              "      <error type=\"error\" message=\"",
              f);
        put_xml(f, error);
        fputs("\">", f);
        put_xml(f, error);
        fputs("</error>\n    </testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
    if (fflush(f) != 0 || ferror(f)) {
        errmsg_set(err, "check: cannot write the JUnit file");
        return -1;
    }
    return 0;
}
