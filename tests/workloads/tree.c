/* A tree of processes driven over stdin: 'burst N', 'fork', 'quit' (see tests/tests/attach_tree.rs). */
#define _GNU_SOURCE
#include "hggc_runtime.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct kid { pid_t pid; FILE *to, *from; };
static struct kid kids[16];
static int nkids, my_index;

static long long now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

volatile unsigned long sink;
/* Burns `ns` of this thread's CPU time; returns what it burnt. */
__attribute__((noinline)) long long spin(long long ns) {
    long long start = now(CLOCK_THREAD_CPUTIME_ID), end = start + ns;
    unsigned long x = 1;
    while (now(CLOCK_THREAD_CPUTIME_ID) < end)
        for (int i = 0; i < 200000; i++)
            x = x * 6364136223846793005UL + i;
    sink = x;
    return now(CLOCK_THREAD_CPUTIME_ID) - start;
}

static long calls(int n) {
    for (int i = 0; i < n; i++) {
        void *p;
        if (hggcMalloc(&p, 1024) != 0 || hggcFree(p) != 0) {
            fprintf(stderr, "tree: a call failed\n");
            exit(2);
        }
    }
    return 2L * n;
}

static void serve(FILE *in, FILE *out);

static void spawn(int index, int grandkids) {
    int down[2], up[2];
    if (pipe(down) || pipe(up))
        exit(3);
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        for (int i = 0; i < nkids; i++) {
            fclose(kids[i].to);
            fclose(kids[i].from);
        }
        nkids = 0;
        close(down[1]);
        close(up[0]);
        my_index = index;
        for (int g = 0; g < grandkids; g++)
            spawn(10 + g, 0);
        FILE *out = fdopen(up[1], "w");
        /* "up" and the pids of this subtree. */
        fprintf(out, "up %d", getpid());
        for (int i = 0; i < nkids; i++) {
            char line[256];
            if (!fgets(line, sizeof line, kids[i].from))
                exit(4);
            line[strcspn(line, "\n")] = 0;
            fprintf(out, " %s", line + 3);
        }
        fprintf(out, "\n");
        fflush(out);
        serve(fdopen(down[0], "r"), out);
        _exit(0);
    }
    close(down[0]);
    close(up[1]);
    kids[nkids++] = (struct kid){p, fdopen(down[1], "w"), fdopen(up[0], "r")};
}

static void serve(FILE *in, FILE *out) {
    char line[4096];
    int n;
    while (fgets(line, sizeof line, in)) {
        if (sscanf(line, "burst %d", &n) == 1) {
            for (int i = 0; i < nkids; i++) {
                fprintf(kids[i].to, "burst %d\n", n);
                fflush(kids[i].to);
            }
            long made = calls((my_index + 1) * n);
            long long cpu = spin(n * 30000000LL);
            char reply[4096];
            int at = snprintf(reply, sizeof reply, "%d:%ld:%lld", getpid(), made, cpu);
            for (int i = 0; i < nkids; i++) {
                char sub[4096];
                if (!fgets(sub, sizeof sub, kids[i].from))
                    exit(5);
                sub[strcspn(sub, "\n")] = 0;
                at += snprintf(reply + at, sizeof reply - at, " %s", sub + 5);
            }
            fprintf(out, "done %s\n", reply);
        } else if (strncmp(line, "fork", 4) == 0) {
            spawn(nkids + 1, 0);
            char up[256];
            if (!fgets(up, sizeof up, kids[nkids - 1].from))
                exit(6);
            fprintf(out, "child %d\n", kids[nkids - 1].pid);
        } else {
            break;
        }
        fflush(out);
    }
    for (int i = 0; i < nkids; i++) {
        fclose(kids[i].to);
        int status = 0;
        if (waitpid(kids[i].pid, &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            exit(7);
    }
}

int main(int argc, char **argv) {
    int k = argc > 1 ? atoi(argv[1]) : 2, g = argc > 2 ? atoi(argv[2]) : 0;
    void *p;
    if (hggcMalloc(&p, 64) != 0 || hggcFree(p) != 0)
        return 2;
    for (int i = 0; i < k; i++)
        spawn(i + 1, i == 0 ? g : 0);
    printf("ready %d", getpid());
    for (int i = 0; i < nkids; i++) {
        char line[256];
        if (!fgets(line, sizeof line, kids[i].from))
            return 4;
        line[strcspn(line, "\n")] = 0;
        printf(" %s", line + 3);
    }
    printf("\n");
    fflush(stdout);
    serve(stdin, stdout);
    return 0;
}
