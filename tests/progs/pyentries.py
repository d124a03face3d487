# pyentries.py: the interpreter entered from C thousands of times a second (map calling Python
# functions with frames of 23 sizes, at varying depths), while a timer's signal makes Python's
# own C handler write its wakeup byte wherever the interpreter was interrupted. Run under CPU
# sampling, every sample and every hooked write reads the frame chain at some instruction of
# the evaluation loop's entry and exit.
import os
import signal
import sys
import time

r, w = os.pipe()
os.set_blocking(w, False)
os.set_blocking(r, False)
signal.set_wakeup_fd(w)
signal.signal(signal.SIGALRM, lambda *a: None)
signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
fs = []
for n in range(1, 24):
    ns = {}
    exec("def f(x, %s):\n    return x\n" % ", ".join("a%d=%d" % (i, i) for i in range(n)), ns)
    fs.append(ns["f"])


def layer(k, fn):
    return sum(map(fn, range(8))) if k == 0 else layer(k - 1, fn)


end = time.time() + float(sys.argv[1])
rounds = 0
while time.time() < end:
    for i, fn in enumerate(fs):
        layer(i % 5, fn)
    try:
        os.read(r, 4096)
    except BlockingIOError:
        pass
    rounds += 1
signal.setitimer(signal.ITIMER_REAL, 0)
print("ok" if rounds else "no rounds")
