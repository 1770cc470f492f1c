# Opens nvtx package ranges, a mark and a thread's range, printing each: this test's ground truth.
import nvtx, threading
print("pushpop outer - 0")
with nvtx.annotate("outer", color="blue"):
    print("pushpop inner mydomain 0")
    with nvtx.annotate("inner", domain="mydomain"):
        nvtx.mark("tick")
        print("pushpop deepest mydomain 1")
        with nvtx.annotate("deepest", domain="mydomain"):
            pass
    print("pushpop pushed - 1")
    nvtx.push_range("pushed")
    nvtx.pop_range()
print("startend startend -")
r = nvtx.start_range("startend")
def worker():
    print("pushpop in-thread - 0")
    with nvtx.annotate("in-thread"):
        pass
t = threading.Thread(target=worker); t.start(); t.join()
nvtx.end_range(r)
