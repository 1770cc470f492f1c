/* Loads the runtime with dlopen after start-up (as Python frameworks do) and
 * makes N rounds of calls through dlsym, DELAY ms after it started (printing
 * "dlopen_app: loading" first). Usage: dlopen_app LIBPATH [rounds=10] [delay_ms=0] */
#include "hggc_runtime.h"
#include "workload_common.h"
#include <dlfcn.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_app LIBPATH [rounds]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 10;
    int delay_ms = argc > 3 ? atoi(argv[3]) : 0;
    if (delay_ms > 0) {
        struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        printf("dlopen_app: loading\n");
        fflush(stdout);
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen_app: %s\n", dlerror());
        return 1;
    }
    hggcError_t (*p_malloc)(void **, size_t) = (hggcError_t (*)(void **, size_t))dlsym(h, "hggcMalloc");
    hggcError_t (*p_free)(void *) = (hggcError_t (*)(void *))dlsym(h, "hggcFree");
    hggcError_t (*p_memset)(void *, int, size_t) = (hggcError_t (*)(void *, int, size_t))dlsym(h, "hggcMemset");
    if (!p_malloc || !p_free || !p_memset)
        return 1;
    for (int i = 0; i < rounds; i++) {
        void *d;
        wl_count("hggcMalloc");
        CHECK(p_malloc(&d, 1 << 16));
        wl_count("hggcMemset");
        CHECK(p_memset(d, i, 1 << 16));
        wl_count("hggcFree");
        CHECK(p_free(d));
    }
    wl_report("dlopen_app");
    return 0;
}
