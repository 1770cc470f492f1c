/*
 * Nested runtime calls, for the kernel's matching of each return to its
 * entry: application callbacks that the runtime runs synchronously
 * (hggcRunHostCallback) call back into the runtime, level after level, past
 * asys's per-thread limit of stored calls; recording may turn on and off
 * inside the nest; and the runtime may call its own API internally.
 *
 *   nested_calls plain DEPTH             every call made while recording
 *   nested_calls range DEPTH START STOP  hggcProfilerStart in the callback at
 *                                        level START, hggcProfilerStop in the
 *                                        one at level STOP (0: none)
 *   nested_calls internal N REPEAT       hggcQueryDeviceInternally(N) REPEAT
 *                                        times, then hggcGetDevice twice
 *
 * Prints a line for each runtime call it made, once it returned:
 * "call NAME DEPTH START END RESULT": DEPTH counts the runtime calls in
 * flight on the thread with this one (the outermost is 1), START and END are
 * CLOCK_MONOTONIC ns taken just before and just after the call. Then its
 * tally (workload_common.h).
 */
#include "hggc_runtime.h"
#include "workload_common.h"
#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

#define RECORD(depth, fn, ...)                                                    \
    ({                                                                          \
        long long s_ = now_ns();                                                \
        hggcError_t r_ = CALL(fn, __VA_ARGS__);                                 \
        long long e_ = now_ns();                                                \
        printf("call %s %d %lld %lld %d\n", #fn, (depth), s_, e_, (int)r_);     \
        r_;                                                                     \
    })

static int g_depth, g_start, g_stop;

/* Runs at level `level` (inside `level` runtime calls); returns 100 + level,
 * so that each hggcRunHostCallback returns a result of its own. */
static hggcError_t callback(void *user) {
    int level = (int)(long)user;
    int device;
    RECORD(level + 1, hggcGetDevice, &device);
    if (level == g_start)
        RECORD(level + 1, hggcProfilerStart);
    if (level == g_stop)
        RECORD(level + 1, hggcProfilerStop);
    if (level < g_depth)
        RECORD(level + 1, hggcRunHostCallback, callback, (void *)(long)(level + 1));
    return (hggcError_t)(100 + level);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "plain";
    if (strcmp(mode, "internal") == 0) {
        int n = argc > 2 ? atoi(argv[2]) : 5, repeat = argc > 3 ? atoi(argv[3]) : 3;
        for (int i = 0; i < repeat; i++)
            CHECK(RECORD(1, hggcQueryDeviceInternally, n));
        int device;
        for (int i = 0; i < 2; i++)
            CHECK(RECORD(1, hggcGetDevice, &device));
        printf("internal-calls %d\n", n * repeat);
    } else {
        g_depth = argc > 2 ? atoi(argv[2]) : 7;
        if (strcmp(mode, "range") == 0) {
            g_start = argc > 3 ? atoi(argv[3]) : 0;
            g_stop = argc > 4 ? atoi(argv[4]) : 0;
        }
        RECORD(1, hggcRunHostCallback, callback, (void *)1L);
        /* After the nest: recording is off again in range mode. */
        int device;
        RECORD(1, hggcGetDevice, &device);
    }
    wl_report("nested_calls");
    return 0;
}
