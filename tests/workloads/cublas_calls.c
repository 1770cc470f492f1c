/* cuBLAS and cuBLASLt as an application calls them, without a GPU: creating
 * a handle fails, the other calls still return their codes, versions and
 * strings. */
#include "tally.h"
typedef int cublasStatus_t;
typedef void *cublasHandle_t;
cublasStatus_t cublasCreate_v2(cublasHandle_t *handle);
cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version);
cublasStatus_t cublasGetProperty(int type, int *value);
size_t cublasGetCudartVersion(void);
const char *cublasGetStatusString(cublasStatus_t status);
const char *cublasGetStatusName(cublasStatus_t status);
size_t cublasLtGetVersion(void);
size_t cublasLtGetCudartVersion(void);
const char *cublasLtGetStatusString(cublasStatus_t status);

int main(void) {
    cublasHandle_t h = 0;
    int v = 0;
    CALL_INT("cublasCreate_v2", cublasCreate_v2(&h));
    CALL_INT("cublasGetVersion_v2", cublasGetVersion_v2(h, &v));
    for (int t = 0; t < 3; t++)
        CALL_INT("cublasGetProperty", cublasGetProperty(t, &v));
    CALL_SIZE("cublasGetCudartVersion", cublasGetCudartVersion());
    int statuses[] = {0, 1, 3, 7};
    for (int i = 0; i < 4; i++)
        CALL_PTR("cublasGetStatusString", cublasGetStatusString(statuses[i]));
    for (int i = 0; i < 2; i++)
        CALL_PTR("cublasGetStatusName", cublasGetStatusName(statuses[i]));
    CALL_SIZE("cublasLtGetVersion", cublasLtGetVersion());
    CALL_SIZE("cublasLtGetCudartVersion", cublasLtGetCudartVersion());
    CALL_PTR("cublasLtGetStatusString", cublasLtGetStatusString(1));
    return 0;
}
