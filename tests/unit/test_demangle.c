// SPDX-License-Identifier: MIT
// demangle: C++ and Rust (legacy and v0) names, Rust hash and LLVM suffixes, and names that are
// not mangled at all, which must come back unchanged.
#include "symbols/demangle.h"

#include <criterion/criterion.h>
#include <stdlib.h>

static void expect(const char *sym, const char *want, bool mangled) {
    bool was = !mangled;
    char *got = demangle_name(sym, &was);
    cr_expect_str_eq(got, want, "%s", sym);
    cr_expect_eq(was, mangled, "%s: mangled?", sym);
    free(got);
}

Test(demangle, cpp_names_keep_their_parameters) {
    expect("_ZNSt6vectorIiSaIiEE9push_backERKi",
           "std::vector<int, std::allocator<int> >::push_back(int const&)", true);
    expect("_Znwm", "operator new(unsigned long)", true);
    expect("_ZN3foo3barEv", "foo::bar()", true);
}

Test(demangle, rust_legacy_drops_the_hash) {
    expect("_ZN10vec_growth13grow_u64_vecs17h87da6e7dd355477fE", "vec_growth::grow_u64_vecs", true);
    expect("_ZN5alloc7raw_vec20RawVecInner$LT$A$GT$11finish_grow17hf564e575eae5f9c5E",
           "alloc::raw_vec::RawVecInner<A>::finish_grow", true);
}

Test(demangle, rust_v0) {
    expect("_RNvCs1234_7mycrate3foo", "mycrate::foo", true);
    expect("_RNvMs4_NtCslNYArtu3iFV_5alloc7raw_vecNtB5_11RawVecInner11finish_growCsjrHSEGnQ3l9_3std",
           "<alloc::raw_vec::RawVecInner>::finish_grow", true);
}

Test(demangle, llvm_suffix_is_dropped) {
    expect("_ZN3foo3bar17h05af221e174051e9E.llvm.1234567", "foo::bar", true);
}

Test(demangle, plain_names_are_unchanged) {
    expect("main", "main", false);
    expect("__libc_start_main", "__libc_start_main", false);
    expect("_Zgarbage!!", "_Zgarbage!!", false);
    expect("", "", false);
}

Test(demangle, already_demangled_rust_loses_its_hash) {
    expect("app::main::h0123456789abcdef", "app::main", false);
    expect("app::main::h0123", "app::main::h0123", false); // too short to be a hash
}

Test(demangle, strip_rust_hash_in_place) {
    char s[] = "a::b::h00112233445566ff";
    cr_expect(demangle_strip_rust_hash(s));
    cr_expect_str_eq(s, "a::b");
    char t[] = "a::b::hXX112233445566ff";
    cr_expect_not(demangle_strip_rust_hash(t));
}
