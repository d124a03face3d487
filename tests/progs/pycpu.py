# pycpu.py: a Python program whose CPU is known, for comparing CPU profilers (scripts/bench-peers):
# four threads, each burning CPU in a function of its own until the thread has used its share of
# SECONDS (default 4) of CPU — burn_a 50 %, burn_b 25 %, burn_c 12.5 %, burn_d 12.5 % — measured
# by the thread's own CPU clock (time.thread_time), whatever the GIL and the machine's load.
import sys
import threading
import time

TOTAL = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0


def burn_a(s):
    t0, x = time.thread_time(), 0
    while time.thread_time() - t0 < s:
        for i in range(1000):
            x += i
    return x


def burn_b(s):
    t0, x = time.thread_time(), 0
    while time.thread_time() - t0 < s:
        for i in range(1000):
            x += i
    return x


def burn_c(s):
    t0, x = time.thread_time(), 0
    while time.thread_time() - t0 < s:
        for i in range(1000):
            x += i
    return x


def burn_d(s):
    t0, x = time.thread_time(), 0
    while time.thread_time() - t0 < s:
        for i in range(1000):
            x += i
    return x


ts = [threading.Thread(target=f, args=(TOTAL * share,))
      for f, share in ((burn_a, 0.5), (burn_b, 0.25), (burn_c, 0.125), (burn_d, 0.125))]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("done")
