# A harmless neighbour: says ready and burns CPU for 300 s.
import time
print('ready', flush=True)
end, x = time.time() + 300, 0
while time.time() < end:
    x += 1
