// SPDX-License-Identifier: MIT
// The interactive flamegraph SVG, self-contained (no network, no external files): the folded
// lines become a tree (sorted lines that share a prefix are adjacent, so one pass with the
// current path builds it), each frame one <g> with its rect, label and a <title> tooltip; a
// small script, written for heapprof (viewer/flame_svg.js, embedded at build time), adds hover
// details, click-to-zoom, reset and a regex search with the matched share. Untrusted text
// (symbol names, paths, the command line) only ever reaches the document XML-escaped in element
// text, and the script reads it back with textContent and writes it with textContent: no
// markup is ever built from it.
#include "analyze/flame.h"

#include "core/xalloc.h"
#include "out/out.h"
#include "out/viewer_assets.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_H 16
#define PAD 10
#define TOP 84
#define BOTTOM 30
#define CHAR_W 7.2 // 12px monospace

typedef struct node {
    const char *name; // into the line's stack text; name_len bytes
    uint32_t name_len;
    uint32_t parent;
    uint32_t depth;
    uint8_t kind;
    uint64_t v[2];
    uint64_t x, child_off; // in metric units
} node_t;

typedef struct tree {
    node_t *v;
    size_t n, cap;
} tree_t;

static uint32_t add_node(tree_t *t, uint32_t parent, uint32_t depth, const char *name, uint32_t len,
                         uint8_t kind) {
    t->v = xgrow(t->v, &t->cap, t->n + 1, sizeof *t->v);
    node_t *nd = &t->v[t->n];
    memset(nd, 0, sizeof *nd);
    nd->name = name;
    nd->name_len = len;
    nd->parent = parent;
    nd->depth = depth;
    nd->kind = kind;
    return (uint32_t)t->n++;
}

// Lines are sorted, so the lines through any one node are adjacent: a frame reuses the node of
// the previous line at its depth while every frame above it did too.
static void build(const flame_t *f, tree_t *t) {
    add_node(t, 0, 0, "all", 3, FLAME_N_KINDS);
    uint32_t *path = NULL;
    size_t path_cap = 0, path_len = 1;
    path = xgrow(path, &path_cap, 1, sizeof *path);
    path[0] = 0;
    for (size_t i = 0; i < f->n; i++) {
        const flame_line_t *l = &f->lines[i];
        t->v[0].v[0] += l->value[0];
        t->v[0].v[1] += l->value[1];
        const char *p = l->stack;
        bool same = true;
        uint32_t d = 1;
        while (*p) {
            const char *e = strchr(p, ';');
            uint32_t len = (uint32_t)(e ? (size_t)(e - p) : strlen(p));
            uint32_t idx;
            if (same && d < path_len && t->v[path[d]].name_len == len &&
                memcmp(t->v[path[d]].name, p, len) == 0) {
                idx = path[d];
            } else {
                same = false;
                uint8_t kind = d - 1 < l->n_frames ? l->kinds[d - 1] : FLAME_KIND_USER;
                idx = add_node(t, path[d - 1], d, p, len, kind);
                path = xgrow(path, &path_cap, d + 1, sizeof *path);
                path[d] = idx;
            }
            t->v[idx].v[0] += l->value[0];
            t->v[idx].v[1] += l->value[1];
            d++;
            p = e ? e + 1 : p + len;
        }
        path_len = d;
    }
    free(path);
}

static void xml_put(FILE *out, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            fputc(s[i], out);
        }
    }
}

static void xml_puts(FILE *out, const char *s) { xml_put(out, s, strlen(s)); }

// ---- colours (no libm: the analyzer does not link it) ----

static double absd(double v) { return v < 0 ? -v : v; }
static int round_int(double v) { return (int)(v < 0 ? v - 0.5 : v + 0.5); }
static long floor_long(double v) {
    long i = (long)v;
    return (double)i > v ? i - 1 : i;
}
// v mod m for v >= 0
static double mod_pos(double v, double m) { return v - m * (double)floor_long(v / m); }

