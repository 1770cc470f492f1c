# A fake session daemon: listens on the addresses given and records the bytes and descriptors each connection sent.
import array, os, select, socket, sys
args = sys.argv[1:]
drop = None
if args[0] == "--drop-to":
    drop = int(args[1]); args = args[2:]
record = open(args[0], "a")
socks = []
for a in args[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + a[1:] if a.startswith("@") else a)
    socks.append(s)
if drop is not None:
    os.setgroups([]); os.setgid(drop); os.setuid(drop)
for s in socks:
    s.listen(16)
print("ready", flush=True)
while True:
    ready, _, _ = select.select(socks, [], [])
    for s in ready:
        c, _ = s.accept()
        c.settimeout(3)
        got, fds = 0, 0
        try:
            while True:
                data, anc, _, _ = c.recvmsg(65536, socket.CMSG_SPACE(64))
                for level, kind, body in anc:
                    if kind == socket.SCM_RIGHTS:
                        fds += len(body) // 4
                if not data:
                    break
                got += len(data)
                c.sendall(b'{"ok":true,"message":"fake","info":null,"reports":[]}\n')
        except OSError:
            pass
        record.write(f"{got} {fds}\n"); record.flush()
        c.close()
