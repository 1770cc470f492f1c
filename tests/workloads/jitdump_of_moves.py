# Writes and maps a jitdump of one LOAD and many MOVEs of a long name, then burns CPU.
import mmap, os, struct, sys, time
moves, name_len = int(sys.argv[1]), int(sys.argv[2])
pid = os.getpid()
path = 'jit-%d.dump' % pid
base = 0x7f0000000000
with open(path, 'wb') as f:
    f.write(struct.pack('<IIIIII', 0x4A695444, 1, 40, 62, 0, pid) + bytes(16))
    name, code = b'n' * name_len, b'\x90' * 16
    f.write(struct.pack('<IIQ', 0, 16 + 40 + len(name) + 1 + len(code), 0))
    f.write(struct.pack('<IIQQQQ', pid, pid, base, base, len(code), 1) + name + b'\0' + code)
    move = b''.join(
        struct.pack('<IIQIIQQQQQ', 1, 64, 0, pid, pid, 0, base + i * 16, base + (i + 1) * 16, 16, 1)
        for i in range(moves))
    f.write(move)
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)
print('ready', flush=True)
end, x = time.time() + 300, 0
while time.time() < end:
    x += 1
