/* The hggc application of tests/tests/combinations.rs, on the simulated
 * runtime: hggc calls inside hgtx ranges, sleeps and a blocked mutex, each
 * printed as cuda_app.c prints its own. */
#include "hggc_runtime.h"
#include "hgtx.h"
#include "tally.h"
#include "blocked_lock.h"
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    int n = 0;
    void *p = NULL;
    for (int i = 0; i < steps; i++) {
        CALL_INT("hgtxRangePushA", hgtxRangePushA("sim-step"));
        printf("range sim-step\n");
        CALL_INT("hggcGetDeviceCount", hggcGetDeviceCount(&n));
        CALL_INT("hggcMalloc", hggcMalloc(&p, 4096));
        CALL_INT("hggcFree", hggcFree(p));
        usleep(2000);
        printf("sleep\n");
        CALL_INT("hgtxRangePop", hgtxRangePop());
    }
    block_on_a_held_lock();
    fflush(stdout);
    return 0;
}
