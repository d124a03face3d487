#!/usr/bin/env python3
"""check_pftrace.py: an independent reader for libprof's Perfetto traces, used by the tests.

Decodes the file with Python's protobuf library against perfetto_subset.proto (a schema written
from Perfetto's documented field numbers, compiled here by protoc) — bundles of packets deflated
(compressed_packets) inflated with Python's zlib — then checks what Perfetto's trace processor
relies on:
  - every interned id resolves (event names, categories, argument names, callstacks, frames,
    function names, mappings) and the interned data comes first on its sequence;
  - every track an event names is described, every thread track names its pid and tid;
  - every slice ends, properly nested, on its track; timestamps never go back on a sequence;
  - each flow id is on two events at least;
  - one ClockSnapshot before any timestamp, relating CLOCK_MONOTONIC (the trace's time) and
    CLOCK_MONOTONIC_COARSE (the heap profile's), no timestamp and no heap dump outside the trace.
With --json FILE (the Chrome trace of the same run) the slices (X and b), instants (i), counter
samples (one per key of each C event) and flows (s) must be as many as the JSON's; with --folded
FILE the CPU samples as many as the folded stacks add up to; with --heap-folded FILE the heap
profile's allocated bytes as the folded allocation stacks add up to.
Prints a JSON summary on stdout; exits 1 with a message when a check fails."""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def load_schema():
    out = tempfile.mkdtemp(prefix="lp-pftrace-")
    subprocess.run(["protoc", "-I", HERE, "--python_out", out, "perfetto_subset.proto"], check=True)
    sys.path.insert(0, out)
    import perfetto_subset_pb2  # noqa: E402
    return perfetto_subset_pb2


def fail(msg):
    sys.exit("check_pftrace: " + msg)


def folded_total(path):
    total = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                total += int(line.rsplit(" ", 1)[1])
    return total


