// SPDX-License-Identifier: MIT
// cpus: the CPUs the analyzer sizes its threads by: a cgroup v2 cpu.max quota read as CPUs
// (rounded up), the cgroup v2 line and the v1 "cpu" controller's line of /proc/self/cgroup, and
// the affinity mask taken over the host's CPU count.
#include "core/cpus.h"
#include "../one_cpu.h"

#include <criterion/criterion.h>
#include <sched.h>

Test(cpus, a_cpu_max_quota_counts_whole_cpus_rounded_up) {
    cr_expect_eq(cpus_of_cpu_max("max 100000\n"), 0);
    cr_expect_eq(cpus_of_cpu_max("200000 100000\n"), 2);
    cr_expect_eq(cpus_of_cpu_max("150000 100000\n"), 2);
    cr_expect_eq(cpus_of_cpu_max("50000 100000"), 1);
    cr_expect_eq(cpus_of_cpu_max("400000 50000"), 8);
    cr_expect_eq(cpus_of_cpu_max(""), 0);
    cr_expect_eq(cpus_of_cpu_max("garbage"), 0);
    cr_expect_eq(cpus_of_cpu_max("0 100000"), 0);
    cr_expect_eq(cpus_of_cpu_max("100000 0"), 0);
    cr_expect_eq(cpus_of_cpu_max("100000"), 0);
}

Test(cpus, the_cgroup2_line_is_found_among_v1_lines) {
    char path[64];
    cr_assert(cpus_cgroup2_path("0::/user.slice/session-1.scope\n", path, sizeof path));
    cr_expect_str_eq(path, "/user.slice/session-1.scope");
    cr_assert(cpus_cgroup2_path("12:cpu,cpuacct:/docker/abc\n1:name=systemd:/x\n0::/kubepods/p1\n",
                                path, sizeof path));
    cr_expect_str_eq(path, "/kubepods/p1");
    cr_assert(cpus_cgroup2_path("0::/", path, sizeof path));
    cr_expect_str_eq(path, "/");
    cr_expect_not(cpus_cgroup2_path("12:cpu,cpuacct:/docker/abc\n", path, sizeof path));
    cr_expect_not(cpus_cgroup2_path("", path, sizeof path));
    cr_expect_not(cpus_cgroup2_path("0::/a-path-longer-than-the-buffer-the-caller-gave-us-for-it/x",
                                    path, 16));
}

Test(cpus, the_cgroup1_cpu_line_is_found) {
    char path[64];
    cr_assert(cpus_cgroup1_cpu_path("4:memory:/m\n3:cpu,cpuacct:/docker/abc\n0::/\n", path,
                                    sizeof path));
    cr_expect_str_eq(path, "/docker/abc");
    cr_assert(cpus_cgroup1_cpu_path("2:cpuacct:/a\n1:cpu:/b\n", path, sizeof path));
    cr_expect_str_eq(path, "/b", "cpuacct alone is not cpu");
    cr_assert(cpus_cgroup1_cpu_path("7:cpuacct,cpu:/\n", path, sizeof path));
    cr_expect_str_eq(path, "/");
    cr_expect_not(cpus_cgroup1_cpu_path("0::/x\n5:cpuset:/y\n", path, sizeof path));
}

// Each test runs in a process of its own: the mask set here is the one cpus_usable reads first.
Test(cpus, the_affinity_mask_bounds_the_count) {
    cpu_set_t mine;
    pin_to_one_cpu(&mine);
    cr_expect_eq(cpus_usable(), 1);
    cr_expect_eq(cpus_usable(), 1, "computed once");
}

Test(cpus, at_least_one_and_no_more_than_the_mask) {
    cpu_set_t mine;
    cr_assert_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    unsigned n = cpus_usable();
    cr_expect_geq(n, 1);
    cr_expect_leq(n, (unsigned)CPU_COUNT(&mine));
}
