// SPDX-License-Identifier: MIT
// preload/cfi_search.c on this test's own executable: as linked, .eh_frame_hdr comes before
// .eh_frame and nothing is renamed; in a copy whose two section headers are swapped (the order
// BOLT leaves, as in rustc's libLLVM) .eh_frame is renamed, and libdw's CFI then answers every
// address as it does for the file as linked (through the search table instead of a scan).
#include "cfi_search.h"

#include <criterion/criterion.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *read_self(size_t *len) {
    int fd = open("/proc/self/exe", O_RDONLY);
    cr_assert(fd >= 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    char *buf = malloc((size_t)st.st_size);
    cr_assert(buf);
    cr_assert_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return buf;
}

// The index of the section named name in the image, or -1.
static int section_index(const char *img, const char *name) {
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    const char *strs = img + sh[eh->e_shstrndx].sh_offset;
    for (int i = 0; i < eh->e_shnum; i++)
        if (!strcmp(strs + sh[i].sh_name, name))
            return i;
    return -1;
}

static Elf *open_private(const char *path, int *fd) {
    elf_version(EV_CURRENT);
    *fd = open(path, O_RDONLY);
    cr_assert(*fd >= 0, "%s", path);
    Elf *elf = elf_begin(*fd, ELF_C_READ_MMAP_PRIVATE, NULL);
    cr_assert(elf);
    return elf;
}

// Every 7th byte of .text, as a return address's call instruction would be asked.
static void expect_same_answers(Dwarf_CFI *a, Dwarf_CFI *b, const char *img) {
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    const Elf64_Shdr *text = (const Elf64_Shdr *)(img + eh->e_shoff) + section_index(img, ".text");
    size_t asked = 0, found = 0;
    for (uint64_t pc = text->sh_addr; pc < text->sh_addr + text->sh_size; pc += 7, asked++) {
        Dwarf_Frame *fa = NULL, *fb = NULL;
        int ra = dwarf_cfi_addrframe(a, pc, &fa), rb = dwarf_cfi_addrframe(b, pc, &fb);
        cr_assert_eq(ra, rb, "pc %#lx: %d against %d", (unsigned long)pc, ra, rb);
        if (ra == 0) {
            Dwarf_Addr sa, ea, sb, eb;
            bool sig_a, sig_b;
            cr_assert_eq(dwarf_frame_info(fa, &sa, &ea, &sig_a),
                         dwarf_frame_info(fb, &sb, &eb, &sig_b));
            cr_assert(sa == sb && ea == eb, "pc %#lx: FDE ranges differ", (unsigned long)pc);
            found++;
        }
        free(fa);
        free(fb);
    }
    cr_expect_gt(found, asked / 2, "%zu of %zu addresses have CFI", found, asked);
}

Test(cfi_search, leaves_a_file_whose_table_comes_first_as_it_is) {
    size_t len;
    char *img = read_self(&len);
    int hdr = section_index(img, ".eh_frame_hdr"), eh = section_index(img, ".eh_frame");
    cr_assert(hdr >= 0 && eh >= 0 && hdr < eh, "the linker's order: .eh_frame_hdr first");
    int fd;
    Elf *elf = open_private("/proc/self/exe", &fd);
    cr_expect_not(hp_cfi_search_table_first(elf));
    elf_end(elf);
    close(fd);
    free(img);
}

Test(cfi_search, renames_an_eh_frame_before_its_table_and_libdw_answers_alike) {
    size_t len;
    char *img = read_self(&len);
    int hdr = section_index(img, ".eh_frame_hdr"), eh = section_index(img, ".eh_frame");
    cr_assert(hdr >= 0 && eh >= 0);
    // the copy: the two section headers swapped, so .eh_frame is met first
    char *swapped = malloc(len);
    cr_assert(swapped);
    memcpy(swapped, img, len);
    const Elf64_Ehdr *ehdr = (const Elf64_Ehdr *)img;
    Elf64_Shdr *sh = (Elf64_Shdr *)(swapped + ehdr->e_shoff);
    Elf64_Shdr t = sh[hdr];
    sh[hdr] = sh[eh];
    sh[eh] = t;
    char path[] = "/tmp/heapprof-cfi-search-XXXXXX";
    int out = mkstemp(path);
    cr_assert(out >= 0);
    cr_assert_eq(write(out, swapped, len), (ssize_t)len);
    close(out);

    int fd_orig, fd_swap;
    Elf *orig = open_private("/proc/self/exe", &fd_orig);
    Elf *moved = open_private(path, &fd_swap);
    cr_expect_not(hp_cfi_search_table_first(orig));
    cr_expect(hp_cfi_search_table_first(moved), ".eh_frame before its table is renamed");
    Dwarf_CFI *a = dwarf_getcfi_elf(orig), *b = dwarf_getcfi_elf(moved);
    cr_assert(a && b);
    expect_same_answers(a, b, img);
    dwarf_cfi_end(a);
    dwarf_cfi_end(b);
    elf_end(orig);
    elf_end(moved);
    close(fd_orig);
    close(fd_swap);
    unlink(path);
    free(swapped);
    free(img);
}
