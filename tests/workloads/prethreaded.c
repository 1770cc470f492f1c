/* A worker thread started first waits for a byte on stdin, then spins and sleeps 30 times and prints its switches. */
#define _GNU_SOURCE
#include <pthread.h>
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
static void *worker(void *arg) {
    (void)arg;
    printf("worker %ld\n", (long)syscall(SYS_gettid));
    fflush(stdout);
    char c;
    if (read(0, &c, 1) != 1)
        return NULL;
    struct rusage a, b;
    getrusage(RUSAGE_THREAD, &a);
    long long cpu = now(CLOCK_THREAD_CPUTIME_ID);
    volatile unsigned long x = 0;
    for (int i = 0; i < 30; i++) {
        long long end = now(CLOCK_MONOTONIC) + 2000000;
        while (now(CLOCK_MONOTONIC) < end)
            x++;
        usleep(5000);
    }
    cpu = now(CLOCK_THREAD_CPUTIME_ID) - cpu;
    getrusage(RUSAGE_THREAD, &b);
    printf("nvcsw %ld cpu_ns %lld\n", b.ru_nvcsw - a.ru_nvcsw, cpu);
    fflush(stdout);
    return NULL;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    return 0;
}
