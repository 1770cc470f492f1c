/* What `cargo xtask soak` leaves running under `asys profile --always-on`:
 * everything that could make a long recording grow, at once, with its own
 * log to check each flight report against.
 * Usage: soak SECONDS PROGRESS_FILE [RATE]   (soak --child: see below)
 * For SECONDS:
 * - the main thread makes RATE (2,000 by default) hggcGetLastError calls a
 *   second, paced by sleeping, and every 100 ms appends "progress T N" to
 *   PROGRESS_FILE, as steady_calls does: at CLOCK_MONOTONIC T (ns), N of
 *   those calls had returned, each later one starting after T. No other
 *   thread or process calls hggcGetLastError, so a report's count of them
 *   is this thread's alone;
 * - a stream thread launches a kernel and a memset 100 times a second;
 * - a new thread every 50 ms makes a few calls (malloc, memset, free) and
 *   ends: thread ids keep coming and going;
 * - every second a new hgtx range name ("range-N"), so the string tables
 *   grow, and a dlopen/dlclose of libsoak_plugin.so (beside the runtime);
 * - every 3 s a fork whose child exits at once, and every third of them a
 *   fork + exec of this program as "soak --child" (a short process that
 *   loads the runtime, makes a few calls and exits).
 * At the end it appends "totals THREADS FORKS EXECS DLOPENS RANGES" and
 * "done". */
#include "hggc_runtime.h"
#include "hgtx.h"
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static void check(hggcError_t r, const char *what) {
    if (r != hggcSuccess) {
        fprintf(stderr, "soak: %s failed with %d\n", what, (int)r);
        exit(1);
    }
}

static atomic_int g_stop;
static long long g_threads, g_forks, g_execs, g_dlopens, g_ranges;
static const char *g_self;

void soak_kernel(void **args) {
    int *v = args[0];
    v[0] += 1;
}

/* Kernels and memsets on a stream of its own, 100 of each a second. */
static void *stream_thread(void *arg) {
    (void)arg;
    hggcStream_t s;
    void *d;
    check(hggcStreamCreate(&s), "hggcStreamCreate");
    check(hggcMalloc(&d, 4096), "hggcMalloc");
    void *args[1] = {d};
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    long long due = now_ns();
    while (!atomic_load(&g_stop)) {
        check(hggcLaunchKernel((const void *)soak_kernel, grid, block, args, 0, s),
              "hggcLaunchKernel");
        check(hggcMemsetAsync(d, 0, 256, s), "hggcMemsetAsync");
        check(hggcStreamSynchronize(s), "hggcStreamSynchronize");
        due += 10000000LL;
        sleep_until(due);
    }
    check(hggcFree(d), "hggcFree");
    check(hggcStreamDestroy(s), "hggcStreamDestroy");
    return NULL;
}

static void *short_thread(void *arg) {
    (void)arg;
    void *d;
    int dev;
    check(hggcGetDevice(&dev), "hggcGetDevice");
    check(hggcMalloc(&d, 1024), "hggcMalloc");
    check(hggcMemset(d, 0, 1024), "hggcMemset");
    check(hggcFree(d), "hggcFree");
    return NULL;
}

/* A new thread every 50 ms, each ended before the next. */
static void *thread_spawner(void *arg) {
    (void)arg;
    long long due = now_ns();
    while (!atomic_load(&g_stop)) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_thread, NULL) != 0) {
            perror("soak: pthread_create");
            exit(1);
        }
        pthread_join(t, NULL);
        g_threads++;
        due += 50000000LL;
        sleep_until(due);
    }
    return NULL;
}

/* Each second: a range with a name never used before, and the plugin
 * loaded, called and unloaded. */
