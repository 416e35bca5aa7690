"""Speed of ``dcpfast.state`` next to the query a user would write instead, in the same run,
on the suite's mixed corpus.

    python benchmarks/bench_state.py [--items N] [--repeat R] [--threads T ...] [--cache DIR]
                                     [--processes P ...] [--vbuckets V] [--json [PATH]]
    python benchmarks/bench_state.py --quick

The anchor is what a user without ``state`` would write: ``dcpfast.scan`` (one thread),
``to_arrow()``, and DuckDB (one thread) keeping per (vbucket, collection, key) the
mutation, deletion or expiration with the highest ``by_seqno`` (``arg_max``) and its
metadata, the live documents of it. It does less than ``state`` (no durable writes,
restarts, collection drops, snapshots or checks) and is timed as the bar ``state`` must
clear. Then, taking turns (best of R after a warm-up, gc paused), one thread each:
``scan`` with all columns; ``state(values=False)``; ``state``; ``state(history=True,
values=False)``; ``state(history=True)``; and ``state`` over ``iter_batches`` of 64 MiB;
and, for each T of ``--threads T ...`` (default: the usable cores), ``state(values=False)``
on T threads, then ``state`` and ``state(history=True)`` on the most; and with
``--processes P ...``, ``state(values=False)`` and ``state`` of the corpus's path (written
to a file) in one process and shared among P processes (``--vbuckets V``: a corpus of V
vbuckets instead of 4, so that more processes have a share each). Each row gives its
time over the scan's and over ``state(values=False)``'s, and the anchor's time over its
own. Before anything is timed it checks that the chunked state
equals the one-batch state, that nothing was skipped and every vbucket is consistent
somewhere, and that the anchor found the same live documents as ``state`` where the
corpus's last change of a document is not a durable write; it reports the peak memory of
the chunked state next to the table it returns.

Last, the goal's table (``--goal-turns G``, default 5; 0 leaves it out): the anchor and
``state(values=False)``, one thread each, on two shapes of stream at about 300k and 1M
frames: the mixed corpus and ``dcpfast.testing.synthetic_stream``'s defaults (fewer
documents, more versions each). Each turn times both; the table gives the anchor's time
over state's, best against best and the lowest, median and highest of the turns.
Timings are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json
import sys
import tempfile
import tracemalloc
from dataclasses import asdict, replace
from pathlib import Path

import pyarrow as pa

import dcpfast
from dcpfast.documents import consistency, state_errors

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import common  # noqa: E402
from suite.common import CheckFailed, arguments, check, settle  # noqa: E402
from suite.corpora import CORPORA, Corpus, load_corpus, print_corpus  # noqa: E402
from suite.timing import Timing, take_turns  # noqa: E402

DEFAULT_JSON = HERE / "results" / "bench_state.json"
MIXED = CORPORA[0]
DEFAULTS = dict(items=MIXED.items, repeat=5)
QUICK = dict(items=20_000, repeat=2)
#: The goal's corpora, each with its document changes at about 300k and 1M frames (and
#: in a quick run): the mixed corpus, and ``synthetic_stream``'s (``synthetic_frames``
#: with its defaults).
GOAL = ((MIXED, (265_000, 880_000), (20_000,)),
        (Corpus("synthetic_stream", "dcpfast.testing.synthetic_stream's defaults", {},
                1_000_000), (300_000, 1_000_000), (20_000,)))
BATCH_BYTES = 64 << 20
#: The anchor's query: per document the last plain change and its metadata.
QUERY = """
select vbucket, collection_id, key,
       max(by_seqno) as by_seqno, arg_max(rev_seqno, by_seqno) as rev_seqno,
       arg_max(cas, by_seqno) as cas, arg_max(flags, by_seqno) as flags,
       arg_max(expiration, by_seqno) as expiration, arg_max(datatype, by_seqno) as datatype,
       arg_max(opcode, by_seqno) as opcode
from frames where opcode in (87, 88, 89)
group by vbucket, collection_id, key
"""


def anchor_query():
    """The anchor, on a DuckDB connection of one thread: a function of a dump's bytes."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 1")

    def run(data: bytes) -> pa.Table:
        frames = dcpfast.scan(data, collections=True, threads=1).to_arrow()  # noqa: F841
        live = con.sql(QUERY)
        return live.filter("opcode = 87").to_arrow_table()
    return run


