// SPDX-License-Identifier: MIT
// How many CPUs the analyzer may use, for sizing its thread pools (decode workers, replay's
// shards) and deciding whether waiting threads may spin. The machine's online CPUs say little
// in a container or under taskset: a process allowed 2 CPUs of a 64-CPU host that sized itself
// by the host would start a dozen threads and spin-wait among them, on 2 CPUs.
#pragma once

#include <stdbool.h>

// The CPUs this process may run on (its affinity mask, when it starts) and no more than its
// cgroup's CPU quota allows (cgroup v2 cpu.max "quota period", or v1's cpu.cfs_quota_us and
// cpu.cfs_period_us, rounded up: a container's CPU limit), at least 1.
// Computed once; thread-safe after the first call returns (call it before starting threads).
unsigned cpus_usable(void);

// cpus_usable's quota rule alone: the CPUs a cgroup v2 cpu.max text ("max 100000", or "quota
// period" in microseconds) allows, rounded up, or 0 where it sets no limit or is not such a
// text. For tests.
unsigned cpus_of_cpu_max(const char *text);

// The line of /proc/self/cgroup for cgroup v2 ("0::/path") in text: its path into path (at
// most cap bytes with the terminator). False where there is none. For tests.
bool cpus_cgroup2_path(const char *text, char *path, unsigned cap);

// The same for the cgroup v1 hierarchy that has the "cpu" controller ("N:cpu,cpuacct:/path").
bool cpus_cgroup1_cpu_path(const char *text, char *path, unsigned cap);
