/* One CUDA application of tests/tests/combinations.rs: it calls the CUDA
 * runtime, cuBLAS, cuDNN and NCCL (NVIDIA's real libraries from PyPI), opens
 * NVTX ranges through NVIDIA's NVTX v3 C header (a C NVTX client), sleeps and
 * waits for a held mutex (OS calls), and prints one line for each: "call NAME
 * KIND VALUE" (tally.h), "range NAME", "sleep" and "blocked-lock". With
 * COMBO_DRIVER set it first maps that libcuda.so.1 and calls its cuInit, as
 * a CUDA process does before its first kernel. */
#include "tally.h"
#include "blocked_lock.h"
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <unistd.h>

typedef int cudaError_t;
cudaError_t cudaRuntimeGetVersion(int *);
cudaError_t cudaGetDeviceCount(int *);
size_t cudnnGetVersion(void);
int cublasGetProperty(int type, int *value);
int ncclGetVersion(int *version);

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    int v = 0;
    const char *driver = getenv("COMBO_DRIVER");
    if (driver) {
        void *h = dlopen(driver, RTLD_NOW | RTLD_GLOBAL);
        if (!h) {
            printf("no driver %s\n", dlerror());
            return 1;
        }
        int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
        CALL_INT("cuInit", cu_init(0));
    }
    CALL_INT("cudaRuntimeGetVersion", cudaRuntimeGetVersion(&v));
    for (int i = 0; i < steps; i++) {
        nvtxRangePushA("c-step");
        printf("range c-step\n");
        CALL_INT("cudaGetDeviceCount", cudaGetDeviceCount(&v));
        CALL_SIZE("cudnnGetVersion", cudnnGetVersion());
        CALL_INT("cublasGetProperty", cublasGetProperty(0, &v));
        CALL_INT("ncclGetVersion", ncclGetVersion(&v));
        usleep(2000);
        printf("sleep\n");
        nvtxRangePop();
    }
    block_on_a_held_lock();
    fflush(stdout);
    return 0;
}
