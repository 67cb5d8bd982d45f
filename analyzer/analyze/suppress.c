// SPDX-License-Identifier: MIT
// LeakSanitizer-style suppressions (suppress.h): the file read into a list of patterns, matched
// against every frame's function, file and module.
#include "analyze/suppress.h"

#include "core/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES 4096

struct suppress {
    char **patterns;
    size_t n, cap;
};

// '*' matches any run (greedy with backtracking, as fnmatch without its other metacharacters).
static bool star_match(const char *p, const char *p_end, const char *s, bool anchored_end) {
    while (p < p_end && *p != '*') {
        if (!*s || *s != *p)
            return false;
        p++, s++;
    }
    if (p == p_end)
        return !anchored_end || !*s;
    // at a '*': try every place the rest can start
    for (;; s++) {
        if (star_match(p + 1, p_end, s, anchored_end))
            return true;
        if (!*s)
            return false;
    }
}

bool suppress_pattern_match(const char *pattern, const char *s) {
    if (!s)
        return false;
    size_t len = strlen(pattern);
    bool start = len && pattern[0] == '^';
    const char *p = pattern + start, *end = pattern + len;
    bool anchored_end = end > p && end[-1] == '$';
    if (anchored_end)
        end--;
    if (start)
        return star_match(p, end, s, anchored_end);
    for (const char *t = s;; t++) { // a substring: any start will do
        if (star_match(p, end, t, anchored_end))
            return true;
        if (!*t)
            return false;
    }
}

suppress_t *suppress_load(const char *path, errmsg_t *err) {
    FILE *f = fopen(path, "r");
    if (!f) {
        errmsg_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    suppress_t *s = xcalloc(1, sizeof *s);
    char line[LINE_MAX_BYTES];
    unsigned no = 0;
    while (fgets(line, sizeof line, f)) {
        no++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            errmsg_set(err, "%s:%u: line longer than %d bytes", path, no, LINE_MAX_BYTES - 2);
            goto fail;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *b = line, *e = line + strlen(line);
        while (*b == ' ' || *b == '\t')
            b++;
        while (e > b && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        *e = '\0';
        if (!*b)
            continue;
        if (strncmp(b, "leak:", 5) != 0 || !b[5]) {
            errmsg_set(err, "%s:%u: not a suppression (a line is leak:PATTERN)", path, no);
            goto fail;
        }
        s->patterns = xgrow(s->patterns, &s->cap, s->n + 1, sizeof *s->patterns);
        s->patterns[s->n++] = xstrdup(b + 5);
    }
    if (ferror(f)) {
        errmsg_set(err, "%s: read error", path);
        goto fail;
    }
    fclose(f);
    return s;
fail:
    fclose(f);
    suppress_free(s);
    return NULL;
}

void suppress_free(suppress_t *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->patterns[i]);
    free(s->patterns);
    free(s);
}

size_t suppress_count(const suppress_t *s) { return s ? s->n : 0; }

bool suppress_matches(const suppress_t *s, const site_t *site) {
    for (size_t i = 0; s && i < s->n; i++)
        for (size_t k = 0; k < site->n_frames; k++) {
            const symbolize_frame_t *f = site->frames[k];
            if (suppress_pattern_match(s->patterns[i], f->function) ||
                suppress_pattern_match(s->patterns[i], f->file) ||
                suppress_pattern_match(s->patterns[i], f->module))
                return true;
        }
    return false;
}
