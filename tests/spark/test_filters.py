"""Spark filters the ``dcp`` data source applies itself (``dcpfast.spark.filters``): each
one taken keeps exactly the rows that SQL keeps."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import dcpfast
from dcpfast import spark as dspark
from dcpfast import testing as T
from dcpfast.spark.convert import to_record_batch


def _filters():
    """pyspark filters with what Spark makes of them on a batch's rows (None: not taken)."""
    from pyspark.sql import datasource as D

    op = dcpfast.Opcode
    vb = ("vbucket",)
    return [
        (D.EqualTo(("opcode",), int(op.MUTATION)), "opcode = 87"),
        (D.In(vb, (98, 308, 70000)), "vbucket in (98, 308, 70000)"),
        (D.Not(D.In(vb, (98, 308))), "not vbucket in (98, 308)"),
        (D.Not(D.EqualTo(vb, 98)), "vbucket <> 98"),
        (D.EqualNullSafe(vb, None), "vbucket is null"),
        (D.Not(D.EqualNullSafe(vb, 98)), "vbucket is distinct from 98"),
        (D.IsNull(vb), "vbucket is null"),
        (D.Not(D.IsNotNull(("collection_id",))), "collection_id is null"),
        (D.GreaterThan(("by_seqno",), 20), "by_seqno > 20"),
        (D.LessThanOrEqual(("snap_end",), -1), "snap_end <= -1"),
        (D.GreaterThanOrEqual(vb, 400), "vbucket >= 400"),
        (D.LessThan(("opcode",), 0x5a), "opcode < 90"),
        (D.EqualTo(("key_str",), "k"), None),
        (D.StringStartsWith(("key_str",), "k"), None),
        (D.EqualTo(("vbucket", "x"), 1), None),
        (D.In(vb, (1, None)), None),
        (D.EqualTo(vb, 1.5), None),
    ]


def test_filters_taken_keep_the_rows_spark_would(stream):
    """Each filter the data source takes, applied to a scanned batch, keeps exactly the
    rows that pass the same condition evaluated by DuckDB on the Arrow rows (SQL's
    three-valued logic: a frame that lacks the column passes neither a comparison nor
    its negation)."""
    pytest.importorskip("pyspark")
    import duckdb

    from dcpfast.spark import filters

    data = stream + T.snapshot_marker(5, 2**64 - 1, vbucket=40) + T.stream_end(vbucket=12)
    batch = dcpfast.scan(data, final=True)
    rows = to_record_batch(batch, None, dspark.spark_arrow_schema("all"))
    assert rows.column("snap_end").to_pylist()[-2] == -1
    sql_rows = duckdb.connect()
    sql_rows.register("frames", pa.Table.from_batches([rows]).append_column(
        "i", pa.array(np.arange(len(batch)))))
    for spark_filter, sql in _filters():
        taken = filters.condition(spark_filter)
        if sql is None:
            assert taken is None, spark_filter
            continue
        want = [i for (i,) in sql_rows.sql(f"select i from frames where {sql} order by i")
                .fetchall()]
        got = np.flatnonzero(filters.keep(batch, [taken])).tolist()
        assert got == want, sql
        assert want and len(want) < len(batch), sql         # the filter does filter
