# Runs module code compiled at run time for two "files", <even> and <odd>, as
# .pth lines, templates and generated code do: each round compiles both, runs
# <even> for 3 parts of CPU time and <odd> for 1, and frees them, so that the
# next round's code objects are likely to take the freed ones' addresses. The
# two share everything but their file: qualified name "<module>", first line 1.
# Prints its own CPU time per file as the truth.
import json, sys, time

SRC = (
    "end = _clock() + _seconds\n"
    "n = 0\n"
    "while _clock() < end:\n"
    "    n += 1\n"
)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 12
spent = {"<even>": 0.0, "<odd>": 0.0}
for r in range(rounds):
    for name, seconds in (("<even>", 0.18), ("<odd>", 0.06)):
        # A new file name string each time, as a template engine makes.
        code = compile(SRC, "".join(name), "exec")
        start = time.thread_time()
        exec(code, {"_clock": time.thread_time, "_seconds": seconds})
        spent[name] += time.thread_time() - start
        del code
print("truth " + json.dumps(spent), flush=True)
