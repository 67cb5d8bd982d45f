// SPDX-License-Identifier: MIT
// Demangling through libiberty's callback interfaces: they write the result in pieces to our
// callback and keep their working state on the stack, so no libiberty allocator (whose
// xmalloc would clash with ours) is ever linked in. Rust is tried first: legacy Rust symbols
// are also valid Itanium C++ names, and the C++ demangler would leave `$LT$` and the hash in.
#include "symbols/demangle.h"

#include "core/xalloc.h"

#include <libiberty/demangle.h>
#include <stdlib.h>
#include <string.h>

typedef struct strbuf {
    char *s;
    size_t n, cap;
} strbuf_t;

static void append(const char *piece, size_t n, void *opaque) {
    strbuf_t *b = opaque;
    if (b->n + n + 1 > b->cap)
        b->s = xgrow(b->s, &b->cap, b->n + n + 1, 1);
    memcpy(b->s + b->n, piece, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool demangle_strip_rust_hash(char *s) {
    size_t n = strlen(s);
    if (n < 19)
        return false;
    char *h = s + n - 19; // "::h" + 16 hex digits
    if (h[0] != ':' || h[1] != ':' || h[2] != 'h')
        return false;
    for (int i = 3; i < 19; i++)
        if (!is_hex(h[i]))
            return false;
    *h = '\0';
    return true;
}

// Drops a trailing ".llvm.<digits or hex>" that LLVM's LTO appends to local symbols, which the
// demanglers may refuse. Writes the cut-down copy into a new string.
static char *without_llvm_suffix(const char *sym) {
    const char *dot = strstr(sym, ".llvm.");
    char *copy = xstrdup(sym);
    if (dot)
        copy[dot - sym] = '\0';
    return copy;
}

char *demangle_name(const char *sym, bool *was_mangled) {
    if (was_mangled)
        *was_mangled = false;
    if (!sym)
        return xstrdup("");
    char *plain = without_llvm_suffix(sym);
    strbuf_t b = {NULL, 0, 0};
    append("", 0, &b);
    bool ok = false;
    if ((plain[0] == '_' && (plain[1] == 'R' || plain[1] == 'Z')) ||
        (plain[0] == '_' && plain[1] == '_' && plain[2] == 'R')) {
        ok = rust_demangle_callback(plain, DMGL_PARAMS | DMGL_ANSI, append, &b);
        if (!ok) {
            b.n = 0;
            b.s[0] = '\0';
            ok = cplus_demangle_v3_callback(plain, DMGL_PARAMS | DMGL_ANSI, append, &b);
        }
    }
    if (!ok || b.n == 0) {
        free(b.s);
        demangle_strip_rust_hash(plain);
        return plain;
    }
    free(plain);
    if (was_mangled)
        *was_mangled = true;
    demangle_strip_rust_hash(b.s);
    return b.s;
}
