# Maps argv[1] (a file of a FUSE mount whose reads never answer) without
# touching it, points the co_qualname of the code object it then runs at
# the mapped page, says "ready" and spins in that code: asys, naming the
# sampled frame, reads the qualname from this process's memory and faults
# on a page that never comes. CPython 3.11 to 3.13 (co_qualname at 128).
import ctypes, os, sys
assert (3, 11) <= sys.version_info[:2] <= (3, 13), sys.version
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY)
PROT_READ, MAP_SHARED = 1, 1
at = libc.mmap(None, 4096, PROT_READ, MAP_SHARED, fd, 0)
if at in (None, ctypes.c_void_p(-1).value):
    sys.exit('mmap: errno %d' % ctypes.get_errno())

def spin():
    x = 0
    while True:
        x += 1

# Nothing in the interpreter reads co_qualname while the code runs (only
# repr and tracebacks do); the old name is left referenced, not freed.
ctypes.c_void_p.from_address(id(spin.__code__) + 128).value = at
print('ready', flush=True)
spin()
