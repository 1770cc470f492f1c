/* Shared by the sample workloads: every runtime call goes through CALL, which
 * counts it, so a workload can print what it made and a test can compare. */
#ifndef WORKLOAD_COMMON_H
#define WORKLOAD_COMMON_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_APIS 64
static struct { const char *name; unsigned long n; } wl_counts[MAX_APIS];
static pthread_mutex_t wl_lock = PTHREAD_MUTEX_INITIALIZER;

static void wl_count(const char *name) {
    pthread_mutex_lock(&wl_lock);
    int i = 0;
    for (; i < MAX_APIS && wl_counts[i].name; i++)
        if (strcmp(wl_counts[i].name, name) == 0)
            break;
    if (i < MAX_APIS) {
        wl_counts[i].name = name;
        wl_counts[i].n++;
    }
    pthread_mutex_unlock(&wl_lock);
}

#define CALL(fn, ...) (wl_count(#fn), fn(__VA_ARGS__))
#define CHECK(expr)                                                                  \
    do {                                                                             \
        int rc_ = (int)(expr);                                                       \
        if (rc_ != 0) {                                                              \
            fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #expr, rc_); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

/* Prints "workload-calls NAME COUNT" lines, sorted by name, to stdout. */
static void wl_report(const char *who) {
    pthread_mutex_lock(&wl_lock);
    int n = 0;
    while (n < MAX_APIS && wl_counts[n].name)
        n++;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(wl_counts[j - 1].name, wl_counts[j].name) > 0; j--) {
            __typeof__(wl_counts[0]) t = wl_counts[j];
            wl_counts[j] = wl_counts[j - 1];
            wl_counts[j - 1] = t;
        }
    printf("%s: runtime calls made\n", who);
    for (int i = 0; i < n; i++)
        printf("workload-calls %s %lu\n", wl_counts[i].name, wl_counts[i].n);
    fflush(stdout);
    pthread_mutex_unlock(&wl_lock);
}
#endif
