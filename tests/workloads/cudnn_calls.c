/* cuDNN as an application calls it, without a GPU. libcudnn.so.9 forwards
 * most calls to its sub-libraries (libcudnn_graph.so.9 exports the same
 * names): only the application's calls are the user's. */
#include "tally.h"
typedef int cudnnStatus_t;
typedef void *cudnnHandle_t;
size_t cudnnGetVersion(void);
size_t cudnnGetCudartVersion(void);
size_t cudnnGetMaxDeviceVersion(void);
const char *cudnnGetErrorString(cudnnStatus_t status);
cudnnStatus_t cudnnGetProperty(int type, int *value);
cudnnStatus_t cudnnCreate(cudnnHandle_t *handle);

int main(void) {
    cudnnHandle_t h = 0;
    int v = 0;
    for (int i = 0; i < 2; i++)
        CALL_SIZE("cudnnGetVersion", cudnnGetVersion());
    CALL_SIZE("cudnnGetCudartVersion", cudnnGetCudartVersion());
    CALL_SIZE("cudnnGetMaxDeviceVersion", cudnnGetMaxDeviceVersion());
    int statuses[] = {0, 1001, 2000};
    for (int i = 0; i < 3; i++)
        CALL_PTR("cudnnGetErrorString", cudnnGetErrorString(statuses[i]));
    for (int t = 0; t < 3; t++)
        CALL_INT("cudnnGetProperty", cudnnGetProperty(t, &v));
    CALL_INT("cudnnCreate", cudnnCreate(&h));
    return 0;
}
