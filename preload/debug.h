// SPDX-License-Identifier: MIT
// The shim's internal assertions (docs/design.md#assertions). HP_ASSERT(cond) is checked where
// HEAPPROF_DEBUG is defined (Debug builds, or HEAPPROF_DEBUG_FULL; preload/CMakeLists.txt);
// HP_ASSERT_EXPENSIVE(cond), for checks that cost more than the event they guard (a walk over a
// table), only with HEAPPROF_DEBUG_FULL. Elsewhere both compile to nothing: the condition is
// not evaluated, and a release build never aborts (STYLE.md, "Errors"). A failed assertion
// writes one line to stderr with write(2) and aborts: no stdio, no allocation, no lock, so it
// may fail anywhere, inside malloc or in a signal handler.
#ifndef HEAPPROF_PRELOAD_DEBUG_H
#define HEAPPROF_PRELOAD_DEBUG_H

#include "compiler.h"

#ifdef HEAPPROF_DEBUG
// Writes "heapprof: assertion failed: FILE:LINE: EXPR" to fd 2, then abort(). Cold.
HP_NOINLINE HP_COLD _Noreturn void hp_debug_fail(const char *file, int line, const char *expr);
#define HP_ASSERT(cond) (HP_LIKELY(cond) ? (void)0 : hp_debug_fail(__FILE__, __LINE__, #cond))
#else
// sizeof: no code and no evaluation, but the names in cond stay used (no unused warnings)
#define HP_ASSERT(cond) ((void)sizeof(!!(cond)))
#endif

#ifdef HEAPPROF_DEBUG_FULL
#define HP_ASSERT_EXPENSIVE(cond) HP_ASSERT(cond)
#else
#define HP_ASSERT_EXPENSIVE(cond) ((void)sizeof(!!(cond)))
#endif

#endif
