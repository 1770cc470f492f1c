#!/bin/sh
# Start-up and finish of `asys profile -t cublas` on a program linked with
# the nvidia-cublas-cu12 wheel's libcublas (tests/workloads/cublas_clock.c),
# against the program alone, in rounds that interleave the modes. Meant for
# a guest kernel (`cargo xtask vm-test 6.1 --run 'sh xtask/scripts/startup_finish.sh'`),
# where the perf-uprobe fallback is real; runs anywhere as root.
#   start-up: launch to the program's main (the loader maps libcublas, and
#             asys places its probes there, before main);
#   finish:   the program's last line to asys's exit (the report written).
#   removal:  on the perf-uprobe path, how long asys's background process
#             took to remove the probes after asys exited (the next run
#             waits for it: a run beside a removal starts slower, measured
#             apart as MODE-beside-removal).
# Each line: MODE ROUND start-up MS finish MS [removal MS]. With
# uprobe-multi links on this kernel, the perf-uprobe fallback is also run,
# forced, for a ratio inside one guest.
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
# The pid of the background process removing a run's perf-event uprobes.
remover_in() {
    if [ -f "$1" ]; then
        sed -n 's/.*removed by a background process, pid \([0-9]*\).*/\1/p' "$1"
    fi
}
# run_mode MODE REPORT STDOUT STDERR
run_mode() {
    case $1 in
    untraced) $bin > $3 ;;
    asys) $asys profile -f true -t cublas -o $2 $bin > $3 2> $4 ;;
    asys-perf-uprobe)
        ASYS_KERNEL_FALLBACK=perf-uprobe $asys profile -f true -t cublas -o $2 $bin > $3 2> $4 ;;
    esac
}
r=1
while [ $r -le $rounds ]; do
    for mode in $modes; do
        rm -f /tmp/asys.err
        t0=$(date +%s%N)
        run_mode $mode /tmp/startup-$r /tmp/clock.out /tmp/asys.err
        t3=$(date +%s%N)
        main=$(sed -n 's/^main //p' /tmp/clock.out)
        end=$(sed -n 's/^end //p' /tmp/clock.out)
        line="$mode $r start-up $(ms $t0 $main) ms finish $(ms $end $t3) ms"
        remover=$(remover_in /tmp/asys.err)
        if [ -n "$remover" ] && [ $r -eq 1 ]; then
            # Once: a run started while that removal goes on.
            tb=$(date +%s%N)
            run_mode $mode /tmp/startup-beside /tmp/beside.out /tmp/beside.err
            echo "$mode-beside-removal $r start-up $(ms $tb $(sed -n 's/^main //p' /tmp/beside.out)) ms"
        fi
        if [ -n "$remover" ]; then
            while kill -0 "$remover" 2> /dev/null; do sleep 0.1; done
            line="$line removal $(ms $t3 $(date +%s%N)) ms"
        fi
        echo "$line"
        # The run beside the removal has a removal of its own.
        other=$(remover_in /tmp/beside.err)
        while [ -n "$other" ] && kill -0 "$other" 2> /dev/null; do sleep 0.1; done
        rm -f /tmp/beside.err
    done
    r=$((r + 1))
done
echo "asys's own lines (last run):"
cat /tmp/asys.err 2> /dev/null || true
