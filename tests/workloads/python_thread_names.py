# Ten threads named at start (worker-0..worker-8, and "воркер-9" in Cyrillic)
# each spin on their own CPU for a known time in burn(); worker-8 is renamed
# "renamed-8" by the main thread while it runs, and then spins on for 1.5 s
# of wall time so that a read a second later sees its new name. An eleventh
# thread, named with a NUL and an escape, spins too. Prints the truth: each
# thread's native id and names, in order, the eleventh's last.
import json, threading, time

SPIN_NS = 150_000_000

def burn(ns):
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass

truth = {}
halfway = threading.Event()
renamed = threading.Event()

def work(i):
    me = threading.current_thread()
    truth[i] = {"tid": threading.get_native_id(), "names": [me.name]}
    burn(SPIN_NS)
    if i == 8:
        halfway.set()
        renamed.wait()
        truth[i]["names"].append(me.name)
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            burn(1_000_000)

names = [f"worker-{i}" for i in range(9)] + ["воркер-9"]
names.append("nul\x00esc\x1b")
threads = [threading.Thread(target=work, args=(i,), name=n) for i, n in enumerate(names)]
for t in threads:
    t.start()
halfway.wait()
threads[8].name = "renamed-8"
renamed.set()
for t in threads:
    t.join()
print("truth " + json.dumps([truth[i] for i in range(11)], ensure_ascii=False), flush=True)
