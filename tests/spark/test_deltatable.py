"""The Delta table's commit (``dcpfast.spark.deltatable``) without Spark: task results
made by hand (Parquet files written where the tasks write them), committed by
concurrent processes that race for the same load."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")
deltatable = pytest.importorskip("dcpfast.spark.deltatable")

SCHEMA = pa.schema([pa.field("offset", pa.int64()), pa.field("vbucket", pa.int32())])
ROWS = {1: [0, 24, 48], 2: [72, 96]}            # vbucket: offsets of one load
RACERS = 3
ROUNDS = 12


def _staged(out: str, job: str, pid: int | None = None) -> list[dict]:
    """The task results of job ``job``: one Parquet file per vbucket written (named) in the
    table's partition folders, as the Delta job's tasks write them, and the job's
    ``running`` marker naming process ``pid`` on this host (None: this process; 0: no
    marker, as a job killed while it deleted its files leaves)."""
    files = []
    for vb, offsets in ROWS.items():
        relative = f"vbucket={vb}/part-{vb:05d}-{job}-0-{vb}-0.parquet"
        path = Path(out, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"offset": pa.array(offsets, pa.int64())}), path)
        files.append([relative, len(offsets), path.stat().st_size])
    if pid != 0:
        Path(deltatable.running(out, job)).write_text(json.dumps(
            {"host": socket.gethostname(), "pid": pid or os.getpid()}))
    return [{"files": files, "frames": sum(len(o) for o in ROWS.values()),
             "rows": {f"vbucket={vb}": len(o) for vb, o in ROWS.items()},
             "input_bytes": 0, "skipped": [], "seconds": 0.0, "attempt": "00000-0-0"}]


def _racer(racer: int, root: str, barrier, results) -> None:
    """Commit the same load (app ``load``, version 0) to a fresh table each round, at
    the same moment as the other racers."""
    for n in range(ROUNDS):
        out = os.path.join(root, f"round-{n}")
        job = f"{racer:08x}{n:08x}"
        staged = _staged(out, job)
        barrier.wait()
        try:
            done = deltatable.commit(out, job, "append", SCHEMA, ["vbucket"], staged,
                                     app_id="load", app_version=0)
            results.put((n, racer, None if done is None else done["version"]))
        except BaseException as e:                 # the test reports it
            results.put((n, racer, f"{type(e).__name__}: {e}"))


@pytest.mark.parametrize("existing", [False, True], ids=["new-table", "existing-table"])
def test_racing_commits_of_one_load_commit_it_once(tmp_path, existing):
    """Racers committing one ``app_id``'s load to a table that does not exist yet (or
    holds nothing yet): one commits it (creating the table, version 0) with the
    transaction recorded, every other finds the load committed and commits nothing,
    round after round."""
    first = 0
    if existing:
        for n in range(ROUNDS):
            deltatable.commit(str(tmp_path / f"round-{n}"), f"{n:016x}", "append", SCHEMA,
                              ["vbucket"], [], app_id=None, app_version=0)
        first = 1
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(RACERS, timeout=120)
    results = context.Queue()
    racers = [context.Process(target=_racer, args=(r, str(tmp_path), barrier, results))
              for r in range(RACERS)]
    for p in racers:
        p.start()
    got = [results.get(timeout=300) for _ in range(RACERS * ROUNDS)]
    for p in racers:
        p.join(timeout=60)
    want = sorted(o for offsets in ROWS.values() for o in offsets)
    for n in range(ROUNDS):
        outcomes = [v for m, _, v in got if m == n]
        assert sorted(outcomes, key=str) == [first] + [None] * (RACERS - 1), \
            (n, outcomes)
        table = deltalake.DeltaTable(str(tmp_path / f"round-{n}"))
        assert table.version() == first and table.transaction_version("load") == 0
        rows = table.to_pyarrow_table(columns=["offset"]).column("offset").to_pylist()
        assert sorted(rows) == want
        on_disk = {str(p.relative_to(tmp_path / f"round-{n}"))
                   for p in (tmp_path / f"round-{n}").rglob("*.parquet")}
        named = {os.path.relpath(u, tmp_path / f"round-{n}") for u in table.file_uris()}
        assert on_disk == named                    # the losers' files are gone
        assert not list((tmp_path / f"round-{n}").glob("_dcpfast-running-*"))
        summary = json.loads(table.history(1)[0][deltatable.SUMMARY_KEY])
        assert summary["frames"] == len(want)


def _gone() -> int:
    """The id of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_a_first_load_killed_before_its_commit_is_taken_over(tmp_path):
    """A folder that holds what first loads killed before their commit left (markers
    naming gone processes, files of jobs without a marker, the log's temporary of a
    commit not made) is no table yet, in every mode: the next job deletes those leftovers,
    keeps those of a job that still runs, and commits; anything else there is refused."""
    out = str(tmp_path / "t")
    killed, unmarked, running, new = ("a" * 16, "b" * 16, "c" * 16, "d" * 16)
    _staged(out, killed, _gone())
    _staged(out, unmarked, 0)
    _staged(out, running)
    Path(out, deltatable.LOG).mkdir()
    Path(out, deltatable.LOG, "_commit_0f3e-77.json.tmp").write_text("{}")
    for mode in ("append", "overwrite", "error"):
        assert deltatable.check(out, mode, SCHEMA, ["vbucket"], "load", 0) == (False, None)
    deltatable.recover(out)
    left = {str(p.relative_to(out)) for p in Path(out).rglob("*") if p.is_file()}
    assert left == {f"vbucket={vb}/part-{vb:05d}-{running}-0-{vb}-0.parquet" for vb in ROWS} \
        | {f"_dcpfast-running-{running}", f"{deltatable.LOG}/_commit_0f3e-77.json.tmp"}
    done = deltatable.commit(out, new, "append", SCHEMA, ["vbucket"], _staged(out, new),
                             app_id="load", app_version=0)
    assert done is not None and done["version"] == 0
    table = deltalake.DeltaTable(out)
    assert {os.path.relpath(u, out) for u in table.file_uris()} == \
        {f"vbucket={vb}/part-{vb:05d}-{new}-0-{vb}-0.parquet" for vb in ROWS}
    assert table.to_pyarrow_table().num_rows == sum(len(o) for o in ROWS.values())

    for n, (foreign, named) in enumerate((("notes.txt", "notes.txt"),
                           ("vbucket=1/mine.parquet", "vbucket=1/mine.parquet"),
                           (f"other/part-00001-{killed}-0-1-0.parquet", "other"),
                           (f"{deltatable.LOG}/00000000000000000000.crc",
                            f"{deltatable.LOG}/00000000000000000000.crc"))):
        fresh = tmp_path / f"f{n}"
        _staged(str(fresh), killed, _gone())
        Path(fresh, foreign).parent.mkdir(parents=True, exist_ok=True)
        Path(fresh, foreign).write_text("mine")
        with pytest.raises(FileExistsError, match=f"holds {named} and is not a Delta "
                                                  "table: write elsewhere"):
            deltatable.check(str(fresh), "overwrite", SCHEMA, ["vbucket"], None, 0)
        assert Path(fresh, f"vbucket=1/part-00001-{killed}-0-1-0.parquet").exists()
