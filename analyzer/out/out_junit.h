// SPDX-License-Identifier: MIT
// out_junit: JUnit XML for CI test reporters (GitLab, Jenkins, GitHub actions that read JUnit):
// one <testsuite> with one <testcase> per budget, in the shape of the Jenkins/Ant JUnit schema
// (tests/e2e/junit.xsd validates it). Text is escaped for XML and made printable.
#ifndef HEAPPROF_ANALYZER_OUT_JUNIT_H
#define HEAPPROF_ANALYZER_OUT_JUNIT_H

#include "core/errmsg.h"

#include <stddef.h>
#include <stdio.h>

typedef struct out_junit_case {
    const char *name;    // the budget as it reads
    const char *failure; // NULL: it held; else the one-line message of the broken budget
} out_junit_case_t;

// Writes the document to f: suite name, the cases, and error (NULL, or why the check itself
// failed: the command's status, a damaged trace) as an extra errored case. Returns 0, or -1
// with err filled when f cannot be written.
int out_junit_write(FILE *f, const char *suite, const out_junit_case_t *cases, size_t n,
                    const char *error, double time_s, errmsg_t *err);

#endif
