/* Calls at a steady rate, with a progress log: the crash-safety and flight
 * recorder tests compare what asys kept with what this program did.
 * Usage: steady_calls RATE SECONDS PROGRESS_FILE [FAIL_AT_SECONDS]
 * Makes RATE hggcGetLastError calls per second for SECONDS (paced by
 * sleeping, so asys has the CPU it needs on a small machine). Every 100 ms it
 * appends "progress T N" to PROGRESS_FILE: at CLOCK_MONOTONIC T (ns), N calls
 * had returned, each started after the previous line's T. With
 * FAIL_AT_SECONDS, one hggcSetDevice(-1) (which fails) is made that long
 * after the start and logged as "fail START END RESULT". */
#include "hggc_runtime.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_until(long long due) {
    struct timespec t = {.tv_sec = due / 1000000000LL, .tv_nsec = due % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0)
        ;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: steady_calls RATE SECONDS PROGRESS_FILE [FAIL_AT_SECONDS]\n");
        return 2;
    }
    double rate = atof(argv[1]);
    double seconds = atof(argv[2]);
    double fail_at = argc > 4 ? atof(argv[4]) : -1;
    if (!(rate > 0) || !(seconds > 0)) {
        fprintf(stderr, "steady_calls: bad arguments\n");
        return 2;
    }
    FILE *log = fopen(argv[3], "w");
    if (!log) {
        perror(argv[3]);
        return 2;
    }
    long long start = now_ns();
    long long gap = (long long)(1e9 / rate);
    long long total = (long long)(rate * seconds);
    long long next_log = start + 100000000LL;
    long long fail_due = fail_at >= 0 ? start + (long long)(fail_at * 1e9) : -1;
    fprintf(log, "start %lld\n", start);
    fflush(log);
    for (long long i = 0; i < total; i++) {
        long long due = start + gap * i;
        long long now = now_ns();
        if (now >= next_log) {
            /* Every call counted here has returned; the next starts after. */
            fprintf(log, "progress %lld %lld\n", now, i);
            fflush(log);
            next_log += 100000000LL;
        }
        if (fail_due >= 0 && now >= fail_due) {
            long long a = now_ns();
            hggcError_t r = hggcSetDevice(-1);
            long long b = now_ns();
            fprintf(log, "fail %lld %lld %d\n", a, b, (int)r);
            fflush(log);
            fail_due = -1;
        }
        if (due > now)
            sleep_until(due);
        hggcGetLastError();
    }
    fprintf(log, "progress %lld %lld\n", now_ns(), total);
    fprintf(log, "done\n");
    fclose(log);
    return 0;
}
