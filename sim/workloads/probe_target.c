/* A target for user-defined probes (--probe, docs/probes.md).
 *
 * Usage: probe_target CALLS SYSCALLS [LOG]
 * Calls probe_work(a, b, name) CALLS times, with negative and positive
 * arguments and three names, then makes SYSCALLS getppid system calls
 * (a kernel path driven a known number of times: __x64_sys_getppid and
 * syscalls:sys_enter_getppid). With LOG (or HGGC_SIM_GROUND_TRUTH) set,
 * each probe_work call appends one JSON line, written with one write(2):
 *   {"fn":"probe_work","pid":P,"tid":T,"a":A,"b":B,"name":"N","ret":R,
 *    "start":S,"end":E}
 * start/end are CLOCK_MONOTONIC ns taken inside the function, so a probe's
 * entry comes before start and its return after end. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;

static unsigned long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* noipa: no clone, no inlining, no changed signature: the uprobe sees the
 * System V argument registers of every call. */
__attribute__((noipa)) long probe_work(int a, long b, const char *name) {
    unsigned long long start = mono_ns();
    volatile long spin = 0;
    for (int i = 0; i < 200 + (a & 0xff); i++)
        spin += i;
    long ret = (long)a * 3 + b + (long)strlen(name);
    unsigned long long end = mono_ns();
    if (log_fd >= 0) {
        char line[512];
        int n = snprintf(line, sizeof line,
                         "{\"fn\":\"probe_work\",\"pid\":%d,\"tid\":%d,\"a\":%d,\"b\":%ld,"
                         "\"name\":\"%s\",\"ret\":%ld,\"start\":%llu,\"end\":%llu}\n",
                         getpid(), (int)syscall(SYS_gettid), a, b, name, ret, start, end);
        if (write(log_fd, line, (size_t)n) != n)
            return ret;
    }
    return ret;
}

int main(int argc, char **argv) {
    long calls = argc > 1 ? atol(argv[1]) : 10;
    long sys = argc > 2 ? atol(argv[2]) : 0;
    const char *log = argc > 3 ? argv[3] : getenv("HGGC_SIM_GROUND_TRUTH");
    if (log && *log)
        log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    static const char *names[] = {"alpha", "beta", "gamma-delta"};
    long sum = 0;
    for (long i = 0; i < calls; i++)
        sum += probe_work((int)(i * 7 - 20), i * 1000003 - 5, names[i % 3]);
    for (long i = 0; i < sys; i++)
        syscall(SYS_getppid);
    printf("pid %d calls %ld syscalls %ld sum %ld\n", getpid(), calls, sys, sum);
    return 0;
}
