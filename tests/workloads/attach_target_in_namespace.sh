# Joins cgroup $1, mounts a tmpfs at $2 with $3 as lib and $4 as bin, and runs attach_target from it.
set -e
echo $$ > "$1/cgroup.procs"
mount --make-rprivate /
mount -t tmpfs asys-test "$2"
mkdir "$2/lib" "$2/bin"
mount --bind "$3" "$2/lib"
mount --bind "$4" "$2/bin"
export LD_LIBRARY_PATH="$2/lib"
exec "$2/bin/attach_target"
