// Throws and catches N exceptions (argv[1], default 10) and says how many.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10, caught = 0;
    for (long i = 0; i < n; i++) {
        try { throw std::runtime_error("boom"); } catch (const std::exception &) { caught++; }
    }
    printf("pid %d thrown %ld caught %ld\n", (int)getpid(), n, caught);
}
