// SPDX-License-Identifier: MIT
// out: the output writers, one file each (out_dhat.c, out_report.c), and the formatting they
// share (out.c). A writer reads an analyze_t and writes to the FILE it is given; it returns 0,
// or -1 with err filled when the output cannot be written.
#ifndef HEAPPROF_ANALYZER_OUT_H
#define HEAPPROF_ANALYZER_OUT_H

#include "analyze.h"
#include "errmsg.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

// ---- out_dhat.c: DHAT's JSON (docs/dhat-format.md). Needs a replay run with REPLAY_DHAT. ----
int out_dhat_write(analyze_t *a, FILE *f, errmsg_t *err);

// ---- out_report.c: the text report and its JSON form (docs/report-json.md) ----
typedef struct out_report_opts {
    size_t top;     // entries per ranking
    bool json;
} out_report_opts_t;
int out_report_write(analyze_t *a, const out_report_opts_t *o, FILE *f, errmsg_t *err);
// out_report_cpu.c: the report's CPU section (source, top functions, allocator CPU share), as
// text at the end of the report and as its JSON "cpu" object (new reference).
void out_report_cpu_text(analyze_t *a, size_t top, FILE *f);
json_t *out_report_cpu_json(analyze_t *a, size_t top);

// ---- out_html.c: the self-contained viewer page (viewer/ with view_data.h's JSON inside) ----
// Needs a opened with growth and timeline (cmd_view.c). Symbolizes every site.
int out_html_write(analyze_t *a, FILE *f, errmsg_t *err);

// ---- out.c: shared formatting ----
// 1234567 -> "1,234,567"
const char *out_grouped(uint64_t v, char buf[32]);
// 1536 -> "1.5 KiB"; below 1 KiB "123 B"
const char *out_bytes(uint64_t v, char buf[32]);
// 1234 ns -> "1.2 µs"; picks ns, µs, ms or s
const char *out_duration(double ns, char buf[32]);
// part of whole as "12.3%" ("-" when whole is 0)
const char *out_percent(uint64_t part, uint64_t whole, char buf[16]);
// A JSON string of s, with bytes that are not valid UTF-8 replaced by '?' (jansson refuses
// invalid UTF-8). NULL s gives JSON null. New reference.
json_t *out_json_str(const char *s);

// Length of the valid UTF-8 sequence at s (1-4), or 0 if the bytes there are not one (overlong
// forms, surrogates and the noncharacters U+FFFE/U+FFFF count as invalid). s is NUL-terminated.
size_t out_utf8_len(const unsigned char *s);
// Copies s (NULL: "") into buf (cap >= 1) as text that is safe to print on a terminal and to put
// in XML, the one sanitiser of every text output (report, stats, folded, SVG, error lines): each
// byte that is a C0 control (below 0x20, tab and newline included), DEL, part of a UTF-8-encoded
// C1 control (U+0080-U+009F, which xterm and others obey as ESC-sequences), or not part of valid
// UTF-8 (a lone 0x80-0xFF byte, C1 included) becomes the visible four characters \xNN; everything
// else is copied. Not reversible (a literal "\x1b" looks the same): it is for display only; the
// JSON outputs keep the exact bytes, escaped by JSON's rules. Stops before a character or escape
// that would not fit whole. Returns buf.
char *out_safe_text(const char *s, char *buf, size_t cap);
// A JSON integer, saturated at the largest one JSON libraries read exactly (INT64_MAX).
json_t *out_json_int(uint64_t v);

#endif
