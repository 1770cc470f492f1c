# Mounts a tmpfs at $1 with $2 as lib and $3 as bin, and runs dlopen_app from it on its runtime.
set -e
mount --make-rprivate /
mount -t tmpfs asys-test "$1"
mkdir "$1/lib" "$1/bin"
mount --bind "$2" "$1/lib"
mount --bind "$3" "$1/bin"
exec "$1/bin/dlopen_app" "$1/lib/libhggcrt.so" 6
