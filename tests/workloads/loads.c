/* Loads and unloads the library argv[1] for argv[3] seconds, then writes 'done N' to the file argv[2]. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    struct timespec a, b;
    long n = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        void *h = dlopen(argv[1], RTLD_NOW);
        if (h)
            dlclose(h);
        n++;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while (b.tv_sec - a.tv_sec < atoi(argv[3]));
    FILE *f = fopen(argv[2], "w");
    fprintf(f, "done %ld\n", n);
    fclose(f);
    return 0;
}
