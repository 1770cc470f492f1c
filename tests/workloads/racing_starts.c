/* 4 threads, 200 rounds: all call hggcProfilerStart together, then hggcProfilerStop together. */
#include "hggc_runtime.h"
#include <pthread.h>
#include <stdio.h>
#define THREADS 4
#define ROUNDS 200
static pthread_barrier_t barrier;
static void *run(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&barrier);
        hggcProfilerStart();
        pthread_barrier_wait(&barrier);
        hggcProfilerStop();
    }
    return NULL;
}
int main(void) {
    pthread_barrier_init(&barrier, NULL, THREADS);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, run, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("rounds %d\n", ROUNDS);
    return 0;
}
