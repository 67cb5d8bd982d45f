// SPDX-License-Identifier: MIT
// The run subcommand: locating libheapprof.so relative to this executable, the child's
// environment (LD_PRELOAD, HEAPPROF_OUT), fork/exec with exec errors reported through a
// close-on-exec pipe, signal forwarding, and finding the traces afterwards. Prints nothing.
#include "cmd/cmd_run.h"

#include "core/random.h"
#include "core/sort.h"
#include "core/xalloc.h"
#include "format/hpt_format.h"
#include "symbols/perfmap.h"
#include "trace/reader.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HEAPPROF_INSTALL_LIBDIR
#define HEAPPROF_INSTALL_LIBDIR "lib"
#endif

#define PRELOAD_NAME "libheapprof.so"
#define DEFAULT_PATTERN "heapprof.%p.hpt" // the shim's default HEAPPROF_OUT

const char cmd_run_usage[] =
    "usage: heapprof run [-o TRACE] [--sample-bytes N] [--no-children] [--] CMD [ARGS...]\n"
    "\n"
    "Runs CMD with libheapprof.so preloaded and records every allocation into a trace.\n"
    "Exits with CMD's exit status (128 + signal if it was killed).\n"
    "\n"
    "  -o, --output TRACE   trace file to write; %p becomes the process id; a directory\n"
    "                       gets heapprof.%p.hpt in it (default: $HEAPPROF_OUT, else\n"
    "                       heapprof.%p.hpt in the current directory)\n"
    "  --sample-bytes N     sampled recording: one allocation in every N bytes on average,\n"
    "                       weighted back up by the analyzer (docs/sampling.md); N in bytes,\n"
    "                       or with a K, M or G suffix (KiB, MiB, GiB), at most 1G; 0 records\n"
    "                       every allocation (default: $HEAPPROF_SAMPLE_BYTES, else 0)\n"
    "  --no-children        record CMD's own process only (also what it execs), not the\n"
    "                       processes it starts: they run without heapprof's threads, which\n"
    "                       a program that must stay single-threaded needs (Chromium's zygote)\n"
    "  -h, --help           this help\n";

// --sample-bytes' value: decimal bytes with an optional K, M or G suffix (powers of 1024), up
// to the shim's limit of 2^30 (the file header's word), into o->sample_bytes as decimal.
static int parse_sample_bytes(const char *v, cmd_run_opts_t *o, errmsg_t *err) {
    unsigned long long n = 0;
    const char *p = v;
    if (*p < '0' || *p > '9')
        goto bad;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (unsigned)(*p - '0');
        if (n > (1ull << 30))
            goto too_big;
    }
    unsigned shift = 0;
    if (*p == 'k' || *p == 'K')
        shift = 10;
    else if (*p == 'm' || *p == 'M')
        shift = 20;
    else if (*p == 'g' || *p == 'G')
        shift = 30;
    if (shift) {
        p++;
        if (*p == 'i' && p[1] == 'B')
            p += 2;
        else if (*p == 'B')
            p++;
    }
    if (*p)
        goto bad;
    if (n > (1ull << (30 - shift)))
        goto too_big;
    snprintf(o->sample_bytes, sizeof o->sample_bytes, "%llu", n << shift);
    return 0;
bad:
    errmsg_set(err, "run: --sample-bytes needs a number of bytes (e.g. 524288 or 512K), not '%s'",
               v);
    return -1;
too_big:
    errmsg_set(err, "run: --sample-bytes %s is more than the limit of 1G (1073741824 bytes)", v);
    return -1;
}

