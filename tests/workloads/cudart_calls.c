/* The CUDA runtime as an application calls it, without a GPU or driver. */
#include "tally.h"
typedef int cudaError_t;
cudaError_t cudaRuntimeGetVersion(int *);
cudaError_t cudaGetDeviceCount(int *);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t);
const char *cudaGetErrorName(cudaError_t);

int main(void) {
    int v = 0, n = 0;
    CALL_INT("cudaRuntimeGetVersion", cudaRuntimeGetVersion(&v));
    cudaError_t e = cudaGetDeviceCount(&n);
    CALL_INT("cudaGetDeviceCount", e);
    CALL_INT("cudaGetLastError", cudaGetLastError());
    int errors[] = {0, 35, (int)e};
    for (int i = 0; i < 3; i++)
        CALL_PTR("cudaGetErrorString", cudaGetErrorString(errors[i]));
    for (int i = 0; i < 2; i++)
        CALL_PTR("cudaGetErrorName", cudaGetErrorName(errors[i]));
    return 0;
}
