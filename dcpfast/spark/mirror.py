"""``mirror`` on Spark: the ``dcp`` stream source feeding ``dcpfast.mirror`` through
``foreachBatch``, so that a Structured Streaming query keeps the Delta table of the
documents current as the dumps grow, exactly once across restarts.

Each micro-batch holds the frames the source read (each file to the end of its last
whole frame, as ``stream_reader`` reads it); the batch tells how far each file was
read, and the mirror applies the stream up to there in one commit (``until``), reading
on from where its last commit stood. A micro-batch Spark runs again after a restart
finds its bytes applied already (the mirror keeps where each input stood in the
table's own commits) and commits nothing, or applies what a run stopped before its
commit would have. The table is then the one-machine mirror's of the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from urllib.parse import unquote, urlparse

from .. import protocol as P
from ..mirror import MirrorRun
from ..mirror import mirror as mirror_files

#: The columns a micro-batch is read with: where each frame ends.
_COLUMNS = "offset,body_len,source"


def mirror_stream(spark, inputs, table: str, checkpoint: str, *,
                  trigger: dict | None = None, values: bool = True, errors: str = "skip",
                  collections: bool | None = None, max_bytes: int | None = None,
                  runs: list[MirrorRun] | None = None):
    """Start a Structured Streaming query that mirrors ``inputs`` (local dumps, or
    directories of them: what ``dcpfast.mirror`` reads) into the Delta table ``table``,
    its progress kept in ``checkpoint``; the ``StreamingQuery``. ``trigger``: the
    ``DataStreamWriter.trigger`` options (None: Spark's default, a micro-batch as soon
    as the last one ends; ``{"availableNow": True}``: what is there now, then stop).
    ``max_bytes``: ``maxBytesPerTrigger`` of the source. ``values``, ``errors`` and
    ``collections`` as for ``dcpfast.mirror``; each micro-batch's ``MirrorRun`` is
    appended to ``runs`` where given."""
    from .datasource import register

    register(spark)
    paths = [os.fspath(i) for i in ([inputs] if isinstance(inputs, (str, os.PathLike))
                                    else inputs)]
    reader = spark.readStream.format("dcp").option("columns", _COLUMNS)
    if max_bytes is not None:
        reader = reader.option("maxBytesPerTrigger", str(max_bytes))
    frames = reader.load(paths if len(paths) > 1 else paths[0])
    writer = frames.writeStream.option("checkpointLocation", os.fspath(checkpoint)) \
        .foreachBatch(_applier(paths, os.fspath(table), runs, values=values,
                               errors=errors, collections=collections))
    if trigger is not None:
        writer = writer.trigger(**trigger)
    return writer.start()


def mirror(spark, inputs, table: str, checkpoint: str, **options) -> list[MirrorRun]:
    """Mirror what ``inputs`` hold now into ``table`` with ``mirror_stream`` run once
    (``Trigger.AvailableNow``) and waited for; the runs of its micro-batches."""
    runs: list[MirrorRun] = []
    query = mirror_stream(spark, inputs, table, checkpoint, trigger={"availableNow": True},
                          runs=runs, **options)
    query.awaitTermination()
    return runs


def _applier(paths: list[str], table: str, runs: list[MirrorRun] | None,
             **options) -> Callable:
    """The ``foreachBatch`` function: the mirror of ``paths`` up to where the batch read
    each file."""
    def apply(batch, batch_id: int) -> None:
        from pyspark.sql import functions as F

        ends = batch.groupBy("source").agg(
            F.max(F.col("offset") + P.HEADER_SIZE + F.col("body_len")).alias("end"))
        until = {local_path(r["source"]): int(r["end"]) for r in ends.collect()}
        run = mirror_files(paths, table, until=until, **options)
        if runs is not None:
            runs.append(run)
    return apply


def local_path(uri: str) -> str:
    """The absolute local path of a file the source names (a path or a ``file:`` URI)."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"{uri}: a mirror reads local files only")
    return os.path.abspath(unquote(parsed.path) if parsed.scheme else uri)