int cmd_run_parse(int argc, char **argv, cmd_run_opts_t *o, errmsg_t *err) {
    memset(o, 0, sizeof *o);
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (i + 1 >= argc) {
                errmsg_set(err, "run: %s needs a TRACE path", a);
                return -1;
            }
            o->out = argv[++i];
        } else if (strncmp(a, "--output=", 9) == 0) {
            o->out = a + 9;
        } else if (strcmp(a, "--sample-bytes") == 0) {
            if (i + 1 >= argc) {
                errmsg_set(err, "run: --sample-bytes needs a number of bytes");
                return -1;
            }
            if (parse_sample_bytes(argv[++i], o, err) != 0)
                return -1;
        } else if (strncmp(a, "--sample-bytes=", 15) == 0) {
            if (parse_sample_bytes(a + 15, o, err) != 0)
                return -1;
        } else if (strcmp(a, "--no-children") == 0) {
            o->no_children = true;
        } else if (strncmp(a, "-o", 2) == 0) {
            o->out = a + 2;
        } else if (a[0] == '-' && a[1] != '\0') {
            errmsg_set(err, "run: unknown option '%s' (see heapprof run --help)", a);
            return -1;
        } else {
            break; // the command starts here
        }
    }
    if (o->out && !o->out[0]) {
        errmsg_set(err, "run: empty TRACE path");
        return -1;
    }
    if (i >= argc) {
        errmsg_set(err, "run: missing command (usage: heapprof run [-o TRACE] -- CMD ARGS...)");
        return -1;
    }
    o->cmd = argv + i;
    return 0;
}

int cmd_run_find_preload(const char *exe_path, char *out, size_t cap) {
    char exe[PATH_MAX];
    if (exe_path) {
        if (snprintf(exe, sizeof exe, "%s", exe_path) >= (int)sizeof exe)
            return -1;
    } else {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n < 0)
            n = 0;
        exe[n] = '\0';
    }
    char *slash = strrchr(exe, '/');
    if (slash) {
        *slash = '\0';
        const char *libdir = HEAPPROF_INSTALL_LIBDIR;
        char cand[4][PATH_MAX + 64];
        snprintf(cand[0], sizeof cand[0], "%s/../preload/" PRELOAD_NAME, exe);
        snprintf(cand[1], sizeof cand[1], "%s/../lib/" PRELOAD_NAME, exe);
        snprintf(cand[2], sizeof cand[2], "%s/../lib/x86_64-linux-gnu/" PRELOAD_NAME, exe);
        if (libdir[0] == '/')
            snprintf(cand[3], sizeof cand[3], "%s/" PRELOAD_NAME, libdir);
        else
            snprintf(cand[3], sizeof cand[3], "%s/../%s/" PRELOAD_NAME, exe, libdir);
        for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
            char real[PATH_MAX];
            struct stat st;
            if (stat(cand[i], &st) == 0 && S_ISREG(st.st_mode) && realpath(cand[i], real)) {
                if (strlen(real) >= cap)
                    return -1;
                strcpy(out, real);
                return 0;
            }
        }
    }
    if (cap < sizeof PRELOAD_NAME)
        return -1;
    strcpy(out, PRELOAD_NAME);
    return 0;
}

int cmd_run_trace_path(const char *pattern, pid_t pid, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = pattern; *p; p++) {
        char num[24];
        const char *piece = p;
        size_t len = 1;
        if (p[0] == '%' && p[1] == 'p') {
            len = (size_t)snprintf(num, sizeof num, "%ld", (long)pid);
            piece = num;
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            p++; // "%%" is a literal '%', as in the shim
        }
        if (n + len >= cap)
            return -1;
        memcpy(out + n, piece, len);
        n += len;
    }
    if (cap == 0)
        return -1;
    out[n] = '\0';
    return 0;
}

// ---- signals ----

static volatile sig_atomic_t child_pid;

