// SPDX-License-Identifier: MIT
// out_file: -o FILE as a temporary file renamed into place (out_file.h). Never opens FILE itself,
// so no symlink, FIFO or device at FILE is ever written through.
#include "core/out_file.h"

#include "core/random.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    if (S_ISLNK(m))
        return "a symbolic link";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

// 0 when path is absent or a regular file (what rename may replace). lstat, not stat: a symlink
// is judged as itself, never by what it points at.
static int check_target(const char *cmd, const char *path, errmsg_t *err) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        errmsg_set(err, "%s: cannot write %s: %s", cmd, path, strerror(errno));
        return -1;
    }
    if (S_ISREG(st.st_mode))
        return 0;
    errmsg_set(err, "%s: refusing to write %s: it is %s, not a regular file (use -o - for stdout)",
               cmd, path, kind_of(st.st_mode));
    return -1;
}


// Creates "PATH.tmp-XXXXXXXX" beside path (same directory, so rename is atomic) and returns its
// fd, with o->tmp set; -1 and err filled when none can be made. O_EXCL|O_NOFOLLOW: a name that
// someone planted (a file or a link) is skipped, never opened. Mode 0666 less the umask, as
// fopen(3) would give.
static int create_temp(out_file_t *o, errmsg_t *err) {
    size_t n = strlen(o->path) + sizeof ".tmp-0123456789abcdef";
    o->tmp = xmalloc(n);
    for (int tries = 0; tries < 100; tries++) {
        snprintf(o->tmp, n, "%s.tmp-%016llx", o->path, (unsigned long long)random_u64());
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            break;
    }
    errmsg_set(err, "%s: cannot write %s: %s", o->cmd, o->path, strerror(errno));
    free(o->tmp);
    o->tmp = NULL;
    return -1;
}

int out_file_open(out_file_t *o, const char *cmd, const char *path, FILE *dflt, errmsg_t *err) {
    *o = (out_file_t){.f = dflt, .cmd = cmd};
    if (!path || strcmp(path, "-") == 0)
        return 0;
    o->path = path;
    if (check_target(cmd, path, err) != 0)
        return -1;
    int fd = create_temp(o, err);
    if (fd < 0)
        return -1;
    o->f = fdopen(fd, "w");
    if (!o->f) {
        errmsg_set(err, "%s: cannot write %s: %s", cmd, o->tmp, strerror(errno));
        close(fd);
        unlink(o->tmp);
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
    // Checked again since the run may have taken minutes. What could still slip in between this
    // check and rename(2) is harmless: rename replaces a symlink or FIFO as a name, never
    // writing through it, and fails on a directory.
    if (rc == 0 && check_target(o->cmd, o->path, err) != 0)
        rc = -1;
    if (rc == 0 && rename(o->tmp, o->path) != 0) {
        errmsg_set(err, "%s: cannot rename %s to %s: %s", o->cmd, o->tmp, o->path, strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    return rc;
}
