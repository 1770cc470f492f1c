/* Two phases of runtime calls and device work in hgtx ranges, 50 ms apart; prints each phase's times and calls. */
#include "hggc_runtime.h"
#include "hgtx.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 4096
static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
void phases_kernel(void **args) {
    int *x = args[0];
    for (int i = 0; i < N; i++) x[i] += 1;
}
int main(int argc, char **argv) {
    int a = atoi(argv[1]), b = atoi(argv[2]), steps = atoi(argv[3]);
    static int host[N];
    int *dev, count = 0;
    hggcStream_t s;
    if (hggcSetDevice(0) || hggcStreamCreate(&s) || hggcMalloc((void **)&dev, sizeof host)) return 1;
    long long t0 = now();
    hgtxRangePushA("phase-a");
    hgtxRangeId_t load = hgtxRangeStartA("load");
    for (int i = 0; i < a; i++) hggcGetLastError();
    hgtxRangeEnd(load);
    dim3 grid = {N / 256, 1, 1}, block = {256, 1, 1};
    void *args[1] = {dev};
    if (hggcMemcpy(dev, host, sizeof host, hggcMemcpyHostToDevice)) return 1;
    if (hggcLaunchKernel((const void *)phases_kernel, grid, block, args, 0, s)) return 1;
    if (hggcStreamSynchronize(s)) return 1;
    if (hggcMemcpy(host, dev, sizeof host, hggcMemcpyDeviceToHost)) return 1;
    if (hggcMemset(dev, 0, sizeof host)) return 1;
    hgtxRangePop();
    long long t1 = now();
    usleep(50000);
    long long t2 = now();
    hgtxRangePushA("phase-b");
    for (int i = 0; i < b; i++) hggcGetLastError();
    if (hggcMemset(dev, 1, sizeof host)) return 1;
    for (int k = 0; k < steps; k++) {
        hgtxRangePushA("step");
        for (int i = 0; i <= k; i++) hggcGetDeviceCount(&count);
        hgtxRangePop();
    }
    hgtxRangePop();
    long long t3 = now();
    printf("phase phase-a %lld %lld\n", t0, t1);
    printf("phase phase-b %lld %lld\n", t2, t3);
    printf("tally phase-a hggcGetLastError %d\n", a);
    printf("tally phase-a hggcMemcpy 2\n");
    printf("tally phase-a hggcLaunchKernel 1\n");
    printf("tally phase-a hggcStreamSynchronize 1\n");
    printf("tally phase-a hggcMemset 1\n");
    printf("tally phase-b hggcGetLastError %d\n", b);
    printf("tally phase-b hggcMemset 1\n");
    printf("tally phase-b hggcGetDeviceCount %d\n", steps * (steps + 1) / 2);
    return 0;
}
