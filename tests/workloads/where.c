/* Writes its pid and pthread_mutex_lock's address to the file argv[1], then waits until it is removed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "%d %lu\n", getpid(), (unsigned long)dlsym(RTLD_DEFAULT, "pthread_mutex_lock"));
    fclose(f);
    rename(tmp, argv[1]);
    while (access(argv[1], F_OK) == 0) usleep(10000);
    return 0;
}
