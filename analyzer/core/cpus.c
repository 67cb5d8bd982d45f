// SPDX-License-Identifier: MIT
#include "core/cpus.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// quota / period CPUs, rounded up; 0 where either is not positive (no limit).
static unsigned quota_cpus(long long quota, long long period) {
    if (quota <= 0 || period <= 0)
        return 0;
    long long n = (quota + period - 1) / period;
    return n > 65536 ? 65536 : (unsigned)n;
}

unsigned cpus_of_cpu_max(const char *text) {
    char *end;
    if (!strncmp(text, "max", 3))
        return 0;
    long long quota = strtoll(text, &end, 10);
    if (end == text || *end != ' ')
        return 0;
    const char *p = end + 1;
    long long period = strtoll(p, &end, 10);
    return end == p ? 0 : quota_cpus(quota, period);
}

// The whole of a small file (procfs, cgroupfs) into buf, NUL-terminated; false if unreadable.
static bool read_small(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t n = 0;
    for (ssize_t r; n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) != 0;) {
        if (r < 0) {
            close(fd);
            return false;
        }
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    return true;
}

// Whether the controller list [c, end) ("cpu,cpuacct") names ctl.
static bool names_controller(const char *c, const char *end, const char *ctl) {
    size_t n = strlen(ctl);
    while (c <= end) {
        const char *comma = memchr(c, ',', (size_t)(end - c));
        const char *e = comma ? comma : end;
        if ((size_t)(e - c) == n && !strncmp(c, ctl, n))
            return true;
        c = e + 1;
    }
    return false;
}

// The path of the first line of /proc/self/cgroup's text ("id:controllers:path") whose
// controllers name ctl, or with ctl NULL the cgroup v2 line ("0::path"), into path (at most
// cap bytes with the terminator).
static bool cgroup_line_path(const char *text, const char *ctl, char *path, unsigned cap) {
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        size_t plen = c2 ? len - (size_t)(c2 + 1 - line) : 0;
        bool match = c2 && (ctl ? c2 > c1 + 1 && names_controller(c1 + 1, c2, ctl)
                                : c1 == line + 1 && line[0] == '0' && c2 == c1 + 1);
        if (match && plen > 0 && plen < cap) {
            memcpy(path, c2 + 1, plen);
            path[plen] = 0;
            return true;
        }
        line += len + (nl != NULL);
    }
    return false;
}

bool cpus_cgroup2_path(const char *text, char *path, unsigned cap) {
    return cgroup_line_path(text, NULL, path, cap);
}

bool cpus_cgroup1_cpu_path(const char *text, char *path, unsigned cap) {
    return cgroup_line_path(text, "cpu", path, cap);
}

// The smallest quota over the cgroup at rel and its parents, as CPUs (0: none), the quota read
// by one(dir) for each directory under mount.
static unsigned quota_up(const char *mount, char *rel, unsigned (*one)(const char *dir)) {
    unsigned best = 0;
    for (;;) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s%s", mount, strcmp(rel, "/") ? rel : "");
        unsigned n = one(dir);
        if (n && (!best || n < best))
            best = n;
        char *slash = strrchr(rel, '/');
        if (!slash || slash == rel)
            break;
        *slash = 0;
    }
    return best;
}

static unsigned v2_quota(const char *dir) {
    char file[4300], max[128];
    snprintf(file, sizeof file, "%s/cpu.max", dir);
    return read_small(file, max, sizeof max) ? cpus_of_cpu_max(max) : 0;
}

static unsigned v1_quota(const char *dir) {
    char file[4300], q[64], p[64];
    snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", dir);
    if (!read_small(file, q, sizeof q))
        return 0;
    snprintf(file, sizeof file, "%s/cpu.cfs_period_us", dir);
    if (!read_small(file, p, sizeof p))
        return 0;
    return quota_cpus(atoll(q), atoll(p)); // quota -1: none
}

// The CPU quota of this process's cgroup, where one is set: cgroup v2's cpu.max, else v1's
// cpu.cfs_quota_us over cpu.cfs_period_us, of its own cgroup and of each parent up to the
// mount (the smallest wins); 0: none. In a container with its own cgroup namespace the path
// is "/" and the mount is the container's cgroup.
static unsigned cgroup_quota_cpus(void) {
    char text[4096], rel[2048];
    if (!read_small("/proc/self/cgroup", text, sizeof text))
        return 0;
    if (cpus_cgroup2_path(text, rel, sizeof rel)) {
        unsigned n = quota_up("/sys/fs/cgroup", rel, v2_quota);
        if (n)
            return n;
    }
    static const char *const v1_mounts[] = {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"};
    for (size_t i = 0; i < sizeof v1_mounts / sizeof *v1_mounts; i++) {
        if (!cpus_cgroup1_cpu_path(text, rel, sizeof rel))
            return 0;
        unsigned n = quota_up(v1_mounts[i], rel, v1_quota);
        if (n)
            return n;
    }
    return 0;
}

static unsigned usable;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void compute(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = online > 0 ? (unsigned)online : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        n = (unsigned)CPU_COUNT(&set);
    unsigned quota = cgroup_quota_cpus();
    if (quota && quota < n)
        n = quota;
    usable = n ? n : 1;
}

unsigned cpus_usable(void) {
    pthread_once(&once, compute);
    return usable;
}
