/* Burns HOT_MS ms of CPU in burn_hot, then COLD_MS (default HOT_MS / 5) in burn_cold, under main. */
#include <time.h>
#include <stdlib.h>
static long long cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
volatile unsigned long sink;
__attribute__((noinline)) void burn_hot(long long ns) {
    long long end = cpu_ns() + ns;
    unsigned long x = 1;
    while (cpu_ns() < end)
        for (int i = 0; i < 200000; i++) x = x * 6364136223846793005UL + i;
    sink = x;
}
__attribute__((noinline)) void burn_cold(long long ns) {
    long long end = cpu_ns() + ns;
    unsigned long x = 7;
    while (cpu_ns() < end)
        for (int i = 0; i < 200000; i++) x = x * 2862933555777941757UL + 3 * i;
    sink = x;
}
int main(int argc, char **argv) {
    long long hot_ms = argc > 1 ? atoll(argv[1]) : 300;
    long long cold_ms = argc > 2 ? atoll(argv[2]) : hot_ms / 5;
    burn_hot(hot_ms * 1000000);
    burn_cold(cold_ms * 1000000);
    return 0;
}
