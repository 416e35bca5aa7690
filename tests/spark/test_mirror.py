"""``dcpfast.spark.mirror``: the ``dcp`` stream source feeding the mirror through
``foreachBatch`` on the shared session. A dump written in pieces cut inside frames and a
second file: after each run the table is the model's state of what the stream read, at
each vbucket's consistent seqno, as the one-machine mirror has it; a micro-batch Spark
runs again after a restart commits nothing twice."""

from __future__ import annotations

import os

import deltalake
import pytest

from dcpfast import testing as T
from dcpfast.mirror import mirror as mirror_files
from dcpfast.mirror.inputs import whole_frames
from tests.mirror.test_api import held, wanted

dspark = pytest.importorskip("dcpfast.spark")


@pytest.mark.spark
def test_the_stream_keeps_the_table_the_mirror_of_what_it_read(spark, tmp_path):
    data = T.synthetic_stream(1500, seed=11, vbuckets=3, sync_writes=True)
    where = tmp_path / "dumps"
    where.mkdir()
    table, checkpoint = str(tmp_path / "t.delta"), str(tmp_path / "ckpt")
    # the dump grows cut inside frames; then it ends on a frame and the rest of the
    # stream comes as a second file
    rotated = whole_frames(data[:3 * len(data) // 4])
    pieces = [0, len(data) // 3 + 7, 2 * len(data) // 3 + 101, rotated]
    for lo, hi in zip(pieces, pieces[1:]):
        with open(where / "a.dcp", "ab") as f:
            f.write(data[lo:hi])
        runs = dspark.mirror(spark, where, table, checkpoint)
        assert held(table) == wanted(data[:whole_frames(data[:hi])])
    (where / "b.dcp").write_bytes(data[rotated:])
    runs = dspark.mirror(spark, where, table, checkpoint)
    assert runs and runs[-1].waiting == 0                # the source reads whole frames
    assert held(table) == wanted(data)
    alone = str(tmp_path / "alone.delta")
    mirror_files(where, alone)
    assert held(alone) == held(table)
    # later runs read on: the last one read the second file, not the first again
    assert runs[-1].read < len(data) - rotated + len(data) // 5


@pytest.mark.spark
def test_a_batch_run_again_after_a_restart_commits_nothing_twice(spark, tmp_path):
    data = T.synthetic_stream(800, seed=13, vbuckets=2)
    where = tmp_path / "dumps"
    where.mkdir()
    (where / "a.dcp").write_bytes(data[:len(data) // 2])
    table, checkpoint = str(tmp_path / "t.delta"), tmp_path / "ckpt"
    dspark.mirror(spark, where, table, str(checkpoint))
    with open(where / "a.dcp", "ab") as f:
        f.write(data[len(data) // 2:])
    dspark.mirror(spark, where, table, str(checkpoint))
    version = deltalake.DeltaTable(table).version()
    # the query stopped after the batch's commit to the table, before its own: Spark
    # runs the batch again on restart
    last = max(int(n) for n in os.listdir(checkpoint / "commits") if n.isdigit())
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    runs = dspark.mirror(spark, where, table, str(checkpoint))
    assert [r.version for r in runs] == [None]
    assert deltalake.DeltaTable(table).version() == version
    assert held(table) == wanted(data)
