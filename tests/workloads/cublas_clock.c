/* One cuBLAS call between two wall-clock readings: how long a launch takes
 * to reach main (the dynamic loader maps libcublas first, and a tracer
 * places its probes there), and when the program is done. Prints
 * "main NS" and "end NS" (CLOCK_REALTIME), for xtask/scripts/startup_finish.sh. */
#include <stddef.h>
#include <stdio.h>
#include <time.h>

size_t cublasGetCudartVersion(void);

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void) {
    printf("main %lld\n", now_ns());
    printf("call cublasGetCudartVersion size %zu\n", cublasGetCudartVersion());
    printf("end %lld\n", now_ns());
    return 0;
}
