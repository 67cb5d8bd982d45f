// SPDX-License-Identifier: MIT
// forwarder: the rule that tells an allocator wrapper from a real allocation site, on small
// x86-64 functions assembled from the Intel-syntax source beside each (GNU as; the calls are
// unrelocated, `call` to the next instruction, which is all the rule needs: it never follows a
// call). ret is the return address of the call seen to reach the allocator. funcbounds: the
// .eh_frame of this very executable against its own symbol table (the linker's truth).
#include "symbols/forwarder.h"
#include "symbols/funcbounds.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fn {
    const uint8_t *code;
    size_t size;
} fn_t;

static const uint8_t *fn_bytes(void *ctx, uint64_t addr, size_t *avail) {
    const fn_t *f = ctx;
    if (addr >= f->size)
        return NULL;
    *avail = f->size - addr;
    return f->code + addr;
}

static bool fn_bounds(void *ctx, uint64_t addr, uint64_t *lo, uint64_t *hi) {
    const fn_t *f = ctx;
    *lo = 0;
    *hi = f->size;
    return addr < f->size;
}

static bool check(const uint8_t *code, size_t size, uint64_t ret) {
    fn_t f = {code, size};
    forwarder_code_t c = {.bytes = fn_bytes, .bounds = fn_bounds, .ctx = &f};
    return forwarder_check(&c, ret, false);
}
#define CHECK(code, ret) check(code, sizeof code, ret)

static bool check_loose(const uint8_t *code, size_t size, uint64_t ret) {
    fn_t f = {code, size};
    forwarder_code_t c = {.bytes = fn_bytes, .bounds = fn_bounds, .ctx = &f};
    return forwarder_check(&c, ret, true);
}
#define CHECK_LOOSE(code, ret) check_loose(code, sizeof code, ret)

// push rbp; mov rbp, rsp; call malloc; test rax, rax; je 1f; pop rbp; ret; 1: call abort
static const uint8_t xmalloc_like[] = {0x55, 0x48, 0x89, 0xe5, 0xe8, 0x00, 0x00,
                                       0x00, 0x00, 0x48, 0x85, 0xc0, 0x74, 0x02,
                                       0x5d, 0xc3, 0xe8, 0x00, 0x00, 0x00, 0x00};

Test(forwarder, xmalloc_forwards) { cr_expect(CHECK(xmalloc_like, 9)); }

Test(forwarder, only_from_the_call_that_reached_the_allocator) {
    cr_expect_not(CHECK(xmalloc_like, 16), "abort's call is not the allocator's");
    cr_expect_not(CHECK(xmalloc_like, 7), "no call ends there");
}

// push rbx; mov rbx, rsi; mov edi, 16; call malloc; test rax, rax; je 1f;
// mov [rax], rbx; mov qword ptr [rax+8], 0; pop rbx; ret; 1: call abort
static const uint8_t make_node_like[] = {0x53, 0x48, 0x89, 0xf3, 0xbf, 0x10, 0x00, 0x00, 0x00, 0xe8,
                                         0x00, 0x00, 0x00, 0x00, 0x48, 0x85, 0xc0, 0x74, 0x0d, 0x48,
                                         0x89, 0x18, 0x48, 0xc7, 0x40, 0x08, 0x00, 0x00, 0x00, 0x00,
                                         0x5b, 0xc3, 0xe8, 0x00, 0x00, 0x00, 0x00};

Test(forwarder, a_function_that_fills_the_block_is_a_site) {
    cr_expect_not(CHECK(make_node_like, 14));
    cr_expect_not(CHECK_LOOSE(make_node_like, 14));
}

