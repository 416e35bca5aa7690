"""Speed of the stream health summary next to the scan it follows.

    python benchmarks/bench_streams.py [--items N] [--vbuckets V] [--repeat R]

Times ``dcpfast.scan`` (all columns) and ``streams.summarize`` on the same synthetic
conversation, best of ``repeat`` runs after a warm-up, and prints frames per second.
It first checks that the summary of the clean corpus finds no anomaly; timings are
reported, never judged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import dcpfast
from dcpfast import streams, testing

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite.timing import best  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--vbuckets", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)

    data = testing.synthetic_stream(args.items, seed=0, vbuckets=args.vbuckets)
    batch = dcpfast.scan(data, final=True)
    summary = streams.summarize(batch)
    if summary.anomalies.num_rows:
        print(summary.report(), file=sys.stderr)
        return 1
    print(f"corpus: {len(batch):,} frames, {len(data) / 1e6:.1f} MB, {args.vbuckets} vbuckets "
          f"(dcpfast {dcpfast.IMPLEMENTATION} core)")
    runs = [("scan, all columns", lambda: dcpfast.scan(data, final=True)),
            ("summarize (one batch)", lambda: streams.summarize(batch)),
            ("scan + summarize (iter_batches 8 MiB)",
             lambda: streams.summarize(dcpfast.iter_batches([data], batch_bytes=8 << 20)))]
    for name, fn in runs:
        seconds = best(fn, args.repeat)
        print(f"{name:38s} {seconds * 1e3:8.1f} ms  {len(batch) / seconds / 1e6:6.2f} M frames/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
