# Calls argv[1] code objects named by one shared 1 MiB string, round and round (0: a plain burner).
import sys, time
count = int(sys.argv[1])
long = 'n' * (1 << 20)
src = 'def f(x):\n    s = 0\n    for k in range(x):\n        s += k\n    return s\n'
fs = []
for i in range(max(count, 1)):
    ns = {}
    exec(compile(src, 'attack.py', 'exec'), ns)
    f = ns['f']
    if count:
        f.__code__ = f.__code__.replace(co_name=long, co_qualname=long)
    fs.append(f)
print('ready', flush=True)
end = time.time() + 300
while time.time() < end:
    for f in fs:
        f(50)
