// SPDX-License-Identifier: MIT
// viewer_assets: viewer/viewer.html, viewer.css and viewer.js (the `heapprof view` page) and
// viewer/flame_svg.js (the flamegraph SVG's script, without the file's opening comment lines)
// as they were at build time, embedded by viewer/embed.cmake into a generated C source
// (viewer_assets.c in the build tree). Each array holds the file's bytes plus a terminating
// NUL that the length leaves out.
#ifndef HEAPPROF_ANALYZER_VIEWER_ASSETS_H
#define HEAPPROF_ANALYZER_VIEWER_ASSETS_H

#include <stddef.h>

extern const unsigned char viewer_html[];
extern const size_t viewer_html_len;
extern const unsigned char viewer_css[];
extern const size_t viewer_css_len;
extern const unsigned char viewer_js[];
extern const size_t viewer_js_len;
extern const unsigned char flame_svg_js[];
extern const size_t flame_svg_js_len;

#endif
