// SPDX-License-Identifier: MIT
#include "out_file.h"

#include "xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int out_file_open(out_file_t *o, const char *cmd, const char *path, FILE *dflt, errmsg_t *err) {
    *o = (out_file_t){.f = dflt, .cmd = cmd};
    if (!path || strcmp(path, "-") == 0)
        return 0;
    struct stat st;
    o->path = path;
    o->in_place = lstat(path, &st) == 0 && !S_ISREG(st.st_mode);
    size_t n = strlen(path) + 5;
    o->tmp = xmalloc(n);
    snprintf(o->tmp, n, o->in_place ? "%s" : "%s.tmp", path);
    o->f = fopen(o->tmp, "w");
    if (!o->f) {
        errmsg_set(err, "%s: cannot write %s: %s", cmd, o->tmp, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        return -1;
    }
    return 0;
}

int out_file_close(out_file_t *o, int rc, errmsg_t *err) {
    if (!o->path)
        return rc;
    if (fclose(o->f) != 0 && rc == 0) {
        errmsg_set(err, "%s: cannot write %s: %s", o->cmd, o->tmp, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && !o->in_place && rename(o->tmp, o->path) != 0) {
        errmsg_set(err, "%s: cannot rename %s to %s: %s", o->cmd, o->tmp, o->path, strerror(errno));
        rc = -1;
    }
    if (rc != 0 && !o->in_place)
        remove(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    return rc;
}
