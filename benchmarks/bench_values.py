"""Speed of ``FrameBatch.values()`` against the Snappy library alone, on one synthetic corpus.

    python benchmarks/bench_values.py [--items N] [--repeat R] [--json [PATH]]
    python benchmarks/bench_values.py --quick

The corpus is ``dcpfast.testing.synthetic_frames`` with its default value mix (20% of the
values Snappy-compressed, 10% with xattrs, 60% JSON). The baseline is what any decoder
must at least spend: ``cramjam.snappy.decompress_raw`` called once per compressed value,
on values already cut out of the stream as ``bytes``. ``values()`` does that and
everything else: finding the documents, inflating, checking and splitting the xattr
sections, and building the Arrow columns. Before anything is timed, the table is checked
against the generator's record of every document; a failed check is the only way this
script exits non-zero. Timings are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import cramjam
import pyarrow as pa
import pyarrow.compute as pc

import dcpfast
from dcpfast import _core as core
from dcpfast import testing

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import common  # noqa: E402
from suite.common import CheckFailed, arguments, check, settle  # noqa: E402
from suite.timing import Timing, take_turns  # noqa: E402

DEFAULT_JSON = HERE / "results" / "bench_values.json"
#: Generator settings; the value mix is ``synthetic_frames``' default.
CORPUS = dict(seed=0, vbuckets=4, collections=True, sync_writes=True)
DEFAULTS = dict(items=300_000, repeat=7)
QUICK = dict(items=30_000, repeat=3)
SNAPPY = int(dcpfast.Datatype.SNAPPY)
JSON = int(dcpfast.Datatype.JSON)


def machine() -> dict:
    """``suite.common.machine()`` plus the Snappy library and the values helper in use."""
    return {**common.machine(), "cramjam": cramjam.__version__,
            "helper": core.values.__name__}


def verify(table: pa.Table, documents: list) -> None:
    check(table.num_rows == len(documents),
          f"values(): {table.num_rows} rows, the generator wrote {len(documents)} documents")
    bodies = table["body"].to_pylist()
    xattrs = table["xattrs"].to_pylist()
    is_json = table["is_json"].to_pylist()
    for i, (doc, body, pairs, flag) in enumerate(zip(documents, bodies, xattrs, is_json)):
        check(body == doc.body, f"row {i}: body differs from the generator's")
        check((None if pairs is None else dict(pairs)) == doc.xattrs,
              f"row {i}: xattrs differ from the generator's")
        check(flag == bool(doc.fields["datatype"] & JSON), f"row {i}: is_json differs")


def timed_rows(batch, compressed: list, documents: int, value_bytes: int, repeat: int
               ) -> list[Timing]:
    """``values()`` in four settings and, last, the Snappy library alone on the compressed
    values, taking turns; prints their table."""
    baseline = Timing("cramjam decompress_raw, one call per value", len(compressed),
                      sum(map(len, compressed)))
    rows = [Timing(label, documents, value_bytes) for label in
            ("values()", "values(xattrs='drop')", "values(xattrs='keep')",
             "values(decompress=False)")] + [baseline]
    decompress_raw = cramjam.snappy.decompress_raw
    take_turns(list(zip(rows, [batch.values, lambda: batch.values(xattrs="drop"),
                               lambda: batch.values(xattrs="keep"),
                               lambda: batch.values(decompress=False),
                               lambda: [decompress_raw(v) for v in compressed]])), repeat)

    print(f"\nspeed (best of {repeat} after a warm-up, measurements taking turns, gc paused; "
          "MB/s counts\nvalue bytes as sent; x baseline compares times)")
    print(f"{'measurement':<44} {'values':>9} {'best':>10} {'values/s':>10} {'MB/s':>8}"
          f" {'x baseline':>10}")
    for t in rows:
        print(f"{t.label:<44} {t.frames:>9,} {t.best * 1e3:>7.2f} ms "
              f"{t.frames / t.best / 1e6:>8.2f} M {t.nbytes / t.best / 1e6:>8.1f}"
              f" {t.best / baseline.best:>9.2f}x")
    return rows


def main(argv=None) -> int:
    args = settle(arguments(__doc__, DEFAULTS, QUICK, DEFAULT_JSON), argv, DEFAULTS, QUICK)
    if dcpfast.IMPLEMENTATION != "cython":
        print("the compiled helpers are not in use: build them with `python setup.py "
              "build_ext --inplace` and unset DCPFAST_PUREPYTHON", file=sys.stderr)
        return 2
    info = machine()
    print("machine")
    print(f"  cpu      {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable)")
    print(f"  python   {info['python']}  numpy {info['numpy']}  pyarrow {info['pyarrow']}  "
          f"cramjam {info['cramjam']}  dcpfast {info['dcpfast']}")

    start = time.perf_counter()
    frames = testing.synthetic_frames(args.items, **CORPUS)
    data = b"".join(f.data for f in frames)
    generated = time.perf_counter() - start
    documents = [f for f in frames if f.body is not None]
    batch = dcpfast.scan(data, collections=True)
    compressed = [f.fields["value"] for f in documents
                  if f.fields["datatype"] & SNAPPY and f.fields["value"]]
    with_xattrs = sum(f.xattrs is not None for f in documents)
    value_bytes = sum(len(f.fields["value"]) for f in documents)
    body_bytes = sum(len(f.body) for f in documents)
    snappy_bytes = sum(map(len, compressed))
    n = len(documents)
    print(f"\ncorpus (synthetic_frames({args.items:,}, "
          + ", ".join(f"{k}={v}" for k, v in CORPUS.items()) + f"), {generated:.1f} s)")
    print(f"  {len(frames):,} frames, {len(data):,} bytes; {n:,} documents: "
          f"{value_bytes:,} value bytes as sent, {body_bytes:,} body bytes")
    print(f"  Snappy {len(compressed):,} values ({100 * len(compressed) / n:.1f}%, "
          f"{snappy_bytes:,} bytes), xattrs {with_xattrs:,} ({100 * with_xattrs / n:.1f}%)")

    try:
        verify(batch.values(), documents)
        inflated = sum(len(cramjam.snappy.decompress_raw(v)) for v in compressed)
        keep = batch.values(xattrs="keep")
        keep_bytes = pc.sum(pc.binary_length(keep["body"])).as_py()
        check(keep_bytes == value_bytes - snappy_bytes + inflated,
              "values(xattrs='keep'): body bytes differ from the inflated values")
    except CheckFailed as failure:
        print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
        return 1
    print("\nchecks passed: every row's body, xattrs and is_json equal the generator's "
          "document;\n  xattrs='keep' bodies add up to the library's inflated bytes")

    r = args.repeat
    rows = timed_rows(batch, compressed, n, value_bytes, r)
    baseline = rows[-1]
    ratio = rows[0].best / baseline.best
    print(f"\nvalues() takes {ratio:.2f}x the time the Snappy library alone needs for the "
          f"{len(compressed):,} compressed values")

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "machine": info,
            "corpus": {"items": args.items, **CORPUS, "frames": len(frames),
                       "bytes": len(data), "documents": n, "snappy_values": len(compressed),
                       "xattr_values": with_xattrs, "value_bytes": value_bytes,
                       "body_bytes": body_bytes, "snappy_bytes": snappy_bytes},
            "repeat": r,
            "timings": [{**asdict(t), "best": t.best, "values_per_s": t.frames / t.best,
                         "mb_per_s": t.nbytes / t.best / 1e6,
                         "x_baseline": t.best / baseline.best} for t in rows],
            "ratio": ratio,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
