// SPDX-License-Identifier: MIT
// Compiler attributes the shim uses on its hot and cold paths.
#ifndef HEAPPROF_PRELOAD_COMPILER_H
#define HEAPPROF_PRELOAD_COMPILER_H

#define HP_LIKELY(x) __builtin_expect(!!(x), 1)
#define HP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HP_NOINLINE __attribute__((noinline))
#define HP_COLD __attribute__((cold))
#define HP_EXPORT __attribute__((visibility("default")))
// initial-exec TLS: reading it is one %fs-relative load and never calls __tls_get_addr (which
// may allocate)
#define HP_TLS __thread __attribute__((tls_model("initial-exec")))

#endif
