#!/usr/bin/env python3
"""check_trace.py: an independent reader for libprof's Chrome traces, used by the tests.

Loads the file with Python's strict json module, checks that every event has integer pid and
tid, that X slices on each thread nest (no partial overlap), and that every flow has one start
("s") and one end ("f"), each inside a slice of its thread. Prints a JSON summary on stdout:
{"slices": {name: count}, "instants": {...}, "counters": {...}, "threads": {tid: name},
 "categories": {cat: slices}, "flows": pairs}.
Exits 1 with a message on stderr when a check fails."""
import collections
import json
import sys


def main(path):
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    out = {"slices": collections.Counter(), "instants": collections.Counter(),
           "counters": collections.Counter(), "threads": {}, "categories": collections.Counter()}
    per_thread = collections.defaultdict(list)
    flows = collections.defaultdict(list)
    for e in events:
        if type(e.get("pid")) is not int or type(e.get("tid")) is not int:
            sys.exit("event without integer pid/tid: %r" % (e,))
        ph = e["ph"]
        if ph == "X":
            start = round(e["ts"] * 1000)
            per_thread[e["tid"]].append((start, start + round(e["dur"] * 1000), e["name"]))
            out["slices"][e["name"]] += 1
            out["categories"][e.get("cat", "")] += 1
        elif ph in ("s", "f"):
            flows[(e.get("cat"), e["id"])].append((ph, e["tid"], round(e["ts"] * 1000)))
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
    for key, ends in flows.items():
        if sorted(p for p, _, _ in ends) != ["f", "s"]:
            sys.exit("flow %r: expected one start and one end, got %r" % (key, ends))
        for ph, tid, ts in ends:
            if not any(start <= ts <= end for start, end, _ in per_thread.get(tid, [])):
                sys.exit("flow %r: %s at %d is inside no slice of thread %d" % (key, ph, ts, tid))
    out["flows"] = len(flows)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
