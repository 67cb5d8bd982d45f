// SPDX-License-Identifier: MIT
// hp_follow_bench: the CPU of one `heapprof live` refresh on a trace that keeps growing, the old
// way (one `heapprof report` pass over the whole file so far, analyze_open_opts) next to the new
// one (only what was written since the previous refresh, analyze_follow_step), with live's
// options (per-site figures and growth chains). Copies TRACE into a temporary file in STEPS
// pieces as a writer would; after each piece the follower takes a step, and at every
// STEPS/4-th piece the whole file is also read once the old way. CPU is the process's
// (CLOCK_PROCESS_CPUTIME_ID: the decode workers' threads included). Used by bench/follow.sh.
#include "analyze/analyze.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 3 || atoi(argv[2]) < 4) {
        fprintf(stderr, "usage: hp_follow_bench TRACE STEPS (STEPS >= 4)\n");
        return 2;
    }
    int steps = atoi(argv[2]);
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 2;
    }
    fseek(in, 0, SEEK_END);
    long total = ftell(in);
    fseek(in, 0, SEEK_SET);
    unsigned char *data = malloc((size_t)total);
    if (!data || fread(data, 1, (size_t)total, in) != (size_t)total) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        return 2;
    }
    fclose(in);
    char path[] = "/tmp/hp_follow_bench_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 2;
    }
    analyze_opts_t ao = {.mode = REPLAY_SITES, .growth = true, .short_ns = 1000000};
    analyze_t *f = NULL;
    long done = 0;
    double follow_sum = 0, quarter_sum = 0;
    // follow_cpu_ms: the mean of the quarter's steps (a step's events depend on where the SYNC
    // watermarks fell, so single steps vary); ratio: one re-read over that mean
    printf("%6s %10s %12s %14s %14s %8s\n", "piece", "file_MB", "events", "reread_cpu_ms",
           "follow_cpu_ms", "ratio");
    for (int i = 1; i <= steps; i++) {
        long upto = (long)((double)total * i / steps);
        if (write(fd, data + done, (size_t)(upto - done)) != upto - done) {
            perror("write");
            return 2;
        }
        done = upto;
        errmsg_t err;
        errmsg_init(&err);
        double t0 = cpu_ms();
        if (!f)
            f = analyze_follow_open(path, &ao, &err);
        if (f && analyze_follow_step(f, false, &err) != 0) {
            fprintf(stderr, "follow: %s\n", err.msg);
            return 1;
        }
        double follow = cpu_ms() - t0;
        follow_sum += follow;
        quarter_sum += follow;
        if (i % (steps / 4) != 0)
            continue;
        follow = quarter_sum / (steps / 4);
        quarter_sum = 0;
        t0 = cpu_ms();
        analyze_t *w = analyze_open_opts(path, &ao, NULL, &err);
        double reread = cpu_ms() - t0;
        if (!w || !f) {
            fprintf(stderr, "read: %s\n", err.msg);
            return 1;
        }
        const replay_totals_t *tf = replay_totals(f->rp);
        printf("%6d %10.1f %12llu %14.1f %14.2f %8.0f\n", i, (double)done / 1048576.0,
               (unsigned long long)tf->n_events, reread, follow, follow > 0 ? reread / follow : 0);
        analyze_close(w);
    }
    printf("follow: all %d steps %.1f ms CPU in total (the whole trace once)\n", steps,
           follow_sum);
    analyze_close(f);
    close(fd);
    unlink(path);
    free(data);
    return 0;
}
