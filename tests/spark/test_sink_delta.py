"""The Delta job (``dcpfast.spark.write_delta``) on the shared local session, read back by
``deltalake``, polars and Spark's readers of the files; its failed attempts are tested in
``tests/spark/test_sink.py``'s child process, which retries tasks."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

import dcpfast
from dcpfast import testing as T

dspark = pytest.importorskip("dcpfast.spark")
deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("delta-dumps")
    paths = []
    for i, items in enumerate((250, 60)):
        path = root / f"d{i}.dcp"
        path.write_bytes(T.synthetic_stream(items, seed=40 + i, sync_writes=i == 0))
        paths.append(str(path))
    return root, paths


def _frames(paths) -> Counter:
    """Frames per vbucket (None: frames without one) by a single-process scan."""
    counts: Counter = Counter()
    for path in paths:
        batch = dcpfast.read(path)
        carried = batch.validity("vbucket")
        for vb, has in zip(batch["vbucket"].tolist(), carried.tolist()):
            counts[vb if has else None] += 1
    return counts


def _on_disk(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet")}


def _referenced(table: Path) -> set[str]:
    return {os.path.relpath(u, table) for u in deltalake.DeltaTable(str(table)).file_uris()}


def test_the_table_holds_every_frame_once_and_loads_commit_once(spark, dumps, tmp_path):
    root, paths = dumps
    table = tmp_path / "frames"
    want = _frames(paths)
    summary = dspark.write_delta(spark, [str(root)], str(table), partition_bytes=20_000,
                                 app_id="load-1")
    assert summary["committed"] and summary["version"] == 0
    assert summary["frames"] == sum(want.values()) and summary["tasks"] > len(paths)
    assert summary["rows"]["vbucket=null"] == want[None]
    dt = deltalake.DeltaTable(str(table))
    rows = dt.to_pyarrow_table(columns=["source", "offset", "vbucket", "opcode",
                                        "opcode_name"])
    assert Counter(rows.column("vbucket").to_pylist()) == want
    assert len({(r["source"], r["offset"]) for r in rows.to_pylist()}) == rows.num_rows
    assert {(r["opcode"], r["opcode_name"]) for r in rows.to_pylist()} >= \
        {(int(dcpfast.Opcode.MUTATION), "mutation")}
    assert _on_disk(table) == _referenced(table)           # no file the log does not name
    assert dt.metadata().partition_columns == ["vbucket"]
    assert dt.history(1)[0]["dcpfast"]                      # the job's account, in its commit
    import polars as pl

    assert pl.scan_delta(str(table)).select(pl.len()).collect().item() == rows.num_rows

    again = dspark.write_delta(spark, [str(root)], str(table), app_id="load-1")
    assert again["committed"] is False and again["version"] == 0
    assert deltalake.DeltaTable(str(table)).version() == 0 and _on_disk(table) == \
        _referenced(table)

    appended = dspark.write_delta(spark, paths[1], str(table), app_id="load-1",
                                  app_version=1)
    assert appended["version"] == 1
    assert deltalake.DeltaTable(str(table)).to_pyarrow_table(columns=["offset"]).num_rows \
        == sum(want.values()) + sum(_frames(paths[1:]).values())

    replaced = dspark.write_delta(spark, paths[1], str(table), mode="overwrite")
    dt = deltalake.DeltaTable(str(table))
    assert replaced["version"] == 2 == dt.version()
    assert Counter(dt.to_pyarrow_table(columns=["vbucket"]).column("vbucket").to_pylist()) \
        == _frames(paths[1:])
    assert dt.transaction_version("load-1") == 1            # the loads stay recorded


def test_what_the_delta_job_refuses_before_it_runs(spark, dumps, tmp_path):
    root, paths = dumps
    table = tmp_path / "t"
    dspark.write_delta(spark, paths[1], str(table), columns=["offset", "vbucket", "key"])
    with pytest.raises(FileExistsError, match="already a Delta table"):
        dspark.write_delta(spark, paths[1], str(table), mode="error")
    with pytest.raises(ValueError, match="the table has the columns"):
        dspark.write_delta(spark, paths[1], str(table))          # other columns
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="notes.txt and is not a Delta table"):
        dspark.write_delta(spark, paths[1], str(mine), mode="overwrite")
    assert (mine / "notes.txt").read_text() == "keep me"
    assert deltalake.DeltaTable(str(table)).version() == 0


def test_the_command_writes_a_delta_table(spark, tmp_path):
    """``spark-decode --format delta`` on the running session (in this process)."""
    from click.testing import CliRunner

    from dcpfast.cli import main

    out = tmp_path / "sample"
    run = CliRunner().invoke(main, ["spark-decode", "--sample", "--out", str(out),
                                    "--format", "delta", "--app-id", "sample", "-q"])
    assert run.exit_code == 0, run.output
    frames = len(dcpfast.read(T.SAMPLE))
    assert run.output.startswith(f"{frames:,} frames from ") and "Delta table version 0" \
        in run.output and "(=null: frames that carry no value there" in run.output
    for more in ([], ["--append"], ["--overwrite"]):       # the same load run again
        again = CliRunner().invoke(main, ["spark-decode", "--sample", "--out", str(out),
                                          "--format", "delta", "--app-id", "sample", *more])
        assert again.exit_code == 0 and "committed already (version 0): nothing new" in \
            again.output, again.output
    other = CliRunner().invoke(main, ["spark-decode", "--sample", "--out", str(out),
                                      "--format", "delta", "--app-id", "other"])
    assert other.exit_code == 1 and "already a Delta table" in other.output, other.output
    assert deltalake.DeltaTable(str(out)).to_pyarrow_table(columns=["offset"]).num_rows == \
        frames
