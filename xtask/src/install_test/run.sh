#!/bin/sh
# Runs inside a clean Debian root file system (chroot), as root: installs
# asys from the tarball ($1 = tarball) or the .deb ($1 = deb), then runs
# selftest, status --environment, and profiles of two programs built here
# from source: one calling libcudart from NVIDIA's PyPI wheel (cuda/), one
# on the simulated runtime asys installs. Outputs go to out/; the xtask
# checks them.
set -u
cd /root/asys-install
mkdir -p out
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C
if [ "$1" = tarball ]; then
    mkdir -p /opt && tar -xzf asys.tar.gz -C /opt || exit 10
    P=$(ls -d /opt/asys-*-x86_64-linux)
    A=$P/bin/asys
else
    dpkg -i asys.deb > out/dpkg 2>&1 || exit 11
    P=/usr
    A=asys
fi
ldd --version | head -1 > out/libc
$A --version > out/version 2>&1
$A selftest > out/selftest 2>&1; echo $? > out/selftest.rc
$A status --environment > out/status 2>&1; echo $? > out/status.rc
gcc -O1 -o cudart_steps cudart_steps.c -L/root/asys-install/cuda -l:libcudart.so.12 \
    -Wl,-rpath,/root/asys-install/cuda > out/cudart.build 2>&1 || exit 12
$A profile -t cuda -o out/cudart ./cudart_steps 100 > out/cudart.stdout 2> out/cudart.stderr
echo $? > out/cudart.rc
$A stats --report cuda_api_sum --format json out/cudart.asysrep > out/cudart_api.json
gcc -O1 -rdynamic -o sim_steps sim_steps.c -I$P/include -L$P/lib/asys/sim -lhggcrt \
    -Wl,-rpath,$P/lib/asys/sim > out/sim.build 2>&1 || exit 13
$A profile -t hggc -o out/sim ./sim_steps 50 > out/sim.stdout 2> out/sim.stderr
echo $? > out/sim.rc
$A stats --report hggc_api_trace --format json out/sim.asysrep > out/sim_api.json
$A stats --report hggc_ppu_trace --format json out/sim.asysrep > out/sim_ppu.json
if [ "$1" = deb ]; then
    MANWIDTH=80 man -P cat asys-profile > out/man 2>&1
    echo $? > out/man.rc
fi
exit 0
