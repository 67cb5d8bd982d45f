// SPDX-License-Identifier: MIT
// demangle: symbol names as a person reads them. C++ (Itanium ABI) and Rust (legacy `_ZN...E`
// and v0 `_R...`) through libiberty's callback demanglers, which never allocate; Rust's
// `::h<16 hex>` hash suffix and LLVM's `.llvm.<n>` suffixes are dropped.
#ifndef HEAPPROF_ANALYZER_DEMANGLE_H
#define HEAPPROF_ANALYZER_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>

// The readable form of sym: demangled if it is a C++ or Rust symbol, else sym itself (a C
// name, or an already demangled one), in both cases without a Rust hash suffix. Returns a new
// string the caller frees (never NULL; exits on OOM). *was_mangled (may be NULL) says whether
// a demangler accepted it.
char *demangle_name(const char *sym, bool *was_mangled);

// Removes a trailing Rust legacy hash `::h` + 16 hex digits from s in place. Returns true if
// there was one.
bool demangle_strip_rust_hash(char *s);

#endif
