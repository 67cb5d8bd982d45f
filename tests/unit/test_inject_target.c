// SPDX-License-Identifier: MIT
// inject/target: what `heapprof attach` reads of a program's file before touching the process:
// another architecture and a static program are refused with their one line; this test's own
// program (x86-64, dynamic) passes. The ELF files are written here, byte by byte.
#include "inject/target.h"

#include <criterion/criterion.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Writes an ELF header (and, with interp, one PT_INTERP program header) to a fresh file.
static char *write_elf(unsigned char cls, uint16_t machine, bool interp) {
    static char path[] = "/tmp/heapprof-target-XXXXXX";
    char *p = strdup(path);
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = cls;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = machine;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = interp ? 1 : 0;
    eh.e_ehsize = sizeof eh;
    cr_assert_eq(write(fd, &eh, sizeof eh), (ssize_t)sizeof eh);
    if (interp) {
        Elf64_Phdr ph = {.p_type = PT_INTERP};
        cr_assert_eq(write(fd, &ph, sizeof ph), (ssize_t)sizeof ph);
    }
    close(fd);
    return p;
}

static void expect_refused(const char *path, const char *why) {
    errmsg_t err;
    errmsg_init(&err);
    bool dynamic = true;
    cr_expect_eq(target_check_exe(path, 1234, &dynamic, &err), -1, "%s was accepted", path);
    cr_expect(strstr(err.msg, why), "expected '%s' in: %s", why, err.msg);
    cr_expect(strstr(err.msg, "1234"), "the message does not name the process: %s", err.msg);
    cr_expect(!strchr(err.msg, '\n'), "not one line: %s", err.msg);
}

Test(inject_target, another_architecture_is_refused) {
    char *arm = write_elf(ELFCLASS64, EM_AARCH64, true);
    expect_refused(arm, "another architecture");
    char *i386 = write_elf(ELFCLASS32, EM_386, true);
    expect_refused(i386, "another architecture");
    unlink(arm);
    unlink(i386);
    free(arm);
    free(i386);
}

Test(inject_target, a_program_without_an_interpreter_is_refused_as_static) {
    char *stat = write_elf(ELFCLASS64, EM_X86_64, false);
    expect_refused(stat, "statically linked");
    unlink(stat);
    free(stat);
}

Test(inject_target, not_an_elf_file_is_refused) {
    char path[] = "/tmp/heapprof-target-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "#!/bin/sh\n", 10), 10);
    close(fd);
    expect_refused(path, "not an ELF file");
    unlink(path);
}

Test(inject_target, this_dynamic_x86_64_program_passes) {
    errmsg_t err;
    errmsg_init(&err);
    bool dynamic = false;
    cr_expect_eq(target_check_exe("/proc/self/exe", getpid(), &dynamic, &err), 0, "%s", err.msg);
    cr_expect(dynamic);
}
