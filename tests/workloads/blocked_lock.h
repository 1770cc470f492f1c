/* The OS calls both applications of tests/tests/combinations.rs make at
 * their end: a thread holds a mutex 30 ms (one sleep), and the caller's lock
 * of it blocks meanwhile (one blocked lock), each printed. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int held;

static void *holder(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    held = 1;
    usleep(30000);
    printf("sleep\n");
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void block_on_a_held_lock(void) {
    pthread_t t;
    pthread_create(&t, NULL, holder, NULL);
    while (!held)
        sched_yield();
    pthread_mutex_lock(&lock);
    printf("blocked-lock\n");
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
}
