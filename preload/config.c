// SPDX-License-Identifier: MIT
// Reads HEAPPROF_* once at start. Runs inside the constructor before recording starts; never
// allocates (getenv does not), reports bad values with hp_diag_line.
#include "config.h"

#include "diag.h"
#include "format/hpt_format.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

hp_config_t hp_config;

// Parses a decimal in [lo, hi]; on a bad value says so and keeps *out.
static void parse_u32(const char *name, uint32_t lo, uint32_t hi, uint32_t *out) {
    const char *s = getenv(name);
    if (!s)
        return;
    uint64_t v = 0;
    const char *p = s;
    while (*p >= '0' && *p <= '9' && v <= hi)
        v = v * 10 + (uint64_t)(*p++ - '0');
    if (p == s || *p || v < lo || v > hi) {
        char a[21], b[21], d[21];
        hp_diag_line("ignoring ", name, "=", s, ": expected an integer from ", hp_diag_u64(a, lo),
                     " to ", hp_diag_u64(b, hi), "; using ", hp_diag_u64(d, *out), (char *)NULL);
        return;
    }
    *out = (uint32_t)v;
}

static void parse_bool(const char *name, bool *out) {
    const char *s = getenv(name);
    if (!s)
        return;
    if (!strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "on") || !strcmp(s, "true"))
        *out = true;
    else if (!strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "off") || !strcmp(s, "false"))
        *out = false;
    else
        hp_diag_line("ignoring ", name, "=", s, ": expected 1 or 0; using ", *out ? "1" : "0",
                     (char *)NULL);
}

