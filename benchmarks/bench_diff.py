"""Speed of ``dcpfast.diff`` next to building the two states it compares, in the same run,
on the suite's mixed corpus (about a million frames) and a target made from it.

    python benchmarks/bench_diff.py [--items N] [--repeat R] [--cache DIR] [--json [PATH]]
    python benchmarks/bench_diff.py --quick

The target is the corpus with one byte of the body changed in one plain JSON mutation in
``--every`` (100 by default), frames otherwise unchanged. Times, taking turns (best of R
after a warm-up, gc paused): ``state`` of the source; the two states one after the other
(``state(source)``, then ``state(target)``: the baseline); ``diff(threads=1)``, which
builds them one after the other too, then compares; and ``diff`` as it runs by default
(the two states built at the same time where the process may use 2 cores). Before
anything is timed it checks that the diff finds exactly the documents changed (those
whose changed version is still their current one) and nothing else, on both thread
settings. It reports the peak memory of the diff next to that of the two states.
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

import numpy as np
import pyarrow as pa

import dcpfast
from dcpfast.compare import diff_errors, summary

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import common  # noqa: E402
from suite.common import CheckFailed, arguments, check, settle  # noqa: E402
from suite.corpora import CORPORA, load_corpus, print_corpus  # noqa: E402
from suite.timing import Timing, take_turns  # noqa: E402

DEFAULT_JSON = HERE / "results" / "bench_diff.json"
MIXED = CORPORA[0]
DEFAULTS = dict(items=MIXED.items, repeat=5, every=100)
QUICK = dict(items=20_000, repeat=2, every=100)


def changed(data: bytes, every: int) -> tuple[bytes, set]:
    """``data`` with the first body byte of every ``every``-th plain JSON mutation
    changed, and the (vbucket, collection, key, seqno) of each change."""
    batch = dcpfast.scan(data, collections=True)
    plain = np.flatnonzero((batch["opcode"] == dcpfast.Opcode.MUTATION)
                           & (batch["datatype"] == dcpfast.Datatype.JSON)
                           & (batch["value_len"] > 0))[::every]
    out = bytearray(data)
    at = batch["value_offset"][plain]                # positions in the stream
    out_view = np.frombuffer(out, np.uint8)
    out_view[at] ^= 0x20                  # '{' becomes '[': still a JSON-flagged value
    del out_view
    start = batch["key_offset"]
    keys = {(int(batch["vbucket"][i]), int(batch["collection_id"][i]),
             data[start[i]:start[i] + batch["key_len"][i]], int(batch["by_seqno"][i]))
            for i in plain.tolist()}
    return bytes(out), keys


def verify(source: bytes, target: bytes, touched: set) -> pa.Table:
    """The diff of the corpus and its target, checked: exactly the documents whose current
    version was changed, each a body mismatch, nothing skipped or left uncompared; the
    same on one thread."""
    state = dcpfast.state(source).select(["vbucket", "collection_id", "key", "by_seqno"])
    current = {(r["vbucket"], r["collection_id"], r["key"], r["by_seqno"])
               for r in state.to_pylist()}
    found = dcpfast.diff(source, target)
    check(found.equals(dcpfast.diff(source, target, threads=1), check_metadata=True),
          "the diff on one thread differs from the diff on several")
    rows = found.to_pylist()
    check(all(r["kind"] == "mismatch" and r["fields"] == ["body"] for r in rows),
          "the diff found something other than body mismatches")
    check({(r["source_vbucket"], r["source_collection_id"], r["key"], r["source_by_seqno"])
           for r in rows} == touched & current and len(rows) == len(touched & current),
          f"{len(rows)} mismatches for {len(touched & current)} documents changed")
    totals = summary(found).to_pylist()
    check(sum(c["not_compared"] for c in totals) == 0 and
          not any(diff_errors(found).values()), "something was skipped or not compared")
    return found


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
    parser.add_argument("--every", type=int, help="change one plain JSON mutation in "
                        f"this many (default {DEFAULTS['every']})")
    parser.add_argument("--cache", type=Path, help="directory to keep the corpus in")
    args = settle(parser, argv, DEFAULTS, QUICK)
    info = common.machine()
    common.print_machine(info)
    source, expected, origin = load_corpus(MIXED, args.items, args.cache)
    print_corpus(MIXED, args.items, expected, origin)
    frames, size = expected["frames"], expected["bytes"]
    target, touched = changed(source, args.every)
    try:
        found = verify(source, target, touched)
    except CheckFailed as failure:
        print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
        return 1
    totals = summary(found).to_pylist()
    documents = sum(c["source"] for c in totals)
    print(f"\nchecks passed: {documents:,} documents a side, {found.num_rows:,} body "
          f"mismatches found (of {len(touched):,} mutations changed); the same on one "
          "thread; nothing skipped or left uncompared")
    runs = [
        ("state(source)", lambda: dcpfast.state(source)),
        ("state(source), state(target)", lambda: (dcpfast.state(source),
                                                  dcpfast.state(target))),
        ("diff(threads=1)", lambda: dcpfast.diff(source, target, threads=1)),
        ("diff", lambda: dcpfast.diff(source, target)),
    ]
    timings = [Timing(label, frames * (1 if i == 0 else 2), size * (1 if i == 0 else 2))
               for i, (label, _) in enumerate(runs)]
    take_turns(list(zip(timings, [fn for _, fn in runs])), args.repeat)
    both = timings[1].best
    print(f"\nspeed (best of {args.repeat} after a warm-up, measurements taking turns, gc "
          "paused; x states compares times with building the two states)")
    print(f"{'measurement':<32} {'best':>10} {'M frames/s':>11} {'x states':>9}   (frames "
          "of the streams read)")
    for t in timings:
        print(f"{t.label:<32} {t.best * 1e3:>7.0f} ms {t.frames_per_s / 1e6:>11.2f} "
              f"{t.best / both:>9.2f}")
    _, states_held = peak(lambda: (dcpfast.state(source), dcpfast.state(target)))
    _, diff_held = peak(lambda: dcpfast.diff(source, target, threads=1))
    print(f"\nmemory: diff(threads=1) peaked at {diff_held / 1e6:,.1f} MB, the two states "
          f"built one after the other (the first kept) at {states_held / 1e6:,.1f} MB, for "
          f"two {size / 1e6:,.1f} MB streams of {documents:,} documents")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {"machine": info, "corpus": {"name": MIXED.name, "items": args.items,
                                              **MIXED.params, **expected},
                  "repeat": args.repeat, "every": args.every, "documents": documents,
                  "mismatches": found.num_rows, "states_peak_bytes": states_held,
                  "diff_peak_bytes": diff_held,
                  "timings": [{**asdict(t), "best": t.best, "x_states": t.best / both}
                              for t in timings]}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
