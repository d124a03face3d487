"""pygil.py: Python threads with a known truth about the GIL and time off the CPU.

usage: pygil.py SECONDS OUT.json
Three CPU-bound threads spin for SECONDS of wall time each, measuring their own wall and CPU
time (time.thread_time): what a thread did not run of its wall time it spent waiting for the
GIL — or, on a loaded machine, runnable while another process had the processor: the kernel's
run-queue delay of the thread (/proc/thread-self/schedstat) is kept beside them. A sleeper sleeps
SECONDS/2 in one time.sleep; a blocker waits on a lock the main thread holds for SECONDS/3.
OUT.json: per native thread id, its role, wall, CPU and run-queue delay seconds, and the unix
times its measures began and ended; a spinning thread's rounds of work (what a profiler's cost
takes from a run of fixed length)."""
import json
import sys
import threading
import time

seconds = float(sys.argv[1])
truth = {}


def run_delay():
    """The calling thread's time runnable but waiting for a processor, in seconds (0: not known)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def start():
    """The thread's clocks at the start of what it measures (the file read first: its I/O gives the
    GIL up, and taking it back is a wait of its own, left out)."""
    d0 = run_delay()
    return time.perf_counter(), time.thread_time(), d0, time.time()


def record(role, w0, c0, d0, u0, **more):
    """What the thread measured, from start() to now: wall, CPU, run-queue delay, and when (unix
    seconds: the trace's events are placed by its start_time_unix_ns)."""
    wall, cpu, u1 = time.perf_counter() - w0, time.thread_time() - c0, time.time()
    truth[threading.get_native_id()] = dict(role=role, wall=wall, cpu=cpu, run_delay=run_delay() - d0, t0=u0, t1=u1,
                                            **more)


def spin():
    w0, c0, d0, u0 = start()
    n = k = 0
    while time.perf_counter() - w0 < seconds:
        for i in range(2000):
            n += i * i
        k += 1
    record("spin", w0, c0, d0, u0, rounds=k)


def sleeper():
    w0, c0, d0, u0 = start()
    s0 = time.perf_counter()
    time.sleep(seconds / 2)
    # the call as the thread saw it: the sleep (a loaded machine wakes it late) and taking the GIL back
    record("sleep", w0, c0, d0, u0, asked=seconds / 2, slept=time.perf_counter() - s0)


lock = threading.Lock()


def blocker():
    w0, c0, d0, u0 = start()
    with lock:
        pass
    record("lock", w0, c0, d0, u0)


lock.acquire()
threads = [threading.Thread(target=spin, name=f"spin-{i}") for i in range(3)]
threads += [threading.Thread(target=sleeper, name="sleeper"), threading.Thread(target=blocker, name="blocker")]
for t in threads:
    t.start()
time.sleep(seconds / 3)
lock.release()
for t in threads:
    t.join()
with open(sys.argv[2], "w") as f:
    json.dump({str(k): v for k, v in truth.items()}, f)
