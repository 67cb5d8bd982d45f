// SPDX-License-Identifier: MIT
// suppress: LeakSanitizer's pattern rules (a substring, '*' any run, '^' and '$' anchors).
#include "analyze/suppress.h"

#include <criterion/criterion.h>

Test(suppress, patterns_match_as_leak_sanitizer_does) {
    cr_expect(suppress_pattern_match("foo", "my_foo_bar"));          // a substring
    cr_expect(!suppress_pattern_match("^foo", "my_foo_bar"));        // anchored at the start
    cr_expect(suppress_pattern_match("^my_", "my_foo_bar"));
    cr_expect(suppress_pattern_match("bar$", "my_foo_bar"));         // anchored at the end
    cr_expect(!suppress_pattern_match("foo$", "my_foo_bar"));
    cr_expect(suppress_pattern_match("^my*bar$", "my_foo_bar"));      // '*' any run
    cr_expect(suppress_pattern_match("^my*$", "my"));                 // an empty run too
    cr_expect(suppress_pattern_match("f*o*r", "xxfaaobbrxx"));
    cr_expect(!suppress_pattern_match("f*o*r", "xxfaaobb"));
    cr_expect(suppress_pattern_match("*", ""));
    cr_expect(suppress_pattern_match("libc.so", "/usr/lib/x86_64-linux-gnu/libc.so.6"));
    cr_expect(!suppress_pattern_match("x", NULL));                    // a frame without it
    cr_expect(suppress_pattern_match("a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaab"));
    cr_expect(!suppress_pattern_match("^a*a*a*a*b$", "aaaaaaaaaaaaaaaaaaaaaaaaaaaac"));
}
