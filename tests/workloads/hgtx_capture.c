/* Runtime calls in and out of hgtx ranges that the capture tests open and close collection with. */
#include "hggc_runtime.h"
#include "hgtx.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void calls(int n) {
    for (int i = 0; i < n; i++) {
        void *p;
        hggcMalloc(&p, 1024);
        hggcFree(p);
    }
}
/* The names are literals that nothing has read before their first call: a
 * uprobe cannot fault their page in at entry, so asys reads them again at
 * the call's return. */
int main(void) {
    hgtxDomainHandle_t net = hgtxDomainCreateA("net");
    calls(2);
    hgtxRangePushA("Setup"); calls(1); hgtxRangePop();
    for (int k = 0; k < 3; k++) {
        hgtxRangePushA("Outer");
        calls(1);
        hgtxRangePushA("Step");
        calls(k + 2);
        hgtxRangePushA("Inner"); calls(1); hgtxRangePop();
        hgtxRangePop();
        calls(1);
        hgtxRangePop();
    }
    hgtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = HGTX_VERSION;
    a.size = HGTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = HGTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "Step";
    hgtxDomainRangePushEx(net, &a); calls(5); hgtxDomainRangePop(net);
    hgtxRangeId_t id = hgtxRangeStartA("Load"); calls(3); hgtxRangeEnd(id);
    fflush(stdout);
    /* Long enough for asys to end it first when the range's end should. */
    const char *ms = getenv("END_SLEEP_MS");
    usleep((ms ? atoi(ms) : 0) * 1000);
    calls(1);
    printf("finished\n");
    return 0;
}