// gcc 12 -O2's make_request (samples/c/server_loop.c: p = malloc(64); memset(p, i & 0x7f, 64)):
// ...; call malloc; test rax, rax; je 1f; movd xmm0, edi; punpck...; movups [rax], xmm0;
// movups [rax+0x10], xmm0; ...; 1: mov rbx, [rbp-8]; leave; ret. Capstone 4 marks movups'
// memory destination as read only: the rule must still see the block being filled.
static const uint8_t memset_like[] = {
    0x55, 0x48, 0x89, 0xe5, 0x53, 0x48, 0x89, 0xfb, 0xbf, 0x40, 0x00, 0x00, 0x00, 0x48,
    0x83, 0xec, 0x08, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x85, 0xc0, 0x74, 0x25, 0x89,
    0xdf, 0x83, 0xe7, 0x7f, 0x66, 0x0f, 0x6e, 0xc7, 0x66, 0x0f, 0x60, 0xc0, 0x66, 0x0f,
    0x61, 0xc0, 0x66, 0x0f, 0x70, 0xc0, 0x00, 0x0f, 0x11, 0x00, 0x0f, 0x11, 0x40, 0x10,
    0x0f, 0x11, 0x40, 0x20, 0x0f, 0x11, 0x40, 0x30, 0x48, 0x8b, 0x5d, 0xf8, 0xc9, 0xc3};

Test(forwarder, a_block_filled_by_sse_stores_is_a_site) {
    cr_expect_not(CHECK(memset_like, 22));
    cr_expect_not(CHECK_LOOSE(memset_like, 22));
}

// push rbp; push rbx; mov rbp, rdi; lea rdi, [rdi+8]; sub rsp, 8; call malloc; mov rbx, rax;
// test rax, rax; je 1f; mov [rax], rbp; add rbx, 8; 1: add rsp, 8; mov rax, rbx; pop rbx;
// pop rbp; ret   (sqlite3MemMalloc: the size in a header in front of what it returns)
static const uint8_t header_like[] = {
    0x55, 0x53, 0x48, 0x89, 0xfd, 0x48, 0x8d, 0x7f, 0x08, 0x48, 0x83, 0xec, 0x08, 0xe8, 0x00,
    0x00, 0x00, 0x00, 0x48, 0x89, 0xc3, 0x48, 0x85, 0xc0, 0x74, 0x07, 0x48, 0x89, 0x28, 0x48,
    0x83, 0xc3, 0x08, 0x48, 0x83, 0xc4, 0x08, 0x48, 0x89, 0xd8, 0x5b, 0x5d, 0xc3};

Test(forwarder, a_size_header_in_front_of_the_block_forwards) { cr_expect(CHECK(header_like, 18)); }

// sub rsp, 8; call malloc; mov [rip+0x1000], rax; add rsp, 8; ret
static const uint8_t keeps_like[] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0x00, 0x00,
                                     0x00, 0x00, 0x48, 0x89, 0x05, 0x00, 0x10,
                                     0x00, 0x00, 0x48, 0x83, 0xc4, 0x08, 0xc3};

Test(forwarder, a_function_that_keeps_the_block_is_a_site) {
    cr_expect_not(CHECK(keeps_like, 9));
    cr_expect_not(CHECK_LOOSE(keeps_like, 9));
}

// push rbx; call malloc; mov rbx, rax; mov rdi, rax; call init; mov rax, rbx; pop rbx; ret
static const uint8_t passes_like[] = {0x53, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x89,
                                      0xc3, 0x48, 0x89, 0xc7, 0xe8, 0x00, 0x00, 0x00,
                                      0x00, 0x48, 0x89, 0xd8, 0x5b, 0xc3};

Test(forwarder, a_function_that_hands_the_block_on_is_a_site) {
    cr_expect_not(CHECK(passes_like, 6));
    cr_expect(CHECK_LOOSE(passes_like, 6), "the loose rule allows it");
}

// test rdi, rdi; je 1f; sub rsp, 8; call malloc; test rax, rax; je 2f; add rsp, 8; ret;
// 2: call g_error; 1: xor eax, eax; ret   (g_malloc: NULL for 0 bytes, no allocation)
static const uint8_t zero_like[] = {
    0x48, 0x85, 0xff, 0x74, 0x18, 0x48, 0x83, 0xec, 0x08, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x85,
    0xc0, 0x74, 0x05, 0x48, 0x83, 0xc4, 0x08, 0xc3, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x31, 0xc0, 0xc3};

Test(forwarder, null_for_zero_bytes_forwards) { cr_expect(CHECK(zero_like, 14)); }

