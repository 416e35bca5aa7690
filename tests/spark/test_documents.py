"""dcpfast.spark.state: the same rows as dcpfast.state on the same dumps, on a local Spark,
and the same frames lost on dumps cut inside."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.documents.output import metadata
from dcpfast.errors import DcpFormatError
from dcpfast.protocol import Opcode
from dcpfast.spark import read_dcp, state_report
from dcpfast.spark import state as spark_state
from dcpfast.spark.documents import output_schema
from tests.documents.test_api_losses import dump
from tests.state_scenarios import CAS_EPOCH, scenario

pytestmark = pytest.mark.spark
ORDER = [("vbucket", "ascending"), ("collection_id", "ascending"), ("key", "ascending"),
         ("by_seqno", "ascending")]


def same(spark_df, table, **options):
    schema = output_schema(values=options.get("values", True),
                           history=options.get("history", False))
    want = table.cast(schema, safe=False).sort_by(ORDER)
    got = spark_df.toArrow()
    got = got.cast(pa.schema([got.schema.field(n).with_type(schema.field(n).type)
                              for n in schema.names])).sort_by(ORDER)
    assert got.to_pylist() == want.to_pylist()


OPTIONS = {"restarts": [{}, {"history": True, "include_deleted": True}],
           "placed_later": [{"at_seqno": 25, "values": False}],
           "sids": [{"at_time": CAS_EPOCH + 4 * 10**11, "only_collections": [0]}],
           "synthetic": [{"include_deleted": True}, {"history": True}]}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("state")
    out = {}
    for name, data in {"restarts": scenario(1, restarts=0.25, requests=True),
                       "placed_later": scenario(2, restarts=0.25),
                       "sids": scenario(3, stream_ids=True),
                       "synthetic": t.synthetic_stream(2000, seed=5, sync_writes=True)
                       }.items():
        path = root / f"{name}.dcp"
        path.write_bytes(data)
        out[name] = path
    return out


@pytest.mark.parametrize("name", ["restarts", "placed_later", "sids", "synthetic"])
def test_spark_state_is_the_single_process_state(spark, dumps, name):
    frames = read_dcp(spark, str(dumps[name]), columns="all", values=True, errors="skip")
    for options in OPTIONS[name]:
        same(spark_state(frames, errors="skip", **options),
             dcpfast.state(dumps[name], errors="skip", **options), **options)


def test_files_are_one_stream_in_path_order(spark, tmp_path):
    data = scenario(4, restarts=0.3)
    cut = dcpfast.scan(data)["offset"][len(dcpfast.scan(data)) // 2]
    (tmp_path / "a.dcp").write_bytes(data[:cut])
    (tmp_path / "b.dcp").write_bytes(data[cut:])
    frames = read_dcp(spark, str(tmp_path), columns="all", values=True, errors="skip")
    same(spark_state(frames, errors="skip", history=True),
         dcpfast.state(data, errors="skip", history=True), history=True)


def test_strict_spark_state_raises(spark, tmp_path):
    path = tmp_path / "bad.dcp"
    path.write_bytes(t.snapshot_marker(1, 2, vbucket=1) + t.commit(
        b"a", prepared_seqno=1, commit_seqno=2, vbucket=1))
    frames = read_dcp(spark, str(path), columns="all", values=True)
    with pytest.raises(Exception, match="no such prepare"):
        spark_state(frames).collect()
    assert spark_state(frames, errors="skip").count() == 0
    with pytest.raises(ValueError, match="values=True"):
        spark_state(read_dcp(spark, str(path)))
    with pytest.raises(DcpFormatError):
        dcpfast.state(path)


def test_partitions_fed_a_few_rows_at_a_time(spark, dumps):
    """The engine on the executors takes its rows in record batches of any size."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "3")
    try:
        frames = read_dcp(spark, str(dumps["restarts"]), columns="all", values=True, errors="skip")
        for options in ({}, {"history": True, "at_time": CAS_EPOCH + 4 * 10**11}):
            same(spark_state(frames, errors="skip", **options),
                 dcpfast.state(dumps["restarts"], errors="skip", **options), **options)
    finally:
        spark.conf.set(key, before)


def test_report_is_the_single_process_metadata(spark, dumps, tmp_path):
    """Consistent seqnos and what skip mode passed over, with the file of each."""
    for name in ("restarts", "sids"):
        frames = read_dcp(spark, str(dumps[name]), columns="all", values=True, errors="skip")
        for options in ({}, {"at_time": CAS_EPOCH + 4 * 10**11}):
            report = state_report(frames, errors="skip", **options)
            want = metadata(dcpfast.state(dumps[name], errors="skip", **options))
            assert report["consistency"] == want["consistency"], (name, options)
            assert report["unrestored"] == []
    bad = tmp_path / "b.dcp"
    bad.write_bytes(t.snapshot_marker(1, 3, vbucket=1)
                    + t.mutation(b"a", b"1", by_seqno=2, vbucket=1)
                    + t.commit(b"a", prepared_seqno=1, commit_seqno=3, vbucket=1)   # no prepare
                    + t.mutation(b"b", b"1", by_seqno=2, vbucket=1))                # backwards
    frames = read_dcp(spark, str(bad), columns="all", values=True)
    report = state_report(frames, errors="skip")
    want = metadata(dcpfast.state(bad, errors="skip"))
    assert len(want["errors"]) == 2
    assert report["errors"] == [[f"file:{bad}", *e] for e in want["errors"]]
    assert report["consistency"] == want["consistency"]


@pytest.mark.spark
def test_spark_sees_the_same_losses(spark, tmp_path):
    from dcpfast.spark import read_dcp, state_report

    frames, fields = dump(4, vbuckets=2, items=800)
    rng = random.Random(4)
    markers = [i for i, f in enumerate(fields) if f["opcode"] == Opcode.SNAPSHOT_MARKER]
    cut = set(rng.sample(markers[5:], 2))
    path = tmp_path / "cut.dcp"
    path.write_bytes(b"".join(f for i, f in enumerate(frames) if i not in cut))
    report = state_report(read_dcp(spark, str(path), columns="all", values=True),
                          errors="skip")
    want = metadata(dcpfast.state(path, errors="skip"))
    assert report["consistency"] == want["consistency"]
    assert report["lost"] == want["lost"] and want["lost"]
    assert [e[1:] for e in report["errors"]] == want["errors"]
