/* A sleep stopped and continued, then a sleep cut short by a signal handler (EINTR). */
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
static void on_alarm(int sig) { (void)sig; }
int main(void) {
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        usleep(100000);
        kill(parent, SIGSTOP);
        usleep(50000);
        kill(parent, SIGCONT);
        _exit(0);
    }
    int first = usleep(300000);
    waitpid(child, 0, 0);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, 0);
    struct itimerval t = {{0, 0}, {0, 50000}};
    setitimer(ITIMER_REAL, &t, 0);
    int second = usleep(300000);
    printf("results %d %d\n", first, second);
    return 0;
}
