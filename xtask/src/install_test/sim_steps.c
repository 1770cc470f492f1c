/* Built inside the install test's root file system, against the simulated
 * runtime asys installs (include/asys/sim, lib/asys/sim): COUNT steps of a
 * copy to the device, a memset and a kernel, so that device records reach
 * asys through its injection library. Prints what it put on the device. */
#include <asys/sim/hggc_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void scale_kernel(void **args) { (void)args; }

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 50, ops = 0;
    char host[4096];
    memset(host, 7, sizeof host);
    void *dev = NULL;
    if (hggcMalloc(&dev, sizeof host) != 0)
        return 1;
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    for (int i = 0; i < count; i++) {
        ops += hggcMemcpy(dev, host, sizeof host, hggcMemcpyHostToDevice) == 0;
        ops += hggcMemset(dev, i & 0xff, sizeof host) == 0;
        ops += hggcLaunchKernel((const void *)scale_kernel, grid, block, NULL, 0, NULL) == 0;
    }
    if (hggcDeviceSynchronize() != 0)
        return 1;
    hggcFree(dev);
    printf("made device operations %d\n", ops);
    return ops == 3 * count ? 0 : 1;
}