def verify(data: bytes, anchor, vbuckets: int) -> pa.Table:
    """The state of the corpus, checked: chunked equals whole, nothing skipped, every
    vbucket consistent somewhere, and the anchor's live documents those of the state
    whose last change is not a durable write."""
    whole = dcpfast.state(data)
    chunked = dcpfast.state(dcpfast.iter_batches(data, 1 << 20))
    check(chunked.equals(whole, check_metadata=True),
          "state over 1 MiB batches differs from state over one batch")
    check(not state_errors(whole), "state skipped frames of a clean corpus")
    points = consistency(whole).column("consistent_seqno").to_pylist()
    check(len(points) == vbuckets and min(points) > 0, f"consistent seqnos {points}")
    check(not any(consistency(whole).column("frames_lost").to_pylist()),
          "the stream checks found frames lost in a complete corpus")
    agreement(data, anchor, whole)
    return whole


def agreement(data: bytes, anchor, whole: pa.Table) -> None:
    """Check that the anchor's live documents are, mostly, those of the state ``whole``
    (the others' last change is a durable write, which the anchor does not read)."""
    mine = {(r["vbucket"], r["collection_id"], r["key"]): r["by_seqno"]
            for r in whole.select(["vbucket", "collection_id", "key", "by_seqno"]).to_pylist()}
    theirs = {(r["vbucket"], r["collection_id"], r["key"]): r["by_seqno"]
              for r in anchor(data).select(["vbucket", "collection_id", "key",
                                            "by_seqno"]).to_pylist()}
    agree = sum(mine.get(k) == v for k, v in theirs.items())
    check(agree >= 0.5 * len(mine), f"the anchor agrees with state on {agree:,} of "
          f"{len(mine):,} documents")
    print(f"the anchor keeps {len(theirs):,} live documents, the same as state on {agree:,} "
          f"of state's {len(mine):,} (the others' last change is a durable write, which the "
          "anchor does not read)")


def goal(args, anchor) -> list[dict]:
    """The goal's table (see the module's text): one row per corpus and size, printed
    and returned."""
    rows = []
    for corpus, sizes, quick in GOAL:
        for items in quick if args.quick else sizes:
            data, expected, _ = load_corpus(corpus, items, args.cache)
            agreement(data, anchor, dcpfast.state(data, values=False))
            theirs = Timing("anchor", expected["frames"], expected["bytes"])
            mine = Timing("state(values=False)", expected["frames"], expected["bytes"])
            take_turns([(theirs, lambda data=data: anchor(data)),
                        (mine, lambda data=data: dcpfast.state(data, values=False,
                                                               threads=1))],
                       args.goal_turns)
            turns = sorted(a / m for a, m in zip(theirs.times, mine.times))
            rows.append({"corpus": corpus.name, "items": items, **expected,
                         "anchor_s": theirs.best, "state_s": mine.best,
                         "best_over_best": theirs.best / mine.best, "turns": turns})
            del data
    print(f"\ngoal: state(values=False) at least 2x faster than the anchor, one thread "
          f"each ({args.goal_turns} turns, each timing both after a warm-up; anchor / state)")
    print(f"{'corpus':<18} {'frames':>10} {'MB':>7} {'anchor':>10} {'state':>10} "
          f"{'best/best':>9} {'lowest':>7} {'median':>7} {'highest':>7}")
    for r in rows:
        turns = r["turns"]
        print(f"{r['corpus']:<18} {r['frames']:>10,} {r['bytes'] / 1e6:>7.1f} "
              f"{r['anchor_s'] * 1e3:>7.0f} ms {r['state_s'] * 1e3:>7.0f} ms "
              f"{r['best_over_best']:>9.2f} {turns[0]:>7.2f} {turns[len(turns) // 2]:>7.2f} "
              f"{turns[-1]:>7.2f}")
    return rows


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


def _shared(data: bytes, processes: list[int]) -> list[tuple[str, object]]:
    """The runs of the corpus's path (written to a file kept for the process) in one
    process and shared among each of ``processes``."""
    if not processes:
        return []
    held = tempfile.NamedTemporaryFile(suffix=".dcp")  # noqa: SIM115 (kept to the end)
    held.write(data)
    held.flush()
    _FILES.append(held)
    path = held.name
    return [(f"{label}, path, {n} process{'es' * (n > 1)}",
             lambda n=n, kw=kw: dcpfast.state(path, processes=n, threads=1, **kw))
            for label, kw in (("state(values=False)", {"values": False}), ("state", {}))
            for n in sorted({1, *processes})]


_FILES: list = []    # the files the runs of a path read


