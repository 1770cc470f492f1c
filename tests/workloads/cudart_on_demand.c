/* The CUDA runtime on demand, without a GPU or driver, in a process to
 * attach to. Prints "ready PID"; on "calls N" makes N rounds of
 * (cudaGetDeviceCount, cudaGetLastError) and prints "done N <last
 * cudaGetDeviceCount result>"; on "quit" exits 0. */
#include <stdio.h>
#include <unistd.h>
typedef int cudaError_t;
cudaError_t cudaGetDeviceCount(int *);
cudaError_t cudaGetLastError(void);

int main(void) {
    printf("ready %d\n", getpid());
    fflush(stdout);
    char line[64];
    int n;
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "calls %d", &n) == 1) {
            int count = 0;
            cudaError_t e = 0;
            for (int i = 0; i < n; i++) {
                e = cudaGetDeviceCount(&count);
                cudaGetLastError();
            }
            printf("done %d %d\n", n, (int)e);
            fflush(stdout);
        } else {
            break;
        }
    }
    return 0;
}
