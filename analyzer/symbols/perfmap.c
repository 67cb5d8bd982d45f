// SPDX-License-Identifier: MIT
#include "symbols/perfmap.h"

#include "core/errmsg.h"
#include "core/out_file.h"
#include "core/sort.h"
#include "core/xalloc.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct entry {
    uint64_t lo, hi; // [lo, hi)
    size_t order;    // line order: the higher, the later written
    size_t name;     // offset in names
} entry_t;

struct perfmap {
    entry_t *e;       // sorted by lo
    uint64_t *max_hi; // max_hi[i]: the largest hi of e[0..i], to stop the backward scan
    size_t n;
    char *names;
    char *path;
};

static int cmp_entry(const void *a, const void *b) {
    const entry_t *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

// "START SIZE NAME": hex numbers with or without 0x, the name the rest of the line.
static bool parse_line(char *line, uint64_t *lo, uint64_t *size, char **name) {
    char *end;
    unsigned long long a = strtoull(line, &end, 16);
    if (end == line || *end != ' ')
        return false;
    char *p = end + 1;
    unsigned long long n = strtoull(p, &end, 16);
    if (end == p || *end != ' ' || n == 0 || a + n < a)
        return false;
    p = end + 1;
    size_t len = strcspn(p, "\r\n");
    if (len == 0)
        return false;
    p[len] = '\0';
    *lo = a;
    *size = n;
    *name = p;
    return true;
}

perfmap_t *perfmap_load(const char *path) {
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    perfmap_t *m = xcalloc(1, sizeof *m);
    size_t cap = 0, names_len = 0, names_cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    while ((got = getline(&line, &line_cap, f)) > 0) {
        uint64_t lo, size;
        char *name;
        if (!parse_line(line, &lo, &size, &name))
            continue;
        size_t len = strlen(name) + 1;
        m->names = xgrow(m->names, &names_cap, names_len + len, 1);
        memcpy(m->names + names_len, name, len);
        m->e = xgrow(m->e, &cap, m->n + 1, sizeof *m->e);
        m->e[m->n] = (entry_t){.lo = lo, .hi = lo + size, .order = m->n, .name = names_len};
        m->n++;
        names_len += len;
    }
    free(line);
    fclose(f);
    if (m->n == 0) {
        perfmap_free(m);
        return NULL;
    }
    sort_items(m->e, m->n, sizeof *m->e, cmp_entry);
    m->max_hi = xmalloc(m->n * sizeof *m->max_hi);
    for (size_t i = 0; i < m->n; i++)
        m->max_hi[i] = i && m->max_hi[i - 1] > m->e[i].hi ? m->max_hi[i - 1] : m->e[i].hi;
    m->path = xstrdup(path);
    return m;
}

void perfmap_free(perfmap_t *m) {
    if (!m)
        return;
    free(m->e);
    free(m->max_hi);
    free(m->names);
    free(m->path);
    free(m);
}

const char *perfmap_find(const perfmap_t *m, uint64_t addr) {
    if (!m)
        return NULL;
    // the last entry starting at or below addr, then back while an earlier one may reach it
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->e[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    const entry_t *best = NULL;
    for (size_t i = lo; i-- > 0 && m->max_hi[i] > addr;)
        if (addr < m->e[i].hi && (!best || m->e[i].order > best->order))
            best = &m->e[i];
    return best ? m->names + best->name : NULL;
}

size_t perfmap_entries(const perfmap_t *m) {
    return m ? m->n : 0;
}

const char *perfmap_path(const perfmap_t *m) {
    return m ? m->path : NULL;
}

// TRACE.perf.map: where `heapprof run` keeps a traced process's map. Malloc'd.
static char *beside(const char *trace) {
    static const char suffix[] = ".perf.map";
    size_t n = strlen(trace) + sizeof suffix;
    char *path = xmalloc(n);
    snprintf(path, n, "%s%s", trace, suffix);
    return path;
}

char *perfmap_of_process(uint32_t pid, uint64_t since_unix_ns) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%u.map", pid);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL;
    if (st.st_uid != geteuid() && st.st_uid != 0)
        return NULL;
    uint64_t mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    if (mtime < since_unix_ns)
        return NULL;
    return xstrdup(path);
}

char *perfmap_path_for(const char *trace, uint32_t pid, uint64_t trace_start_unix_ns,
                       bool attached) {
    const char *env = getenv("HEAPPROF_PERF_MAP");
    if (env)
        return env[0] ? xstrdup(env) : NULL;
    if (trace) {
        char *copy = beside(trace);
        struct stat st;
        if (stat(copy, &st) == 0 && S_ISREG(st.st_mode))
            return copy;
        free(copy);
    }
    return perfmap_of_process(pid, attached ? 0 : trace_start_unix_ns);
}

int perfmap_keep_beside(const char *trace, uint32_t pid, uint64_t since_unix_ns) {
    char *to = beside(trace);
    char *from = perfmap_of_process(pid, since_unix_ns);
    if (!from) {
        unlink(to); // an earlier trace's of that name: not this one's
        free(to);
        return 0;
    }
    // written as -o FILE is (a temporary file renamed into place): a link planted at TRACE's
    // name in a shared directory is never written through
    int rc = -1;
    FILE *in = fopen(from, "re");
    out_file_t out;
    errmsg_t err;
    errmsg_init(&err);
    if (in && out_file_open(&out, "run", to, NULL, &err) == 0) {
        char buf[65536];
        size_t got;
        rc = 0;
        while ((got = fread(buf, 1, sizeof buf, in)) > 0)
            if (fwrite(buf, 1, got, out.f) != got)
                rc = -1;
        if (ferror(in))
            rc = -1;
        rc = out_file_close(&out, rc, &err) == 0 ? 1 : -1;
    }
    if (in)
        fclose(in);
    free(from);
    free(to);
    return rc;
}

void perfmap_remove_beside(const char *trace) {
    char *copy = beside(trace);
    unlink(copy);
    free(copy);
}
