/* Plants the problems `asys analyze` looks for, each bracketed by
 * CLOCK_MONOTONIC times logged before and after it, so a test knows where
 * each finding must lie. Usage: planted_problems LOG [clean]
 *
 * LOG lines: "NAME BEFORE AFTER" (ns), for:
 *   gap       a >= 5 ms device gap between two kernels on one stream: BEFORE is
 *             taken after the first kernel has finished, AFTER before the
 *             second is launched (the gap covers [BEFORE, AFTER] at least)
 *   memcpy    a synchronous hggcMemcpy from pageable (malloc) memory
 *   memset    a synchronous hggcMemset
 *   sync      a hggcDeviceSynchronize waiting ~20 ms for a slow kernel
 * With `clean`, none of these: asynchronous copies and memsets from pinned
 * memory and back-to-back kernels on one stream, queued behind one 50 ms
 * kernel; one final sync (which waits for that kernel). */
#include "hggc_runtime.h"
#include "workload_common.h"

#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

void quick_kernel(void **args) {
    float *v = args[0];
    for (int i = 0; i < 1024; i++)
        v[i] += 1.0f;
}

/* Runs ~20 ms on the device. */
void slow_kernel(void **args) {
    (void)args;
    sleep_ms(20);
}

/* Runs ~50 ms on the device. */
void slow50_kernel(void **args) {
    (void)args;
    sleep_ms(50);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: planted_problems LOG [clean]\n");
        return 2;
    }
    FILE *log = fopen(argv[1], "w");
    if (!log) {
        perror(argv[1]);
        return 2;
    }
    int clean = argc > 2 && strcmp(argv[2], "clean") == 0;
    size_t bytes = 1 << 20;
    hggcStream_t s;
    float *d, *pinned;
    CHECK(CALL(hggcSetDevice, 0));
    CHECK(CALL(hggcStreamCreate, &s));
    CHECK(CALL(hggcMalloc, (void **)&d, bytes));
    CHECK(CALL(hggcMallocHost, (void **)&pinned, bytes));
    memset(pinned, 0, bytes);
    void *args[1] = {d};
    dim3 grid = {4, 1, 1}, block = {256, 1, 1};
    if (clean) {
        /* A 50 ms kernel first: everything below is queued behind it before
         * the device gets to it, so a host thread descheduled on a busy
         * machine cannot make the device wait. */
        CHECK(CALL(hggcLaunchKernel, (const void *)slow50_kernel, grid, block, args, 0, s));
        for (int i = 0; i < 20; i++) {
            CHECK(CALL(hggcMemcpyAsync, d, pinned, bytes, hggcMemcpyHostToDevice, s));
            CHECK(CALL(hggcLaunchKernel, (const void *)quick_kernel, grid, block, args, 0, s));
            CHECK(CALL(hggcMemsetAsync, d, 0, 4096, s));
            CHECK(CALL(hggcMemcpyAsync, pinned, d, bytes, hggcMemcpyDeviceToHost, s));
        }
        CHECK(CALL(hggcStreamSynchronize, s));
    } else {
        char *pageable = malloc(bytes);
        memset(pageable, 1, bytes);
        /* The gap: one kernel, wait for it, 5 ms of host-only time, another. */
        CHECK(CALL(hggcLaunchKernel, (const void *)quick_kernel, grid, block, args, 0, s));
        CHECK(CALL(hggcStreamSynchronize, s));
        long long a = now_ns();
        sleep_ms(5);
        long long b = now_ns();
        CHECK(CALL(hggcLaunchKernel, (const void *)quick_kernel, grid, block, args, 0, s));
        CHECK(CALL(hggcStreamSynchronize, s));
        fprintf(log, "gap %lld %lld\n", a, b);

        a = now_ns();
        CHECK(CALL(hggcMemcpy, d, pageable, bytes, hggcMemcpyHostToDevice));
        b = now_ns();
        fprintf(log, "memcpy %lld %lld\n", a, b);

        a = now_ns();
        CHECK(CALL(hggcMemset, d, 0, bytes));
        b = now_ns();
        fprintf(log, "memset %lld %lld\n", a, b);

        CHECK(CALL(hggcLaunchKernel, (const void *)slow_kernel, grid, block, args, 0, s));
        a = now_ns();
        CHECK(CALL(hggcDeviceSynchronize));
        b = now_ns();
        fprintf(log, "sync %lld %lld\n", a, b);
        free(pageable);
    }
    CHECK(CALL(hggcFreeHost, pinned));
    CHECK(CALL(hggcFree, d));
    CHECK(CALL(hggcStreamDestroy, s));
    fclose(log);
    wl_report("planted_problems");
    return 0;
}
