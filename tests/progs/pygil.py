"""pygil.py: Python threads with a known truth about the GIL and time off the CPU.

usage: pygil.py SECONDS OUT.json
Three CPU-bound threads spin for SECONDS of wall time each, measuring their own wall and CPU
time (time.thread_time): what a thread did not run of its wall time it spent waiting for the
GIL. A sleeper sleeps SECONDS/2 in one time.sleep; a blocker waits on a lock the main thread
holds for SECONDS/3. OUT.json: per native thread id, its role, wall and CPU seconds."""
import json
import sys
import threading
import time

seconds = float(sys.argv[1])
truth = {}


def spin():
    w0, c0 = time.perf_counter(), time.thread_time()
    n = 0
    while time.perf_counter() - w0 < seconds:
        for i in range(2000):
            n += i * i
    truth[threading.get_native_id()] = {"role": "spin", "wall": time.perf_counter() - w0, "cpu": time.thread_time() - c0}


def sleeper():
    w0, c0 = time.perf_counter(), time.thread_time()
    time.sleep(seconds / 2)
    truth[threading.get_native_id()] = {"role": "sleep", "wall": time.perf_counter() - w0, "cpu": time.thread_time() - c0,
                                        "slept": seconds / 2}


lock = threading.Lock()


def blocker():
    w0, c0 = time.perf_counter(), time.thread_time()
    with lock:
        pass
    truth[threading.get_native_id()] = {"role": "lock", "wall": time.perf_counter() - w0, "cpu": time.thread_time() - c0}


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
