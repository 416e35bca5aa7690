"""Cost of system-event decoding and of naming collections, on synthetic streams.

    python benchmarks/bench_events.py [--items N] [--events E] [--repeat R]

Prints, best of R runs: ``to_arrow()`` against ``with_names(Manifest())`` on a
collection-enabled conversation of N document changes (a few percent more frames), and
``system_events`` on streams of E create-collection events of version 0/1 (fixed layouts)
and of version 2 (FlatBuffers). The decoded events are checked against the encoder's input
before anything is timed; timings are reported, never judged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import dcpfast
from dcpfast import testing as t
from dcpfast.events import Manifest, system_events

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite.timing import best  # noqa: E402


def event_stream(count: int, flatbuffers: bool) -> bytes:
    """``count`` create-collection events: versions 0 and 1 alternating, or all version 2."""
    frames = []
    for i in range(count):
        common = dict(by_seqno=i + 1, manifest_uid=i, scope_id=8, collection_id=8 + i)
        if flatbuffers:
            common.update(version=2, max_ttl=60 if i % 2 else None)
        elif i % 2:
            common["max_ttl"] = 60
        frames.append(t.create_collection(b"collection_%d" % i, **common))
    return b"".join(frames)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    batch = dcpfast.scan(t.synthetic_stream(args.items, seed=1), final=True)
    plain = best(batch.to_arrow, args.repeat)
    named = best(lambda: batch.with_names(Manifest()), args.repeat)
    frames = len(batch)
    print(f"core {dcpfast.IMPLEMENTATION}; {frames:,} frames, "
          f"{len(batch.data) / 1e6:.1f} MB")
    for label, took in (("to_arrow()", plain), ("with_names(Manifest())", named)):
        print(f"{label:30} {took * 1e3:8.1f} ms  {frames / took / 1e6:6.2f} M frames/s")
    print(f"names add {(named - plain) * 1e3:.1f} ms")

    for flatbuffers, label in ((False, "versions 0/1"), (True, "version 2")):
        events = dcpfast.scan(event_stream(args.events, flatbuffers), collections=True,
                              final=True)
        rows = system_events(events)
        if rows["collection_id"].to_pylist() != [8 + i for i in range(args.events)]:
            print("system_events does not match the encoder's input", file=sys.stderr)
            return 1
        took = best(lambda: system_events(events), args.repeat)
        print(f"system_events(), {label:14} {took * 1e3:8.1f} ms  "
              f"{args.events / took / 1e3:6.1f} k events/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