static uint32_t hash_name(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static void hsl_rgb(double h, double s, double l, int rgb[3]) {
    double c = (1 - absd(2 * l - 1)) * s, hp = mod_pos(h, 360) / 60;
    double x = c * (1 - absd(mod_pos(hp, 2) - 1)), m = l - c / 2;
    double r = 0, g = 0, b = 0;
    if (hp < 1)
        r = c, g = x;
    else if (hp < 2)
        r = x, g = c;
    else if (hp < 3)
        g = c, b = x;
    else if (hp < 4)
        g = x, b = c;
    else if (hp < 5)
        r = x, b = c;
    else
        r = c, b = x;
    rgb[0] = (int)round_int((r + m) * 255);
    rgb[1] = (int)round_int((g + m) * 255);
    rgb[2] = (int)round_int((b + m) * 255);
}

// The "mem" palette: a hue family per frame kind, varied by the name's hash so neighbours differ.
static const struct {
    double hue, hue_span, sat, light, light_span;
    const char *label;
} palette[FLAME_N_KINDS + 1] = {
    [FLAME_KIND_USER] = {105, 35, 0.55, 0.50, 0.14, "user code"},
    [FLAME_KIND_RUST_STD] = {200, 25, 0.60, 0.64, 0.12, "Rust std/alloc"},
    [FLAME_KIND_CXX_STD] = {170, 15, 0.45, 0.58, 0.12, "C++ std"},
    [FLAME_KIND_LIBC] = {250, 25, 0.35, 0.70, 0.10, "libc and system"},
    [FLAME_KIND_ALLOCATOR] = {25, 15, 0.85, 0.58, 0.10, "allocator"},
    [FLAME_KIND_UNKNOWN] = {0, 0, 0, 0.72, 0, "unknown"},
    [FLAME_N_KINDS] = {0, 0, 0, 0.82, 0, "all"},
};

static void kind_colour(unsigned kind, const char *name, size_t n, int rgb[3]) {
    uint32_t h = hash_name(name, n);
    double h1 = (double)(h & 0xffff) / 65535.0, h2 = (double)(h >> 16) / 65535.0;
    if (kind > FLAME_N_KINDS)
        kind = FLAME_KIND_USER;
    hsl_rgb(palette[kind].hue + palette[kind].hue_span * h1, palette[kind].sat,
            palette[kind].light + palette[kind].light_span * (h2 - 0.5), rgb);
}

// Differential colour: red for growth, blue for shrinkage, white for no change; the stronger
// the larger the change against the largest change of any frame.
static void diff_colour(const node_t *nd, double max_abs, int rgb[3]) {
    double d = (double)nd->v[1] - (double)nd->v[0];
    int k = max_abs > 0 && d != 0 ? (int)round_int(40 + 170 * absd(d) / max_abs) : 0;
    if (d > 0)
        rgb[0] = 255, rgb[1] = 255 - k, rgb[2] = 255 - k;
    else if (d < 0)
        rgb[0] = 255 - k, rgb[1] = 255 - k, rgb[2] = 255;
    else
        rgb[0] = rgb[1] = rgb[2] = 245;
}

// ---- text ----

static void value_text(flame_metric_t m, uint64_t v, char *buf, size_t cap) {
    char a[32], b[32];
    if (flame_metric_is_bytes(m) && v >= 1024)
        snprintf(buf, cap, "%s (%s bytes)", fmt_bytes(v, a), fmt_grouped(v, b));
    else if (flame_metric_is_bytes(m))
        snprintf(buf, cap, "%s bytes", fmt_grouped(v, a));
    else
        snprintf(buf, cap, "%s %s", fmt_grouped(v, a), m == FLAME_CPU ? "samples" : "blocks");
}

static void share_text(uint64_t part, uint64_t whole, char *buf, size_t cap) {
    if (whole == 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.2f%%", 100.0 * (double)part / (double)whole);
}

// Tooltip: "NAME\nDETAILS"; the script splits at the first newline (names have none).
static void write_title(FILE *out, const flame_t *f, const node_t *nd, uint64_t total) {
    char v0[96], v1[96], sh[32];
    fputs("<title>", out);
    xml_put(out, nd->name, nd->name_len);
    if (!f->is_diff) {
        value_text(f->metric, nd->v[0], v0, sizeof v0);
        share_text(nd->v[0], total, sh, sizeof sh);
        fprintf(out, "\n%s, %s</title>", v0, sh);
        return;
    }
    value_text(f->metric, nd->v[0], v0, sizeof v0);
    value_text(f->metric, nd->v[1], v1, sizeof v1);
    share_text(nd->v[1], total, sh, sizeof sh);
    int64_t d = (int64_t)(nd->v[1] - nd->v[0]);
    char pct[32];
    if (nd->v[0])
        snprintf(pct, sizeof pct, "%+.1f%%", 100.0 * (double)d / (double)nd->v[0]);
    else
        snprintf(pct, sizeof pct, "new");
    fprintf(out, "\nbefore %s, after %s (%s), delta %+" PRId64 " (%s)</title>", v0, v1, sh, d, pct);
}

// The label drawn inside a frame: as many characters as fit, ".." when cut (at a character
// boundary, so the document stays valid UTF-8).
static void write_label(FILE *out, const node_t *nd, double w_px) {
    long fit = floor_long((w_px - 6) / CHAR_W);
    if (fit < 3)
        return;
    size_t chars = 0, i = 0, cut = nd->name_len;
    for (; i < nd->name_len; i++) {
        if (((uint8_t)nd->name[i] & 0xC0) == 0x80)
            continue;
        if (chars == (size_t)(fit - 2))
            cut = i;
        chars++;
    }
    if (chars <= (size_t)fit) {
        xml_put(out, nd->name, nd->name_len);
    } else {
        xml_put(out, nd->name, cut);
        fputs("..", out);
    }
}

static const char *metric_title(flame_metric_t m) {
    switch (m) {
    case FLAME_BYTES:
        return "Bytes allocated";
    case FLAME_BLOCKS:
        return "Blocks allocated";
    case FLAME_PEAK:
        return "Bytes live at the peak";
    case FLAME_LEAKED:
        return "Bytes live at exit (leaked)";
    case FLAME_TEMPORARY:
        return "Bytes of temporary blocks";
    case FLAME_GROWTH:
        return "Bytes copied by growth";
    default:
        return "CPU samples";
    }
}

int out_svg_write(const flame_t *f, const out_svg_opts_t *o, FILE *out, errmsg_t *err) {
    unsigned width = o && o->width_px >= 200 ? o->width_px : 1200;
    double min_px = o && o->min_width_px > 0 ? o->min_width_px : 1.2;
    int wi = f->is_diff ? 1 : 0;
    tree_t t = {0};
    build(f, &t);
    uint64_t total = t.v[0].v[wi];
    double usable = (double)(width - 2 * PAD);

    // positions (parents come before their children, siblings in order), what is drawn, depth
    uint64_t n_pruned = 0;
    uint32_t max_depth = 0;
    double max_abs = 0;
    bool *drawn = xcalloc(t.n, sizeof *drawn);
    for (size_t i = 0; i < t.n; i++) {
        node_t *nd = &t.v[i];
        if (i > 0) {
            node_t *p = &t.v[nd->parent];
            nd->x = p->x + p->child_off;
            p->child_off += nd->v[wi];
        }
        bool parent_drawn = i == 0 || drawn[nd->parent];
        double w_px = total ? (double)nd->v[wi] / (double)total * usable : 0;
        drawn[i] = i == 0 || (parent_drawn && w_px >= min_px);
        if (!drawn[i]) {
            n_pruned++;
            continue;
        }
        if (nd->depth > max_depth)
            max_depth = nd->depth;
        double d = absd((double)nd->v[1] - (double)nd->v[0]);
        if (i > 0 && d > max_abs)
            max_abs = d;
    }
    unsigned height = TOP + (max_depth + 1) * FRAME_H + BOTTOM;

    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
            "height=\"%u\" viewBox=\"0 0 %u %u\" data-width=\"%u\" data-total=\"%" PRIu64 "\">\n",
            width, height, width, height, width, total);
    fputs("<style>\n"
          "text { font-family: monospace; font-size: 12px; fill: #000; }\n"
          "g.f { cursor: pointer; }\n"
          "g.f text { pointer-events: none; }\n"
          "g.f:hover rect { stroke: #000; stroke-width: 0.6; }\n"
          ".anc rect { opacity: 0.55; }\n"
          ".hide { display: none; }\n"
          "#title { font-size: 17px; font-family: sans-serif; }\n"
          "#subtitle, #status, #matched { font-family: sans-serif; }\n"
          "#reset { cursor: pointer; text-decoration: underline; }\n"
          "</style>\n",
          out);
    fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#f8f8f4\"/>\n", width,
            height);

    // title: metric and program; subtitle: totals and what was pruned
    char v0[96], v1[96], num[32];
    fprintf(out, "<text id=\"title\" x=\"%u\" y=\"24\" text-anchor=\"middle\">", width / 2);
    xml_puts(out, f->is_diff ? "Differential flamegraph: " : "");
    xml_puts(out, metric_title(f->metric));
    if (f->title_program[0]) {
        fputs(" by ", out);
        // a very long command line is cut so the title stays one line
        size_t n = strlen(f->title_program), cut = n;
        if (n > 110) {
            cut = 100;
            while (cut > 0 && ((uint8_t)f->title_program[cut] & 0xC0) == 0x80)
                cut--;
        }
        xml_put(out, f->title_program, cut);
        if (cut < n)
            fputs("...", out);
    }
    fputs("</text>\n", out);
    fprintf(out, "<text id=\"subtitle\" x=\"%u\" y=\"44\" text-anchor=\"middle\">", width / 2);
    if (f->is_diff) {
        value_text(f->metric, f->total[0], v0, sizeof v0);
        value_text(f->metric, f->total[1], v1, sizeof v1);
        fprintf(out, "before %s, after %s; width = after, red grew, blue shrank", v0, v1);
    } else {
        value_text(f->metric, f->total[0], v0, sizeof v0);
        fprintf(out, "total %s in %s stack%s", v0, fmt_grouped(f->n, num), f->n == 1 ? "" : "s");
    }
    if (n_pruned)
        fprintf(out, "; %s frame%s narrower than %.1f px not drawn", fmt_grouped(n_pruned, num),
                n_pruned == 1 ? "" : "s", min_px);
    fputs("</text>\n", out);
    fprintf(out, "<text id=\"reset\" class=\"hide\" x=\"%d\" y=\"70\">Reset zoom</text>\n", PAD);
    fprintf(out,
            "<foreignObject x=\"%u\" y=\"54\" width=\"250\" height=\"24\">"
            "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"search\" type=\"search\" "
            "placeholder=\"search (regex), Ctrl-F\" style=\"width:240px\"/></foreignObject>\n",
            width - PAD - 250);
    if (!f->is_diff) { // legend of the frame kinds
        double lx = 110;
        for (unsigned k = 0; k < FLAME_KIND_UNKNOWN; k++) {
            int rgb[3];
            hsl_rgb(palette[k].hue + palette[k].hue_span / 2, palette[k].sat, palette[k].light,
                    rgb);
            fprintf(out,
                    "<rect x=\"%.0f\" y=\"60\" width=\"12\" height=\"12\" "
                    "fill=\"rgb(%d,%d,%d)\"/><text x=\"%.0f\" y=\"70\">%s</text>\n",
                    lx, rgb[0], rgb[1], rgb[2], lx + 16, palette[k].label);
            lx += 16 + CHAR_W * (double)strlen(palette[k].label) + 18;
        }
    }

    for (size_t i = 0; i < t.n; i++) {
        if (!drawn[i])
            continue;
        const node_t *nd = &t.v[i];
        double x_px = PAD + (total ? (double)nd->x / (double)total * usable : 0);
        double w_px = total ? (double)nd->v[wi] / (double)total * usable : usable;
        if (i == 0)
            w_px = usable;
        unsigned y = TOP + (max_depth - nd->depth) * FRAME_H;
        int rgb[3];
        if (f->is_diff)
            diff_colour(nd, max_abs, rgb);
        else
            kind_colour(nd->kind, nd->name, nd->name_len, rgb);
        fprintf(out, "<g class=\"f\" data-x=\"%" PRIu64 "\" data-w=\"%" PRIu64 "\" data-d=\"%u\">",
                nd->x, i == 0 ? total : nd->v[wi], nd->depth);
        write_title(out, f, nd, total);
        fprintf(out,
                "<rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" rx=\"2\" "
                "fill=\"rgb(%d,%d,%d)\"/><text x=\"%.2f\" y=\"%u\">",
                x_px, y, w_px, FRAME_H - 1, rgb[0], rgb[1], rgb[2], x_px + 3, y + 12);
        write_label(out, nd, w_px);
        fputs("</text></g>\n", out);
    }
    fprintf(out, "<text id=\"status\" x=\"%d\" y=\"%u\">", PAD, height - 10);
    fputs(total ? "Hover over a frame for details; click to zoom."
                : "Nothing to show: the total is 0.",
          out);
    fputs("</text>\n", out);
    fprintf(out, "<text id=\"matched\" x=\"%u\" y=\"%u\" text-anchor=\"end\"></text>\n",
            width - PAD, height - 10);
    fputs("<script type=\"text/ecmascript\"><![CDATA[\n", out);
    fwrite(flame_svg_js, 1, flame_svg_js_len, out); // viewer/flame_svg.js; has no "]]>"
    fputs("]]></script>\n</svg>\n", out);
    free(drawn);
    free(t.v);
    if (fflush(out) != 0 || ferror(out)) {
        errmsg_set(err, "cannot write the SVG output");
        return -1;
    }
    return 0;
}
