/* One cheap runtime call RATE times a second for SECONDS, each logged as its before and after times. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef CUDA
int cudaRuntimeGetVersion(int *);
static void call(void) { int v; cudaRuntimeGetVersion(&v); }
#else
int hggcGetLastError(void);
static void call(void) { hggcGetLastError(); }
#endif
static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    double rate = atof(argv[1]), seconds = atof(argv[2]);
    FILE *log = fopen(argv[3], "w");
    if (!log || !(rate > 0)) return 2;
    long long start = now_ns(), gap = (long long)(1e9 / rate);
    long long total = (long long)(rate * seconds);
    for (long long i = 0; i < total; i++) {
        long long due = start + gap * i;
        struct timespec t = {due / 1000000000LL, due % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0)
            ;
        long long a = now_ns();
        call();
        long long b = now_ns();
        fprintf(log, "%lld %lld\n", a, b);
    }
    return fclose(log) == 0 ? 0 : 1;
}
