/* A training-step loop: per step, upload a batch, run forward/backward/update
 * kernels, download the loss, and time the step with events. Usage:
 * train_step [steps=20] [batch_floats=65536] */
#include "hggc_runtime.h"
#include "hgtx.h"
#include "workload_common.h"
#include <time.h>

static size_t g_n;

/* Kernels: host functions the runtime runs on the stream's worker thread. */
void forward_kernel(void **args) {
    float *x = args[0], *w = args[1], *loss = args[2];
    double acc = 0;
    for (size_t i = 0; i < g_n; i++)
        acc += (double)x[i] * w[i];
    loss[0] = (float)acc;
}

void backward_kernel(void **args) {
    float *x = args[0], *grad = args[3], *loss = args[2];
    for (size_t i = 0; i < g_n; i++)
        grad[i] = x[i] * loss[0] * 1e-6f;
}

void sgd_update_kernel(void **args) {
    float *w = args[1], *grad = args[3];
    for (size_t i = 0; i < g_n; i++)
        w[i] -= 0.01f * grad[i];
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    g_n = argc > 2 ? (size_t)atol(argv[2]) : 65536;
    size_t bytes = g_n * sizeof(float);
    int ndev = 0;
    CHECK(CALL(hggcGetDeviceCount, &ndev));
    CHECK(CALL(hggcSetDevice, 0));
    hggcStream_t stream;
    CHECK(CALL(hggcStreamCreate, &stream));
    float *d_x, *d_w, *d_loss, *d_grad, *h_batch, *h_loss;
    CHECK(CALL(hggcMalloc, (void **)&d_x, bytes));
    CHECK(CALL(hggcMalloc, (void **)&d_w, bytes));
    CHECK(CALL(hggcMalloc, (void **)&d_grad, bytes));
    CHECK(CALL(hggcMalloc, (void **)&d_loss, 64));
    CHECK(CALL(hggcMallocHost, (void **)&h_batch, bytes));
    CHECK(CALL(hggcMallocHost, (void **)&h_loss, 64));
    CHECK(CALL(hggcMemset, d_w, 0, bytes));
    hggcEvent_t start, stop;
    CHECK(CALL(hggcEventCreate, &start));
    CHECK(CALL(hggcEventCreate, &stop));
    /* One deliberate mistake, as real programs make: an invalid copy kind. */
    if (CALL(hggcMemcpy, d_x, h_batch, bytes, (hggcMemcpyKind)7) != hggcErrorInvalidMemcpyDirection) {
        fprintf(stderr, "expected hggcErrorInvalidMemcpyDirection\n");
        return 1;
    }
    CALL(hggcGetLastError);
    void *args[4] = {d_x, d_w, d_loss, d_grad};
    dim3 grid = {(unsigned)((g_n + 255) / 256), 1, 1}, block = {256, 1, 1};
    double total_ms = 0;
    struct timespec loop_start, loop_end;
    clock_gettime(CLOCK_MONOTONIC, &loop_start);
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; i < g_n; i++)
            h_batch[i] = (float)((i + (size_t)s) % 17) * 0.1f;
        /* The step and its phases as hgtx ranges, as a framework would mark them. */
        CALL(hgtxRangePushA, "train_step");
        CHECK(CALL(hggcEventRecord, start, stream));
        CHECK(CALL(hggcMemcpyAsync, d_x, h_batch, bytes, hggcMemcpyHostToDevice, stream));
        CALL(hgtxRangePushA, "forward");
        CHECK(CALL(hggcLaunchKernel, (const void *)forward_kernel, grid, block, args, 0, stream));
        CALL(hgtxRangePop);
        CALL(hgtxRangePushA, "backward");
        CHECK(CALL(hggcLaunchKernel, (const void *)backward_kernel, grid, block, args, 0, stream));
        CHECK(CALL(hggcLaunchKernel, (const void *)sgd_update_kernel, grid, block, args, 0, stream));
        CALL(hgtxRangePop);
        CHECK(CALL(hggcMemcpyAsync, h_loss, d_loss, sizeof(float), hggcMemcpyDeviceToHost, stream));
        CHECK(CALL(hggcEventRecord, stop, stream));
        CHECK(CALL(hggcStreamSynchronize, stream));
        CALL(hgtxRangePop);
        float ms = 0;
        CHECK(CALL(hggcEventElapsedTime, &ms, start, stop));
        total_ms += ms;
    }
    clock_gettime(CLOCK_MONOTONIC, &loop_end);
    CHECK(CALL(hggcDeviceSynchronize));
    CHECK(CALL(hggcEventDestroy, start));
    CHECK(CALL(hggcEventDestroy, stop));
    CHECK(CALL(hggcFree, d_x));
    CHECK(CALL(hggcFree, d_w));
    CHECK(CALL(hggcFree, d_grad));
    CHECK(CALL(hggcFree, d_loss));
    CHECK(CALL(hggcFreeHost, h_batch));
    CHECK(CALL(hggcFreeHost, h_loss));
    CHECK(CALL(hggcStreamDestroy, stream));
    printf("train_step: %d steps on %d device(s), %.3f ms of device time, last loss %g\n", steps,
           ndev, total_ms, (double)h_loss[0]);
    printf("loop_ms %.3f\n", (double)(loop_end.tv_sec - loop_start.tv_sec) * 1e3 +
                                 (double)(loop_end.tv_nsec - loop_start.tv_nsec) / 1e6);
    wl_report("train_step");
    return 0;
}
