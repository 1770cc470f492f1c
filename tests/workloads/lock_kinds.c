/* Each kind of lock waits once 20 ms for its holder, timed by itself; then a futex wait that is no lock's.
   The holder's 20 ms start once the waiter is about to call, so that a waiter slow to start (a loaded or
   emulated machine) still waits the whole time. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pi;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t b;
static sem_t s;
static int flag;
static int about_to_wait;
static const char *kind;
static long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
static struct timespec later(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 60;
    return t;
}
static void *waiter(void *a) {
    struct timespec t = later();
    void *object = 0;
    unsigned long size = 0;
    long start = now();
    __atomic_store_n(&about_to_wait, 1, __ATOMIC_SEQ_CST);
    if (!strcmp(kind, "pthread_mutex_lock")) { pthread_mutex_lock(&m); object = &m; size = sizeof m; pthread_mutex_unlock(&m); }
    else if (!strcmp(kind, "pthread_mutex_lock-pi")) { pthread_mutex_lock(&pi); object = &pi; size = sizeof pi; pthread_mutex_unlock(&pi); }
    else if (!strcmp(kind, "pthread_mutex_timedlock")) { pthread_mutex_timedlock(&m, &t); object = &m; size = sizeof m; pthread_mutex_unlock(&m); }
    else if (!strcmp(kind, "pthread_rwlock_rdlock")) { pthread_rwlock_rdlock(&rw); object = &rw; size = sizeof rw; pthread_rwlock_unlock(&rw); }
    else if (!strcmp(kind, "pthread_rwlock_wrlock")) { pthread_rwlock_wrlock(&rw); object = &rw; size = sizeof rw; pthread_rwlock_unlock(&rw); }
    else if (!strcmp(kind, "sem_wait")) { sem_wait(&s); object = &s; size = sizeof s; }
    else if (!strcmp(kind, "sem_timedwait")) { sem_timedwait(&s, &t); object = &s; size = sizeof s; }
    else if (!strcmp(kind, "pthread_barrier_wait")) { pthread_barrier_wait(&b); object = &b; size = sizeof b; }
    else if (!strcmp(kind, "pthread_cond_wait")) {
        pthread_mutex_lock(&cm);
        start = now();
        __atomic_store_n(&about_to_wait, 1, __ATOMIC_SEQ_CST);
        while (!flag) pthread_cond_wait(&c, &cm);
        object = &c;
        size = sizeof c;
        pthread_mutex_unlock(&cm);
    } else if (!strcmp(kind, "pthread_cond_timedwait")) {
        pthread_mutex_lock(&cm);
        start = now();
        __atomic_store_n(&about_to_wait, 1, __ATOMIC_SEQ_CST);
        while (!flag) pthread_cond_timedwait(&c, &cm, &t);
        object = &c;
        size = sizeof c;
        pthread_mutex_unlock(&cm);
    }
    printf("workload-wait %s %ld %lu %lu\n", kind, now() - start, (unsigned long)object, size);
    return 0;
}
static void *sleep_20_ms(void *a) {
    usleep(20000);
    return a;
}
/* Holds for 20 ms from the moment the waiter is about to call. */
static void hold(void) {
    while (!__atomic_load_n(&about_to_wait, __ATOMIC_SEQ_CST))
        usleep(100);
    sleep_20_ms(0);
}
int main(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&pi, &attr);
    pthread_barrier_init(&b, 0, 2);
    sem_init(&s, 0, 0);
    const char *kinds[] = {"pthread_mutex_lock", "pthread_mutex_lock-pi", "pthread_mutex_timedlock",
        "pthread_rwlock_rdlock", "pthread_rwlock_wrlock", "sem_wait", "sem_timedwait",
        "pthread_barrier_wait", "pthread_cond_wait", "pthread_cond_timedwait"};
    for (unsigned i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        pthread_t t;
        kind = kinds[i];
        flag = 0;
        about_to_wait = 0;
        if (!strcmp(kind, "pthread_mutex_lock") || !strcmp(kind, "pthread_mutex_timedlock")) {
            pthread_mutex_lock(&m);
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_mutex_unlock(&m);
        } else if (!strcmp(kind, "pthread_mutex_lock-pi")) {
            pthread_mutex_lock(&pi);
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_mutex_unlock(&pi);
        } else if (!strcmp(kind, "pthread_rwlock_rdlock")) {
            pthread_rwlock_wrlock(&rw);
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_rwlock_unlock(&rw);
        } else if (!strcmp(kind, "pthread_rwlock_wrlock")) {
            pthread_rwlock_rdlock(&rw);
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_rwlock_unlock(&rw);
        } else if (!strncmp(kind, "sem_", 4)) {
            pthread_create(&t, 0, waiter, 0);
            hold();
            sem_post(&s);
        } else if (!strcmp(kind, "pthread_barrier_wait")) {
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_barrier_wait(&b);
        } else {
            pthread_create(&t, 0, waiter, 0);
            hold();
            /* Signalled after the mutex is let go: the waiter re-locks it
               without waiting. */
            pthread_mutex_lock(&cm);
            flag = 1;
            pthread_mutex_unlock(&cm);
            pthread_cond_signal(&c);
        }
        pthread_join(t, 0);
    }
    /* pthread_join waits for a thread that sleeps 20 ms. Its stack is
       the program's own, so that the descriptor glibc puts at its top (and
       the futex word the join waits on in it) lies at an address no other
       thread had: glibc reuses the stacks of threads joined before. */
    static char join_stack[1 << 20] __attribute__((aligned(4096)));
    pthread_attr_t join_attr;
    pthread_attr_init(&join_attr);
    pthread_attr_setstack(&join_attr, join_stack, sizeof join_stack);
    pthread_t t;
    kind = "none";
    pthread_create(&t, &join_attr, sleep_20_ms, 0);
    long start = now();
    pthread_join(t, 0);
    printf("workload-wait pthread_join %ld %lu %lu\n", now() - start,
           (unsigned long)join_stack, (unsigned long)sizeof join_stack);
    /* The program's own futex wait, times out after 20 ms: no lock's. */
    static int word;
    struct timespec twenty = {0, 20000000};
    syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &twenty, 0, 0);
    printf("workload-futex %lu\n", (unsigned long)&word);
    return 0;
}
