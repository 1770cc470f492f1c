/* Puts N operations on the device (kernel launches, copies, memsets, in turn),
 * waits for them, prints what it made, then ends the way MODE says:
 *   segv         a real invalid write (SIGSEGV)
 *   segv-handled the same, with its own SIGSEGV handler installed before its
 *                first runtime call: the handler prints "handled SIGSEGV" and
 *                calls _exit(42)
 *   stack        unbounded recursion on the main thread (SIGSEGV at the guard page)
 *   abort        abort() (SIGABRT)
 *   term         kill(getpid(), SIGTERM) with the default action
 *   _exit        _exit(7): no atexit handler runs
 *   exit         exit(0), the normal way
 * Usage: crash_exit MODE [ops=50]. The ground truth is the runtime's log
 * (HGGC_SIM_GROUND_TRUTH) and the "workload-calls" lines. */
#define _GNU_SOURCE
#include "hggc_runtime.h"
#include "workload_common.h"
#include <signal.h>
#include <unistd.h>

void scale_kernel(void **args) {
    float *x = args[0];
    for (int i = 0; i < 256; i++)
        x[i] *= 2.0f;
}

static int *volatile g_bad; /* NULL, unknown to the compiler */

/* Each frame keeps 4 KiB live across the call, so the stack overflows; the
 * limit (never reached) keeps the compiler from calling it infinite. */
static volatile int g_limit = 1 << 30;
static int recurse(int depth) {
    volatile char pad[4096];
    pad[depth % 4096] = (char)depth;
    if (depth >= g_limit)
        return 0;
    return recurse(depth + 1) + pad[(depth * 7) % 4096];
}

static void on_segv(int sig) {
    (void)sig;
    static const char msg[] = "handled SIGSEGV\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    _exit(42);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: crash_exit segv|segv-handled|stack|abort|term|_exit|exit [ops]\n");
        return 2;
    }
    const char *mode = argv[1];
    int ops = argc > 2 ? atoi(argv[2]) : 50;
    if (strcmp(mode, "segv-handled") == 0)
        signal(SIGSEGV, on_segv);
    hggcStream_t stream;
    CHECK(CALL(hggcStreamCreate, &stream));
    float *d, *h;
    size_t bytes = 256 * sizeof(float);
    CHECK(CALL(hggcMalloc, (void **)&d, bytes));
    CHECK(CALL(hggcMallocHost, (void **)&h, bytes));
    for (int i = 0; i < 256; i++)
        h[i] = (float)i;
    void *args[1] = {d};
    dim3 grid = {1, 1, 1}, block = {256, 1, 1};
    for (int i = 0; i < ops; i++) {
        switch (i % 3) {
        case 0:
            CHECK(CALL(hggcLaunchKernel, (const void *)scale_kernel, grid, block, args, 0, stream));
            break;
        case 1:
            CHECK(CALL(hggcMemcpyAsync, d, h, bytes, hggcMemcpyHostToDevice, stream));
            break;
        default:
            CHECK(CALL(hggcMemsetAsync, d, i, bytes, stream));
            break;
        }
    }
    CHECK(CALL(hggcStreamSynchronize, stream));
    wl_report("crash_exit");
    printf("crash_exit: device operations %d, ending by %s\n", ops, mode);
    fflush(stdout);
    if (strcmp(mode, "segv") == 0 || strcmp(mode, "segv-handled") == 0)
        *g_bad = 1;
    else if (strcmp(mode, "stack") == 0)
        return recurse(0);
    else if (strcmp(mode, "abort") == 0)
        abort();
    else if (strcmp(mode, "term") == 0)
        kill(getpid(), SIGTERM);
    else if (strcmp(mode, "_exit") == 0)
        _exit(7);
    else if (strcmp(mode, "exit") == 0)
        exit(0);
    fprintf(stderr, "crash_exit: unknown mode %s\n", mode);
    return 2;
}
