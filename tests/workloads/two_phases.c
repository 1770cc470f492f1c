/* 5 alloc/free pairs, 1.5 s asleep, then 7 more. */
#include "hggc_runtime.h"
#include <stdio.h>
#include <unistd.h>
static void calls(int n) {
    for (int i = 0; i < n; i++) {
        void *p;
        hggcMalloc(&p, 4096);
        hggcFree(p);
    }
}
int main(void) {
    calls(5);
    usleep(1500000);
    calls(7);
    printf("made 5 then 7 alloc/free pairs\n");
    return 0;
}
