// SPDX-License-Identifier: MIT
// A main thread that ends with pthread_exit before the threads it started: glibc ends the
// process (exit(0), the exit handlers run) when the last of them ends. Under a shim whose own
// threads outlive the program's, the process never ended.
// main registers an exit handler (7 x 70 B allocated, 3 of them freed, then "atexit ran" on
// stdout), allocates 10 x 100 B, starts 2 threads and calls pthread_exit. Each thread makes
// 50,000 blocks of 32 B and frees each, sleeps 20 ms (main is gone by then), then keeps
// 500 x 16 B. From this program: 101,017 blocks, 3,217,490 B, 100,003 frees.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

static void at_exit(void) {
    void *keep[7];
    for (int i = 0; i < 7; i++)
        keep[i] = malloc(70);
    for (int i = 0; i < 3; i++)
        free(keep[i]);
    sink = keep[6];
    static const char msg[] = "atexit ran\n";
    (void)!write(1, msg, sizeof msg - 1);
}

static void *work(void *arg) {
    (void)arg;
    void *volatile p; // each thread its own: a shared one would be freed by the other thread
    for (int i = 0; i < 50000; i++) {
        p = malloc(32);
        free(p);
    }
    usleep(20000);
    for (int i = 0; i < 500; i++)
        p = malloc(16);
    (void)p;
    return NULL;
}

int main(void) {
    if (atexit(at_exit) != 0)
        return 2;
    for (int i = 0; i < 10; i++)
        sink = malloc(100);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, work, NULL) != 0)
            return 3;
    pthread_exit(NULL);
}
