/* Why threads waited (tests/tests/waits.rs), with its own account of each
 * wait:
 * 1. Lock contention: the main thread ("holder") holds a mutex for a known
 *    time, round after round; the thread "waiter" blocks on it (a futex
 *    wait: sleeping, S) until the holder releases it, so the holder wakes
 *    it. The holder releases only once /proc says the waiter sleeps (which
 *    it says from when the waiter marks itself sleeping, a moment before
 *    it leaves the CPU: the waiter counts the rounds it slept in by its own
 *    voluntary switches, getrusage).
 * 2. vfork: the parent waits uninterruptibly (D: a killable completion)
 *    until its child, which sleeps a known time first, exits; the child
 *    wakes it. On a busy machine the parent may be preempted before it
 *    sleeps and find the child gone when it runs again: it counts the
 *    vforks in which it slept by its own voluntary switches (getrusage).
 * 3. System calls: read()s of /dev/zero for a while (samples in the
 *    kernel).
 * Prints one line per part, with the times it measured itself. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 12
#define VFORKS 5
#define VFORK_SLEEP_NS 30000000L

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int go = -1, done = -1;
static atomic_long waiter_tid;
static long long wait_ns[ROUNDS];
static int slept[ROUNDS];

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The state letter of one of this process's threads, from /proc. */
static char state_of(long tid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] && p[2] ? p[2] : '?';
}

static void *waiter(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "waiter");
    atomic_store(&waiter_tid, syscall(SYS_gettid));
    for (int i = 0; i < ROUNDS; i++) {
        while (atomic_load(&go) < i)
            ;
        struct rusage before, after;
        getrusage(RUSAGE_THREAD, &before);
        long long t0 = now();
        pthread_mutex_lock(&lock);
        wait_ns[i] = now() - t0;
        getrusage(RUSAGE_THREAD, &after);
        slept[i] = after.ru_nvcsw > before.ru_nvcsw;
        pthread_mutex_unlock(&lock);
        atomic_store(&done, i);
    }
    return NULL;
}

int main(void) {
    pthread_setname_np(pthread_self(), "holder");
    long holder = syscall(SYS_gettid);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    while (atomic_load(&waiter_tid) == 0)
        ;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&lock);
        atomic_store(&go, i);
        long long until = now() + (5 + 2 * i) * 1000000LL;
        /* Hold the lock for the round's time, and until the waiter sleeps
         * on it (then its wait is a futex wait that this thread ends). */
        while (now() < until || state_of(atomic_load(&waiter_tid)) != 'S')
            ;
        pthread_mutex_unlock(&lock);
        while (atomic_load(&done) < i)
            ;
    }
    pthread_join(t, NULL);
    /* The rounds in which the waiter slept: their number, total and max. */
    long long total = 0, max = 0;
    int waits = 0;
    for (int i = 0; i < ROUNDS; i++) {
        if (!slept[i])
            continue;
        waits++;
        total += wait_ns[i];
        if (wait_ns[i] > max)
            max = wait_ns[i];
    }
    /* Each round: slept or not, and the wait (for a failing test's message). */
    printf("lock_rounds");
    for (int i = 0; i < ROUNDS; i++)
        printf(" %d:%lld", slept[i], wait_ns[i]);
    printf("\n");
    printf("lock holder_tid %ld waiter_tid %ld rounds %d waits %d wait_total_ns %lld wait_max_ns "
           "%lld\n",
           holder, atomic_load(&waiter_tid), ROUNDS, waits, total, max);

    long long vtotal = 0, vmax = 0, slept_total = 0;
    int slept = 0;
    printf("vfork parent_tid %ld vforks %d children", holder, VFORKS);
    for (int i = 0; i < VFORKS; i++) {
        struct rusage before, after;
        getrusage(RUSAGE_THREAD, &before);
        long long t0 = now();
        pid_t child = vfork();
        if (child == 0) {
            /* Only system calls here: the child runs on the parent's stack. */
            struct timespec d = {0, VFORK_SLEEP_NS};
            syscall(SYS_nanosleep, &d, NULL);
            syscall(SYS_exit, 0);
        }
        long long d = now() - t0;
        getrusage(RUSAGE_THREAD, &after);
        if (after.ru_nvcsw > before.ru_nvcsw) {
            slept++;
            slept_total += d;
        }
        vtotal += d;
        if (d > vmax)
            vmax = d;
        printf(" %d", child);
    }
    while (wait(NULL) > 0)
        ;
    printf(" vfork_total_ns %lld vfork_max_ns %lld slept %d slept_total_ns %lld\n", vtotal, vmax,
           slept, slept_total);

    static char buf[1 << 20];
    int fd = open("/dev/zero", O_RDONLY);
    long long end = now() + 400000000LL;
    long reads = 0;
    while (now() < end) {
        if (read(fd, buf, sizeof buf) != sizeof buf)
            return 1;
        reads++;
    }
    printf("syscalls reads %ld\n", reads);
    return 0;
}
