"""Speed of ``dcpfast.state`` next to the all-column scan, in the same run, on the suite's
mixed corpus (about a million frames).

    python benchmarks/bench_state.py [--items N] [--repeat R] [--cache DIR] [--json [PATH]]
    python benchmarks/bench_state.py --quick

Times, taking turns (best of R after a warm-up, gc paused): ``scan`` with all columns;
``state`` of the stream (which scans it, decodes the values and keeps the newest version
of every document); ``state(values=False)``; ``state(history=True)``; and ``state`` over
``iter_batches`` of 64 MiB, the way a large dump is read. Before anything is timed it
checks that the chunked state equals the one-batch state and that nothing was skipped,
and it reports the peak memory of the chunked state next to the table it returns.
Timings are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json
import sys
import tracemalloc
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa

import dcpfast
from dcpfast.documents import consistency, state_errors

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import common  # noqa: E402
from suite.common import CheckFailed, arguments, check, settle  # noqa: E402
from suite.corpora import CORPORA, load_corpus, print_corpus  # noqa: E402
from suite.timing import Timing, take_turns  # noqa: E402

DEFAULT_JSON = HERE / "results" / "bench_state.json"
MIXED = CORPORA[0]
DEFAULTS = dict(items=MIXED.items, repeat=5)
QUICK = dict(items=20_000, repeat=2)
BATCH_BYTES = 64 << 20


def verify(data: bytes) -> pa.Table:
    """The state of the corpus, checked: chunked equals whole, nothing skipped, every
    vbucket consistent somewhere."""
    whole = dcpfast.state(data)
    chunked = dcpfast.state(dcpfast.iter_batches(data, 1 << 20))
    check(chunked.equals(whole, check_metadata=True),
          "state over 1 MiB batches differs from state over one batch")
    check(not state_errors(whole), "state skipped frames of a clean corpus")
    points = consistency(whole).column("consistent_seqno").to_pylist()
    check(len(points) == 4 and min(points) > 0, f"consistent seqnos {points}")
    return whole


_POOLS = []          # a pool must outlive every buffer it handed out


def peak(fn) -> tuple[object, int]:
    """``fn()`` and the most it held at once: Python's peak plus pyarrow's pool peak."""
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    _POOLS.append(pool)
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        result = fn()
        held = tracemalloc.get_traced_memory()[1] + pool.max_memory()
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)
    return result, held


def main(argv=None) -> int:
    parser = arguments(__doc__, DEFAULTS, QUICK, DEFAULT_JSON)
    parser.add_argument("--cache", type=Path, help="directory to keep the corpus in")
    args = settle(parser, argv, DEFAULTS, QUICK)
    info = common.machine()
    common.print_machine(info)
    data, expected, origin = load_corpus(MIXED, args.items, args.cache)
    print_corpus(MIXED, args.items, expected, origin)
    frames, size = expected["frames"], expected["bytes"]
    try:
        table = verify(data)
    except CheckFailed as failure:
        print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
        return 1
    print(f"\nchecks passed: {table.num_rows:,} documents; the state over 1 MiB batches "
          "equals the one-batch state; nothing skipped")
    runs = [
        ("scan, all columns", lambda: dcpfast.scan(data, collections=True)),
        ("state", lambda: dcpfast.state(data)),
        ("state(values=False)", lambda: dcpfast.state(data, values=False)),
        ("state(history=True)", lambda: dcpfast.state(data, history=True)),
        ("state(iter_batches 64 MiB)",
         lambda: dcpfast.state(dcpfast.iter_batches(data, BATCH_BYTES))),
    ]
    timings = [Timing(label, frames, size) for label, _ in runs]
    take_turns(list(zip(timings, [fn for _, fn in runs])), args.repeat)
    scan_time = timings[0].best
    print(f"\nspeed (best of {args.repeat} after a warm-up, measurements taking turns, gc "
          "paused; x scan compares times)")
    print(f"{'measurement':<30} {'best':>10} {'M frames/s':>11} {'MB/s':>8} {'x scan':>7}")
    for t in timings:
        print(f"{t.label:<30} {t.best * 1e3:>7.0f} ms {t.frames_per_s / 1e6:>11.2f} "
              f"{t.gb_per_s * 1e3:>8.1f} {t.best / scan_time:>7.1f}")
    _, held = peak(lambda: dcpfast.state(dcpfast.iter_batches(data, BATCH_BYTES)))
    print(f"\nmemory of state(iter_batches 64 MiB): peak {held / 1e6:,.1f} MB for a "
          f"{size / 1e6:,.1f} MB stream; the table it returns holds {table.nbytes / 1e6:,.1f} "
          f"MB ({table.num_rows:,} documents)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {"machine": info, "corpus": {"name": MIXED.name, "items": args.items,
                                              **MIXED.params, **expected},
                  "repeat": args.repeat, "documents": table.num_rows,
                  "table_bytes": table.nbytes, "peak_bytes": held,
                  "timings": [{**asdict(t), "best": t.best, "frames_per_s": t.frames_per_s,
                               "x_scan": t.best / scan_time} for t in timings]}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
