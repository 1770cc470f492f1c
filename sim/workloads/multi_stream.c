/* A multi-threaded app: T threads, each with its own stream, run K iterations
 * of upload / kernel / memset. Usage: multi_stream [threads=4] [iters=25] */
#include "hggc_runtime.h"
#include "workload_common.h"

static int g_iters;

void scale_kernel(void **args) {
    float *v = args[0];
    size_t n = *(size_t *)args[1];
    for (size_t i = 0; i < n; i++)
        v[i] *= 2.0f;
}

static void *worker(void *arg) {
    (void)arg;
    size_t n = 4096, bytes = n * sizeof(float);
    float host[4096];
    for (size_t i = 0; i < n; i++)
        host[i] = (float)i;
    hggcStream_t s;
    float *d;
    CHECK(CALL(hggcSetDevice, 0));
    CHECK(CALL(hggcStreamCreate, &s));
    CHECK(CALL(hggcMalloc, (void **)&d, bytes));
    void *args[2] = {d, &n};
    dim3 grid = {16, 1, 1}, block = {256, 1, 1};
    for (int i = 0; i < g_iters; i++) {
        CHECK(CALL(hggcMemcpyAsync, d, host, bytes, hggcMemcpyHostToDevice, s));
        CHECK(CALL(hggcLaunchKernel, (const void *)scale_kernel, grid, block, args, 0, s));
        CHECK(CALL(hggcMemsetAsync, d, 0, 256, s));
    }
    CHECK(CALL(hggcStreamSynchronize, s));
    CHECK(CALL(hggcFree, d));
    CHECK(CALL(hggcStreamDestroy, s));
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    g_iters = argc > 2 ? atoi(argv[2]) : 25;
    pthread_t t[64];
    if (threads > 64)
        threads = 64;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("multi_stream: %d threads x %d iterations\n", threads, g_iters);
    wl_report("multi_stream");
    return 0;
}
