/* Loads the injection library as CUDA's driver would (or leaves it to the driver), then makes runtime calls. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
typedef int cudaError_t;
cudaError_t cudaGetDeviceCount(int *);
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMemset(void *, int, size_t);
cudaError_t cudaDeviceSynchronize(void);
int cudaRuntimeGetVersion(int *);
#define REPORT(name, call) do { int r_ = (int)(call); printf("cuda-call %s %d\n", name, r_); } while (0)
int main(void) {
    /* A stand-in for CUDA's driver, mapped first as the real one is. */
    const char *driver = getenv("FAKE_CUDA_DRIVER");
    if (driver && !dlopen(driver, RTLD_NOW | RTLD_GLOBAL)) {
        printf("no driver %s\n", dlerror());
        return 1;
    }
    const char *inject = getenv("CUDA_INJECTION64_PATH");
    if (inject && getenv("REAL_CUDA_DRIVER")) {
        /* A GPU host: CUDA's driver loads the library at cuInit. */
        printf("injection by-driver %s\n", inject);
    } else if (inject) {
        /* What libcuda does with CUDA_INJECTION64_PATH at cuInit. */
        void *h = dlopen(inject, RTLD_NOW);
        int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
        printf("injection %s %d\n", inject, init ? init() : -1);
    } else {
        printf("injection none\n");
    }
    int n = -1, v = 0;
    void *p = 0;
    REPORT("cudaRuntimeGetVersion", cudaRuntimeGetVersion(&v));
    REPORT("cudaGetDeviceCount", cudaGetDeviceCount(&n));
    REPORT("cudaMalloc", cudaMalloc(&p, 1 << 20));
    REPORT("cudaMemset", cudaMemset(p, 0, 1 << 20));
    REPORT("cudaDeviceSynchronize", cudaDeviceSynchronize());
    REPORT("cudaFree", cudaFree(p));
    printf("device-count %d version %d\n", n, v);
    return 0;
}
