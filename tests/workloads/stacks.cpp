// Calls hggcStreamSynchronize three frames down (C++, a namespace); CALL-* mark each call's line.
#include "hggc_runtime.h"
#include <stdio.h>
namespace app {
__attribute__((noinline)) int inner(hggcStream_t s) {
    int r = hggcStreamSynchronize(s); // CALL-INNER
    __asm__ volatile("");
    return r + 1;
}
__attribute__((noinline)) int middle(hggcStream_t s) {
    int r = inner(s); // CALL-MIDDLE
    __asm__ volatile("");
    return r * 3;
}
}
__attribute__((noinline)) int outer(hggcStream_t s) {
    int r = app::middle(s); // CALL-OUTER
    __asm__ volatile("");
    return r - 2;
}
int main(void) {
    hggcStream_t s;
    hggcStreamCreate(&s);
    int r = outer(s); // CALL-MAIN
    printf("r=%d\n", r);
    return 0;
}
