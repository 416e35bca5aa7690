"""dcpfast.spark.diff: the rows and summary of dcpfast.diff on the same dumps, on a local
Spark."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.compare import FIELDS, diff_errors, summary
from dcpfast.compare.output import metadata
from dcpfast.errors import DcpFormatError
from dcpfast.spark import diff as spark_diff
from dcpfast.spark.compare import rows_schema
from tests.compare.test_api import cut_inside_a_snapshot, without_scope_events
from tests.diff_scenarios import derive, documents, source

pytestmark = pytest.mark.spark
ORDER = [("scope", "ascending"), ("collection", "ascending"), ("key", "ascending")]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """A source; a target derived from it, cut inside a snapshot, with one change sent
    twice (its seqno goes backwards: skip mode leaves it out and lists it); the source
    with a damaged frame."""
    root = tmp_path_factory.mktemp("diff")
    data = source(5, items=300)
    target = cut_inside_a_snapshot(derive(documents(data)[0], 5).data)
    offsets = dcpfast.scan(target)["offset"].tolist()
    again = offsets[len(offsets) // 2]
    frame = target[again:offsets[len(offsets) // 2 + 1]]
    damaged = bytearray(data)
    broken = dcpfast.scan(data)["offset"].tolist()[40]
    damaged[broken] = 0
    paths = {"again": again + len(frame), "broken": broken}
    for name, content in {"source": data, "target": target[:again] + frame + target[again:],
                          "damaged": bytes(damaged)}.items():
        paths[name] = root / f"{name}.dcp"
        paths[name].write_bytes(content)
    return paths


def same(path, table) -> None:
    schema = rows_schema()
    got = pq.read_table(path)
    got = got.select(schema.names).cast(schema).sort_by(ORDER)
    want = table.cast(schema).sort_by(ORDER)
    assert got.to_pylist() == want.to_pylist()


def test_spark_diff_is_the_single_process_diff(spark, dumps, tmp_path):
    options = {"include_deleted": True, "fields": FIELDS, "errors": "skip"}
    counts = spark_diff(spark, str(dumps["source"]), str(dumps["target"]),
                        str(tmp_path / "a"), **options)
    want = dcpfast.diff(dumps["source"], dumps["target"], **options)
    kinds = {r["kind"] for r in want.to_pylist()}
    assert kinds == {"mismatch", "missing_from_source", "missing_from_target"}
    assert sum(c["not_compared"] for c in summary(want).to_pylist())
    same(tmp_path / "a", want)
    assert counts.to_pylist() == summary(want).to_pylist()
    assert summary(counts).equals(counts)
    mine, theirs = metadata(counts)["sides"], metadata(want)["sides"]
    for side in ("source", "target"):
        assert {k: v for k, v in mine[side].items() if k != "errors"} == \
            {k: v for k, v in theirs[side].items() if k != "errors"}
    skipped = diff_errors(counts)
    assert [e.offset for e in skipped["target"]] == [e.offset for e in diff_errors(want)[
        "target"]] == [dumps["again"]] and not skipped["source"]
    assert str(dumps["target"]) in skipped["target"][0].reason


def test_strict_spark_diff_names_the_side(spark, dumps, tmp_path):
    with pytest.raises(DcpFormatError, match=r"at byte %d: .*\(in the source: .*%s" % (
            dumps["broken"], dumps["damaged"].name)) as e:
        spark_diff(spark, str(dumps["damaged"]), str(dumps["target"]), str(tmp_path / "c"))
    assert e.value.offset == dumps["broken"]
    assert not (tmp_path / "c").exists()
    assert isinstance(rows_schema(), pa.Schema)


def test_spark_diff_names_collections_as_the_single_process_diff(spark, tmp_path):
    """A side that never named a scope matches by collection id and name, and a name
    neither side holds is refused, as in dcpfast.diff."""
    _, server = t.synthetic_conversation(200, seed=3, vbuckets=2)
    paths = {"whole": tmp_path / "whole.dcp", "unscoped": tmp_path / "unscoped.dcp"}
    paths["whole"].write_bytes(b"".join(f.data for f in server))
    paths["unscoped"].write_bytes(without_scope_events(server, every=5))
    want = dcpfast.diff(paths["unscoped"], paths["whole"])
    counts = spark_diff(spark, str(paths["unscoped"]), str(paths["whole"]), str(tmp_path / "d"))
    same(tmp_path / "d", want)
    assert counts.to_pylist() == summary(want).to_pylist()
    assert None not in counts["scope"].to_pylist()
    with pytest.raises(ValueError, match="hotle, which neither side holds"):
        spark_diff(spark, str(paths["whole"]), str(paths["whole"]), str(tmp_path / "e"),
                   only_collections=["hotle"])
