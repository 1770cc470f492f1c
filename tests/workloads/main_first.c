/* The main thread leaves by pthread_exit; a thread calls 300 ms later and exits the process; prints its tally. */
#include "hggc_runtime.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void calls(int n) {
    for (int i = 0; i < n; i++) {
        void *d;
        if (hggcMalloc(&d, 64) != 0 || hggcFree(d) != 0) _exit(3);
    }
}
static void *late(void *arg) {
    (void)arg;
    usleep(300000);
    calls(5);
    printf("late thread made 10 calls\n");
    fflush(stdout);
    exit(0);
}
int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, late, NULL);
    calls(1);
    printf("main thread made 2 calls\n");
    fflush(stdout);
    pthread_exit(NULL);
}
