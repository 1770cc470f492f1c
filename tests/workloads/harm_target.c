/* A process to attach to that notices harm done to it. On stdin:
 *   steps N   run N steps, print "steps N <median step ns>"
 *   quit      print "signals <received> <distinct> eintr <n>" and exit 0
 *             (3 if any system call failed with EINTR)
 * A step is four rounds of (upload, kernel, download, sync) on the
 * simulated runtime, then a blocking read() of a pipe that a second thread
 * writes a byte to every 200 us. SIGRTMIN has a handler (SA_RESTART, so a
 * read it interrupts is restarted, never EINTR) that marks the value each
 * signal carries: a test sends numbered signals and checks that each came
 * once. Any EINTR from read, or a wrong result, is harm. */
#define _GNU_SOURCE
#include "hggc_runtime.h"
#include "../../sim/workloads/workload_common.h"
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define MAX_VALUES 65536
static unsigned char seen[MAX_VALUES];
static atomic_long received, eintr;
static int pipefd[2];

static void on_signal(int sig, siginfo_t *info, void *ctx) {
    (void)sig, (void)ctx;
    atomic_fetch_add(&received, 1);
    int v = info->si_value.sival_int;
    if (v >= 0 && v < MAX_VALUES)
        seen[v]++;
}

static void *writer(void *arg) {
    (void)arg;
    struct timespec ts = {0, 200000};
    for (;;) {
        nanosleep(&ts, NULL);
        if (write(pipefd[1], "x", 1) < 0 && errno == EINTR)
            atomic_fetch_add(&eintr, 1);
    }
    return NULL;
}

void increment_kernel(void **args) {
    int *v = args[0];
    for (int i = 0; i < 1024; i++)
        v[i] += 1;
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMIN, &sa, NULL);
    if (pipe(pipefd))
        return 1;
    /* Only the main thread takes SIGRTMIN: the signals are sent to it. */
    sigset_t rt;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &rt, NULL);
    pthread_t w;
    pthread_create(&w, NULL, writer, NULL);
    pthread_sigmask(SIG_UNBLOCK, &rt, NULL);

    hggcStream_t s;
    int *d, host[1024];
    CHECK(CALL(hggcSetDevice, 0));
    CHECK(CALL(hggcStreamCreate, &s));
    CHECK(CALL(hggcMalloc, (void **)&d, sizeof host));
    printf("ready %d\n", getpid());
    fflush(stdout);
    void *args[1] = {d};
    dim3 one = {1, 1, 1}, block = {128, 1, 1};
    char line[128];
    static long times[100000];
    while (fgets(line, sizeof line, stdin)) {
        int n;
        if (sscanf(line, "steps %d", &n) == 1 && n > 0 && n <= 100000) {
            for (int i = 0; i < n; i++) {
                long t0 = now_ns();
                for (int r = 0; r < 4; r++) {
                    for (int j = 0; j < 1024; j++)
                        host[j] = i + j;
                    CHECK(CALL(hggcMemcpyAsync, d, host, sizeof host, hggcMemcpyHostToDevice, s));
                    CHECK(CALL(hggcLaunchKernel, (const void *)increment_kernel, one, block, args, 0, s));
                    CHECK(CALL(hggcMemcpyAsync, host, d, sizeof host, hggcMemcpyDeviceToHost, s));
                    CHECK(CALL(hggcStreamSynchronize, s));
                    for (int j = 0; j < 1024; j++)
                        if (host[j] != i + j + 1) {
                            fprintf(stderr, "harm_target: wrong result\n");
                            return 2;
                        }
                }
                char c;
                ssize_t got;
                while ((got = read(pipefd[0], &c, 1)) < 0 && errno == EINTR)
                    atomic_fetch_add(&eintr, 1);
                if (got != 1)
                    return 4;
                times[i] = now_ns() - t0;
            }
            qsort(times, (size_t)n, sizeof times[0], cmp);
            printf("steps %d %ld\n", n, times[n / 2]);
            fflush(stdout);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        }
    }
    long distinct = 0, twice = 0;
    for (int i = 0; i < MAX_VALUES; i++) {
        distinct += seen[i] > 0;
        twice += seen[i] > 1;
    }
    printf("signals %ld %ld twice %ld eintr %ld\n", atomic_load(&received), distinct, twice,
           atomic_load(&eintr));
    fflush(stdout);
    return atomic_load(&eintr) ? 3 : 0;
}
