/* Spins about 2 ms and sleeps 5 ms, 30 times, then prints its own switches and CPU time. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static long long now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(void) {
    /* Switches before main (fork, exec, before asys traced it) do not count. */
    struct rusage first;
    getrusage(RUSAGE_THREAD, &first);
    volatile unsigned long x = 0;
    for (int i = 0; i < 30; i++) {
        long long end = now(CLOCK_MONOTONIC) + 2000000;
        while (now(CLOCK_MONOTONIC) < end)
            x++;
        usleep(5000);
    }
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    printf("tid %ld nvcsw %ld nivcsw %ld all_nvcsw %ld all_nivcsw %ld cpu_ns %lld\n",
           (long)syscall(SYS_gettid), ru.ru_nvcsw - first.ru_nvcsw,
           ru.ru_nivcsw - first.ru_nivcsw, ru.ru_nvcsw, ru.ru_nivcsw,
           now(CLOCK_THREAD_CPUTIME_ID));
    return 0;
}
