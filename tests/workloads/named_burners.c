/* Two threads named "hot-worker" and "cold-worker" burn CPU, the first
 * HOT_MS ms (default 600) in burn_hot through an inlined mix_step, the
 * second COLD_MS ms (default 200) in burn_cold. Each prints its truth:
 * `truth {"thread":NAME,"tid":TID,"cpu_ns":N}`. The hot loops' lines are
 * marked MIX_STEP_LINE and BURN_COLD_LINE. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static long long cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
volatile unsigned long sink;
static inline __attribute__((always_inline)) unsigned long mix_step(unsigned long x, int i) {
    return x * 6364136223846793005UL + i; /* MIX_STEP_LINE */
}
__attribute__((noinline)) void burn_hot(long long ns) {
    long long end = cpu_ns() + ns;
    unsigned long x = 1;
    while (cpu_ns() < end)
        for (int i = 0; i < 200000; i++) x = mix_step(x, i);
    sink = x;
}
__attribute__((noinline)) void burn_cold(long long ns) {
    long long end = cpu_ns() + ns;
    unsigned long x = 7;
    while (cpu_ns() < end)
        for (int i = 0; i < 200000; i++) x = x * 2862933555777941757UL + 3 * i; /* BURN_COLD_LINE */
    sink = x;
}
struct job {
    const char *name;
    long long ns;
    void (*burn)(long long);
};
static void *worker(void *arg) {
    struct job *j = arg;
    pthread_setname_np(pthread_self(), j->name);
    long long t0 = cpu_ns();
    j->burn(j->ns);
    printf("truth {\"thread\":\"%s\",\"tid\":%ld,\"cpu_ns\":%lld}\n", j->name,
           (long)syscall(SYS_gettid), cpu_ns() - t0);
    fflush(stdout);
    return NULL;
}
int main(int argc, char **argv) {
    long long hot_ms = argc > 1 ? atoll(argv[1]) : 600;
    long long cold_ms = argc > 2 ? atoll(argv[2]) : 200;
    struct job jobs[2] = {
        {"hot-worker", hot_ms * 1000000, burn_hot},
        {"cold-worker", cold_ms * 1000000, burn_cold},
    };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return 0;
}
