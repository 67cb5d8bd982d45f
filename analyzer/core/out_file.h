// SPDX-License-Identifier: MIT
// out_file: where a command's -o FILE goes. The output is written to a new temporary file beside
// FILE (created with O_EXCL|O_NOFOLLOW under a random name) and renamed over FILE only once
// complete, so a failed run never leaves half a report and nothing at FILE is ever written
// through. FILE must be absent or a regular file: a symlink, directory, FIFO or device there is
// refused, since writing through it or replacing it is never what -o asked for (a link planted in
// a shared directory must not aim the output at its target). "-" or no path means the caller's
// stream.
#ifndef HEAPPROF_ANALYZER_OUT_FILE_H
#define HEAPPROF_ANALYZER_OUT_FILE_H

#include "core/errmsg.h"

#include <stdio.h>

typedef struct out_file {
    FILE *f;          // write here
    const char *cmd;  // for messages: "dhat", "flame", ...
    const char *path; // NULL: f is the caller's stream
    char *tmp;        // the temporary file being written, renamed to path on success
} out_file_t;

// Opens the output; returns 0, or -1 with err filled ("CMD: cannot write PATH: reason", or
// "CMD: refusing to write PATH: it is a symbolic link ..."), leaving no file behind.
int out_file_open(out_file_t *o, const char *cmd, const char *path, FILE *dflt, errmsg_t *err);

// Finishes it: with rc == 0 closes, checks FILE again and renames the temporary file over it
// (err filled and -1 if any of that fails); with rc != 0 closes. The temporary file is removed
// whenever it was not renamed. Returns the final rc.
int out_file_close(out_file_t *o, int rc, errmsg_t *err);

#endif
