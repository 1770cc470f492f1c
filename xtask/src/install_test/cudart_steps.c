/* Built inside the install test's root file system, against the CUDA
 * runtime of NVIDIA's PyPI wheel (no GPU or driver needed): COUNT calls of
 * cudaRuntimeGetVersion, and the count it made on stdout. */
#include <stdio.h>
#include <stdlib.h>

int cudaRuntimeGetVersion(int *);

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 100, made = 0, v = 0;
    for (int i = 0; i < count; i++)
        if (cudaRuntimeGetVersion(&v) == 0)
            made++;
    printf("made cudaRuntimeGetVersion %d\n", made);
    return made == count ? 0 : 1;
}