static void *ranges_and_plugin(void *arg) {
    (void)arg;
    long long due = now_ns();
    while (!atomic_load(&g_stop)) {
        char name[32];
        snprintf(name, sizeof name, "range-%lld", g_ranges);
        hgtxRangePushA(name);
        void *h = dlopen("libsoak_plugin.so", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "soak: %s\n", dlerror());
            exit(1);
        }
        int (*value)(int) = (int (*)(int))dlsym(h, "soak_plugin_value");
        if (!value || value(20) != 41) {
            fprintf(stderr, "soak: soak_plugin_value is missing or wrong\n");
            exit(1);
        }
        dlclose(h);
        hgtxRangePop();
        g_ranges++;
        g_dlopens++;
        due += 1000000000LL;
        sleep_until(due);
    }
    return NULL;
}

/* Every 3 s a fork; every third child execs "soak --child" instead of
 * exiting at once. */
static void *forker(void *arg) {
    (void)arg;
    long long due = now_ns();
    while (!atomic_load(&g_stop)) {
        int exec = g_forks % 3 == 2;
        pid_t p = fork();
        if (p < 0) {
            perror("soak: fork");
            exit(1);
        }
        if (p == 0) {
            /* Only async-signal-safe calls in a multi-threaded parent's child. */
            if (exec) {
                char *argv[] = {(char *)g_self, "--child", NULL};
                execv(g_self, argv);
            }
            _exit(exec ? 127 : 0);
        }
        int status;
        if (waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "soak: child %d ended with status %d\n", (int)p, status);
            exit(1);
        }
        g_forks++;
        g_execs += exec;
        due += 3000000000LL;
        sleep_until(due);
    }
    return NULL;
}

/* The exec'd child: a process that loads the runtime, makes a few calls
 * in a range, and exits. */
static int child(void) {
    int dev;
    hgtxRangePushA("soak-child");
    check(hggcGetDevice(&dev), "hggcGetDevice");
    void *d;
    check(hggcMalloc(&d, 256), "hggcMalloc");
    check(hggcMemset(d, 1, 256), "hggcMemset");
    check(hggcFree(d), "hggcFree");
    hgtxRangePop();
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child();
    if (argc < 3) {
        fprintf(stderr, "usage: soak SECONDS PROGRESS_FILE [RATE]\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    double rate = argc > 3 ? atof(argv[3]) : 2000;
    if (!(rate > 0) || !(seconds > 0)) {
        fprintf(stderr, "soak: bad arguments\n");
        return 2;
    }
    /* The exec'd children run this same file. */
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("soak: /proc/self/exe");
        return 2;
    }
    self[n] = 0;
    g_self = self;
    FILE *log = fopen(argv[2], "w");
    if (!log) {
        perror(argv[2]);
        return 2;
    }
    long long start = now_ns();
    long long gap = (long long)(1e9 / rate);
    long long total = (long long)(rate * seconds);
    long long next_log = start + 100000000LL;
    fprintf(log, "start %lld\n", start);
    fflush(log);
    pthread_t helpers[4];
    void *(*bodies[4])(void *) = {stream_thread, thread_spawner, ranges_and_plugin, forker};
    for (int i = 0; i < 4; i++)
        if (pthread_create(&helpers[i], NULL, bodies[i], NULL) != 0) {
            perror("soak: pthread_create");
            return 1;
        }
    for (long long i = 0; i < total; i++) {
        long long due = start + gap * i;
        long long now = now_ns();
        if (now >= next_log) {
            /* Every call counted here has returned; the next starts after. */
            fprintf(log, "progress %lld %lld\n", now, i);
            fflush(log);
            next_log += 100000000LL;
        }
        if (due > now)
            sleep_until(due);
        hggcGetLastError();
    }
    fprintf(log, "progress %lld %lld\n", now_ns(), total);
    fflush(log);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(helpers[i], NULL);
    fprintf(log, "totals %lld %lld %lld %lld %lld\n", g_threads, g_forks, g_execs, g_dlopens,
            g_ranges);
    fprintf(log, "done\n");
    fclose(log);
    return 0;
}
