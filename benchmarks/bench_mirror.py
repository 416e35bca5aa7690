"""Speed of ``dcpfast.mirror`` next to what a user would run instead, in the same run, on
the suite's mixed corpus (about a million frames) split into 20 dumps.

    python benchmarks/bench_mirror.py [--items N] [--repeat R] [--cache DIR] [--json [PATH]]
    python benchmarks/bench_mirror.py --quick

Times (best of R, the table made afresh before each run, gc paused): the anchor, a
rebuild of the whole (``state`` of the 20 dumps and ``write_deltalake`` of it into a
new table); the first run (``mirror`` of the 20 dumps into a new table); a later run
(``mirror`` of the 20 dumps into a table that holds the first 19, so that it applies the
last dump's changes); the same later run where every vbucket's consumer reconnected in
the last dump (a Stream Request's response before its first snapshot there: each stream
restarted where it stood); the same where one vbucket rolled back 5,000 seqnos in the
last dump (a Rollback response, then the stream restarted: that vbucket built anew from
the stream's start); the same where a collection was dropped at the end of the last dump
(its documents deleted from the table reading on); and ``state`` of that last dump alone,
the measure of what is new.
Before anything is timed it checks that the mirror, and each later run, equals the
rebuild. Timings are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gc
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

import dcpfast
from dcpfast.events import system_events

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import common  # noqa: E402
from suite.common import CheckFailed, arguments, check, settle  # noqa: E402
from suite.corpora import CORPORA, load_corpus, print_corpus  # noqa: E402
from suite.timing import Timing  # noqa: E402

DEFAULT_JSON = HERE / "results" / "bench_mirror.json"
MIXED = CORPORA[0]
DEFAULTS = dict(items=MIXED.items, repeat=3)
QUICK = dict(items=20_000, repeat=2)
PIECES = 20


def split(source: bytes, folder: Path) -> list[Path]:
    """``source`` cut at frame boundaries into ``PIECES`` dumps of about equal size."""
    batch = dcpfast.scan(source, columns=["offset"])
    offsets = batch.to_arrow()["offset"].to_numpy()
    cuts = [0] + [int(offsets[offsets.searchsorted(len(source) * i // PIECES)])
                  for i in range(1, PIECES)] + [len(source)]
    files = []
    for i, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        path = folder / f"dump-{i:03d}.dcp"
        path.write_bytes(source[lo:hi])
        files.append(path)
    return files


def reconnected(dump: bytes) -> bytes:
    """``dump`` with each vbucket's consumer reconnecting before its first snapshot
    marker there: a Stream Request's response (a failover log) with the stream's opaque,
    the stream going on where it stood."""
    batch = dcpfast.scan(dump, columns=["offset", "magic", "opcode", "vbucket", "opaque"])
    marker = (batch["opcode"] == dcpfast.protocol.Opcode.SNAPSHOT_MARKER) & \
        (batch["magic"] == dcpfast.protocol.Magic.CLIENT_REQUEST)
    at = np.flatnonzero(marker)
    _, first = np.unique(batch["vbucket"][at], return_index=True)
    pieces, done = [], 0
    for row in sorted(at[first].tolist()):
        offset = int(batch["offset"][row])
        pieces += [dump[done:offset], dcpfast.testing.failover_log_response(
            [(0x5EED + int(batch["vbucket"][row]), 0)], opaque=int(batch["opaque"][row]))]
        done = offset
    return b"".join([*pieces, dump[done:]])


def rolled_back(dump: bytes, seqnos: int = 5000) -> bytes:
    """``dump`` with its first vbucket rolled back ``seqnos`` below its first item there,
    before its first snapshot marker: a Rollback response, then the stream restarted (a
    failover log), its frames going on."""
    batch = dcpfast.scan(dump, columns=["offset", "magic", "opcode", "vbucket", "opaque",
                                        "by_seqno"])
    marker = (batch["opcode"] == dcpfast.protocol.Opcode.SNAPSHOT_MARKER) & \
        (batch["magic"] == dcpfast.protocol.Magic.CLIENT_REQUEST)
    row = int(np.flatnonzero(marker)[0])
    vbucket, opaque = int(batch["vbucket"][row]), int(batch["opaque"][row])
    mine = np.flatnonzero((batch["vbucket"] == vbucket) & (batch.validity("by_seqno")
                                                             if batch.validity("by_seqno")
                                                             is not None else True))
    point = max(int(batch["by_seqno"][mine[mine > row][0]]) - seqnos, 0)
    offset = int(batch["offset"][row])
    answer = dcpfast.testing.response(dcpfast.protocol.Opcode.STREAM_REQUEST,
                                      status=dcpfast.protocol.Status.ROLLBACK,
                                      value=point.to_bytes(8, "big"), opaque=opaque)
    return b"".join([dump[:offset], answer, dcpfast.testing.failover_log_response(
        [(0x5EED, point)], opaque=opaque), dump[offset:]])


def dropped(dump: bytes, source: bytes) -> bytes:
    """``dump`` (the end of ``source``) with a collection dropped at its end: on each
    vbucket that created one, a snapshot of its own holding the drop of the first
    collection it created."""
    batch = dcpfast.scan(source)
    events = system_events(batch).to_pylist()
    made = [e for e in events if e["event"] == "create_collection"]
    cid = made[0]["collection_id"]
    uid = max(e["manifest_uid"] for e in events) + 1
    seqno = np.asarray(batch["by_seqno"], np.uint64)
    if batch.validity("by_seqno") is not None:
        seqno = np.where(batch.validity("by_seqno"), seqno, 0)
    pieces = [dump]
    for e in made:
        if e["collection_id"] != cid:
            continue
        vbucket = e["vbucket"]
        mine = np.flatnonzero(batch["vbucket"] == vbucket)
        top, opaque = int(seqno[mine].max()) + 1, int(batch["opaque"][mine[-1]])
        hdr = dict(vbucket=vbucket, opaque=opaque)
        pieces += [dcpfast.testing.snapshot_marker(top, top, **hdr),
                   dcpfast.testing.drop_collection(
                       by_seqno=top, manifest_uid=uid, scope_id=e["scope_id"],
                       collection_id=cid, **hdr)]
    return b"".join(pieces)


def variant(root: Path, name: str, files: list[Path], last: bytes) -> tuple:
    """The dumps ``files`` with the last one's bytes ``last`` (in a folder ``name`` of
    ``root``, the others linked), their rebuild, a table of the first 19 mirrored, and a
    later run over a copy of it: (the dumps, the rebuilt table, the table of the first
    19, the table after the later run, that run's ``MirrorRun``)."""
    from dcpfast.mirror import mirror

    folder = root / name
    folder.mkdir()
    inputs = [*(folder / f.name for f in files[:-1]), folder / "dump-last.dcp"]
    for f, link in zip(files[:-1], inputs, strict=False):
        link.symlink_to(f)
    inputs[-1].write_bytes(last)
    rebuilt, held, grown = (root / f"{name}-{what}.delta" for what in
                            ("rebuilt", "held", "grown"))
    rebuild(inputs, rebuilt)
    mirror(inputs[:-1], held)
    shutil.copytree(held, grown)
    return inputs, rebuilt, held, grown, mirror(inputs, grown)


def rebuild(files: list[Path], table: Path) -> None:
    """What a user runs instead: the state of everything, written as a new table."""
    import deltalake

    from dcpfast.mirror.table import as_table

    shutil.rmtree(table, ignore_errors=True)
    whole = b"".join(f.read_bytes() for f in files)
    rows = dcpfast.state(whole, errors="skip").replace_schema_metadata(None)
    deltalake.write_deltalake(table, as_table(rows))


_RSS_CHILD = textwrap.dedent("""
    import json, sys
    import dcpfast
    from dcpfast.mirror import mirror

    def peak():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f
                        if line.startswith("VmHWM:"))

    what, files, table = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    base = peak()
    if what == "state":
        dcpfast.state(files[-1], errors="skip")
    else:
        mirror(files, table)
    print(json.dumps({"baseline": base, "peak": peak()}))
""")


def peak_rss(what: str, files: list[Path], table: Path) -> int | None:
    """The peak RSS a fresh interpreter adds while it runs ``what`` ("mirror": a mirror
    of ``files`` into ``table``; "state": the state of the last file alone), or None
    where the system does not say (no /proc)."""
    if not Path("/proc/self/status").exists():
        return None
    out = subprocess.run([sys.executable, "-c", _RSS_CHILD, what,
                          json.dumps([str(f) for f in files]), str(table)],
                         check=True, capture_output=True, text=True).stdout
    got = json.loads(out)
    return got["peak"] - got["baseline"]


def timed(label: str, frames: int, size: int, repeat: int, fn, before=None) -> Timing:
    """``fn`` timed ``repeat`` times after a warm-up, ``before`` run untimed ahead of each."""
    timing = Timing(label, frames, size)
    for i in range(repeat + 1):
        if before is not None:
            before()
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        gc.enable()
        if i:
            timing.times.append(elapsed)
    return timing


def main(argv=None) -> int:
    parser = arguments(__doc__, DEFAULTS, QUICK, DEFAULT_JSON)
    parser.add_argument("--cache", type=Path, help="directory to keep the corpus in")
    args = settle(parser, argv, DEFAULTS, QUICK)
    import deltalake  # the delta extra: imported once --help is past

    from dcpfast.mirror import mirror

    info = common.machine()
    common.print_machine(info)
    source, expected, origin = load_corpus(MIXED, args.items, args.cache)
    print_corpus(MIXED, args.items, expected, origin)
    frames, size = expected["frames"], expected["bytes"]
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        folder = root / "dumps"
        folder.mkdir()
        files = split(source, folder)
        last = files[-1].read_bytes()
        mirrored = root / "mirror.delta"
        mirror(files, mirrored)
        plain, anchor, held, grown, later = variant(root, "plain", files, last)
        # the same later run, every vbucket's consumer reconnected in the last dump
        rejoined, anchor_r, held_r, grown_r, later_r = variant(root, "again", files,
                                                               reconnected(last))
        # the same later run, one vbucket rolled back in the last dump
        rolled, anchor_b, held_b, grown_b, later_b = variant(root, "back", files,
                                                             rolled_back(last))
        # the same later run, a collection dropped at the end of the last dump
        gone, anchor_d, held_d, grown_d, later_d = variant(root, "drop", files,
                                                           dropped(last, source))
        key = ["vbucket", "collection_id", "key", "by_seqno", "cas"]

        def rows(uri: Path):
            return deltalake.DeltaTable(uri).to_pyarrow_table(columns=key).sort_by(
                [(c, "ascending") for c in key])
        try:
            for name, uri, built in (("the mirror", mirrored, anchor),
                                     ("the later run", grown, anchor),
                                     ("the later run across reconnects", grown_r, anchor_r),
                                     ("the later run across a rollback", grown_b, anchor_b),
                                     ("the later run across a drop", grown_d, anchor_d)):
                want, got = rows(built), rows(uri)
                check(want.equals(got), f"{name} holds {got.num_rows:,} documents, the "
                                        f"rebuild {want.num_rows:,}, or their versions differ")
            check(later_r.read < size // 4, f"the later run across reconnects read "
                                            f"{later_r.read:,} bytes: everything again")
            check(len(later_b.rebuilt) == 1, f"the later run across a rollback built "
                                             f"{later_b.rebuilt or 'no'} vbuckets anew")
            check(later_d.read < size // 4 and later_d.deleted > later.deleted,
                  f"the later run across a drop read {later_d.read:,} bytes and deleted "
                  f"{later_d.deleted:,} documents, {later.deleted:,} without it")
        except CheckFailed as failure:
            print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
            return 1
        print(f"\nchecks passed: {rows(mirrored).num_rows:,} documents in the mirror and after "
              f"the later run, as in the rebuild; the last dump holds {len(last):,} bytes, "
              f"the later run read {later.read:,}, {later_r.read:,} across the reconnects; "
              f"across the rollback it built vbucket {later_b.rebuilt[0]} anew; across "
              f"the drop it deleted {later_d.deleted - later.deleted:,} documents more")
        table = root / "t.delta"

        def fresh():
            shutil.rmtree(table, ignore_errors=True)

        def holding(held: Path):
            """Make the table afresh as ``held``, the first 19 dumps applied."""
            def made():
                fresh()
                shutil.copytree(held, table)
            return made

        timings = [
            timed("rebuild: state + write_deltalake", frames, size, args.repeat,
                  lambda: rebuild(files, table)),
            timed("mirror, first run", frames, size, args.repeat,
                  lambda: mirror(files, table), fresh),
            timed("mirror, a later run (1 dump new)", frames, size, args.repeat,
                  lambda: mirror(plain, table), holding(held)),
            timed("the same, every vbucket reconnected", frames, size, args.repeat,
                  lambda: mirror(rejoined, table), holding(held_r)),
            timed("the same, one vbucket rolled back", frames, size, args.repeat,
                  lambda: mirror(rolled, table), holding(held_b)),
            timed("the same, a collection dropped", frames, size, args.repeat,
                  lambda: mirror(gone, table), holding(held_d)),
            timed("state of the new dump alone", frames // PIECES, len(last), args.repeat,
                  lambda: dcpfast.state(last, errors="skip")),
        ]
        holding(held)()
        memory = {"mirror, first run": peak_rss("mirror", files, root / "fresh.delta"),
                  "mirror, a later run (1 dump new)": peak_rss("mirror", plain, table),
                  "state of the new dump alone": peak_rss("state", files, table)}
    base = timings[0].best
    print(f"\nspeed (best of {args.repeat} after a warm-up; x rebuild compares times with the "
          "rebuild of the whole)")
    print(f"{'measurement':<36} {'best':>10} {'x rebuild':>10}")
    for t in timings:
        print(f"{t.label:<36} {t.best * 1e3:>7.0f} ms {t.best / base:>10.2f}")
    print(f"\na later run takes {timings[2].best / timings[-1].best:.1f} times the state of "
          "the new dump alone")
    if all(v is not None for v in memory.values()):
        print("\npeak RSS a fresh interpreter adds (VmHWM after the imports to the end)")
        for label, added in memory.items():
            print(f"{label:<36} {added / 2**20:>7.0f} MiB")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {"machine": info, "corpus": {"name": MIXED.name, "items": args.items,
                                              **MIXED.params, **expected},
                  "repeat": args.repeat, "pieces": PIECES, "peak_rss_bytes": memory,
                  "timings": [{**asdict(t), "best": t.best, "x_rebuild": t.best / base}
                              for t in timings]}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
