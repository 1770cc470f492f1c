/* Loads and unloads libm over and over, every 2 ms, until killed. */
#include <dlfcn.h>
#include <unistd.h>
int main(void) {
    for (;;) {
        void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h)
            dlclose(h);
        usleep(2000);
    }
}
