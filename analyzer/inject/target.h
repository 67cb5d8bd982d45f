// SPDX-License-Identifier: MIT
// What `heapprof attach` needs to know about a running process before it
// touches it: whether it can be traced at all (the refusals of
// docs/design.md#attach), where a module is mapped, and the address of a
// dynamic symbol in it, read from the module's file as the target sees it
// (through /proc/PID/root, so a process in a container resolves its own files).
// Reads /proc and ELF files only; never stops or changes the target.
#ifndef HEAPPROF_ANALYZER_INJECT_TARGET_H
#define HEAPPROF_ANALYZER_INJECT_TARGET_H

#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// Refuses, with one line saying why and what to do, a process that cannot be
// attached to: gone, a zombie, already traced, another architecture than this
// heapprof's, statically linked (no dynamic loader to call). -1 with err set; 0
// when it may be tried.
int target_check(pid_t pid, errmsg_t *err);

// The part of target_check that reads the program's file exe (pid only names the process in
// messages): an ELF file for x86-64 (class 64, EM_X86_64) with a PT_INTERP (*dynamic). -1 with
// err set otherwise (a static program too, *dynamic false).
int target_check_exe(const char *exe, pid_t pid, bool *dynamic, errmsg_t *err);

// The lowest mapping of a file of the target whose path contains `needle` (and,
// if not NULL, whose file has inode ino): its start, and the path as the target
// names it (maybe ending in " (deleted)"). -1 when there is none.
int target_find_module(pid_t pid, const char *needle, const uint64_t *ino, uint64_t *start,
                       char *path, size_t cap);

// The run-time address of dynamic symbol `sym` of the module mapped at `start`
// from `file` (a path this process can open). -1 with err set when the file
// cannot be read or lacks the symbol.
int target_symbol(const char *file, uint64_t start, const char *sym, uint64_t *addr, errmsg_t *err);

// A path under which this process can open the file the target maps at start (named
// target_path in its maps): /proc/PID/map_files/..., else /proc/PID/root/PATH, else PATH.
void target_file_path(pid_t pid, const char *target_path, uint64_t start, char *out, size_t cap);

// Whether the target sees the same root directory as this process.
bool target_same_root(pid_t pid);

// Whether the process exists and is not a zombie.
bool target_alive(pid_t pid);

#endif
