#!/bin/sh
# Start-up and finish of `asys profile -t cublas` on a program linked with
# the nvidia-cublas-cu12 wheel's libcublas (tests/workloads/cublas_clock.c),
# against the program alone, in rounds that interleave the modes. Meant for
# a guest kernel (`cargo xtask vm-test 6.1 --run 'sh xtask/scripts/startup_finish.sh'`),
# where the perf-uprobe fallback is real; runs anywhere as root.
#   start-up: launch to the program's main (the loader maps libcublas, and
#             asys places its probes there, before main);
#   finish:   the program's last line to asys's exit (the report written).
# Each line: MODE ROUND start-up MS finish MS. With uprobe-multi links on
# this kernel, the perf-uprobe fallback is also run, forced, for a ratio
# inside one guest.
set -eu
rounds=${ROUNDS:-3}
asys=${ASYS_BIN:-target/debug/asys}
lib=$(ls -d target/pyenv/lib/python3*/site-packages/nvidia/cublas/lib | head -n1)
bin=/tmp/cublas_clock
gcc -O1 -o $bin tests/workloads/cublas_clock.c -L"$lib" -l:libcublas.so.12 -Wl,-rpath,"$lib"
modes="untraced asys"
if ! $asys status --environment | grep -q "^fallbacks .*perf-uprobe"; then
    modes="$modes asys-perf-uprobe"
fi
ms() { echo $((($2 - $1) / 1000000)); }
r=1
while [ $r -le $rounds ]; do
    for mode in $modes; do
        t0=$(date +%s%N)
        case $mode in
        untraced) $bin > /tmp/clock.out ;;
        asys) $asys profile -t cublas -o /tmp/startup-$r $bin > /tmp/clock.out 2> /tmp/asys.err ;;
        asys-perf-uprobe)
            ASYS_KERNEL_FALLBACK=perf-uprobe $asys profile -t cublas -o /tmp/startup-pu-$r $bin \
                > /tmp/clock.out 2> /tmp/asys.err ;;
        esac
        t3=$(date +%s%N)
        main=$(sed -n 's/^main //p' /tmp/clock.out)
        end=$(sed -n 's/^end //p' /tmp/clock.out)
        echo "$mode $r start-up $(ms $t0 $main) ms finish $(ms $end $t3) ms"
    done
    r=$((r + 1))
done
echo "asys's own lines (last run):"
cat /tmp/asys.err
