// SPDX-License-Identifier: MIT
// seccomp_deny SYSCALL LIB PROG [ARGS...]: runs PROG with LD_PRELOAD=LIB under a seccomp filter
// that makes one system call fail with EACCES, so the shim's fallback paths run whatever this
// kernel allows. SYSCALL: perf_event_open (as Docker's default profile or
// perf_event_paranoid >= 3 refuse it: tests/e2e/test_cpu.c) or membarrier (old kernels,
// sandboxes: the writer's merge falls back to a time margin, tests/e2e/test_threads.c).
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4)
        return 2;
    unsigned nr;
    if (!strcmp(argv[1], "perf_event_open"))
        nr = __NR_perf_event_open;
    else if (!strcmp(argv[1], "membarrier"))
        nr = __NR_membarrier;
    else
        return 2;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof *f, .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("seccomp_deny: seccomp");
        return 3;
    }
    if (setenv("LD_PRELOAD", argv[2], 1) != 0)
        return 4;
    execv(argv[3], argv + 3);
    perror("seccomp_deny: exec");
    return 5;
}
