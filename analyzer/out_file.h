// SPDX-License-Identifier: MIT
// out_file: where a command's -o FILE goes. A regular file (or a new one) is written as FILE.tmp
// and renamed over FILE only once complete, so a failed run never leaves half a report behind;
// anything else that exists at FILE (a FIFO, a device such as /dev/null, a symlink) is written
// in place, never replaced. "-" or no path means the stream the caller gives.
#ifndef HEAPPROF_ANALYZER_OUT_FILE_H
#define HEAPPROF_ANALYZER_OUT_FILE_H

#include "errmsg.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct out_file {
    FILE *f;        // write here
    const char *cmd; // for messages: "dhat", "flame", ...
    const char *path; // NULL: f is the caller's stream
    char *tmp;      // the file being written (FILE.tmp, or path itself in place)
    bool in_place;
} out_file_t;

// Opens the output; returns 0, or -1 with err filled ("CMD: cannot write PATH: reason").
int out_file_open(out_file_t *o, const char *cmd, const char *path, FILE *dflt, errmsg_t *err);

// Finishes it: with rc == 0 closes and renames into place (err filled and -1 if that fails);
// with rc != 0 closes and removes what was written. Returns the final rc.
int out_file_close(out_file_t *o, int rc, errmsg_t *err);

#endif
