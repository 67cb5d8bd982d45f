// SPDX-License-Identifier: MIT
// Plain main for a fuzz target, for builds without libFuzzer (gcc, the sanitizer build): runs
// LLVMFuzzerTestOneInput once on every file named, and on every file (not dot-files) of every
// directory named, in name order. Exit 0 if all ran, 1 if an argument cannot be read or no
// input was found; a crash is the target's own.
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay_driver: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t len = 0, cap = 1 << 16;
    uint8_t *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    bool bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay_driver: %s: cannot read\n", path);
        free(buf);
        return -1;
    }
    fprintf(stderr, "replay_driver: %s (%zu bytes)\n", path, len);
    // an exact-size copy, so ASan catches a read one past the input
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Runs every file of dir; returns the count, or -1.
static long run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay_driver: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap)
            names = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    long ran = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(path) != 0)
                ran = -1;
            else if (ran >= 0)
                ran++;
        }
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv) {
    long total = 0;
    bool failed = false;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay_driver: %s: %s\n", argv[i], strerror(errno));
            failed = true;
        } else if (S_ISDIR(st.st_mode)) {
            long n = run_dir(argv[i]);
            failed |= n < 0;
            total += n > 0 ? n : 0;
        } else {
            failed |= run_file(argv[i]) != 0;
            total += 1;
        }
    }
    if (total == 0) {
        fprintf(stderr, "usage: %s FILE|DIR... (no inputs found)\n", argv[0]);
        return 1;
    }
    fprintf(stderr, "replay_driver: %ld inputs %s\n", total, failed ? "(some unreadable)" : "ok");
    return failed ? 1 : 0;
}
