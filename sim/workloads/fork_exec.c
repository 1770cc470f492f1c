/* A process tree: the parent makes calls on two threads, forks a child that
 * makes calls and then execs train_step. Usage: fork_exec TRAIN_STEP_PATH */
#include "hggc_runtime.h"
#include "workload_common.h"
#include <sys/wait.h>
#include <unistd.h>

static void some_calls(int n) {
    for (int i = 0; i < n; i++) {
        void *d;
        CHECK(CALL(hggcMalloc, &d, 1024));
        CHECK(CALL(hggcFree, d));
    }
}

static void *thread_main(void *arg) {
    some_calls(*(int *)arg);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fork_exec TRAIN_STEP_PATH\n");
        return 2;
    }
    some_calls(3);
    pid_t child = fork();
    if (child == 0) {
        some_calls(5);
        wl_report("fork_exec-child");
        execl(argv[1], argv[1], "2", "1024", (char *)NULL);
        _exit(127);
    }
    int n = 7;
    pthread_t t;
    pthread_create(&t, NULL, thread_main, &n);
    pthread_join(t, NULL);
    int status = 0;
    waitpid(child, &status, 0);
    wl_report("fork_exec-parent");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
