// SPDX-License-Identifier: MIT
// Process plumbing for the end-to-end tests. The Criterion runner itself is never preloaded:
// only the children these helpers spawn are.
#include "spawn.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

char *e2e_tmpdir(const char *tag) {
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "%s/e2e-%s-XXXXXX", E2E_WORKDIR, tag);
    char *d = mkdtemp(tmpl);
    cr_assert(d, "mkdtemp %s: %s", tmpl, strerror(errno));
    return strdup(d);
}

int e2e_traces_in(const char *dir, char out[][4096], int max) {
    DIR *d = opendir(dir);
    cr_assert(d, "cannot open %s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        bool perf_map = len > 9 && !strcmp(e->d_name + len - 9, ".perf.map"); // heapprof run's
        if (strstr(e->d_name, ".hpt") && !perf_map && n < max)
            snprintf(out[n++], 4096, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return n;
}

static int wait_status(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int e2e_run_preloaded(char *const argv[], const char *out_template, const char *const *env,
                      int *pid_out) {
    size_t n = 0;
    while (environ[n])
        n++;
    size_t extra = 0;
    while (env && env[extra])
        extra++;
    char **envp = calloc(n + extra + 4, sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "HEAPPROF_", 9))
            envp[k++] = environ[i];
    char preload[4096], out[4096];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", E2E_LIB);
    snprintf(out, sizeof out, "HEAPPROF_OUT=%s", out_template);
    envp[k++] = preload;
    envp[k++] = out;
    for (size_t i = 0; i < extra; i++)
        envp[k++] = (char *)env[i];
    envp[k] = NULL;
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, envp);
    free(envp);
    cr_assert_eq(rc, 0, "spawn %s: %s", argv[0], strerror(rc));
    if (pid_out)
        *pid_out = pid;
    return wait_status(pid);
}

static char *slurp_fd(int fd) {
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (cap - len < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = 0;
    return buf;
}

int e2e_heapprof(const char *const args[], char **out, char **err) {
    char path_out[] = E2E_WORKDIR "/hp-out-XXXXXX", path_err[] = E2E_WORKDIR "/hp-err-XXXXXX";
    int fo = mkstemp(path_out), fe = mkstemp(path_err);
    cr_assert(fo >= 0 && fe >= 0);
    size_t n = 0;
    while (args[n])
        n++;
    char **argv = calloc(n + 2, sizeof *argv);
    argv[0] = (char *)E2E_HEAPPROF;
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(argv);
    cr_assert_eq(rc, 0, "spawn heapprof: %s", strerror(rc));
    int st = wait_status(pid);
    lseek(fo, 0, SEEK_SET);
    lseek(fe, 0, SEEK_SET);
    if (out)
        *out = slurp_fd(fo);
    if (err)
        *err = slurp_fd(fe);
    close(fo);
    close(fe);
    unlink(path_out);
    unlink(path_err);
    return st;
}

int e2e_run(char *const argv[], const e2e_run_opts_t *o, char **out, char **err, int *pid_out) {
    size_t n = 0, extra = 0;
    while (environ[n])
        n++;
    while (o->env && o->env[extra])
        extra++;
    char **envp = calloc(n + extra + 4, sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "HEAPPROF_", 9))
            envp[k++] = environ[i];
    char preload[4096], *hp_out = NULL;
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", E2E_LIB);
    if (!o->no_preload)
        envp[k++] = preload;
    if (o->out_template) {
        size_t l = strlen(o->out_template) + sizeof "HEAPPROF_OUT=";
        hp_out = malloc(l);
        snprintf(hp_out, l, "HEAPPROF_OUT=%s", o->out_template);
        envp[k++] = hp_out;
    }
    for (size_t i = 0; i < extra; i++)
        envp[k++] = (char *)o->env[i];
    envp[k] = NULL;

    char path_out[] = E2E_WORKDIR "/run-out-XXXXXX", path_err[] = E2E_WORKDIR "/run-err-XXXXXX";
    int fo = mkstemp(path_out), fe = mkstemp(path_err);
    cr_assert(fo >= 0 && fe >= 0, "mkstemp: %s", strerror(errno));
    unlink(path_out);
    unlink(path_err);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        // only async-signal-safe calls from here on; a pending alarm survives execve
        if ((o->cwd && chdir(o->cwd) != 0) || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        close(fo);
        close(fe);
        struct rlimit as = {o->max_as_bytes, o->max_as_bytes};
        if (o->max_as_bytes && setrlimit(RLIMIT_AS, &as) != 0)
            _exit(126);
        if (o->timeout_s)
            alarm(o->timeout_s);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    free(envp);
    free(hp_out);
    if (pid_out)
        *pid_out = pid;
    int st = wait_status(pid);
    lseek(fo, 0, SEEK_SET);
    lseek(fe, 0, SEEK_SET);
    if (out)
        *out = slurp_fd(fo);
    if (err)
        *err = slurp_fd(fe);
    close(fo);
    close(fe);
    return st;
}

char *e2e_heapprof_ok(const char *const args[]) {
    char *out = NULL, *err = NULL;
    int st = e2e_heapprof(args, &out, &err);
    cr_assert_eq(st, 0, "heapprof %s %s failed (%d): %s", args[0], args[1] ? args[1] : "", st,
                 err);
    free(err);
    return out;
}

json_t *e2e_heapprof_json(const char *const args[]) {
    char *out = e2e_heapprof_ok(args);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    cr_assert(j, "heapprof %s output is not JSON (%s): %s", args[0], je.text, out);
    free(out);
    return j;
}

json_t *e2e_stats(const char *trace, const char *from_module) {
    const char *args[] = {"stats", "--json", trace, from_module ? "--from-module" : NULL,
                          from_module, NULL};
    return e2e_heapprof_json(args);
}

json_t *e2e_report(const char *trace) {
    const char *args[] = {"report", "--json", trace, NULL};
    return e2e_heapprof_json(args);
}

long long e2e_expect(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    char line[512];
    long long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && !strncmp(line, key, kl) && line[kl] == '=')
            v = strtoll(line + kl + 1, NULL, 10);
    fclose(f);
    return v;
}

long long e2e_int(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    cr_assert(json_is_integer(v), "stats JSON has no integer '%s'", key);
    return (long long)json_integer_value(v);
}

json_t *e2e_site(json_t *report, const char *fn) {
    json_t *s, *found = NULL;
    size_t i;
    json_array_foreach(json_object_get(report, "sites"), i, s) {
        const char *f = json_string_value(json_object_get(s, "function"));
        if (f && strcmp(f, fn) == 0) {
            cr_assert_null(found, "two sites named %s", fn);
            found = s;
        }
    }
    cr_assert(found, "no site named %s", fn);
    return found;
}

long long e2e_sites_blocks(json_t *report, const char *fn) {
    json_t *s;
    size_t i, n = 0;
    long long blocks = 0;
    json_array_foreach(json_object_get(report, "sites"), i, s) {
        const char *f = json_string_value(json_object_get(s, "function"));
        if (f && strcmp(f, fn) == 0) {
            blocks += e2e_int(s, "blocks");
            n++;
        }
    }
    cr_assert(n, "no site named %s", fn);
    return blocks;
}
