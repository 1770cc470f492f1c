/* Known busy and idle periods of device 0, for its metrics (hgml.h): the
 * device idles, runs one long kernel, idles, runs two shorter ones back to
 * back, idles. It holds 96 MiB of device memory throughout, and 32 MiB more
 * during the second busy period. Each period is logged to the file argv[1]
 * as `busy|idle START_NS END_NS DEVICE_BYTES` (CLOCK_MONOTONIC; the bytes
 * held through it). Usage: busy_idle LOG */
#include "hggc_runtime.h"
#include "workload_common.h"

#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Spins for *args[0] ns: the device is busy that long. */
void spin_kernel(void **args) {
    long long until = now_ns() + *(long long *)args[0];
    while (now_ns() < until) {
    }
}

static FILE *g_log;

static void idle(int ms, size_t held) {
    long long a = now_ns();
    usleep(ms * 1000);
    fprintf(g_log, "idle %lld %lld %zu\n", a, now_ns(), held);
}

static void busy(long long ns, int kernels, size_t held) {
    dim3 one = {1, 1, 1};
    long long a = now_ns();
    void *args[1] = {&ns};
    for (int i = 0; i < kernels; i++)
        CHECK(CALL(hggcLaunchKernel, (const void *)spin_kernel, one, one, args, 0, NULL));
    CHECK(CALL(hggcDeviceSynchronize));
    fprintf(g_log, "busy %lld %lld %zu\n", a, now_ns(), held);
}

int main(int argc, char **argv) {
    if (argc < 2 || !(g_log = fopen(argv[1], "w")))
        return 2;
    size_t base = 96u << 20, more = 32u << 20;
    void *d, *e;
    CHECK(CALL(hggcSetDevice, 0));
    CHECK(CALL(hggcMalloc, &d, base));
    idle(700, base);
    busy(800000000LL, 1, base);
    idle(800, base);
    CHECK(CALL(hggcMalloc, &e, more));
    busy(350000000LL, 2, base + more);
    CHECK(CALL(hggcFree, e));
    idle(600, base);
    CHECK(CALL(hggcFree, d));
    fclose(g_log);
    wl_report("busy_idle");
    return 0;
}
