/* hgtx ranges on demand, driven over stdin: 'range NAME N', 'profiler N', 'quit'; answers 'done'. */
#include "hggc_runtime.h"
#include "hgtx.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static void calls(int n) {
    for (int i = 0; i < n; i++) {
        void *p;
        hggcMalloc(&p, 1024);
        hggcFree(p);
    }
}
int main(void) {
    char line[128], name[64];
    int n;
    calls(1);
    printf("ready %d\n", getpid());
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "range %63s %d", name, &n) == 2) {
            hgtxRangePushA(name); calls(n); hgtxRangePop();
        } else if (sscanf(line, "profiler %d", &n) == 1) {
            hggcProfilerStart(); calls(n); hggcProfilerStop();
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        }
        printf("done\n");
        fflush(stdout);
    }
    return 0;
}