def json_counts(path):
    with open(path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    c = collections.Counter()
    for e in events:
        ph = e["ph"]
        if ph in ("X", "b"):
            c["slices"] += 1
        elif ph in ("i", "I"):
            c["instants"] += 1
        elif ph == "C":
            c["counter_samples"] += len(e.get("args", {}))
        elif ph == "s":
            c["flows"] += 1
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--json")
    ap.add_argument("--folded")
    ap.add_argument("--heap-folded")
    args = ap.parse_args()
    pb = load_schema()
    trace = pb.Trace()
    with open(args.trace, "rb") as f:
        trace.ParseFromString(f.read())
    # bundles of packets deflated (compressed_packets, as Perfetto's service writes them): each
    # one's packets take its place, in order
    packets, bundles = [], 0
    for p in trace.packet:
        if p.WhichOneof("data") == "compressed_packets":
            inner = pb.Trace()
            inner.ParseFromString(zlib.decompress(p.compressed_packets))
            if any(q.WhichOneof("data") == "compressed_packets" for q in inner.packet):
                fail("a compressed bundle inside a compressed bundle")
            if p.ByteSize() >= 512 * 1024:
                fail("a compressed bundle of %d bytes (Perfetto wants less than 512 KiB)" % p.ByteSize())
            packets.extend(inner.packet)
            bundles += 1
        else:
            packets.append(p)

    interned = collections.defaultdict(dict)  # (seq, table) -> iid -> value
    cleared = set()
    last_ts = {}
    tracks = {}
    events = []
    samples = []
    heap = []
    # The clocks: one ClockSnapshot before any timestamp, the trace's time CLOCK_MONOTONIC, and
    # CLOCK_MONOTONIC_COARSE (the heap profile's dumps) related to it — without it Perfetto's
    # trace processor cannot place the heap profile and drops it ("clock_sync_failure")
    snaps = [i for i, p in enumerate(packets) if p.WhichOneof("data") == "clock_snapshot"]
    if len(snaps) != 1:
        fail("%d clock snapshots (one wanted)" % len(snaps))
    stamped = [i for i, p in enumerate(packets) if p.HasField("timestamp")]
    if stamped and stamped[0] < snaps[0]:
        fail("packet %d has a timestamp before the clock snapshot (packet %d)" % (stamped[0], snaps[0]))
    snap = packets[snaps[0]].clock_snapshot
    clocks = {c.clock_id: c.timestamp for c in snap.clocks}
    if snap.primary_trace_clock != 3 or 3 not in clocks or clocks.get(4) != clocks[3]:
        fail("clock snapshot: %s, primary %d (MONOTONIC and MONOTONIC_COARSE wanted, MONOTONIC the trace's)"
             % (clocks, snap.primary_trace_clock))
    t0 = clocks[3]
    for i, p in enumerate(packets):
        seq = p.trusted_packet_sequence_id
        if p.HasField("timestamp"):
            if p.timestamp < t0:
                fail("packet %d: timestamp %d before the clock snapshot's %d" % (i, p.timestamp, t0))
            if p.timestamp < last_ts.get(seq, 0):
                fail("packet %d: timestamp %d after %d on sequence %d" % (i, p.timestamp, last_ts[seq], seq))
            last_ts[seq] = p.timestamp
        if p.sequence_flags & 1:
            cleared.add(seq)
        if p.HasField("interned_data"):
            d = p.interned_data
            for table in ("event_categories", "event_names", "debug_annotation_names", "frames", "callstacks",
                          "mappings"):
                for x in getattr(d, table):
                    interned[(seq, table)][x.iid] = x
            for table in ("function_names", "mapping_paths", "debug_annotation_string_values"):
                for x in getattr(d, table):
                    interned[(seq, table)][x.iid] = x.str.decode("utf-8", "replace")
        if (p.sequence_flags & 2) and seq not in cleared:
            fail("packet %d needs incremental state before any was set on sequence %d" % (i, seq))
        kind = p.WhichOneof("data")
        if kind == "track_descriptor":
            d = p.track_descriptor
            if d.uuid in tracks:
                fail("track %d described twice" % d.uuid)
            if d.HasField("thread") and not (d.thread.HasField("pid") and d.thread.HasField("tid")):
                fail("thread track %d without pid and tid" % d.uuid)
            tracks[d.uuid] = d
        elif kind == "track_event":
            events.append((i, seq, p.timestamp, p.track_event))
        elif kind == "perf_sample":
            samples.append((i, seq, p.timestamp, p.perf_sample))
        elif kind == "profile_packet":
            heap.append(p.profile_packet)

    def resolve(seq, table, iid, what):
        if iid not in interned[(seq, table)]:
            fail("%s: %s iid %d not interned" % (what, table, iid))
        return interned[(seq, table)][iid]

    def annotations(seq, das, what, top=True):
        for a in das:
            if top and a.HasField("name_iid"):
                resolve(seq, "debug_annotation_names", a.name_iid, what)
            elif not a.HasField("name") and top:
                fail("%s: an argument without a name" % what)
            if a.HasField("string_value_iid"):
                resolve(seq, "debug_annotation_string_values", a.string_value_iid, what)
            annotations(seq, a.dict_entries, what, False)
            annotations(seq, a.array_values, what, False)

    names = collections.Counter()
    counts = collections.Counter()
    open_slices = collections.defaultdict(list)
    flow_seen = collections.Counter()
    for i, seq, ts, e in events:
        what = "packet %d" % i
        if e.track_uuid not in tracks:
            fail("%s: track %d has no descriptor" % (what, e.track_uuid))
        name = resolve(seq, "event_names", e.name_iid, what).name if e.HasField("name_iid") else e.name
        for c in e.category_iids:
            resolve(seq, "event_categories", c, what)
        annotations(seq, e.debug_annotations, what)
        for f in list(e.flow_ids) + list(e.terminating_flow_ids):
            flow_seen[f] += 1
        t = e.type
        if t == 1:
            open_slices[e.track_uuid].append((ts, name))
            counts["slices"] += 1
            names[name] += 1
        elif t == 2:
            if not open_slices[e.track_uuid]:
                fail("%s: a slice ends on track %d where none is open" % (what, e.track_uuid))
            open_slices[e.track_uuid].pop()
        elif t == 3:
            if name == "libprof metadata":
                counts["metadata"] += 1
            elif e.flow_ids and not name:
                counts["flow_instants"] += 1
            else:
                counts["instants"] += 1
        elif t == 4:
            if not tracks[e.track_uuid].HasField("counter"):
                fail("%s: a counter value on track %d, not a counter track" % (what, e.track_uuid))
            counts["counter_samples"] += 1
        else:
            fail("%s: event of type %d" % (what, t))
    for uuid, st in open_slices.items():
        if st:
            fail("track %d: %d slices never end (first %r)" % (uuid, len(st), st[0]))
    lone = [f for f, n in flow_seen.items() if n < 2]
    if lone:
        fail("%d flow ids on one event only" % len(lone))
    counts["flows"] = len(flow_seen)

    threads = {d.thread.tid for d in tracks.values() if d.HasField("thread")}
    for i, seq, ts, s in samples:
        cs = resolve(seq, "callstacks", s.callstack_iid, "sample %d" % i)
        for fid in cs.frame_ids:
            fr = resolve(seq, "frames", fid, "sample %d" % i)
            resolve(seq, "function_names", fr.function_name_id, "sample %d" % i)
            if fr.mapping_id:
                m = resolve(seq, "mappings", fr.mapping_id, "sample %d" % i)
                for sid in m.path_string_ids:
                    resolve(seq, "mapping_paths", sid, "sample %d" % i)
    counts["cpu_samples"] = len(samples)
    counts["sampled_threads"] = len({s.tid for *_, s in samples})

    # A profile is a chain of packets (heapprofd's way with a large one): `continued` on all but
    # its last, `index` counting the sequence's profile packets; a packet's frames, callstacks and
    # samples may name what the packets before it in the chain hold, never what comes after.
    heap_alloc = 0
    profiles = 0
    strings, frames, stacks = {}, {}, {}
    for i, h in enumerate(heap):
        if h.index != i:
            fail("heap profile: packet %d has index %d" % (i, h.index))
        strings.update({s.iid: s.str for s in h.strings})
        frames.update({f.iid: f for f in h.frames})
        stacks.update({c.iid: c for c in h.callstacks})
        for f in h.frames:
            if f.function_name_id not in strings:
                fail("heap profile: frame %d names string %d, not there" % (f.iid, f.function_name_id))
        for c in h.callstacks:
            for fid in c.frame_ids:
                if fid not in frames:
                    fail("heap profile: callstack %d names frame %d, not there" % (c.iid, fid))
        for d in h.process_dumps:
            if not t0 <= d.timestamp <= max(last_ts.values(), default=t0):
                fail("heap profile: dumped at %d, outside the trace's %d to %d" % (d.timestamp, t0,
                                                                                   max(last_ts.values(), default=t0)))
            for s in d.samples:
                if s.callstack_id not in stacks:
                    fail("heap profile: sample of callstack %d, not there" % s.callstack_id)
                heap_alloc += s.self_allocated
        if not h.continued:
            profiles += 1
            strings, frames, stacks = {}, {}, {}
    if heap and heap[-1].continued:
        fail("heap profile: its last packet says more follow")
    counts["heap_profiles"] = profiles
    counts["heap_packets"] = len(heap)
    counts["heap_allocated"] = heap_alloc

    if args.json:
        j = json_counts(args.json)
        for k in ("slices", "instants", "counter_samples", "flows"):
            if j[k] != counts[k]:
                fail("%s: %d in the Perfetto trace, %d in the JSON" % (k, counts[k], j[k]))
    if args.folded:
        total = folded_total(args.folded)
        if total != counts["cpu_samples"]:
            fail("cpu samples: %d in the Perfetto trace, %d in %s" % (counts["cpu_samples"], total, args.folded))
    if args.heap_folded:
        total = folded_total(args.heap_folded)
        if total != heap_alloc:
            fail("heap profile: %d bytes allocated, %d in %s" % (heap_alloc, total, args.heap_folded))
    out = dict(counts)
    out["threads"] = len(threads)
    out["names"] = dict(names)
    out["packets"] = len(packets)
    out["compressed_bundles"] = bundles
    json.dump(out, sys.stdout)
    print()


main()
