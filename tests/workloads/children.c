/* A lock that waits 20 ms in a forked child and in a child that executed the program anew. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static sem_t held;
static void *holder(void *a) {
    pthread_mutex_lock(&m);
    sem_post(&held);
    usleep(20000);
    pthread_mutex_unlock(&m);
    return 0;
}
static void contend(void) {
    pthread_t t;
    sem_init(&held, 0, 0);
    pthread_create(&t, 0, holder, 0);
    sem_wait(&held);
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    pthread_join(t, 0);
    printf("workload-contended %d\n", getpid());
    fflush(stdout);
}
int main(int argc, char **argv) {
    if (argc > 1) { contend(); return 0; }
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) { contend(); _exit(0); }
    waitpid(c, 0, 0);
    pid_t e = fork();
    if (e == 0) { execl(argv[0], argv[0], "again", (char *)0); _exit(1); }
    waitpid(e, 0, 0);
    return 0;
}
