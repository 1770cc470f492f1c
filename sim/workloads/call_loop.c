/* The benchmark's loop: N calls of one cheap runtime function, timed with
 * CLOCK_MONOTONIC. Prints "ns_per_call X". Usage: call_loop [N=200000] */
#include "hggc_runtime.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    struct timespec a, b;
    hggcGetLastError(); /* resolve the PLT entry and initialise outside the timing */
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        hggcGetLastError();
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    printf("calls %ld\nns_per_call %.1f\n", n, ns / (double)n);
    return 0;
}
