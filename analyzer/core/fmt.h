// SPDX-License-Identifier: MIT
// fmt: the formatting every output shares, and the only text sanitiser: thousands separators,
// binary byte units, durations, percentages, JSON values jansson always accepts, and text that
// is safe on a terminal (fmt_safe_text). Below everything that prints; depends on nothing of
// the analyzer's.
#ifndef HEAPPROF_ANALYZER_FMT_H
#define HEAPPROF_ANALYZER_FMT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

// 1234567 -> "1,234,567"
const char *fmt_grouped(uint64_t v, char buf[32]);
// 1536 -> "1.5 KiB"; below 1 KiB "123 B"
const char *fmt_bytes(uint64_t v, char buf[32]);
// 1234 ns -> "1.2 µs"; picks ns, µs, ms or s
const char *fmt_duration(double ns, char buf[32]);
// part of whole as "12.3%" ("-" when whole is 0)
const char *fmt_percent(uint64_t part, uint64_t whole, char buf[16]);
// A JSON string of s, with bytes that are not valid UTF-8 replaced by '?' (jansson refuses
// invalid UTF-8). NULL s gives JSON null. New reference.
json_t *fmt_json_str(const char *s);

// Length of the valid UTF-8 sequence at s (1-4), or 0 if the bytes there are not one (overlong
// forms, surrogates and the noncharacters U+FFFE/U+FFFF count as invalid). s is NUL-terminated.
size_t fmt_utf8_len(const unsigned char *s);
// Copies s (NULL: "") into buf (cap >= 1) as text that is safe to print on a terminal and to put
// in XML, the one sanitiser of every text output (report, stats, folded, SVG, error lines): each
// byte that is a C0 control (below 0x20, tab and newline included), DEL, part of a UTF-8-encoded
// C1 control (U+0080-U+009F, which xterm and others obey as ESC-sequences), or not part of valid
// UTF-8 (a lone 0x80-0xFF byte, C1 included) becomes the visible four characters \xNN; everything
// else is copied. Not reversible (a literal "\x1b" looks the same): it is for display only; the
// JSON outputs keep the exact bytes, escaped by JSON's rules. Stops before a character or escape
// that would not fit whole. Returns buf.
char *fmt_safe_text(const char *s, char *buf, size_t cap);
// A JSON integer, saturated at the largest one JSON libraries read exactly (INT64_MAX).
json_t *fmt_json_int(uint64_t v);

#endif
