# Maps the ELF file argv[1] (its first 0x2000 bytes: the one loadable
# segment, .text at 0x1000 holding `jmp .`) readable and executable, says
# "ready", then spins in it: samples land in the file, and asys symbolizes
# it. The hostile neighbours' ELF with millions of symbols.
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY)
PROT_READ, PROT_EXEC, MAP_PRIVATE = 1, 4, 2
at = libc.mmap(None, 0x2000, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0)
if at in (None, ctypes.c_void_p(-1).value):
    sys.exit('mmap: errno %d' % ctypes.get_errno())
print('ready', flush=True)
ctypes.CFUNCTYPE(None)(at + 0x1000)()
