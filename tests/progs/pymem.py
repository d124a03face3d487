# pymem.py: a Python program whose heap is known, for comparing memory profilers (scripts/bench-peers).
#   leak   64 bytearrays of 4 MiB given an extra reference nobody drops: 256 MiB still allocated
#          at exit, whichever way the interpreter ends (line 'LEAK')
#   small  300,000 small dicts and strings built and dropped (pymalloc's, or malloc's with
#          PYTHONMALLOC=malloc): the cost of seeing every object
#   phase  128 bytearrays of 2 MiB alive together, then dropped: the peak is 256 MiB of these on
#          top of the 256 MiB leaked (line 'PEAK')
#   churn  2000 temporaries of 1 MiB, one at a time (line 'CHURN')
# Peak: 512 MiB plus the interpreter's own; leaked: 256 MiB plus what the interpreter never frees.
import ctypes

MiB = 1 << 20


def leak(n):
    for _ in range(n):
        b = bytearray(4 * MiB)  # LEAK
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(b))


def small(n):
    d = [{"k": i, "v": str(i)} for i in range(n)]
    return len(d)


def phase(n):
    bufs = [bytearray(2 * MiB) for _ in range(n)]  # PEAK
    return sum(len(b) for b in bufs)


def churn(n):
    t = 0
    for _ in range(n):
        t += len(bytes(MiB))  # CHURN
    return t


leak(64)
print(small(300000), phase(128), churn(2000))
