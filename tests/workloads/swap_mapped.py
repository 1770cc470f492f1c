# Maps a copy of a library, deletes it, and puts a FIFO, a link to one or a 2 GB sparse file at its path.
import mmap, os, sys, time
src, path, kind, other = sys.argv[1:5]
data = open(src, 'rb').read()
with open(path, 'wb') as f:
    f.write(data)
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, len(data), flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)
os.close(fd)
os.unlink(path)
if kind == 'fifo':
    os.mkfifo(path)
elif kind == 'link':
    os.mkfifo(other)
    os.symlink(other, path)
else:
    with open(path, 'wb') as f:
        f.truncate(2 << 30)
print('ready', flush=True)
time.sleep(300)
