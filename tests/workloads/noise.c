/* Writes 555-byte blocks to /dev/null every 100 us, until killed. */
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    char b[555] = {0};
    int fd = open("/dev/null", O_WRONLY);
    for (;;) { write(fd, b, sizeof b); usleep(100); }
}
