// SPDX-License-Identifier: MIT
// Inspection of a process before `heapprof attach` stops it (target.h):
// /proc/PID/status, maps and exe, and ELF dynamic symbols through libelf.
// Nothing here writes to the target.
#include "inject/target.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// A field of /proc/PID/status, as a number; -1 if absent.
static long status_field(pid_t pid, const char *key, char *state, size_t state_cap) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (state && !strncmp(line, "State:", 6))
            snprintf(state, state_cap, "%s", line + 6 + strspn(line + 6, " \t"));
        if (!strncmp(line, key, klen) && line[klen] == ':')
            v = strtol(line + klen + 1, NULL, 10);
    }
    fclose(f);
    return v;
}

bool target_alive(pid_t pid) {
    char state[64] = "";
    if (status_field(pid, "Pid", state, sizeof state) < 0)
        return false;
    return state[0] != 'Z' && state[0] != 'X';
}

static void comm_of(pid_t pid, char *out, size_t cap) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (f) {
        if (fgets(out, (int)cap, f))
            out[strcspn(out, "\n")] = '\0';
        fclose(f);
    }
}

#define STATIC_MSG                                                                                 \
    "process %d runs a statically linked program (or one without glibc): there is no dynamic "     \
    "loader to load heapprof into; restart it under `heapprof run`"

int target_check(pid_t pid, errmsg_t *err) {
#if !defined(__x86_64__)
    (void)pid;
    errmsg_set(err, "attach is implemented for x86-64 only; run the program under `heapprof run`");
    return -1;
#else
    char state[64] = "";
    if (pid <= 0 || status_field(pid, "Pid", state, sizeof state) < 0) {
        errmsg_set(err, "no process %d (it exited, or /proc does not show it)", (int)pid);
        return -1;
    }
    if (state[0] == 'Z' || state[0] == 'X') {
        errmsg_set(err, "process %d has exited (a zombie): nothing to attach to", (int)pid);
        return -1;
    }
    if (pid == getpid()) {
        errmsg_set(err, "heapprof cannot attach to itself");
        return -1;
    }
    long tracer = status_field(pid, "TracerPid", NULL, 0);
    if (tracer > 0) {
        char comm[64];
        comm_of((pid_t)tracer, comm, sizeof comm);
        errmsg_set(err,
                   "process %d is already traced by process %ld (%s), a debugger or another "
                   "profiler: detach that one first",
                   (int)pid, tracer, comm[0] ? comm : "?");
        return -1;
    }
    char exe[64];
    snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
    bool dynamic = false;
    if (target_check_exe(exe, pid, &dynamic, err) != 0)
        return -1;
    uint64_t start;
    char path[PATH_MAX];
    if (!dynamic || target_find_module(pid, "/libc.so.6", NULL, &start, path, sizeof path)) {
        errmsg_set(err, STATIC_MSG, (int)pid);
        return -1;
    }
    return 0;
#endif
}

int target_check_exe(const char *exe, pid_t pid, bool *dynamic, errmsg_t *err) {
    int fd = open(exe, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errmsg_set(err, "cannot read process %d's program (%s): run heapprof as its owner or root",
                   (int)pid, strerror(errno));
        return -1;
    }
    Elf64_Ehdr eh;
    ssize_t n = pread(fd, &eh, sizeof eh, 0);
    if (n < EI_NIDENT || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        close(fd);
        errmsg_set(err, "process %d's program is not an ELF file heapprof can read", (int)pid);
        return -1;
    }
    // e_machine sits at the same offset in 32- and 64-bit headers
    if (n != (ssize_t)sizeof eh || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_machine != EM_X86_64) {
        close(fd);
        errmsg_set(err,
                   "process %d runs a program for another architecture (ELF class %u, machine "
                   "%u); heapprof attaches to x86-64 programs only: use a heapprof built for it",
                   (int)pid, eh.e_ident[EI_CLASS], eh.e_machine);
        return -1;
    }
    bool has_interp = false;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
            (ssize_t)sizeof ph)
            break;
        has_interp |= ph.p_type == PT_INTERP;
    }
    close(fd);
    *dynamic = has_interp;
    if (!has_interp) {
        errmsg_set(err, STATIC_MSG, (int)pid);
        return -1;
    }
    return 0;
}

