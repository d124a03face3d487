#!/usr/bin/env python3
"""check_pftrace_schema.py: libprof's Perfetto trace read with Perfetto's own schema.

Perfetto's Python package (`perfetto` on PyPI, in the project's environment) ships the whole
trace schema compiled (perfetto_trace_pb2: Trace, TracePacket and everything under it). This
parses the file with it — bundles of packets deflated (compressed_packets) inflated and parsed
as the Trace they are — and walks every message of every packet: a field this schema does not
have (a wrong number) is an unknown field, a field of the wrong wire type fails the parse.
Prints a JSON summary (packets by kind, track events by type, samples, the unknown fields and
where they are) on stdout; exits 1 with a message when the file does not parse or has a field
the schema does not know.
Run it with the environment's python3 (its protobuf is the one Perfetto's compiled schema asks)."""
import collections
import json
import sys
import zlib

from google.protobuf import unknown_fields
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def fail(msg):
    sys.exit("check_pftrace_schema: " + msg)


def unknown(msg, path, out):
    """Every unknown field under msg, as 'path.field_number'."""
    for f in unknown_fields.UnknownFieldSet(msg):
        out.append("%s.%d" % (path, f.field_number))
    for fd, value in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        items = value if fd.is_repeated else [value]
        for i, m in enumerate(items):
            unknown(m, "%s.%s" % (path, fd.name), out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_pftrace_schema.py TRACE.pftrace")
    data = open(sys.argv[1], "rb").read()
    packets = []

    def read(blob, where):
        t = pb.Trace()
        try:
            t.ParseFromString(blob)
        except Exception as e:  # a wrong wire type, a cut message
            fail("%s does not parse as Perfetto's Trace: %s" % (where, e))
        for p in t.packet:
            if p.HasField("compressed_packets"):
                read(zlib.decompress(p.compressed_packets), "a bundle")
            else:
                packets.append(p)

    read(data, sys.argv[1])
    bad = []
    kinds = collections.Counter()
    events = collections.Counter()
    for i, p in enumerate(packets):
        unknown(p, "packet[%d]" % i, bad)
        kinds[p.WhichOneof("data") or "(interned data or defaults only)"] += 1
        if p.HasField("track_event"):
            events[pb.TrackEvent.Type.Name(p.track_event.type)] += 1
    if bad:
        fail("fields Perfetto's schema does not have: %s" % ", ".join(bad[:20]))
    json.dump({"packets": len(packets), "kinds": dict(kinds), "track_events": dict(events)}, sys.stdout)
    print()


main()
