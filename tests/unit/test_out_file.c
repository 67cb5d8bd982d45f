// SPDX-License-Identifier: MIT
// out_file: -o FILE is written to a temporary file and renamed over FILE only when FILE is
// absent or a regular file; a symlink, directory or FIFO there is refused with one line, left as
// it was, and no temporary file stays behind.
#include "core/out_file.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/hp_out_file.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0)
            rmdir(p);
    }
    closedir(d);
    rmdir(dir);
}

static size_t n_entries(void) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static char *at(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path) {
    static char buf[256];
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

// Opens path, writes text, closes with rc; returns out_file_open's or out_file_close's result.
static int write_out(const char *path, const char *text, int rc, errmsg_t *err) {
    out_file_t o;
    errmsg_init(err);
    if (out_file_open(&o, "dhat", path, stdout, err) != 0)
        return -1;
    fputs(text, o.f);
    return out_file_close(&o, rc, err);
}

TestSuite(out_file, .init = setup, .fini = teardown);

Test(out_file, new_file_is_created_whole) {
    errmsg_t err;
    cr_assert_eq(write_out(at("new.json"), "{}", 0, &err), 0, "%s", err.msg);
    cr_expect_str_eq(slurp(at("new.json")), "{}");
    cr_expect_eq(n_entries(), 1, "a temporary file was left behind");
}

Test(out_file, regular_file_is_replaced) {
    put(at("old.json"), "old contents");
    errmsg_t err;
    cr_assert_eq(write_out(at("old.json"), "new", 0, &err), 0, "%s", err.msg);
    cr_expect_str_eq(slurp(at("old.json")), "new");
    cr_expect_eq(n_entries(), 1);
}

Test(out_file, failed_run_leaves_the_old_file_and_no_temporary) {
    put(at("old.json"), "old contents");
    errmsg_t err;
    cr_expect_neq(write_out(at("old.json"), "half", -1, &err), 0);
    cr_expect_str_eq(slurp(at("old.json")), "old contents");
    cr_expect_eq(n_entries(), 1);
}

Test(out_file, symlink_is_refused_and_its_target_untouched) {
    put(at("victim"), "precious");
    cr_assert_eq(symlink(at("victim"), at("link.html")), 0);
    errmsg_t err;
    cr_expect_neq(write_out(at("link.html"), "overwritten", 0, &err), 0);
    cr_expect(strstr(err.msg, "symbolic link") && !strchr(err.msg, '\n'), "message: %s", err.msg);
    cr_expect_str_eq(slurp(at("victim")), "precious");
    struct stat st;
    cr_assert_eq(lstat(at("link.html"), &st), 0);
    cr_expect(S_ISLNK(st.st_mode), "the link was replaced");
    cr_expect_eq(n_entries(), 2, "a temporary file was left behind");
}

Test(out_file, dangling_symlink_is_refused_and_nothing_created) {
    cr_assert_eq(symlink(at("nothing"), at("link.html")), 0);
    errmsg_t err;
    cr_expect_neq(write_out(at("link.html"), "x", 0, &err), 0);
    cr_expect_neq(access(at("nothing"), F_OK), 0, "the link was followed");
    cr_expect_eq(n_entries(), 1);
}

Test(out_file, fifo_and_directory_are_refused) {
    cr_assert_eq(mkfifo(at("fifo"), 0600), 0);
    cr_assert_eq(mkdir(at("sub"), 0700), 0);
    errmsg_t err;
    cr_expect_neq(write_out(at("fifo"), "x", 0, &err), 0);
    cr_expect(strstr(err.msg, "FIFO"), "message: %s", err.msg);
    cr_expect_neq(write_out(at("sub"), "x", 0, &err), 0);
    cr_expect(strstr(err.msg, "directory"), "message: %s", err.msg);
    cr_expect_eq(n_entries(), 2);
}

Test(out_file, device_is_refused) {
    errmsg_t err;
    cr_expect_neq(write_out("/dev/null", "x", 0, &err), 0);
    cr_expect(strstr(err.msg, "device"), "message: %s", err.msg);
}

Test(out_file, link_planted_during_the_run_is_refused) {
    put(at("victim"), "precious");
    out_file_t o;
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(out_file_open(&o, "view", at("page.html"), stdout, &err), 0, "%s", err.msg);
    fputs("page", o.f);
    cr_assert_eq(symlink(at("victim"), at("page.html")), 0);
    cr_expect_neq(out_file_close(&o, 0, &err), 0, "a link planted during the run was accepted");
    cr_expect_str_eq(slurp(at("victim")), "precious");
    cr_expect_eq(n_entries(), 2);
}

Test(out_file, dash_is_the_callers_stream) {
    out_file_t o;
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(out_file_open(&o, "dhat", "-", stderr, &err), 0);
    cr_expect_eq(o.f, stderr);
    cr_expect_eq(out_file_close(&o, 0, &err), 0);
}

Test(out_file, mode_follows_the_umask) {
    mode_t old = umask(022);
    errmsg_t err;
    cr_assert_eq(write_out(at("m.json"), "{}", 0, &err), 0, "%s", err.msg);
    umask(old);
    struct stat st;
    cr_assert_eq(stat(at("m.json"), &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0644);
}
