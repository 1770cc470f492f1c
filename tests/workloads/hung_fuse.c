/* A FUSE file system that never answers a read: one file, /data (1 MiB),
 * whose attributes and opens are answered, and whose reads wait for ever.
 * A process that maps /data and leaves a pointer into it where asys reads
 * makes asys's read of its memory fault on a page that never comes: the
 * hostile neighbours' hung mount. Run as `hung_fuse -f MOUNTPOINT`
 * (libfuse's own options; multithreaded, so that other requests are
 * answered while a read waits). */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int hung_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    (void)fi;
    memset(st, 0, sizeof *st);
    if (strcmp(path, "/") == 0) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    }
    if (strcmp(path, "/data") == 0) {
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        st->st_size = 1 << 20;
        return 0;
    }
    return -ENOENT;
}

static int hung_open(const char *path, struct fuse_file_info *fi) {
    (void)fi;
    return strcmp(path, "/data") == 0 ? 0 : -ENOENT;
}

static int hung_read(const char *path, char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi) {
    (void)path, (void)buf, (void)size, (void)off, (void)fi;
    for (;;)
        pause();
}

static const struct fuse_operations ops = {
    .getattr = hung_getattr,
    .open = hung_open,
    .read = hung_read,
};

int main(int argc, char **argv) { return fuse_main(argc, argv, &ops, NULL); }
