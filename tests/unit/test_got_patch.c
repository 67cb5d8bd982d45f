// SPDX-License-Identifier: MIT
// got_patch: the test program's own GOT slot of a libc function is pointed at a hook and put
// back, as `heapprof attach` does with the allocator's slots (docs/design.md#attach).
#include "got_patch.h"

#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

static int n_hook_calls;

static pid_t fake_getppid(void) {
    n_hook_calls++;
    return 424242;
}

static hp_got_hook_t hook_of(void) {
    pid_t (*fn)(void) = fake_getppid;
    void *p;
    memcpy(&p, &fn, sizeof p);
    return (hp_got_hook_t){"getppid", p};
}

Test(got_patch, rewrites_a_slot_and_puts_it_back) {
    pid_t real = getppid();
    cr_assert_neq(real, 424242);
    hp_got_hook_t h = hook_of();
    size_t n = hp_got_patch(&h, 1, NULL);
    cr_assert_geq(n, 1, "no module calls getppid through a slot");
    cr_expect_eq(hp_got_n_patched(), n);
    cr_expect_eq(getppid(), 424242);
    cr_expect_eq(n_hook_calls, 1);
    // a second pass finds every slot patched already (what the dlopen hook relies on)
    cr_expect_eq(hp_got_patch(&h, 1, NULL), 0);
    cr_expect_eq(hp_got_restore(NULL), n);
    cr_expect_eq(hp_got_n_patched(), 0);
    cr_expect_eq(getppid(), real);
    cr_expect_eq(n_hook_calls, 1);
}

Test(got_patch, a_slot_patched_twice_is_undone_newest_first) {
    hp_got_hook_t h = hook_of();
    size_t n = hp_got_patch(&h, 1, NULL);
    cr_assert_geq(n, 1);
    // a second hook over the first: each slot is remembered twice, and the restore undoes the
    // newest first, so every slot ends with its original value
    hp_got_hook_t other = {"getppid", (void *)&n_hook_calls};
    cr_expect_eq(hp_got_patch(&other, 1, NULL), n, "the slots hold the first hook");
    cr_expect_eq(hp_got_restore(NULL), 2 * n);
    cr_expect_neq(getppid(), 424242, "a slot still calls the hook");
}

Test(got_patch, a_restore_may_leave_one_hook_for_later) {
    hp_got_hook_t h = hook_of();
    size_t n = hp_got_patch(&h, 1, NULL);
    cr_assert_geq(n, 1);
    cr_expect_eq(hp_got_restore(h.hook), 0, "the excepted hook's slots were put back");
    cr_expect_eq(getppid(), 424242);
    cr_expect_eq(hp_got_restore(NULL), n);
    cr_expect_neq(getppid(), 424242);
}

Test(got_patch, an_unknown_name_patches_nothing) {
    hp_got_hook_t h = {"heapprof_no_such_function", (void *)&n_hook_calls};
    cr_expect_eq(hp_got_patch(&h, 1, NULL), 0);
    cr_expect_eq(hp_got_restore(NULL), 0);
}