static void forward(int sig, siginfo_t *si, void *uctx) {
    (void)uctx;
    // A terminal's ^C (SI_KERNEL) already reached the whole foreground process group, the
    // child included; forwarding it too would deliver it twice. Signals sent to heapprof by a
    // process (kill, a supervisor) are what the child would otherwise never see.
    if (si && si->si_code == SI_KERNEL)
        return;
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

// ---- traces found afterwards ----

static void add_trace(cmd_run_result_t *res, size_t *cap, const char *path) {
    res->traces = xgrow(res->traces, cap, res->n_traces + 1, sizeof *res->traces);
    res->traces[res->n_traces++] = xstrdup(path);
}

// Does name fit the shim's file naming (preload/writer.c): the pattern with %p as the pid
// (`pid`, or any digits when NULL) and %% as %, then optionally ".N" (a free name chosen
// because the first existed; inserted before a final ".hpt").
static bool name_matches(const char *pat, const char *s, const char *pid) {
    for (;;) {
        if (*pat == '\0' || strcmp(pat, ".hpt") == 0) {
            // optional ".N", then the rest of the pattern (".hpt" or nothing)
            if (s[0] == '.' && s[1] >= '0' && s[1] <= '9') {
                const char *t = s + 1;
                while (*t >= '0' && *t <= '9')
                    t++;
                if (strcmp(t, pat) == 0)
                    return true;
            }
            return strcmp(s, pat) == 0;
        }
        if (pat[0] == '%' && pat[1] == 'p') {
            if (pid) {
                size_t n = strlen(pid);
                if (strncmp(s, pid, n) != 0)
                    return false;
                s += n;
                pat += 2;
                continue;
            }
            if (!(*s >= '0' && *s <= '9'))
                return false;
            // any run of digits: try each length (the pattern may continue with digits)
            for (const char *t = s + 1;; t++) {
                if (name_matches(pat + 2, t, pid))
                    return true;
                if (!(*t >= '0' && *t <= '9'))
                    return false;
            }
        }
        char c = *pat;
        if (pat[0] == '%' && pat[1] == '%')
            pat++;
        if (*s != c)
            return false;
        s++;
        pat++;
    }
}

// The pid, parent pid and run id a trace's file header gives; false if it is not a readable
// trace.
static bool trace_ids(const char *path, uint32_t *pid, uint32_t *ppid, uint32_t *run_id) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return false;
    hpt_file_hdr_t h;
    ssize_t n = read(fd, &h, sizeof h);
    close(fd);
    if (n != (ssize_t)sizeof h || memcmp(h.magic, HPT_MAGIC, sizeof h.magic) != 0)
        return false;
    *pid = h.pid;
    *ppid = h.ppid;
    *run_id = h.run_id;
    return true;
}

// Keeps the traces of the command's own process tree: the first n_own (named by its pid), any
// whose header gives its pid or this run's id (every process the command started inherits it:
// a daemon's grandchild whose parent never allocated, and so left no trace, is still found),
// and any of a process whose parent left a kept trace (a program that rebuilt its environment
// but kept LD_PRELOAD). Other traces that appeared in the directory meanwhile (another run of
// the same program) are dropped.
static void keep_own_tree(cmd_run_result_t *res, pid_t pid, size_t n_own) {
    size_t n = res->n_traces;
    uint32_t *pids = xcalloc(n + 1, sizeof *pids), *ppids = xcalloc(n + 1, sizeof *ppids);
    bool *keep = xcalloc(n + 1, sizeof *keep);
    for (size_t i = 0; i < n; i++) {
        uint32_t run_id = 0;
        if (!trace_ids(res->traces[i], &pids[i], &ppids[i], &run_id))
            pids[i] = ppids[i] = 0;
        keep[i] = i < n_own || (pids[i] != 0 && pids[i] == (uint32_t)pid) ||
                  (pids[i] != 0 && res->run_id != 0 && run_id == res->run_id);
    }
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < n; i++) {
            if (keep[i] || pids[i] == 0)
                continue;
            for (size_t j = 0; j < n; j++)
                if (keep[j] && pids[j] == ppids[i]) {
                    keep[i] = grew = true;
                    break;
                }
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep[i])
            res->traces[k++] = res->traces[i];
        else
            free(res->traces[i]);
    }
    res->n_traces = k;
    free(pids);
    free(ppids);
    free(keep);
}

static int cmp_trace(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t lx = strlen(x), ly = strlen(y);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y); // numeric order of equal-shape names
}

