/* The pipeline benchmark's load: T threads each make N calls of one cheap
 * runtime function, paced to R calls per second per thread (0: as fast as
 * they can). Prints how many calls were made and the rate achieved, so the
 * benchmark compares what asys recorded with what the program did.
 * Usage: rate_loop THREADS CALLS_PER_THREAD RATE_PER_THREAD */
#include "hggc_runtime.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static long calls_per_thread;
static double rate_per_thread;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *worker(void *arg) {
    (void)arg;
    double start = now_ns();
    double gap = rate_per_thread > 0 ? 1e9 / rate_per_thread : 0;
    for (long i = 0; i < calls_per_thread; i++) {
        if (gap > 0) {
            /* Busy-wait, not sleep: a sleeping thread would hand asys the
             * CPU and measure a different machine than a busy application. */
            double due = start + gap * (double)i;
            while (now_ns() < due)
                ;
        }
        hggcGetLastError();
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: rate_loop THREADS CALLS_PER_THREAD RATE_PER_THREAD\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    calls_per_thread = atol(argv[2]);
    rate_per_thread = atof(argv[3]);
    if (threads < 1 || threads > 256 || calls_per_thread < 1) {
        fprintf(stderr, "rate_loop: bad arguments\n");
        return 2;
    }
    hggcGetLastError(); /* resolve the PLT entry outside the timing */
    pthread_t tids[256];
    double a = now_ns();
    for (int t = 0; t < threads; t++)
        pthread_create(&tids[t], NULL, worker, NULL);
    for (int t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);
    double ns = now_ns() - a;
    long total = calls_per_thread * threads;
    /* The warm-up call above is a call too. */
    /* The program's own CPU time, probe traps included: whoever launched it
     * (asys) is charged it too, and subtracts it to find its own. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
    printf("calls %ld\nelapsed_ns %.0f\ncalls_per_s %.0f\ncpu_ns %.0f\n", total + 1, ns,
           (double)total * 1e9 / ns, cpu);
    /* When the program is done (CLOCK_MONOTONIC): the benchmark measures how
     * long asys takes to finish after it. */
    printf("exit_ns %.0f\n", now_ns());
    fflush(stdout);
    return 0;
}
