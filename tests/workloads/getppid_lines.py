# Says 'ready PID'; for each line N on stdin makes N getppid calls and says 'done'.
import os, sys
print('ready', os.getpid(), flush=True)
for line in sys.stdin:
    for _ in range(int(line)):
        os.getppid()
    print('done', flush=True)
