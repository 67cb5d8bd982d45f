// SPDX-License-Identifier: MIT
// fmt: fmt_safe_text, the one sanitiser of the text outputs: control bytes (C0, DEL, C1 encoded
// or not) and invalid UTF-8 become visible \xNN escapes, valid text stays as it is, and nothing
// is cut inside a character or an escape.
#include "core/fmt.h"

#include <criterion/criterion.h>

static char buf[256];

static const char *safe(const char *s) { return fmt_safe_text(s, buf, sizeof buf); }

Test(fmt, safe_text_escapes_a_terminal_escape_sequence) {
    cr_expect_str_eq(safe("\x1b]0;PWNED\a\x1b[41mRED\x1b[0m"),
                     "\\x1b]0;PWNED\\x07\\x1b[41mRED\\x1b[0m");
}

Test(fmt, safe_text_escapes_c0_and_del) {
    cr_expect_str_eq(safe("a\tb\nc\rd\x7f!\x01"), "a\\x09b\\x0ac\\x0dd\\x7f!\\x01");
}

Test(fmt, safe_text_keeps_valid_text) {
    const char *ok[] = {"main", "std::vector<int>::push_back(int const&)", "caf\xc3\xa9",
                        "\xe6\x97\xa5\xe6\x9c\xac", "nbsp\xc2\xa0here", "\xf0\x9f\xa6\x80", ""};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        cr_expect_str_eq(safe(ok[i]), ok[i]);
    cr_expect_str_eq(safe(NULL), "");
}

// A lone 0x80-0x9F byte is the 8-bit C1 form (0x9b is CSI); U+0080-U+009F encoded in UTF-8 is
// obeyed too by xterm in UTF-8 mode: both are escaped, byte by byte.
Test(fmt, safe_text_escapes_c1_in_both_forms) {
    cr_expect_str_eq(safe("x\x9b;m"), "x\\x9b;m");
    cr_expect_str_eq(safe("x\xc2\x9b;m"), "x\\xc2\\x9b;m");
    cr_expect_str_eq(safe("x\xc2\x80y"), "x\\xc2\\x80y");
}

Test(fmt, safe_text_escapes_invalid_utf8_and_resynchronises) {
    cr_expect_str_eq(safe("bad\xff\xfe!"), "bad\\xff\\xfe!");
    cr_expect_str_eq(safe("cut\xe6\x97"), "cut\\xe6\\x97");
    cr_expect_str_eq(safe("\xe6\x97\xc3\xa9"), "\\xe6\\x97\xc3\xa9"); // the valid é after survives
    cr_expect_str_eq(safe("over\xc0\xaflong"), "over\\xc0\\xaflong");
}

Test(fmt, safe_text_never_cuts_an_escape_or_a_character) {
    char small[6];
    cr_expect_str_eq(fmt_safe_text("a\x1b", small, sizeof small), "a\\x1b");
    cr_expect_str_eq(fmt_safe_text("ab\x1b", small, sizeof small), "ab");
    cr_expect_str_eq(fmt_safe_text("abcd\xc3\xa9", small, sizeof small), "abcd");
    char one[1];
    cr_expect_str_eq(fmt_safe_text("abc", one, sizeof one), "");
}