// Every trace written since the command started: its own (a second one after exec, under the
// next free name), then its descendants' (fork gives a child its own trace).
static void find_traces(cmd_run_result_t *res, const char *pattern, pid_t pid,
                        const struct timespec *start) {
    size_t cap = 0;
    const char *slash = strrchr(pattern, '/');
    const char *base = slash ? slash + 1 : pattern;
    char dir[PATH_MAX];
    if (!slash)
        strcpy(dir, ".");
    else if (slash == pattern)
        strcpy(dir, "/");
    else if ((size_t)(slash - pattern) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - pattern), pattern);
    else
        return;
    if (memchr(pattern, '%', (size_t)(base - pattern))) {
        // a pid in the directory name: only the command's own file can be found
        struct stat st;
        if (stat(res->expected, &st) == 0 && S_ISREG(st.st_mode))
            add_trace(res, &cap, res->expected);
        return;
    }
    char pid_str[24];
    snprintf(pid_str, sizeof pid_str, "%ld", (long)pid);
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t n_own = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!name_matches(base, de->d_name, NULL))
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s%s%s", slash ? dir : "",
                 slash && slash != pattern ? "/" : "", de->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
            continue;
        if (st.st_mtim.tv_sec < start->tv_sec ||
            (st.st_mtim.tv_sec == start->tv_sec && st.st_mtim.tv_nsec < start->tv_nsec))
            continue; // there before the command ran
        add_trace(res, &cap, path);
        if (name_matches(base, de->d_name, pid_str)) {
            // own traces go first
            char *t = res->traces[res->n_traces - 1];
            memmove(res->traces + n_own + 1, res->traces + n_own,
                    (res->n_traces - 1 - n_own) * sizeof *res->traces);
            res->traces[n_own++] = t;
        }
    }
    closedir(d);
    if (n_own > 1)
        sort_items(res->traces, n_own, sizeof *res->traces, cmp_trace);
    if (res->n_traces - n_own > 1)
        sort_items(res->traces + n_own, res->n_traces - n_own, sizeof *res->traces, cmp_trace);
    keep_own_tree(res, pid, n_own);
}

// ---- spawning ----

// A nonzero id for this run's processes, unlikely to be another run's in the same directory.
static uint32_t new_run_id(void) {
    uint64_t v = random_u64();
    uint32_t id = (uint32_t)(v ^ (v >> 32));
    return id ? id : 1;
}

// In the child between fork and exec: the parent is single-threaded, so setenv is safe here.
__attribute__((noreturn)) static void child_exec(const cmd_run_opts_t *o, const char *preload,
                                                 uint32_t run_id, const sigset_t *old_mask,
                                                 int err_fd) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    const char *prev = getenv("LD_PRELOAD");
    if (prev && prev[0]) {
        size_t n = strlen(preload) + 1 + strlen(prev) + 1;
        char *v = malloc(n);
        if (v) {
            snprintf(v, n, "%s:%s", preload, prev);
            setenv("LD_PRELOAD", v, 1);
        }
    } else {
        setenv("LD_PRELOAD", preload, 1);
    }
    if (o->out)
        setenv("HEAPPROF_OUT", o->out, 1);
    if (o->sample_bytes[0])
        setenv("HEAPPROF_SAMPLE_BYTES", o->sample_bytes, 1);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid()); // the command keeps it through exec
    // the command's processes say where their traces go; `heapprof run` lists the others at
    // the end (a shell script's hundreds of processes wrote a line each, amid its own output)
    setenv("HEAPPROF_ANNOUNCE_PID", pid, 1);
    char id[16];
    snprintf(id, sizeof id, "%u", (unsigned)run_id);
    setenv("HEAPPROF_RUN_ID", id, 1);
    if (o->no_children)
        setenv("HEAPPROF_ONLY_PID", pid, 1);
    execvp(o->cmd[0], o->cmd);
    int e = errno;
    ssize_t w = write(err_fd, &e, sizeof e);
    (void)w;
    _exit(e == ENOENT ? 127 : 126);
}

