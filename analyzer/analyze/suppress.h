// SPDX-License-Identifier: MIT
// suppress: known leaks, in LeakSanitizer's suppression format, so a report's leak ranking shows
// only the new ones. A file holds one rule per line, `leak:PATTERN` ('#' starts a comment,
// blank lines are skipped); a site is suppressed when PATTERN matches the function, the source
// file or the module of any frame of its stack. PATTERN matches as a substring, '*' matching
// any run of characters, a leading '^' anchoring it at the start and a trailing '$' at the end
// (LeakSanitizer's rules; docs/report-json.md#suppressions).
#ifndef HEAPPROF_ANALYZER_SUPPRESS_H
#define HEAPPROF_ANALYZER_SUPPRESS_H

#include "core/errmsg.h"
#include "model/sites.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct suppress suppress_t;

// Reads path. NULL with err filled ("FILE:LINE: ...", one line) if it cannot be read or a line
// is not a rule.
suppress_t *suppress_load(const char *path, errmsg_t *err);
void suppress_free(suppress_t *s);
size_t suppress_count(const suppress_t *s);

// Whether a rule matches a frame of the site (its stack resolved).
bool suppress_matches(const suppress_t *s, const site_t *site);

// LeakSanitizer's pattern match on one string (for tests).
bool suppress_pattern_match(const char *pattern, const char *s);

#endif
