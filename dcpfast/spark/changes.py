"""``changes`` on Spark: the change feed of decoded frames (``read_dcp``), with the rows of
``dcpfast.changes``: the engine's rows made as for ``state`` on Spark (the Stream Request
responses placed on the driver), shuffled by vbucket, ordered, and each partition's feed
built by a ``ChangesBuilder`` (``mapInArrow``)."""

from __future__ import annotations

import pyarrow as pa

from ..changes import ChangesBuilder, changes_schema
from .documents import engine_rows, located, partition_rows, spark_types


def output_schema(*, values: bool = True) -> pa.Schema:
    """``changes_schema`` in the types Spark takes (``documents.spark_types``)."""
    return spark_types(changes_schema(values=values))


def changes(frames_df, *, values: bool = True, errors: str = "strict"):
    """The change feed of ``frames_df`` (the frames ``read_dcp(..., columns="all")``
    decodes; with ``values``, ``read_dcp(..., columns="all", values=True)``) as a Spark
    DataFrame of ``output_schema``: the rows of ``dcpfast.changes`` on the same dumps
    (files in path order), each vbucket's in stream order within its partition (order by
    vbucket then ``epoch``, ``change != "rollback"`` and ``seqno`` per document).
    ``vbucket_uuid`` is null: the failover logs stay on the driver."""
    from pyspark.sql.pandas.types import from_arrow_schema

    ChangesBuilder(values=values, errors=errors)            # checks the options
    facts, rows, _, _ = engine_rows(frames_df, values=values, errors=errors)
    files, manifest = facts.files(), facts.manifest()
    schema = output_schema(values=values)

    def run(batches):
        builder = ChangesBuilder(values=values, errors=errors)
        builder.builder.manifest = manifest
        with located(files):
            for rb in batches:
                if rb.num_rows:
                    found, damaged = partition_rows(rb, values)
                    builder.feed(found, problems=damaged)
            table = builder.table(placed=False)
        yield from table.cast(schema, safe=False).to_batches()

    return rows.repartition("vb").sortWithinPartitions("pos").mapInArrow(
        run, from_arrow_schema(schema))
