#!/usr/bin/env python3
"""check_trace.py: an independent reader for libprof's Chrome traces, used by the tests.

Loads the file with Python's strict json module, checks that every event has integer pid and
tid, and that X slices on each thread nest (no partial overlap). Prints a JSON summary on stdout:
{"slices": {name: count}, "instants": {...}, "counters": {...}, "threads": {tid: name}}.
Exits 1 with a message on stderr when a check fails."""
import collections
import json
import sys


def main(path):
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    out = {"slices": collections.Counter(), "instants": collections.Counter(),
           "counters": collections.Counter(), "threads": {}}
    per_thread = collections.defaultdict(list)
    for e in events:
        if type(e.get("pid")) is not int or type(e.get("tid")) is not int:
            sys.exit("event without integer pid/tid: %r" % (e,))
        ph = e["ph"]
        if ph == "X":
            start = round(e["ts"] * 1000)
            per_thread[e["tid"]].append((start, start + round(e["dur"] * 1000), e["name"]))
            out["slices"][e["name"]] += 1
        elif ph == "i":
            out["instants"][e["name"]] += 1
        elif ph == "C":
            out["counters"][e["name"]] += 1
        elif ph == "M" and e["name"] == "thread_name":
            out["threads"][str(e["tid"])] = e["args"]["name"]
    for tid, slices in per_thread.items():
        slices.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, name in slices:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                sys.exit("thread %d: %r [%d,%d] overlaps %r [%d,%d]" % (tid, name, start, end, stack[-1][2],
                                                                           stack[-1][0], stack[-1][1]))
            stack.append((start, end, name))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
