/* Locks, condition waits, sleeps, 777-byte pipe I/O and a forked child's sleep; prints how many of each. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static sem_t held;
static int flag;
static long locks, cond_waits, sleeps;
static void lock(void) { pthread_mutex_lock(&m); __atomic_add_fetch(&locks, 1, __ATOMIC_RELAXED); }
static void nap(unsigned us) { usleep(us); __atomic_add_fetch(&sleeps, 1, __ATOMIC_RELAXED); }
static void *holder(void *a) { lock(); sem_post(&held); nap(30000); pthread_mutex_unlock(&m); return 0; }
static void *signaler(void *a) {
    nap(10000);
    lock(); flag = 1; pthread_cond_signal(&c); pthread_mutex_unlock(&m);
    return 0;
}
int main(void) {
    sem_init(&held, 0, 0);
    /* Uncontended: never waits. */
    for (int i = 0; i < 2000; i++) { lock(); pthread_mutex_unlock(&m); }
    /* Contended: blocks until the holder lets go, 30 ms later. */
    pthread_t t;
    pthread_create(&t, 0, holder, 0);
    sem_wait(&held);
    lock(); pthread_mutex_unlock(&m);
    pthread_join(t, 0);
    /* A condition wait, which re-locks the mutex inside. */
    lock();
    pthread_create(&t, 0, signaler, 0);
    while (!flag) { cond_waits++; pthread_cond_wait(&c, &m); }
    pthread_mutex_unlock(&m);
    pthread_join(t, 0);
    for (int i = 0; i < 4; i++) nap(1000);
    int fds[2];
    if (pipe(fds) != 0) return 1;
    char buf[777] = {0};
    long writes = 0, reads = 0;
    for (int i = 0; i < 9; i++) writes += write(fds[1], buf, sizeof buf) == sizeof buf;
    for (int i = 0; i < 9; i++) reads += read(fds[0], buf, sizeof buf) == sizeof buf;
    pid_t child = fork();
    if (child == 0) { usleep(40000); _exit(0); }
    int status;
    waitpid(child, &status, 0);
    printf("workload-mutex %lu\n", (unsigned long)&m);
    printf("workload-cond %lu\n", (unsigned long)&c);
    printf("workload-calls pthread_mutex_lock %ld\n", locks);
    printf("workload-calls pthread_cond_wait %ld\n", cond_waits);
    printf("workload-calls clock_nanosleep %ld\n", sleeps);
    printf("workload-calls write %ld\n", writes);
    printf("workload-calls read %ld\n", reads);
    return 0;
}