def main(argv=None) -> int:
    parser = arguments(__doc__, DEFAULTS, QUICK, DEFAULT_JSON)
    parser.add_argument("--cache", type=Path, help="directory to keep the corpus in")
    parser.add_argument("--threads", type=int, nargs="+", metavar="T",
                        default=[len(os.sched_getaffinity(0))],
                        help="thread counts of the last state measurements (default: the "
                        "usable cores)")
    parser.add_argument("--processes", type=int, nargs="+", metavar="P", default=[],
                        help="also time the state of the corpus's path shared among P "
                        "processes")
    parser.add_argument("--vbuckets", type=int, default=MIXED.params["vbuckets"],
                        help="vbuckets of the corpus (default: %(default)s)")
    parser.add_argument("--goal-turns", type=int, default=5, metavar="G",
                        help="turns of the goal's table (default: %(default)s; 0 leaves "
                        "it out)")
    args = settle(parser, argv, DEFAULTS, QUICK)
    info = common.machine()
    common.print_machine(info)
    corpus = replace(MIXED, params={**MIXED.params, "vbuckets": args.vbuckets})
    data, expected, origin = load_corpus(corpus, args.items, args.cache)
    print_corpus(corpus, args.items, expected, origin)
    frames, size = expected["frames"], expected["bytes"]
    anchor = anchor_query()
    try:
        table = verify(data, anchor, args.vbuckets)
    except CheckFailed as failure:
        print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
        return 1
    print(f"checks passed: {table.num_rows:,} documents; the state over 1 MiB batches "
          "equals the one-batch state; nothing skipped")
    most = max(args.threads)
    runs = [
        ("scan, all columns", lambda: dcpfast.scan(data, collections=True, threads=1)),
        ("anchor: scan + to_arrow + DuckDB", lambda: anchor(data)),
        ("state(values=False)", lambda: dcpfast.state(data, values=False, threads=1)),
        ("state", lambda: dcpfast.state(data, threads=1)),
        ("state(history=True, values=False)",
         lambda: dcpfast.state(data, history=True, values=False, threads=1)),
        ("state(history=True)", lambda: dcpfast.state(data, history=True, threads=1)),
        ("state(iter_batches 64 MiB)",
         lambda: dcpfast.state(dcpfast.iter_batches(data, BATCH_BYTES, threads=1),
                               threads=1)),
        *((f"state(values=False), {n} thread{'s' * (n > 1)}",
           lambda n=n: dcpfast.state(data, values=False, threads=n)) for n in args.threads),
        (f"state, {most} thread{'s' * (most > 1)}", lambda: dcpfast.state(data, threads=most)),
        (f"state(history=True), {most} thread{'s' * (most > 1)}",
         lambda: dcpfast.state(data, history=True, threads=most)),
        *_shared(data, args.processes),
    ]
    timings = [Timing(label, frames, size) for label, _ in runs]
    take_turns(list(zip(timings, [fn for _, fn in runs])), args.repeat)
    scan_time, anchor_time, bare_time = timings[0].best, timings[1].best, timings[2].best
    print(f"\nspeed (best of {args.repeat} after a warm-up, measurements taking turns, gc "
          "paused; one thread unless said; x scan, x bare and anchor / x compare times, bare "
          "being state(values=False))")
    print(f"{'measurement':<38} {'best':>10} {'M frames/s':>11} {'MB/s':>8} {'x scan':>7} "
          f"{'x bare':>7} {'anchor / x':>11}")
    for t in timings:
        print(f"{t.label:<38} {t.best * 1e3:>7.0f} ms {t.frames_per_s / 1e6:>11.2f} "
              f"{t.gb_per_s * 1e3:>8.1f} {t.best / scan_time:>7.1f} {t.best / bare_time:>7.2f} "
              f"{anchor_time / t.best:>11.2f}")
    _, held = peak(lambda: dcpfast.state(dcpfast.iter_batches(data, BATCH_BYTES)))
    print(f"\nmemory of state(iter_batches 64 MiB): peak {held / 1e6:,.1f} MB for a "
          f"{size / 1e6:,.1f} MB stream; the table it returns holds {table.nbytes / 1e6:,.1f} "
          f"MB ({table.num_rows:,} documents)")
    goals = goal(args, anchor) if args.goal_turns > 0 else []
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {"machine": info, "corpus": {"name": MIXED.name, "items": args.items,
                                              **MIXED.params, **expected},
                  "repeat": args.repeat, "documents": table.num_rows,
                  "table_bytes": table.nbytes, "peak_bytes": held,
                  "timings": [{**asdict(t), "best": t.best, "frames_per_s": t.frames_per_s,
                               "x_scan": t.best / scan_time, "x_bare": t.best / bare_time,
                               "anchor_over": anchor_time / t.best} for t in timings],
                  "goal": goals}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
