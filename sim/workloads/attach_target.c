/* A long-running process to attach to. It reads commands on stdin:
 *   burst N   run N iterations of (upload, kernel, download, sync), verify the
 *             result, print "done N <checksum>"
 *   fill N    N memsets of the device buffer to zero, then a sync; print
 *             "filled N"
 *   quit      print the calls it made and exit 0
 * It prints "ready <pid>" once its runtime is set up. */
#include "hggc_runtime.h"
#include "workload_common.h"
#include <unistd.h>

void increment_kernel(void **args) {
    int *v = args[0];
    for (int i = 0; i < 1024; i++)
        v[i] += 1;
}

int main(void) {
    hggcStream_t s;
    int *d, host[1024];
    CHECK(CALL(hggcSetDevice, 0));
    CHECK(CALL(hggcStreamCreate, &s));
    CHECK(CALL(hggcMalloc, (void **)&d, sizeof host));
    printf("ready %d\n", getpid());
    fflush(stdout);
    char line[128];
    void *args[1] = {d};
    dim3 one = {1, 1, 1}, block = {128, 1, 1};
    while (fgets(line, sizeof line, stdin)) {
        int n;
        if (sscanf(line, "burst %d", &n) == 1) {
            long checksum = 0;
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < 1024; j++)
                    host[j] = i + j;
                CHECK(CALL(hggcMemcpyAsync, d, host, sizeof host, hggcMemcpyHostToDevice, s));
                CHECK(CALL(hggcLaunchKernel, (const void *)increment_kernel, one, block, args, 0, s));
                CHECK(CALL(hggcMemcpyAsync, host, d, sizeof host, hggcMemcpyDeviceToHost, s));
                CHECK(CALL(hggcStreamSynchronize, s));
                for (int j = 0; j < 1024; j++) {
                    if (host[j] != i + j + 1) {
                        fprintf(stderr, "attach_target: wrong result at %d/%d\n", i, j);
                        return 2;
                    }
                    checksum += host[j];
                }
            }
            printf("done %d %ld\n", n, checksum);
            fflush(stdout);
        } else if (sscanf(line, "fill %d", &n) == 1) {
            for (int i = 0; i < n; i++)
                CHECK(CALL(hggcMemsetAsync, d, 0, sizeof host, s));
            CHECK(CALL(hggcStreamSynchronize, s));
            printf("filled %d\n", n);
            fflush(stdout);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        }
    }
    CHECK(CALL(hggcFree, d));
    CHECK(CALL(hggcStreamDestroy, s));
    wl_report("attach_target");
    return 0;
}
