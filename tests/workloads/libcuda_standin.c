/* A stand-in libcuda.so.1 exporting a few CUDA driver API functions, for the
 * test of the driver API only: there is no GPU and no NVIDIA driver here, and
 * the real libcuda.so.1 installs from neither Debian main nor PyPI (Debian's
 * libcuda1 is in non-free and needs the NVIDIA kernel module). What the test
 * checks is asys's side: that under -t cuda it probes libcuda's cu* exports
 * and names and counts the application's calls.
 *
 * cuMemAlloc_v2 calls cuDriverGetVersion through the PLT, as a driver calls
 * its own entry points: a vendor-internal call, not the application's. */
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#ifdef STANDIN_LOADS_INJECTION
/* What the real driver does at cuInit: load the library that
 * CUDA_INJECTION64_PATH names and call its InitializeInjection (the
 * combination tests, combinations.rs). */
#include <dlfcn.h>
CUresult cuInit(unsigned int flags) {
    const char *inject = getenv("CUDA_INJECTION64_PATH");
    if (inject) {
        void *h = dlopen(inject, RTLD_NOW);
        int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
        if (!init || init() != 1)
            return 999;
    }
    return flags == 0 ? 0 : 1;
}
#else
CUresult cuInit(unsigned int flags) { return flags == 0 ? 0 : 1; }
#endif

CUresult cuDriverGetVersion(int *version) {
    *version = 12090;
    return 0;
}

CUresult cuDeviceGetCount(int *count) {
    *count = 1;
    return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    int v;
    if (cuDriverGetVersion(&v) != 0)
        return 999;
    void *p = malloc(bytesize);
    if (!p)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    *dptr = (CUdeviceptr)p;
    return 0;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    free((void *)dptr);
    return 0;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    memcpy((void *)dst, src, bytes);
    return 0;
}

CUresult cuGetErrorString(CUresult error, const char **str) {
    *str = error == 0 ? "no error" : "unknown error";
    return error == 0 || error == 999 ? 0 : 1;
}
