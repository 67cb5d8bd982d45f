// SPDX-License-Identifier: MIT
// sites: the frame classifier that picks the frame naming a site, and the whole pipeline
// (reader -> replay -> symbolize -> sites) on a synthetic trace whose modules do not exist on
// disk, which must give module+offset frames and correct figures instead of failing.
#include "analyze/analyze.h"
#include "model/sites.h"
#include "trace_builder.h"

#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#define A SITES_FRAME_ALLOCATOR
#define L SITES_FRAME_LIBRARY
#define U SITES_FRAME_USER

static void expect_kind(const char *fn, const char *file, const char *module,
                        sites_frame_kind_t want) {
    cr_expect_eq(sites_classify(fn, file, module), want, "%s (file %s, module %s)",
                 fn ? fn : "NULL", file ? file : "NULL", module ? module : "NULL");
}

Test(sites, allocator_frames) {
    expect_kind("malloc", NULL, "/lib/x86_64-linux-gnu/libc.so.6", A);
    expect_kind("realloc", NULL, NULL, A);
    expect_kind("operator new(unsigned long)", NULL, "/lib/libstdc++.so.6", A);
    expect_kind("operator new[](unsigned long)", NULL, NULL, A);
    expect_kind("__rust_alloc", NULL, NULL, A);
    expect_kind("__rdl_realloc", NULL, NULL, A);
    expect_kind("alloc::alloc::alloc", "/rustc/abc/library/alloc/src/alloc.rs", NULL, A);
    expect_kind("<alloc::alloc::Global as core::alloc::Allocator>::allocate", NULL, NULL, A);
    expect_kind("alloc::raw_vec::RawVecInner<A>::finish_grow", NULL, NULL, A);
    expect_kind("<alloc::raw_vec::RawVecInner>::finish_grow", NULL, NULL, A);
    expect_kind("hashbrown::raw::RawTable<T,A>::reserve_rehash", NULL, NULL, A);
    expect_kind("void std::vector<int, std::allocator<int> >::_M_realloc_insert<int>("
                "__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, "
                "int&&)",
                "/usr/include/c++/12/bits/vector.tcc", NULL, A);
    expect_kind("std::__new_allocator<int>::allocate(unsigned long, void const*)", NULL, NULL, A);
    expect_kind("std::_Vector_base<int, std::allocator<int> >::_M_allocate(unsigned long)", NULL,
                NULL, A);
}

Test(sites, library_frames) {
    expect_kind("std::vector<int, std::allocator<int> >::push_back(int&&)", NULL, NULL, L);
    expect_kind("alloc::vec::Vec<T,A>::push", NULL, NULL, L);
    expect_kind("<alloc::string::String as core::clone::Clone>::clone", NULL, NULL, L);
    expect_kind("hashbrown::map::HashMap<K,V,S,A>::insert", NULL, NULL, L);
    expect_kind("std::collections::hash::map::HashMap<K,V,S,A>::entry", NULL, NULL, L);
    // a trait impl on a primitive: only the file says it is the standard library's
    expect_kind("<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec::<alloc::alloc::Global>",
                "/rustc/59807616e1fa/library/alloc/src/slice.rs", NULL, L);
    expect_kind("__fopen_internal", "./libio/iofopen.c", "/lib/x86_64-linux-gnu/libc.so.6", L);
    expect_kind(NULL, NULL, "/lib64/ld-linux-x86-64.so.2", L);
    expect_kind("_start", NULL, "/usr/bin/app", L);
    expect_kind("start_thread", NULL, NULL, L);
}

Test(sites, user_frames) {
    expect_kind("main", "/src/app.c", "/usr/bin/app", U);
    expect_kind("vec_growth::grow_u64_vecs", "/src/vec_growth.rs", "/usr/bin/vec_growth", U);
    expect_kind("clone_thing", NULL, "/usr/bin/app", U);           // not clone(2)
    expect_kind("freelist_push", NULL, "/usr/bin/app", U);         // not free
    expect_kind("my::alloc::pool::grab", NULL, "/usr/bin/app", U); // a user's own alloc module
    expect_kind(NULL, NULL, "/usr/bin/app", U);
    expect_kind(NULL, NULL, NULL, U);
}

static char path[64];

static void cleanup(void) {
    if (path[0])
        unlink(path);
}

