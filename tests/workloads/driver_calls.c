/* The CUDA driver API as an application calls it (linked against libcuda.so.1). */
#include "tally.h"
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuInit(unsigned int);
CUresult cuDriverGetVersion(int *);
CUresult cuDeviceGetCount(int *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuGetErrorString(CUresult, const char **);

int main(void) {
    int v = 0, n = 0;
    const char *s = 0;
    char host[4096] = {0};
    CUdeviceptr d[3];
    CALL_INT("cuInit", cuInit(0));
    CALL_INT("cuDriverGetVersion", cuDriverGetVersion(&v));
    CALL_INT("cuDeviceGetCount", cuDeviceGetCount(&n));
    size_t sizes[] = {1 << 20, 4096, 12345};
    for (int i = 0; i < 3; i++) {
        CUresult r = cuMemAlloc_v2(&d[i], sizes[i]);
        /* What the call allocated and its size, as the call's pointer. */
        printf("call cuMemAlloc_v2 int %d %zu 0x%016llx\n", r, sizes[i], d[i]);
    }
    for (int i = 0; i < 2; i++)
        CALL_BYTES("cuMemcpyHtoD_v2", cuMemcpyHtoD_v2(d[i], host, 1000 + i), 1000 + i);
    CALL_INT("cuGetErrorString", cuGetErrorString(0, &s));
    CALL_INT("cuGetErrorString", cuGetErrorString(7, &s));
    for (int i = 0; i < 3; i++)
        printf("call cuMemFree_v2 int %d - 0x%016llx\n", cuMemFree_v2(d[i]), d[i]);
    return 0;
}