int target_find_module(pid_t pid, const char *needle, const uint64_t *ino, uint64_t *start,
                       char *path, size_t cap) {
    char maps[64];
    snprintf(maps, sizeof maps, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(maps, "r");
    if (!f)
        return -1;
    // A loaded module is an offset-0 mapping followed by its executable segment. Other
    // mappings of the same file exist: a library the process reads as data (heapprof's own
    // unwinder maps whole ELF files to read their unwind tables) has only the offset-0 one.
    char line[PATH_MAX + 256];
    uint64_t head_start = 0, head_inode = 0;
    bool have_head = false;
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        uint64_t lo, hi, off, inode;
        char perms[8], dev[16];
        int name_at = 0;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %15s %" SCNu64 " %n", &lo, &hi,
                   perms, &off, dev, &inode, &name_at) < 6 ||
            !name_at)
            continue;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = '\0';
        if (!strstr(name, needle) || (ino && inode != *ino))
            continue;
        if (off == 0) {
            head_start = lo;
            head_inode = inode;
            have_head = true;
            snprintf(path, cap, "%s", name);
        } else if (perms[2] == 'x' && have_head && inode == head_inode) {
            *start = head_start;
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

void target_file_path(pid_t pid, const char *target_path, uint64_t start, char *out, size_t cap) {
    // The mapping's own link first: it names the very file mapped, whatever the target's root
    // and mount namespace (maps prints paths as seen from the reader's root, and a deleted
    // file has no path at all).
    char maps[64], line[PATH_MAX + 256];
    snprintf(maps, sizeof maps, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(maps, "r");
    out[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        uint64_t lo, hi;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2 && lo == start) {
            snprintf(out, cap, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, lo, hi);
            break;
        }
    }
    if (f)
        fclose(f);
    if (out[0] && access(out, R_OK) == 0)
        return;
    // without that (no CAP_SYS_ADMIN): the path in the target's root, else as maps says it
    snprintf(out, cap, "/proc/%d/root%s", (int)pid, target_path);
    if (access(out, R_OK) != 0)
        snprintf(out, cap, "%s", target_path);
}

bool target_same_root(pid_t pid) {
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", (int)pid);
    struct stat a, b;
    return stat(root, &a) == 0 && stat("/", &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

int target_symbol(const char *file, uint64_t start, const char *sym, uint64_t *addr,
                  errmsg_t *err) {
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errmsg_set(err, "cannot open %s: %s", file, strerror(errno));
        return -1;
    }
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    int rc = -1;
    uint64_t first_load = UINT64_MAX, value = 0;
    bool found = false;
    size_t nph = 0;
    if (e && elf_getphdrnum(e, &nph) == 0) {
        for (size_t i = 0; i < nph; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < first_load)
                first_load = ph.p_vaddr;
        }
        Elf_Scn *scn = NULL;
        while (!found && (scn = elf_nextscn(e, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
                continue;
            Elf_Data *data = elf_getdata(scn, NULL);
            size_t n = data ? sh.sh_size / sh.sh_entsize : 0;
            for (size_t i = 0; i < n; i++) {
                GElf_Sym s;
                if (!gelf_getsym(data, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
                    continue;
                const char *name = elf_strptr(e, sh.sh_link, s.st_name);
                if (name && !strcmp(name, sym)) {
                    value = s.st_value;
                    found = true;
                    break;
                }
            }
        }
    }
    if (found && first_load != UINT64_MAX) {
        // the lowest mapping (offset 0) starts at the load bias plus the first
        // segment's page
        *addr = start - (first_load & ~(uint64_t)0xfff) + value;
        rc = 0;
    } else {
        errmsg_set(err, "%s has no dynamic symbol %s", file, sym);
    }
    if (e)
        elf_end(e);
    close(fd);
    return rc;
}
