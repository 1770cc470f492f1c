/* Runtime calls with two hggcProfilerStart/Stop ranges (argument 0: none), a 4 s wait, then 'finished'. */
#include "hggc_runtime.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void calls(int n) {
    for (int i = 0; i < n; i++) {
        void *p;
        hggcMalloc(&p, 1024);
        hggcFree(p);
    }
}
int main(int argc, char **argv) {
    int with_range = argc < 2 || atoi(argv[1]);
    calls(3);
    if (with_range) hggcProfilerStart();
    calls(4);
    if (with_range) hggcProfilerStop();
    calls(5);
    if (with_range) { hggcProfilerStart(); calls(2); hggcProfilerStop(); }
    fflush(stdout);
    /* Long enough for asys to finish its report and the test to look
       (symbolizing with source lines takes a while on a loaded machine). */
    usleep(4000000);
    calls(1);
    printf("finished\n");
    return 0;
}