void hp_config_load(void) {
    static const char default_out[] = "heapprof.%p.hpt";
    memcpy(hp_config.out, default_out, sizeof default_out);
    hp_config.flush_ms = 50;
    hp_config.max_frames = 64;
    // the largest a ring grows to (it starts at 64 KiB): a full ring makes its thread drain it
    // itself, which 1 MiB keeps rare (docs/design.md#the-pipeline)
    uint32_t buffer_kb = 2048; // rings hold fixed-width entries, ~2.5x the trace's bytes an event
    uint32_t level = 1;
    hp_config.quiet = false;
    hp_config.enabled = true;
    hp_config.touch = true;
    // glibc's default mmap threshold: larger blocks are fresh mappings, where resident pages
    // measure exactly what was touched
    hp_config.touch_fill_max = 128 * 1024;
    hp_config.touch_sample_bytes = 512;
    // Off unless asked: the drainers' table of live blocks cost rust_vec_growth 0.57 s of wall
    // time on 0.82 s (2.27 s against 1.70 s, hyperfine, 2-core VM), most of it page faults of the
    // growing table: more than the whole rest of the touch measure (docs/trace-format.md#touch).
    hp_config.touch_live = false;

    const char *out = getenv("HEAPPROF_OUT");
    if (out) {
        size_t n = strlen(out);
        if (n == 0 || n > 4000) // leaves room for the "%p" expansion and a ".N" suffix
            hp_diag_line("ignoring HEAPPROF_OUT: empty or longer than 4000 bytes; using ",
                         default_out, (char *)NULL);
        else
            memcpy(hp_config.out, out, n + 1);
    }
    // A relative name is taken from the directory the process started in, once: a process that
    // changes its working directory and then forks (a daemon's chdir("/")) would put its
    // children's traces wherever it went. A program it runs reads HEAPPROF_OUT afresh, from its
    // own start directory (`heapprof run` passes a full path).
    // The directory's own '%'s are doubled: the template's %p and %% are expanded (writer.c).
    char cwd[HP_PATH_MAX], dir[HP_PATH_MAX];
    size_t n_out = strlen(hp_config.out), n_dir = 0;
    if (hp_config.out[0] != '/' && getcwd(cwd, sizeof cwd)) {
        for (const char *c = cwd; *c && n_dir + 3 < sizeof dir; c++) {
            if (*c == '%')
                dir[n_dir++] = '%';
            dir[n_dir++] = *c;
        }
        if (n_dir && dir[n_dir - 1] != '/')
            dir[n_dir++] = '/';
        if (n_dir + n_out < sizeof hp_config.out) {
            memmove(hp_config.out + n_dir, hp_config.out, n_out + 1);
            memcpy(hp_config.out, dir, n_dir);
        }
    }
    parse_u32("HEAPPROF_FLUSH_MS", 1, 100, &hp_config.flush_ms);
    parse_u32("HEAPPROF_MAX_FRAMES", 1, 128, &hp_config.max_frames);
    parse_u32("HEAPPROF_BUFFER_KB", 64, 8192, &buffer_kb);
    parse_u32("HEAPPROF_ZSTD_LEVEL", 1, 19, &level);
    parse_bool("HEAPPROF_QUIET", &hp_config.quiet);
    parse_bool("HEAPPROF_ENABLE", &hp_config.enabled);
    // `heapprof run`: only the command's process says where its trace goes
    hp_config.announce_pid = 0;
    parse_u32("HEAPPROF_ANNOUNCE_PID", 0, UINT32_MAX, &hp_config.announce_pid);
    hp_config.run_id = 0;
    parse_u32("HEAPPROF_RUN_ID", 0, UINT32_MAX, &hp_config.run_id);
    // `heapprof run --no-children`: the processes the program starts run without the shim's
    // threads (heaptrack's default), which a program that must stay single-threaded needs
    // (Chromium's zygote)
    hp_config.only_pid = 0;
    parse_u32("HEAPPROF_ONLY_PID", 0, UINT32_MAX, &hp_config.only_pid);
    if (hp_config.only_pid && hp_config.only_pid != (uint32_t)getpid())
        hp_config.enabled = false;
    parse_bool("HEAPPROF_TOUCH", &hp_config.touch);
    parse_u32("HEAPPROF_TOUCH_FILL_MAX", 0, 1u << 30, &hp_config.touch_fill_max);
    parse_u32("HEAPPROF_TOUCH_SAMPLE_BYTES", 64, 1u << 30, &hp_config.touch_sample_bytes);
    parse_bool("HEAPPROF_TOUCH_LIVE", &hp_config.touch_live);
    // 1 MiB: compresses well; smaller chunks lose less to one damaged byte
    hp_config.chunk_kb = 1024;
    parse_u32("HEAPPROF_CHUNK_KB", 1, 1024, &hp_config.chunk_kb);
    hp_config.test_drain_delay_ms = 0;
    parse_u32("HEAPPROF_TEST_DRAIN_DELAY_MS", 0, 10000, &hp_config.test_drain_delay_ms);
    hp_config.cpu_switch = true;
    parse_bool("HEAPPROF_CPU_SWITCH", &hp_config.cpu_switch);
    hp_config.test_cpu_switch_after = 0;
    parse_u32("HEAPPROF_TEST_CPU_SWITCH_AFTER", 0, 1u << 30, &hp_config.test_cpu_switch_after);
    const char *clk = getenv("HEAPPROF_CLOCK");
    hp_config.clock_tsc = true;
    if (clk && !strcmp(clk, "mono"))
        hp_config.clock_tsc = false;
    else if (clk && strcmp(clk, "tsc"))
        hp_diag_line("ignoring HEAPPROF_CLOCK=", clk, ": expected tsc or mono; using tsc",
                     (char *)NULL);
    const char *unw = getenv("HEAPPROF_UNWIND");
    hp_config.unwinder = HP_UNWIND_CFI;
    if (unw && !strcmp(unw, "libunwind"))
        hp_config.unwinder = HP_UNWIND_LIBUNWIND;
    else if (unw && !strcmp(unw, "check"))
        hp_config.unwinder = HP_UNWIND_CHECK;
    else if (unw && strcmp(unw, "cfi"))
        hp_diag_line("ignoring HEAPPROF_UNWIND=", unw, ": expected cfi, libunwind or check; using cfi",
                     (char *)NULL);
    hp_config.cpu = HP_CPU_AUTO;
    hp_config.cpu_hz = 997; // prime, so sampling does not lock step with periodic work
    const char *cpu = getenv("HEAPPROF_CPU");
    if (cpu && (!strcmp(cpu, "0") || !strcmp(cpu, "off") || !strcmp(cpu, "no")))
        hp_config.cpu = HP_CPU_OFF;
    else if (cpu && !strcmp(cpu, "perf"))
        hp_config.cpu = HP_CPU_PERF;
    else if (cpu && !strcmp(cpu, "timer"))
        hp_config.cpu = HP_CPU_TIMER;
    else if (cpu && strcmp(cpu, "1") && strcmp(cpu, "on") && strcmp(cpu, "auto"))
        hp_diag_line("ignoring HEAPPROF_CPU=", cpu, ": expected 0, 1, perf or timer; using 1",
                     (char *)NULL);
    parse_u32("HEAPPROF_CPU_HZ", 1, 10000, &hp_config.cpu_hz);
    // Sampled recording (sample.h): 1 GiB at most, so the interval fits the file header's word
    hp_config.sample_bytes = 0;
    parse_u32("HEAPPROF_SAMPLE_BYTES", 0, 1u << 30, &hp_config.sample_bytes);
    uint32_t seed = (uint32_t)getpid();
    parse_u32("HEAPPROF_SAMPLE_SEED", 0, UINT32_MAX, &seed);
    hp_config.sample_seed = seed;
    // round the buffer down to a power of two so ring offsets wrap with a mask
    uint32_t ring = 1u << 16;
    while ((uint64_t)ring * 2 <= (uint64_t)buffer_kb * 1024)
        ring *= 2;
    hp_config.ring_bytes = ring;
    hp_config.zstd_level = (int)level;
}

bool hp_config_announces(void) {
    return !hp_config.quiet &&
           (!hp_config.announce_pid || hp_config.announce_pid == (uint32_t)getpid());
}
