"""dcpfast.spark.changes: the rows of dcpfast.changes on the same dumps, each vbucket's in
the same order, on a local Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dcpfast.changes import changes
from dcpfast.spark import changes as spark_changes
from dcpfast.spark import read_dcp
from dcpfast.spark.changes import output_schema
from tests.state_scenarios import scenario

pytestmark = pytest.mark.spark


def _per_vbucket(table: pa.Table) -> dict:
    out: dict = {}
    for row in table.to_pylist():
        out.setdefault(row["vbucket"], []).append(row)
    return out


@pytest.mark.parametrize("seed, options", [(1, {"restarts": 0.3, "requests": True}),
                                           (2, {"restarts": 0.25})])
def test_the_feed_on_spark_is_the_feed(spark, tmp_path, seed, options):
    path = tmp_path / "d.dcp"
    path.write_bytes(scenario(seed, **options))
    frames = read_dcp(spark, str(path), columns="all", values=True, errors="skip")
    got = spark_changes(frames, errors="skip").toArrow()
    schema = output_schema()
    want = changes(path, errors="skip").drop_columns(["vbucket_uuid"])
    got = got.cast(pa.schema([got.schema.field(n).with_type(schema.field(n).type)
                              for n in got.schema.names])).drop_columns(["vbucket_uuid"])
    assert _per_vbucket(got) == _per_vbucket(want.cast(got.schema, safe=False))
