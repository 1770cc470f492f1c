/* Says whether CUDA's driver loads, initializes and counts a device: 'gpu N' or 'none: why'. */
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("none: libcuda.so.1 does not load (%s)\n", dlerror());
        return 0;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    if (!init || !count) {
        printf("none: libcuda.so.1 has no cuInit or cuDeviceGetCount\n");
        return 0;
    }
    int r = init(0);
    if (r != 0) {
        printf("none: cuInit(0) returned CUresult %d\n", r);
        return 0;
    }
    int n = 0;
    r = count(&n);
    if (r != 0 || n < 1) {
        printf("none: cuDeviceGetCount returned CUresult %d and %d devices\n", r, n);
        return 0;
    }
    printf("gpu %d\n", n);
    return 0;
}