// The file execvp would run for cmd: cmd itself when it has a '/', else the first executable
// regular file of that name in PATH. False when there is none (execvp then says why).
static bool find_program(const char *cmd, char *out, size_t cap) {
    if (strchr(cmd, '/'))
        return snprintf(out, cap, "%s", cmd) < (int)cap;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        struct stat st;
        if (snprintf(out, cap, "%.*s%s%s", (int)n, p, n ? "/" : "", cmd) < (int)cap &&
            stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return true;
        p += n + (p[n] == ':');
    }
    return false;
}

// Whether path is an ELF executable without a program interpreter: a static binary, which the
// dynamic linker never loads, so LD_PRELOAD cannot reach it. Anything else (a script, a
// dynamic ELF, a file that cannot be read) is for execvp to run or refuse.
bool cmd_run_is_static_elf(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    Elf64_Ehdr eh;
    bool is_static = false;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN) &&
        eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 && eh.e_phnum < 1024) {
        // ET_DYN too: a static-pie has no interpreter either
        is_static = true;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph) {
                is_static = false; // unreadable: let execvp decide
                break;
            }
            if (ph.p_type == PT_INTERP)
                is_static = false;
        }
    }
    close(fd);
    return is_static;
}

// The trace pattern names a place the shim can write: its directory exists (a pattern with a
// '%' before its last '/' is left to the shim). An existing directory as the pattern means
// heapprof.%p.hpt in it: *in_dir gets that pattern (else it is left empty). False with err set.
static bool check_out(const char *pattern, char *in_dir, size_t cap, errmsg_t *err) {
    in_dir[0] = 0;
    struct stat st;
    if (stat(pattern, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t n = strlen(pattern);
        if (snprintf(in_dir, cap, "%s%s%s", pattern, n && pattern[n - 1] == '/' ? "" : "/",
                     DEFAULT_PATTERN) >= (int)cap) {
            errmsg_set(err, "run: the trace path %s/%s is too long", pattern, DEFAULT_PATTERN);
            return false;
        }
        pattern = in_dir;
    }
    const char *slash = strrchr(pattern, '/');
    if (!slash || slash == pattern)
        return true; // the current directory, or /
    char dir[PATH_MAX];
    size_t n = (size_t)(slash - pattern);
    if (n >= sizeof dir || memchr(pattern, '%', n))
        return true;
    memcpy(dir, pattern, n);
    dir[n] = 0;
    if (stat(dir, &st) != 0) {
        errmsg_set(err, "run: cannot write traces to %s: %s", dir, strerror(errno));
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        errmsg_set(err, "run: cannot write traces to %s: not a directory", dir);
        return false;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        errmsg_set(err, "run: cannot write traces to %s: %s", dir, strerror(errno));
        return false;
    }
    return true;
}

int cmd_run_exec(const cmd_run_opts_t *o, cmd_run_result_t *res, errmsg_t *err) {
    memset(res, 0, sizeof *res);
    char prog[PATH_MAX];
    if (find_program(o->cmd[0], prog, sizeof prog) && cmd_run_is_static_elf(prog)) {
        errmsg_set(err, "run: %s is statically linked: no dynamic linker loads it, so heapprof "
                        "cannot be preloaded into it (link it dynamically to profile it)",
                   prog);
        return -1;
    }
    if (cmd_run_find_preload(NULL, res->preload, sizeof res->preload) != 0) {
        errmsg_set(err, "run: the path of %s is too long", PRELOAD_NAME);
        return -1;
    }
    if (strpbrk(res->preload, ": ")) {
        errmsg_set(err, "run: cannot preload %s: LD_PRELOAD splits paths at ':' and ' '",
                   res->preload);
        return -1;
    }
    const char *pattern = o->out ? o->out : getenv("HEAPPROF_OUT");
    if (!pattern || !pattern[0])
        pattern = DEFAULT_PATTERN;
    // Where the traces go is checked once here: else every process the command starts says
    // it cannot create its trace (a make -j2: 278 lines) and the end asks whether the shim
    // was loaded at all.
    static char in_dir[PATH_MAX];
    cmd_run_opts_t with_dir;
    if (!check_out(pattern, in_dir, sizeof in_dir, err))
        return -1;
    if (in_dir[0]) {
        with_dir = *o;
        with_dir.out = in_dir;
        o = &with_dir;
        pattern = in_dir;
    }
    // The command's processes are told the directory in full: a process that changed its
    // working directory before it forked or ran another program (a daemon's chdir("/"), make
    // -C) put its children's traces there, where this command never looked for them.
    // `pattern` stays as given: the traces are found and named relative to it.
    // The directory's own '%'s are doubled: the shim expands %p and %% in the whole path.
    static char full[2 * PATH_MAX];
    cmd_run_opts_t with_full;
    char cwd[PATH_MAX];
    if (pattern[0] != '/' && getcwd(cwd, sizeof cwd)) {
        size_t n = 0;
        for (const char *c = cwd; *c; c++) {
            if (*c == '%')
                full[n++] = '%';
            full[n++] = *c;
        }
        if ((size_t)snprintf(full + n, sizeof full - n, "%s%s", strcmp(cwd, "/") ? "/" : "",
                             pattern) < sizeof full - n) {
            with_full = *o;
            with_full.out = full;
            o = &with_full;
        }
    }

    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        errmsg_set(err, "run: pipe: %s", strerror(errno));
        return -1;
    }
    struct timespec start;
    clock_gettime(CLOCK_REALTIME, &start);
    start.tv_sec -= 1; // file systems with coarse timestamps
    res->run_id = new_run_id();

    // Block the forwarded signals until child_pid is set, so none is lost in between.
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        child_exec(o, res->preload, res->run_id, &old_mask, pipefd[1]);
    }
    int fork_errno = errno;
    child_pid = pid > 0 ? pid : 0;
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    close(pipefd[1]);
    int rc = 0;
    if (pid < 0) {
        errmsg_set(err, "run: fork: %s", strerror(fork_errno));
        rc = -1;
        goto restore;
    }
    res->pid = pid;

    int exec_errno = 0;
    ssize_t got;
    do
        got = read(pipefd[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            errmsg_set(err, "run: waitpid: %s", strerror(errno));
            rc = -1;
            goto restore;
        }
    }
    res->exit_status = WIFEXITED(status)     ? WEXITSTATUS(status)
                       : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                             : 1;
    if (got == (ssize_t)sizeof exec_errno) {
        res->exec_failed = true;
        errmsg_set(err, "run: cannot run '%s': %s", o->cmd[0], strerror(exec_errno));
        rc = -1;
        goto restore;
    }
    if (cmd_run_trace_path(pattern, pid, res->expected, sizeof res->expected) == 0)
        find_traces(res, pattern, pid, &start);
    // A JIT's perf map (node --perf-basic-prof, python -X perf) lives in /tmp, apart from the
    // trace: a copy beside it keeps the names with the trace wherever it is analysed.
    uint64_t since = (uint64_t)start.tv_sec * 1000000000u + (uint64_t)start.tv_nsec;
    for (size_t i = 0; i < res->n_traces; i++) {
        uint32_t tpid, tppid, run_id;
        if (trace_ids(res->traces[i], &tpid, &tppid, &run_id) &&
            perfmap_keep_beside(res->traces[i], tpid, since) > 0)
            res->n_perf_maps++;
    }

restore:
    child_pid = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    close(pipefd[0]);
    return rc;
}

void cmd_run_result_fini(cmd_run_result_t *res) {
    for (size_t i = 0; i < res->n_traces; i++)
        free(res->traces[i]);
    free(res->traces);
    res->traces = NULL;
    res->n_traces = 0;
}

int cmd_run_trace_program(const char *path, char *out, size_t cap, uint32_t *pid) {
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    if (!r)
        return -1;
    int rc = -1;
    if (reader_read_process(r, &err) == 0 && reader_exe(r)) {
        const char *exe = reader_exe(r), *slash = strrchr(exe, '/');
        snprintf(out, cap, "%s", slash ? slash + 1 : exe);
        *pid = reader_header(r)->pid;
        rc = 0;
    }
    reader_close(r);
    return rc;
}
