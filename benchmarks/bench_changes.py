"""Speed of ``dcpfast.changes`` next to what a user would run instead, in the same run,
on the suite's mixed corpus (about a million frames).

    python benchmarks/bench_changes.py [--items N] [--repeat R] [--cache DIR] [--json [PATH]]
    python benchmarks/bench_changes.py --quick

Times, taking turns (best of R after a warm-up, gc paused): the frames and their values
to Parquet (``scan``, ``to_arrow()``, ``values()``, two Parquet files in memory: what
``dcpfast convert --values`` writes; the baseline); ``state`` of the corpus; the feed
(``changes``) to Parquet; the feed as Debezium JSON lines (``before`` included, the
documents' JSON spliced in), with its output in MB/s, and the JSON lines of the Debezium
table alone (the encoding: ``json_lines``); ``audit`` of a clean sink (every version the
stream sent, as the Kafka connector's records in an Arrow table, and as Debezium events in
a JSON lines file) next to ``diff`` of the stream with itself. Before anything is timed it
checks that the feed, applied in order, is the state, and that the audits of the clean
sinks find nothing. The feed is written as ``dcpfast changes`` writes it, a batch at a
time. Then it measures the peak RSS a fresh interpreter adds while it makes the state,
the feed to Parquet and the Debezium JSON lines (each batch written and let go, and once
made whole for comparison), and while it audits the JSON lines sink.
Timings are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import io
import json
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import dcpfast
from dcpfast.changes import audit, changes, formatted, json_lines

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import common  # noqa: E402
from suite.common import CheckFailed, arguments, check, settle  # noqa: E402
from suite.corpora import CORPORA, load_corpus, print_corpus  # noqa: E402
from suite.timing import Timing, take_turns  # noqa: E402

DEFAULT_JSON = HERE / "results" / "bench_changes.json"
MIXED = CORPORA[0]
DEFAULTS = dict(items=MIXED.items, repeat=3)
QUICK = dict(items=20_000, repeat=2)


def verify(source: bytes) -> pa.Table:
    """The feed of ``source``, checked: applied in order, it is the state."""
    feed = changes(source, before=True)
    docs: dict = {}
    for row in feed.select(["vbucket", "collection_id", "key", "deleted", "by_seqno",
                            "cas"]).to_pylist():
        key = (row["vbucket"], row["collection_id"], row["key"])
        if row["deleted"]:
            docs.pop(key, None)
        else:
            docs[key] = (row["by_seqno"], row["cas"])
    state = dcpfast.state(source, values=False)
    want = {(r["vbucket"], r["collection_id"], r["key"]): (r["by_seqno"], r["cas"])
            for r in state.select(["vbucket", "collection_id", "key", "by_seqno",
                                   "cas"]).to_pylist()}
    check(docs == want, f"the feed applied holds {len(docs):,} documents, the state "
                        f"{len(want):,}, or their versions differ")
    return feed


def _parquet(table: pa.Table) -> int:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.tell()


def feed_to_parquet(source, sink) -> None:
    """The feed of ``source`` to Parquet at ``sink``, a batch at a time (as ``dcpfast
    changes -o FEED.parquet`` writes it)."""
    stream = changes(source, stream=True)
    with pq.ParquetWriter(sink, stream.schema) as writer:
        for batch in stream:
            writer.write_batch(batch)


def debezium_lines(source) -> int:
    """The bytes of the feed of ``source`` as Debezium JSON lines, made a batch at a
    time and let go."""
    return sum(len(piece) for batch in changes(source, before=True, stream=True)
               for piece in json_lines(formatted(pa.Table.from_batches([batch]),
                                                 "debezium")))


_RSS_CHILD = textwrap.dedent("""
    import io, sys
    sys.path.insert(0, sys.argv[3])
    import dcpfast
    from bench_changes import debezium_lines, feed_to_parquet
    from dcpfast.changes import changes, formatted, json_lines

    def peak():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f
                        if line.startswith("VmHWM:"))

    what, path = sys.argv[1], sys.argv[2]
    base = peak()
    if what == "audit":
        from dcpfast.changes import audit
        assert audit(path, sys.argv[4]).num_rows == 0
    elif what == "state":
        dcpfast.state(path)
    elif what == "parquet":
        feed_to_parquet(path, io.BytesIO())
    elif what == "debezium":
        debezium_lines(path)
    else:
        sum(map(len, json_lines(formatted(changes(path, before=True), "debezium"))))
    print(peak() - base)
