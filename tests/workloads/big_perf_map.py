# Writes a perf map of argv[1] symbols, then burns CPU.
import os, sys, time
lines = int(sys.argv[1])
pid = os.getpid()
with open('/tmp/perf-%d.map' % pid, 'w') as f:
    for i in range(0, lines, 10000):
        f.write(''.join('%x 10 %s%d\n' % (0x7f0000000000 + j * 16, 'p' * 40, j)
                        for j in range(i, min(i + 10000, lines))))
print('ready', flush=True)
end, x = time.time() + 300, 0
while time.time() < end:
    x += 1