// push rbx; mov rbx, rdi; call find; test rax, rax; jne 1f; mov rdi, rbx; call malloc;
// 1: pop rbx; ret   (returns what find found: a cache, not a forwarder)
static const uint8_t lookup_like[] = {0x53, 0x48, 0x89, 0xfb, 0xe8, 0x00, 0x00, 0x00,
                                      0x00, 0x48, 0x85, 0xc0, 0x75, 0x08, 0x48, 0x89,
                                      0xdf, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x5b, 0xc3};

Test(forwarder, returning_something_else_found_is_a_site) {
    cr_expect_not(CHECK(lookup_like, 22));
    cr_expect_not(CHECK_LOOSE(lookup_like, 22));
}

// sub rsp, 8; call malloc; add rsp, 8; jmp rdi
static const uint8_t jumps_like[] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0x00, 0x00, 0x00,
                                     0x00, 0x48, 0x83, 0xc4, 0x08, 0xff, 0xe7};

Test(forwarder, code_it_cannot_follow_is_no_forwarder) {
    cr_expect_not(CHECK(jumps_like, 9), "an indirect jump");
    cr_expect_not(CHECK_LOOSE(jumps_like, 9), "no path returns the block");
    // the bytes end in the middle of the walk: no instruction to decode there
    static const uint8_t cut[] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x83};
    cr_expect_not(CHECK(cut, 9));
}

// push rbp; push rbx; xor ebx, ebx; sub rsp, 8; mov rbp, [rip+0x2ea9]; nop;
// 1: mov edi, 0x60; call malloc; movsxd rdx, ebx; add ebx, 1; mov [rbp+rdx*8], rax;
// cmp ebx, 0x32; jne 1b; add rsp, 8; pop rbx; pop rbp; ret
// (gcc's plugin_allocate of tests/e2e/progs/plugin.c: rbp holds a global array, not the frame)
static const uint8_t global_in_rbp[] = {0x55, 0x53, 0x31, 0xdb, 0x48, 0x83, 0xec, 0x08, 0x48, 0x8b,
                                        0x2d, 0xa9, 0x2e, 0x00, 0x00, 0x90, 0xbf, 0x60, 0x00, 0x00,
                                        0x00, 0xe8, 0x06, 0xff, 0xff, 0xff, 0x48, 0x63, 0xd3, 0x83,
                                        0xc3, 0x01, 0x48, 0x89, 0x44, 0xd5, 0x00, 0x83, 0xfb, 0x32,
                                        0x75, 0xe6, 0x48, 0x83, 0xc4, 0x08, 0x5b, 0x5d, 0xc3};

Test(forwarder, a_store_through_rbp_that_is_no_frame_pointer_keeps_the_block) {
    cr_expect_not(CHECK(global_in_rbp, 26));
    cr_expect_not(CHECK_LOOSE(global_in_rbp, 26));
}

// test rdi, rdi; je 1f; jmp rsi; 1: sub rsp, 8; call malloc; add rsp, 8; ret
// (sqlite3Malloc: a tail call through the configured allocator's pointer on one path)
static const uint8_t tail_like[] = {0x48, 0x85, 0xff, 0x74, 0x02, 0xff, 0xe6,
                                    0x48, 0x83, 0xec, 0x08, 0xe8, 0x00, 0x00,
                                    0x00, 0x00, 0x48, 0x83, 0xc4, 0x08, 0xc3};

Test(forwarder, the_loose_rule_takes_a_tail_call_through_a_pointer) {
    cr_expect_not(CHECK(tail_like, 16));
    cr_expect(CHECK_LOOSE(tail_like, 16));
}

// sub rsp, 8; test rsi, rsi; je 2f; call calloc; test rax, rax; je 3f; 1: add rsp, 8; ret;
// 2: call croak_memory_wrap; 3: mov rdx, [rip+0x100]; cmp byte ptr [rdx], 0; jne 1b;
// call croak_no_mem   (Perl_safesyscalloc: the block after a call that never returns)
static const uint8_t croak_like[] = {
    0x48, 0x83, 0xec, 0x08, 0x48, 0x85, 0xf6, 0x74, 0x0f, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x85,
    0xc0, 0x74, 0x0a, 0x48, 0x83, 0xc4, 0x08, 0xc3, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x8b, 0x15,
    0x00, 0x01, 0x00, 0x00, 0x80, 0x3a, 0x00, 0x75, 0xea, 0xe8, 0x00, 0x00, 0x00, 0x00};