""")
#: What the memory table measures, by the child's word for it.
_PEAKS = [("state", "state"), ("changes to Parquet, a batch at a time", "parquet"),
          ("Debezium JSON lines, a batch at a time", "debezium"),
          ("Debezium JSON lines, made whole", "whole"),
          ("audit of the Debezium JSON lines sink", "audit")]


def peak_rss(what: str, path: Path, sink: Path) -> int | None:
    """The peak RSS a fresh interpreter adds while it runs ``what`` (``_PEAKS``) over
    the dump at ``path`` (the audit: of ``sink``); None where the system does not say (no
    /proc)."""
    if not Path("/proc/self/status").exists():
        return None
    out = subprocess.run([sys.executable, "-c", _RSS_CHILD, what, str(path), str(HERE),
                          str(sink)], check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1])


def main(argv=None) -> int:
    parser = arguments(__doc__, DEFAULTS, QUICK, DEFAULT_JSON)
    parser.add_argument("--cache", type=Path, help="directory to keep the corpus in")
    args = settle(parser, argv, DEFAULTS, QUICK)
    info = common.machine()
    common.print_machine(info)
    source, expected, origin = load_corpus(MIXED, args.items, args.cache)
    print_corpus(MIXED, args.items, expected, origin)
    frames, size = expected["frames"], expected["bytes"]
    try:
        feed = verify(source)
    except CheckFailed as failure:
        print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
        return 1
    debezium = formatted(feed, "debezium")
    json_bytes = sum(len(piece) for piece in json_lines(debezium))
    print(f"\nchecks passed: {feed.num_rows:,} changes, applied in order the state")

    def baseline():
        batch = dcpfast.scan(source)
        table = batch.to_arrow()
        values = batch.values()
        return _parquet(table) + _parquet(values)

    sent = feed.filter(pa.compute.is_in(feed["change"], pa.array(
        ["mutation", "deletion", "expiration"])))
    sink = formatted(sent.drop_columns(["before"]), "couchbase-kafka")
    found = audit(source, sink)
    check(found.num_rows == 0, f"the audit of a clean sink found {found.num_rows:,} problems")
    scratch = tempfile.TemporaryDirectory()
    lines = Path(scratch.name) / "sink.jsonl"
    with open(lines, "wb") as f:
        for piece in json_lines(formatted(sent, "debezium")):
            f.write(piece)
    found = audit(source, lines)
    check(found.num_rows == 0, f"the audit of the JSON lines sink found {found.num_rows:,} "
                               "problems")
    del sent, found
    runs = [
        ("frames and values to Parquet", baseline),
        ("state", lambda: dcpfast.state(source)),
        ("changes to Parquet", lambda: feed_to_parquet(source, io.BytesIO())),
        ("changes as Debezium JSON lines", lambda: debezium_lines(source)),
        ("JSON lines of the Debezium table", lambda: sum(
            len(p) for p in json_lines(debezium))),
        ("audit of a clean sink", lambda: audit(source, sink)),
        ("audit of it as Debezium JSON lines", lambda: audit(source, lines)),
        ("diff of the stream with itself", lambda: dcpfast.diff(source, source)),
    ]
    timings = [Timing(label, frames, size) for label, _ in runs]
    take_turns(list(zip(timings, [fn for _, fn in runs])), args.repeat)
    base = timings[0].best
    print(f"\nspeed (best of {args.repeat} after a warm-up, measurements taking turns, gc "
          "paused; x base compares times with the frames and values to Parquet)")
    print(f"{'measurement':<34} {'best':>10} {'M frames/s':>11} {'x base':>8}")
    for t in timings:
        print(f"{t.label:<34} {t.best * 1e3:>7.0f} ms {t.frames_per_s / 1e6:>11.2f} "
              f"{t.best / base:>8.2f}")
    print(f"\nthe Debezium JSON lines sink of the audit: {lines.stat().st_size / 1e6:,.1f} "
          "MB")
    print(f"\nDebezium JSON lines: {json_bytes / 1e6:,.1f} MB of output, "
          f"{json_bytes / timings[3].best / 1e6:,.1f} MB/s with the feed built in the same "
          f"time, {json_bytes / timings[4].best / 1e6:,.1f} MB/s encoding the Debezium "
          "table alone")
    with scratch:
        path = Path(scratch.name) / "corpus.dcp"
        path.write_bytes(source)
        peaks = {label: peak_rss(what, path, lines) for label, what in _PEAKS}
    if None not in peaks.values():
        print(f"\npeak RSS a fresh interpreter adds (VmHWM after the imports to the end), "
              f"the dump {size / 2**20:,.0f} MiB")
        for label, peak in peaks.items():
            print(f"{label:<42} {peak / 2**20:>7,.0f} MiB")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {"machine": info, "corpus": {"name": MIXED.name, "items": args.items,
                                              **MIXED.params, **expected},
                  "repeat": args.repeat, "changes": feed.num_rows, "json_bytes": json_bytes,
                  "peak_rss": peaks,
                  "timings": [{**asdict(t), "best": t.best, "x_base": t.best / base}
                              for t in timings]}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
