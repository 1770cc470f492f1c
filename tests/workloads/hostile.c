/* Takes the process, thread, range and JIT symbol names given in hex and holds each, printing what it holds. */
#define _GNU_SOURCE
#include "hgtx.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static char *unhex(const char *h) {
    size_t n = strlen(h) / 2;
    char *s = calloc(n + 1, 1);
    for (size_t i = 0; i < n; i++)
        sscanf(h + 2 * i, "%2hhx", (unsigned char *)&s[i]);
    return s;
}

static void say(const char *what, long id, const char *a, const char *b) {
    pthread_mutex_lock(&out);
    printf("%s %d %ld ", what, getpid(), id);
    for (const char *s = a; *s; s++) printf("%02x", (unsigned char)*s);
    if (b) {
        printf(" ");
        for (const char *s = b; *s; s++) printf("%02x", (unsigned char)*s);
    }
    printf("\n");
    fflush(stdout);
    pthread_mutex_unlock(&out);
}

/* The calling thread's name as the kernel holds it, said; then sleeps under it. */
static void named(const char *what) {
    long tid = syscall(SYS_gettid);
    char path[64], got[64] = {0};
    snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(got, sizeof got, f)) { perror(path); exit(1); }
    fclose(f);
    size_t n = strlen(got);
    if (n && got[n - 1] == '\n') got[n - 1] = 0;
    say(what, tid, got, NULL);
    for (int i = 0; i < 20; i++) usleep(2000);
}

static void *thread_main(void *name) {
    int rc = pthread_setname_np(pthread_self(), name);
    if (rc) { fprintf(stderr, "pthread_setname_np: %d\n", rc); exit(1); }
    named("thread");
    return NULL;
}

static hgtxEventAttributes_t ascii(const char *msg) {
    hgtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = HGTX_VERSION;
    a.size = HGTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = HGTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    return a;
}

static void jit(const char *name) {
    static const unsigned char code[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    memcpy(p, code, sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    fprintf(f, "%lx %zx %s\n", (unsigned long)p, sizeof code, name);
    fclose(f);
    say("jit", (long)(unsigned long)p, name, NULL);
    ((void (*)(unsigned long))p)(1000000000UL);
}

int main(int argc, char **argv) {
    printf("uid %d\n", (int)getuid());
    pthread_t threads[16];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        char *v = argv[i] + 2;
        switch (argv[i][0]) {
        case 'p':
            if (prctl(PR_SET_NAME, unhex(v))) { perror("prctl"); return 1; }
            named("process");
            break;
        case 't':
            if (n == 16 || pthread_create(&threads[n++], NULL, thread_main, unhex(v))) return 1;
            break;
        case 'r':
            hgtxRangePushA(unhex(v));
            usleep(1000);
            hgtxRangePop();
            say("range", 0, unhex(v), NULL);
            break;
        case 'd': {
            char *sep = strchr(v, ':');
            *sep = 0;
            char *domain = unhex(v), *name = unhex(sep + 1);
            hgtxDomainHandle_t d = hgtxDomainCreateA(domain);
            hgtxEventAttributes_t a = ascii(name);
            hgtxDomainRangePushEx(d, &a);
            usleep(1000);
            hgtxDomainRangePop(d);
            say("domain", 0, name, domain);
            break;
        }
        case 'j':
            jit(unhex(v));
            break;
        }
    }
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    return 0;
}
