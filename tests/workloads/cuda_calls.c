/* Real libcudart calls printed with their results, then a PTX kernel launched on the driver where one is loaded. */
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
typedef int cudaError_t;
cudaError_t cudaGetDeviceCount(int *);
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMemcpy(void *, const void *, size_t, int);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
int cudaRuntimeGetVersion(int *);
#define REPORT(name, call) do { int r_ = (int)(call); printf("cuda-call %s %d\n", name, r_); } while (0)
#define REPORT_CU(name, call) do { int r_ = (int)(call); printf("cu-call %s %d\n", name, r_); } while (0)

/* A kernel that does nothing, in PTX for the driver to compile (ISA 7.0
   knows every target up to sm_80; the code runs on any later device). */
static const char PTX[] =
    ".version 7.0\n"
    ".target sm_%d\n"
    ".address_size 64\n"
    ".visible .entry asys_test_kernel()\n"
    "{\n"
    "    ret;\n"
    "}\n";

/* Launches it with the driver API, only where the runtime has loaded CUDA's
   driver (RTLD_NOLOAD: on a host without one nothing is loaded here). */
static void launch_kernel(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        printf("kernel none: no driver loaded\n");
        return;
    }
    int (*attribute)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cuDeviceGetAttribute");
    int (*load)(void **, const void *) = (int (*)(void **, const void *))dlsym(h, "cuModuleLoadData");
    int (*function)(void **, void *, const char *) =
        (int (*)(void **, void *, const char *))dlsym(h, "cuModuleGetFunction");
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                  void *, void **, void **) =
        (int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                 void *, void **, void **))dlsym(h, "cuLaunchKernel");
    int (*synchronize)(void) = (int (*)(void))dlsym(h, "cuCtxSynchronize");
    if (!attribute || !load || !function || !launch || !synchronize) {
        printf("kernel none: the driver lacks a function\n");
        return;
    }
    /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR, device 0
       (the runtime's current device, whose primary context is current). */
    int major = 0, minor = 0;
    REPORT_CU("cuDeviceGetAttribute", attribute(&major, 75, 0));
    REPORT_CU("cuDeviceGetAttribute", attribute(&minor, 76, 0));
    int sm = major * 10 + minor;
    char ptx[sizeof PTX + 8];
    snprintf(ptx, sizeof ptx, PTX, sm > 80 ? 80 : sm);
    void *module = 0, *kernel = 0;
    REPORT_CU("cuModuleLoadData", load(&module, ptx));
    REPORT_CU("cuModuleGetFunction", function(&kernel, module, "asys_test_kernel"));
    REPORT_CU("cuLaunchKernel", launch(kernel, 2, 1, 1, 32, 1, 1, 0, 0, 0, 0));
    REPORT_CU("cuCtxSynchronize", synchronize());
    printf("kernel launched sm_%d\n", sm);
}

int main(void) {
    int n = -1, v = 0;
    void *p = 0;
    char host[64] = {0};
    REPORT("cudaRuntimeGetVersion", cudaRuntimeGetVersion(&v));
    REPORT("cudaGetDeviceCount", cudaGetDeviceCount(&n));
    REPORT("cudaMalloc", cudaMalloc(&p, 1 << 20));
    REPORT("cudaMemcpy", cudaMemcpy(p, host, sizeof host, 1));
    REPORT("cudaDeviceSynchronize", cudaDeviceSynchronize());
    REPORT("cudaGetLastError", cudaGetLastError());
    printf("device-count %d\n", n);
    launch_kernel();
    REPORT("cudaFree", cudaFree(p));
    return 0;
}
