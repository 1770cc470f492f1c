/* Sends two bursts of UDP datagrams to argv[1]:argv[2] and logs each burst to the file argv[7]. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &to.sin_addr);
    FILE *f = fopen(argv[7], "w");
    static char buf[2000];
    memset(buf, 'x', sizeof buf);
    for (int b = 0; b < 2; b++) {
        int n = atoi(argv[3 + 2 * b]), size = atoi(argv[4 + 2 * b]);
        long long a = now();
        for (int i = 0; i < n; i++) {
            if (sendto(s, buf, size, 0, (struct sockaddr *)&to, sizeof to) != size) {
                perror("sendto");
                return 2;
            }
            usleep(500);
        }
        long long e = now();
        fprintf(f, "burst %d %d %lld %lld\n", n, size, a, e);
        fflush(f);
        usleep(b == 0 ? 700000 : 300000);
    }
    return 0;
}
