/* Burns CPU in burn_a, then burn_b, then poll_clock (the vDSO), each under run_phase, and prints what each took. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static long long cpu_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
volatile unsigned long sink;
__attribute__((noinline)) void burn_a(long long ns) {
    long long end = cpu_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
    unsigned long x = 1;
    while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < end)
        for (int i = 0; i < 200000; i++) x = x * 6364136223846793005UL + i;
    sink = x;
}
__attribute__((noinline)) void burn_b(long long ns) {
    long long end = cpu_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
    unsigned long x = 7;
    while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < end)
        for (int i = 0; i < 200000; i++) x = x * 2862933555777941757UL + 3 * i;
    sink = x;
}
__attribute__((noinline)) void poll_clock(long long ns) {
    long long end = cpu_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
    struct timespec t;
    unsigned long x = 0;
    while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < end)
        for (int i = 0; i < 2000; i++) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            x += t.tv_nsec;
        }
    sink = x;
}
__attribute__((noinline)) long long run_phase(void (*f)(long long), long long ns) {
    long long t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    f(ns);
    return cpu_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
}
int main(int argc, char **argv) {
    if (argc > 1) {
        long long ms = atoll(argv[1]);
        long long a = run_phase(burn_a, ms * 1000000);
        long long b = run_phase(burn_b, ms * 500000);
        long long c = run_phase(poll_clock, ms * 500000);
        printf("a=%lld b=%lld c=%lld\n", a, b, c);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "burn ", 5) == 0)
            printf("burned %lld\n", run_phase(burn_a, atoll(line + 5) * 1000000));
        else
            break;
    }
    return 0;
}