Test(forwarder, code_after_a_call_that_never_returns_does_not_count) {
    cr_expect(CHECK(croak_like, 14));
}

// Every function symbol of elf named funcbounds_* (our own code: libraries linked in statically
// may lack unwind tables) has an entry in fb with its bounds: at least 3 (init, fini, find).
static void expect_symbols_bounds(Elf *elf, const funcbounds_t *fb) {
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    size_t n_checked = 0;
    while ((scn = elf_nextscn(elf, scn))) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            const char *name;
            uint64_t lo, hi;
            if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
                sym.st_size == 0 || sym.st_shndx == SHN_UNDEF ||
                !(name = elf_strptr(elf, sh.sh_link, sym.st_name)) ||
                strncmp(name, "funcbounds_", 11) != 0)
                continue;
            cr_assert(funcbounds_find(fb, sym.st_value + sym.st_size / 2, &lo, &hi), "%s", name);
            cr_expect_eq(lo, sym.st_value, "%s", name);
            cr_expect_eq(hi, sym.st_value + sym.st_size, "%s", name);
            n_checked++;
        }
    }
    cr_expect_geq(n_checked, 3);
}

// Every function symbol of this executable with a size: its .eh_frame entry has the same bounds.
Test(funcbounds, eh_frame_entries_are_the_functions) {
    elf_version(EV_CURRENT);
    int fd = open("/proc/self/exe", O_RDONLY);
    cr_assert_geq(fd, 0);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    cr_assert_not_null(elf);
    funcbounds_t fb;
    funcbounds_init(&fb, elf);
    cr_assert_gt(fb.n, 10);
    expect_symbols_bounds(elf, &fb);
    uint64_t lo, hi;
    cr_expect_not(funcbounds_find(&fb, 0, &lo, &hi));
    funcbounds_fini(&fb);
    elf_end(elf);
    close(fd);
}

// lld gives .eh_frame the type SHT_X86_64_UNWIND (LLVM's own libraries are linked so): the same
// section under that type gives the same entries. This executable's file, read into memory,
// with its .eh_frame header's type changed.
Test(funcbounds, an_eh_frame_of_lld_type_is_read_too) {
    elf_version(EV_CURRENT);
    int fd = open("/proc/self/exe", O_RDONLY);
    cr_assert_geq(fd, 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    char *img = malloc((size_t)st.st_size);
    cr_assert_not_null(img);
    cr_assert_eq(pread(fd, img, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    Elf *elf = elf_memory(img, (size_t)st.st_size);
    cr_assert_not_null(elf);
    funcbounds_t want;
    funcbounds_init(&want, elf);
    cr_assert_gt(want.n, 10);
    elf_end(elf);

    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    Elf64_Shdr strtab;
    memcpy(&strtab, img + eh.e_shoff + (size_t)eh.e_shstrndx * eh.e_shentsize, sizeof strtab);
    bool patched = false;
    for (size_t i = 0; i < eh.e_shnum; i++) {
        char *at = img + eh.e_shoff + i * eh.e_shentsize;
        Elf64_Shdr sh;
        memcpy(&sh, at, sizeof sh);
        if (strcmp(img + strtab.sh_offset + sh.sh_name, ".eh_frame") == 0) {
            cr_assert_eq(sh.sh_type, SHT_PROGBITS); // as GNU ld made it
            sh.sh_type = SHT_X86_64_UNWIND;
            memcpy(at, &sh, sizeof sh);
            patched = true;
        }
    }
    cr_assert(patched);
    elf = elf_memory(img, (size_t)st.st_size);
    cr_assert_not_null(elf);
    funcbounds_t got;
    funcbounds_init(&got, elf);
    cr_expect_eq(got.n, want.n);
    expect_symbols_bounds(elf, &got); // and the entries are the functions, as above
    funcbounds_fini(&want);
    funcbounds_fini(&got);
    elf_end(elf);
    free(img);
}
