// SPDX-License-Identifier: MIT
#include "cmd/cmd_args.h"

#include <stddef.h>
#include <string.h>

int cmd_args_other(const char *cmd, const char *a, bool *only_args, const char **trace,
                   errmsg_t *err) {
    if (!*only_args && strcmp(a, "--") == 0) {
        *only_args = true;
    } else if (!*only_args && a[0] == '-' && a[1] != '\0') {
        errmsg_set(err, "%s: unknown option '%s' (see heapprof %s --help)", cmd, a, cmd);
        return -1;
    } else if (!*trace) {
        *trace = a;
    } else {
        errmsg_set(err, "%s: unexpected argument '%s' (one TRACE only)", cmd, a);
        return -1;
    }
    return 0;
}

int cmd_args_need_trace(const char *cmd, const char *trace, errmsg_t *err) {
    if (trace)
        return 0;
    errmsg_set(err, "%s: missing TRACE (see heapprof %s --help)", cmd, cmd);
    return -1;
}

int cmd_args_trace_out(const char *cmd, int argc, char **argv, const char **trace,
                       const char **out, errmsg_t *err) {
    *trace = *out = NULL;
    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0)) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                errmsg_set(err, "%s: %s needs a FILE", cmd, a);
                return -1;
            }
            *out = argv[++i];
        } else if (!only_args && strncmp(a, "--output=", 9) == 0 && a[9]) {
            *out = a + 9;
        } else if (cmd_args_other(cmd, a, &only_args, trace, err) != 0) {
            return -1;
        }
    }
    return cmd_args_need_trace(cmd, *trace, err);
}
