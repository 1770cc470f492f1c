# A script whose file name is not ASCII (a UCS-4 character), with an ASCII
# function, a Cyrillic one (UCS-2) and a Latin-1 one, each burning a known
# share of CPU; prints each function's first line and CPU time as the truth.
import json, time


def function1(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def функция2(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def café3(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


spent = {}
for f, seconds in ((function1, 0.5), (функция2, 0.5), (café3, 0.5)):
    start = time.thread_time()
    f(seconds)
    spent[f.__code__.co_name] = {
        "ns": (time.thread_time() - start) * 1e9,
        "first_line": f.__code__.co_firstlineno,
    }
print("truth " + json.dumps(spent, ensure_ascii=False), flush=True)
