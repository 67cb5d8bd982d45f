// SPDX-License-Identifier: MIT
// `heapprof live`'s two forms (out_live.h). Every name on screen went through fmt_safe_text in
// live.c; curses draws it as text, never as control sequences.
#include "out/out_live.h"

#include "core/fmt.h"

#include <curses.h>
#include <string.h>

void out_live_line(FILE *f, const live_snapshot_t *s) {
    char b1[32], b2[32], b3[32];
    fprintf(f, "t=%.1fs live=%s in %s blocks rate=%s/s", (double)s->time_ns / 1e9,
            fmt_bytes(s->live_bytes, b1), fmt_grouped(s->live_blocks, b2),
            fmt_bytes((uint64_t)s->rate_bytes_s, b3));
    if (s->n_by_live)
        fprintf(f, " | top live: %s %s", s->by_live[0].name,
                fmt_bytes(s->by_live[0].live_bytes, b1));
    if (s->n_by_rate)
        fprintf(f, " | top rate: %s %s/s", s->by_rate[0].name,
                fmt_bytes((uint64_t)s->by_rate[0].rate_bytes_s, b1));
    fprintf(f, "%s\n", s->finished ? " | trace complete" : "");
    fflush(f);
}

// The heap over time as one row of bars, the newest at the right, scaled to the largest shown.
static void draw_history(int row, int width, const uint64_t *hist, size_t n) {
    static const char levels[] = " .:-=+*#%@";
    size_t shown = n < (size_t)width ? n : (size_t)width;
    uint64_t max = 1;
    for (size_t i = n - shown; i < n; i++)
        if (hist[i] > max)
            max = hist[i];
    move(row, 0);
    clrtoeol();
    for (size_t i = n - shown; i < n; i++) {
        size_t k = (size_t)((double)hist[i] / (double)max * (sizeof levels - 2) + 0.5);
        addch((chtype)(unsigned char)levels[k]);
    }
}

static void draw_sites(int *row, int rows, const char *title, const live_site_t *v, size_t n,
                       bool rate) {
    char b1[32], b2[32];
    if (*row >= rows - 1)
        return;
    attron(A_BOLD);
    mvprintw((*row)++, 0, "%s", title);
    attroff(A_BOLD);
    for (size_t i = 0; i < n && *row < rows - 1; i++) {
        move(*row, 0);
        clrtoeol();
        if (rate)
            printw(" %10s/s  %10s live  %s", fmt_bytes((uint64_t)v[i].rate_bytes_s, b1),
                   fmt_bytes(v[i].live_bytes, b2), v[i].name);
        else
            printw(" %12s  %9s blocks  %s", fmt_bytes(v[i].live_bytes, b1),
                   fmt_grouped(v[i].live_blocks, b2), v[i].name);
        (*row)++;
    }
    if (!n && *row < rows - 1)
        mvprintw((*row)++, 0, " (none yet)");
    (*row)++;
}

void out_live_screen(const char *trace, const live_snapshot_t *s, const char *why,
                     const uint64_t *hist, size_t n_hist) {
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    erase();
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    attron(A_BOLD);
    mvprintw(0, 0, "heapprof live  %s", trace);
    attroff(A_BOLD);
    if (!s) {
        mvprintw(2, 0, "waiting for the trace: %s", why ? why : "");
        mvprintw(rows - 1, 0, "q quits");
        refresh();
        return;
    }
    mvprintw(1, 0, "%s (pid %u)%s  t=%.1f s%s", s->exe, s->pid,
             s->attached ? " attached mid-run" : s->forked ? " forked" : "",
             (double)s->time_ns / 1e9,
             s->finished ? "  [trace complete]" : "");
    mvprintw(2, 0, "live %s in %s blocks   peak %s   allocating %s/s   allocated %s",
             fmt_bytes(s->live_bytes, b1), fmt_grouped(s->live_blocks, b2),
             fmt_bytes(s->peak_bytes, b3), fmt_bytes((uint64_t)s->rate_bytes_s, b4),
             fmt_bytes(s->n_bytes, b5));
    mvprintw(4, 0, "live heap over time (one mark a second):");
    draw_history(5, cols, hist, n_hist);
    int row = 7;
    draw_sites(&row, rows, "Top sites by live bytes", s->by_live, s->n_by_live, false);
    draw_sites(&row, rows, "Top sites by allocation rate", s->by_rate, s->n_by_rate, true);
    if (row < rows - 1) {
        attron(A_BOLD);
        mvprintw(row++, 0, "Growth hotspots (bytes copied as blocks grew)");
        attroff(A_BOLD);
        for (size_t i = 0; i < s->n_growth && row < rows - 1; i++, row++)
            mvprintw(row, 0, " %12s  %9s steps  %s", fmt_bytes(s->growth[i].bytes_copied, b1),
                     fmt_grouped(s->growth[i].n_steps, b2), s->growth[i].name);
        if (!s->n_growth && row < rows - 1)
            mvprintw(row++, 0, " (none yet)");
    }
    mvprintw(rows - 1, 0, "q quits (the program is not touched)");
    refresh();
}
