#!/usr/bin/env python3
"""check_pftrace_tp.py: a libprof Perfetto trace as Perfetto's own trace processor loads it.

usage: check_pftrace_tp.py TRACE_PROCESSOR_SHELL TRACE.pftrace SUMMARY.json

TRACE_PROCESSOR_SHELL is Perfetto's `trace_processor_shell` (not packaged for Debian or PyPI:
built from Perfetto's sources, docs/building.md); SUMMARY.json is what check_pftrace.py printed
for the same trace (its own decoding). The trace is loaded and queried with SQL; this checks that
the trace processor met no import error or data loss (its `stats`), and that its tables hold what
the trace holds by the independent decoder's count: every slice and instant, every counter
sample, every flow, every CPU sample with a call stack on a thread, the heap profile's bytes.
Prints the tables' counts as JSON; exits 1 with a message when a check fails."""
import csv
import io
import json
import subprocess
import sys
import tempfile

QUERIES = {
    "errors": "select name || '=' || value from stats where value != 0 and severity in ('error', 'data_loss')",
    "slices": "select count(*) from slice",
    "unfinished": "select count(*) from slice where dur < 0",
    "counter_samples": "select count(*) from counter c join counter_track t on c.track_id = t.id "
    "where t.name != 'cpu-clock'",
    "flows": "select count(*) from flow",
    "cpu_samples": "select count(*) from perf_sample",
    "samples_without_stack": "select count(*) from perf_sample where callsite_id is null",
    "samples_without_thread": "select count(*) from perf_sample where utid is null or utid = 0",
    "heap_allocated": "select coalesce(sum(size), 0) from heap_profile_allocation where size > 0",
    "threads": "select count(*) from thread where tid != 0",
}


def fail(msg):
    sys.exit("check_pftrace_tp: " + msg)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    tp, trace, summary = sys.argv[1:]
    with open(summary) as f:
        want = json.load(f)
    # one query a line, each result a CSV table of one column: read back in order
    names = list(QUERIES)
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as q:
        q.write("\n".join(QUERIES[n] + ";" for n in names) + "\n")
        q.flush()
        r = subprocess.run([tp, "-q", q.name, trace], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("trace_processor_shell failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
    tables = [t for t in r.stdout.strip().split("\n\n") if t.strip()]
    if len(tables) != len(names):
        fail("%d results for %d queries: %s" % (len(tables), len(names), r.stdout[-2000:]))
    got = {}
    for n, t in zip(names, tables):
        rows = list(csv.reader(io.StringIO(t.strip())))[1:]
        got[n] = [row[0] for row in rows] if n == "errors" else int(rows[0][0])
    if got["errors"]:
        fail("the trace processor's errors: %s" % ", ".join(got["errors"]))
    if got["unfinished"]:
        fail("%d slices never end" % got["unfinished"])
    # every slice, instant (the metadata's included) and flow end point is a slice there
    events = sum(want.get(k, 0) for k in ("slices", "instants", "metadata", "flow_instants"))
    expect = {
        "slices": events,
        "counter_samples": want.get("counter_samples", 0),
        "flows": want.get("flows", 0),
        "cpu_samples": want.get("cpu_samples", 0),
        "heap_allocated": want.get("heap_allocated", 0),
    }
    for k, v in expect.items():
        if got[k] != v:
            fail("%s: %d in the trace processor, %d in the trace" % (k, got[k], v))
    if got["samples_without_stack"] or got["samples_without_thread"]:
        fail("CPU samples without a call stack (%d) or a thread (%d)" %
             (got["samples_without_stack"], got["samples_without_thread"]))
    json.dump(got, sys.stdout)
    print()


main()