// Modules that do not exist on disk: every frame becomes module+offset.
Test(sites, pipeline_on_a_trace_without_files, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"/nonexistent/app", "-x"};
    tb_rec_process(tb, "/nonexistent/app", 2, argv);
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/nonexistent/app", (const uint8_t *)"\1\2", 2);
    tb_rec_module_load(tb, 0, 0x7f0000000000ull, 0x10000, "/nonexistent/libc.so.6", NULL, 0);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 100, 10, 0);
    uint64_t s1[] = {0x7f0000000100ull, 0x401000, 0x402000}, s2[] = {0x401100, 0x402000};
    tb_rec_stack(tb, 1, 3, s1);
    tb_rec_stack(tb, 2, 2, s2);
    tb_rec_malloc(tb, 10, 1, 0x1000, 100);
    tb_rec_malloc(tb, 20, 2, 0x2000, 30);
    tb_rec_realloc(tb, 30, 31, 2, 0x2000, 0x3000, 60);
    tb_rec_free(tb, 40, 0x1000);
    tb_rec_malloc(tb, 50, 0, 0x4000, 7); // stack 0: unwinding failed
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    tb_free(tb);

    errmsg_t err;
    errmsg_init(&err);
    analyze_t *a = analyze_open(path, 0, NULL, &err);
    cr_assert_not_null(a, "%s", err.msg);
    cr_assert_eq(sites_count(a->sites), 3);
    bool seen[3] = {false, false, false};
    for (size_t i = 0; i < 3; i++) {
        const site_t *s = sites_get(a->sites, i);
        char fn[128];
        if (s->fig.stack == 1) {
            seen[0] = true;
            cr_expect_eq(s->n_frames, 3);
            cr_expect_eq(s->name_frame, 1); // past the (library) libc frame
            cr_expect_str_eq(sites_frame_function(s->frames[1], fn, sizeof fn), "app+0x1000");
            cr_expect_str_eq(sites_frame_function(s->frames[0], fn, sizeof fn),
                             "libc.so.6+0x100");
            cr_expect_eq(s->fig.bytes, 100);
            cr_expect_eq(s->fig.end_blocks, 0);
        } else if (s->fig.stack == 2) {
            seen[1] = true;
            cr_expect_eq(s->name_frame, 0);
            cr_expect_eq(s->fig.blocks, 2); // malloc + realloc
            cr_expect_eq(s->fig.bytes, 90);
            cr_expect_eq(s->fig.end_bytes, 60);
        } else {
            seen[2] = true;
            cr_expect_eq(s->fig.stack, 0);
            cr_expect_not(s->known_stack);
            cr_expect_eq(s->n_frames, 0);
            cr_expect_eq(s->fig.bytes, 7);
        }
    }
    cr_expect(seen[0] && seen[1] && seen[2]);
    size_t n_mods;
    const symbolize_module_t *m = symbolize_modules(a->sym, &n_mods);
    cr_assert_eq(n_mods, 2);
    cr_expect_eq(m[0].status, SYMBOLIZE_MODULE_MISSING);
    cr_expect_eq(m[0].n_addresses, 3);
    analyze_close(a);
}

// symbolize_warm looks addresses up ahead (the reading thread does, while replay is behind)
// without counting them: the per-module figures are what symbolize_addr was asked for, the
// same whether or not the address was warmed first.
Test(sites, warmed_addresses_count_only_when_asked, .fini = cleanup) {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(len, 0);
    self[len] = '\0';
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    tb_rec_module_load(tb, 0, 0x400000, 0x100000, self, NULL, 0);
    tb_rec_module_load(tb, 0, 0x7f0000000000ull, 0x10000, "/nonexistent/libc.so.6", NULL, 0);
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    tb_free(tb);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    cr_assert_not_null(r, "%s", err.msg);
    cr_assert_eq(reader_load_defs(r, &err), 0, "%s", err.msg);
    symbolize_t *s = symbolize_new(r);
    cr_assert(symbolize_current(s, r));
    size_t n_mods;
    const symbolize_module_t *m = symbolize_modules(s, &n_mods);
    cr_assert_eq(n_mods, 2);
    cr_expect_eq(m[0].status, SYMBOLIZE_MODULE_UNUSED);
    symbolize_warm(s, 0x401000);
    symbolize_warm(s, 0x7f0000000100ull);
    cr_expect_eq(symbolize_n_addresses(s), 0);
    cr_expect_eq(m[0].n_addresses, 0);
    cr_expect_eq(m[1].n_addresses, 0);
    cr_expect_eq(m[0].status, SYMBOLIZE_MODULE_UNUSED, "warming marked the module used");
    size_t n;
    symbolize_addr(s, 0x401000, &n);
    symbolize_addr(s, 0x401000, &n);
    cr_expect_eq(symbolize_n_addresses(s), 1);
    cr_expect_eq(m[0].n_addresses, 1);
    cr_expect_neq(m[0].status, SYMBOLIZE_MODULE_UNUSED);
    cr_expect_eq(m[1].n_addresses, 0);
    cr_expect_eq(m[1].status, SYMBOLIZE_MODULE_MISSING);
    symbolize_free(s);
    reader_close(r);
}

Test(sites, addresses_outside_every_module) {
    symbolize_t *s = symbolize_new(NULL);
    size_t n;
    const symbolize_frame_t *f = symbolize_addr(s, 0x1234, &n);
    cr_assert_eq(n, 1);
    cr_expect_null(f->module);
    cr_expect_null(f->function);
    char buf[64];
    cr_expect_str_eq(sites_frame_function(f, buf, sizeof buf), "0x1234");
    cr_expect_str_eq(sites_frame_location(f, buf, sizeof buf), "0x1234");
    const symbolize_frame_t *again = symbolize_addr(s, 0x1234, &n);
    cr_expect_eq(again, f); // cached
    cr_expect_eq(symbolize_n_addresses(s), 1);
    symbolize_free(s);
}

Test(sites, short_paths) {
    cr_expect_str_eq(symbolize_short_path("/work/app/src/main.rs", 3), "app/src/main.rs");
    cr_expect_str_eq(symbolize_short_path("main.rs", 3), "main.rs");
    cr_expect_str_eq(symbolize_short_path("/a/b", 3), "/a/b");
}
