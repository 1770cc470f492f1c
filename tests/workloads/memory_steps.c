/* Holds 0, 64, 128 and 256 MiB in turn, then a child holds 32 MiB; logs each hold to the file argv[1]. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void hold(FILE *f, const char *what, long mib, int ms) {
    long long a = now();
    usleep(ms * 1000);
    long long b = now();
    fprintf(f, "%s %ld %lld %lld %d\n", what, mib, a, b, (int)getpid());
    fflush(f);
}

static char *take(long mib, int fill) {
    size_t n = (size_t)mib << 20;
    char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); _exit(2); }
    memset(p, fill, n);
    return p;
}

int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "w");
    if (!f) return 2;
    hold(f, "phase", 0, 700);
    long sizes[] = {64, 128, 256};
    for (int i = 0; i < 3; i++) {
        char *p = take(sizes[i], i + 1);
        hold(f, "phase", sizes[i], 800);
        munmap(p, (size_t)sizes[i] << 20);
    }
    pid_t c = fork();
    if (c == 0) {
        take(32, 7);
        hold(f, "child", 32, 700);
        _exit(0);
    }
    waitpid(c, 0, 0);
    hold(f, "phase", 0, 300);
    return 0;
}
