/* SPDX-License-Identifier: MIT */
/* c_churn: single-threaded malloc/free stress (default 10M pairs). */
#include <stdio.h>
#include "churn_common.h"

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 10000000L;
    uint64_t s = run_churn(0x1234567ull, ops);
    printf("c_churn ops=%ld checksum=%llu\n", ops, (unsigned long long)s);
    return 0;
}
