"""``diff`` on Spark: the two sides' states (``state`` over ``read_dcp``) joined by
collection and key in Spark, each document judged as ``dcpfast.diff`` judges it, the
differences written as Parquet: the rows ``dcpfast.diff`` gives on the same dumps, in
Spark's types.

Each side's state is computed once and kept (``persist``) while the driver reads its few
collections and its report (``state_report``: consistent seqnos, what skip mode passed
over, which runs the state's job once more); documents past their vbucket's consistent
seqno are marked, a document held in several vbuckets keeps its row of the highest seqno,
and a full outer join on (collection, key) pairs the sides.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

from ..compare.output import METADATA_KEY, diff_schema, summary_schema
from ..compare.rules import (
    DATATYPE_MASK,
    KINDS,
    SYSTEM_XATTR,
    VALUE_FIELDS,
    checked_collections,
    checked_fields,
    labels,
    order,
    wanted,
)
from ..errors import DcpFormatError, checked_mode, text
from .datasource import read_dcp
from .documents import state, state_report
from .job import spark_error

_MIN = -(1 << 63)                  # a long XOR this compares as the unsigned it holds
_SIDES = {"source": "s_", "target": "t_"}
_KEPT = ("vbucket", "collection_id", "by_seqno", "cas", "deleted", "key_str", "rev_seqno",
         "flags", "expiration", "datatype", "delete_time")


def diff(spark, source, target, out: str, *, at_seqno=None, at_time=None, fields=None,
         include_deleted: bool = False, only_collections=None, errors: str = "strict",
         mode: str = "errorifexists") -> pa.Table:
    """Compare the buckets whose dumps are ``source`` and ``target`` (paths ``read_dcp``
    reads: a file, a directory or a list of them, read as one stream in path order) and
    write the rows of ``dcpfast.diff`` on them as a Parquet dataset at ``out`` (written
    with Spark's ``mode``). Options as for ``dcpfast.diff``. Returns the summary
    (``dcpfast.compare.summary`` of the single-process diff), carrying the diff's metadata
    (``dcpfast.compare.diff_errors`` reads it)."""
    from pyspark import StorageLevel

    fields = checked_fields(fields)
    checked_mode(errors)
    checked_collections(only_collections)
    values = any(f in VALUE_FIELDS for f in fields)
    options = dict(at_seqno=at_seqno, at_time=at_time, include_deleted=True, values=values,
                   errors=errors)
    kept = []
    try:
        sides = {}
        for name, path in (("source", source), ("target", target)):
            sides[name] = _Side(spark, name, path, options)
            kept.append(sides[name].docs)
        for name, other in (("source", "target"), ("target", "source")):
            sides[name].named(sides[other])
        found = order(sides["source"].labels + sides["target"].labels)
        found = [lb for lb in found if lb in wanted(found, only_collections)]
        lost = sorted({*sides["source"].unrestored, *sides["target"].unrestored})
        joined = _joined(spark, sides, found, lost, values)
        judged = _judged(joined, fields, include_deleted).persist(StorageLevel.MEMORY_AND_DISK)
        kept.append(judged)
        _rows(spark, judged, found).write.mode(mode).parquet(out)
        counts = _counts(judged, found)
    finally:
        for frame in kept:
            frame.unpersist()
    meta = {"fields": list(fields), "include_deleted": include_deleted, "summary": counts,
            "sides": {name: side.report for name, side in sides.items()}}
    return pa.Table.from_pylist(counts, schema=summary_schema()).replace_schema_metadata(
        {METADATA_KEY: json.dumps(meta).encode()})


class _Side:
    """One side's state on Spark, kept, with its collections and its report."""

    def __init__(self, spark, name: str, path, options: dict):
        from pyspark import StorageLevel

        frames = read_dcp(spark, path, columns="all", values=options["values"],
                          errors=options["errors"])
        report = self._run(name, lambda: state_report(frames, **options))
        self.docs = state(frames, **options).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            found = self._run(name, lambda: self.docs.groupBy(
                "collection_id", "scope", "collection").count().collect())
        except Exception:
            self.docs.unpersist()
            raise
        self.name = name
        #: its collections, (id, scope, name) as its state names them
        self.collections = [(r.collection_id, r.scope, r.collection) for r in found]
        self.labels: list[tuple] = []
        self.label_of: dict[int, tuple] = {}
        self.points = {vb: seqno for vb, seqno in report["consistency"]}
        self.unrestored = list(report["unrestored"])
        errors = [[offset, length, reason if file is None else
                   text("diff_side_file", reason=reason, file=file)]
                  for file, offset, length, reason in report["errors"]]
        self.report = {"documents": sum(r["count"] for r in found),
                       "consistency": report["consistency"], "unrestored": self.unrestored,
                       "errors": errors}

    def named(self, other: _Side) -> None:
        """The labels of its collections beside the ``other`` side's (``rules.labels``)."""
        self.labels = labels(self.collections, other.collections)
        self.label_of = {c[0]: lb for c, lb in zip(self.collections, self.labels)}

    @staticmethod
    def _run(side: str, job):
        """``job()``; a damaged side's failure as a ``DcpFormatError`` naming the side."""
        try:
            return job()
        except DcpFormatError as e:
            raise type(e)(e.offset, text("diff_side", side=side, reason=e.reason)) from None
        except Exception as e:
            raise _named(e, side) from e

    def marked(self, spark, code_of: dict, lost: list, values: bool):
        """The side's documents with their collection's code, whether it is unsure, one
        row per (code, key) (``dcpfast.diff``'s rule for a key in several vbuckets), its
        columns prefixed."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        prefix = _SIDES[self.name]
        codes = spark.createDataFrame(
            [(cid, code_of[lb]) for cid, lb in self.label_of.items() if lb in code_of],
            "collection_id long, code int")
        limits = spark.createDataFrame(
            [(vb, _signed(seqno)) for vb, seqno in self.points.items()],
            "vbucket int, limit long")
        docs = self.docs.join(F.broadcast(codes), "collection_id") \
            .join(F.broadcast(limits), "vbucket", "left")
        unsure = (F.col("by_seqno").bitwiseXOR(F.lit(_MIN))
                  > F.coalesce("limit", F.lit(0)).bitwiseXOR(F.lit(_MIN)))
        if lost:
            unsure = unsure | F.col("vbucket").isin(*lost)
        if values:
            unsure = unsure | F.col("body").isNull()
        identity = Window.partitionBy("code", "key")
        newest = identity.orderBy(F.col("by_seqno").bitwiseXOR(F.lit(_MIN)).desc(),
                                  F.col("vbucket").desc())
        docs = docs.withColumn("unsure", F.max(unsure.cast("int")).over(identity) == 1) \
            .withColumn("_rank", F.row_number().over(newest)).where(F.col("_rank") == 1)
        columns = [*_KEPT, "unsure", *(("body", "xattrs") if values else ())]
        return docs.select("code", "key", *(F.col(c).alias(prefix + c) for c in columns),
                           F.lit(True).alias(prefix + "row"))


def _named(error: Exception, side: str) -> Exception:
    """A failed job's error as a ``DcpFormatError`` naming the side, the file and the
    offset where a task raised one (else ``error``, with a note naming the side)."""
    said = spark_error(error)
    found = re.search(r"at byte (\d+): (.*)", said)
    if found is None:
        error.add_note(f"while building the state of the {side}")
        return error
    where = said[:found.start()].rstrip(": ")
    reason = text("diff_side_in", side=side, file=where, reason=found.group(2)) if where \
        else text("diff_side", side=side, reason=found.group(2))
    return DcpFormatError(int(found.group(1)), reason)


def _joined(spark, sides: dict, labels: list, lost: list, values: bool):
    code_of = {lb: i for i, lb in enumerate(labels)}
    a, b = (sides[name].marked(spark, code_of, lost, values) for name in _SIDES)
    return a.join(b, ["code", "key"], "full_outer")


def _judged(joined, fields: tuple, include_deleted: bool):
    """Each identity with its kind (an index into ``KINDS``, or ``equal``, ``not_compared``
    or ``absent``), the fields that differ, and whether each side holds it."""
    from pyspark.sql import functions as F

    def has(prefix):
        row = F.coalesce(F.col(prefix + "row"), F.lit(False))
        return row if include_deleted else row & ~F.coalesce(F.col(prefix + "deleted"),
                                                             F.lit(False))

    differs = [F.when(_differs(f), F.lit(f)) for f in fields]
    unsure = F.coalesce("s_unsure", F.lit(False)) | F.coalesce("t_unsure", F.lit(False))
    both = F.col("has_s") & F.col("has_t")
    differing = F.filter(F.array(*differs), lambda x: x.isNotNull())
    kind = (F.when(unsure, F.lit("not_compared"))
            .when(both & (F.size(differing) > 0), F.lit("mismatch"))
            .when(both, F.lit("equal"))
            .when(F.col("has_s"), F.lit("missing_from_target"))
            .when(F.col("has_t"), F.lit("missing_from_source"))
            .otherwise(F.lit("absent")))
    out = joined.withColumn("has_s", has("s_")).withColumn("has_t", has("t_"))
    return out.withColumn("kind", kind).withColumn(
        "fields", F.when(F.col("kind") == "mismatch", differing)).select(
        "code", "key", "kind", "fields", "has_s", "has_t",
        *(F.col(p + c) for p in _SIDES.values()
          for c in ("vbucket", "collection_id", "by_seqno", "cas", "key_str")))


def _differs(field: str):
    """Whether ``field`` differs between the two sides' columns."""
    from pyspark.sql import functions as F

    s, t = F.col("s_" + field if field != "system_xattrs" else "s_xattrs"), \
        F.col("t_" + field if field != "system_xattrs" else "t_xattrs")
    if field in ("xattrs", "system_xattrs"):
        return ~_entries(s, field == "system_xattrs").eqNullSafe(
            _entries(t, field == "system_xattrs"))
    if field == "datatype":
        return s.bitwiseAND(DATATYPE_MASK) != t.bitwiseAND(DATATYPE_MASK)
    return ~s.eqNullSafe(t)


def _entries(column, system: bool):
    """A map's user (or ``system``) entries sorted, none as an empty array."""
    from pyspark.sql import functions as F

    def chosen(key, _):
        starts = key.startswith(SYSTEM_XATTR)
        return starts if system else ~starts
    entries = F.array_sort(F.map_entries(F.map_filter(column, chosen)))
    return F.coalesce(entries, F.array().cast("array<struct<key:string,value:string>>"))


def _rows(spark, judged, labels: list):
    """The differences in the columns of ``diff_schema`` (Spark's types)."""
    from pyspark.sql import functions as F

    names = spark.createDataFrame([(i, lb[0], lb[1]) for i, lb in enumerate(labels)],
                                  "code int, scope string, collection string")
    rows = judged.where(F.col("kind").isin(*KINDS)).join(F.broadcast(names), "code")
    columns = {"key_str": F.coalesce("s_key_str", "t_key_str")}
    for name, prefix in _SIDES.items():
        for column in ("vbucket", "collection_id", "by_seqno", "cas"):
            columns[f"{name}_{column}"] = F.col(prefix + column)
    return rows.select(*(columns.get(f.name, F.col(f.name)).alias(f.name)
                         for f in diff_schema()))


def _counts(judged, labels: list) -> list[dict]:
    """Per collection, the documents on each side and how many were judged each way."""
    from pyspark.sql import functions as F

    def count(condition):
        return F.sum(F.when(condition, 1).otherwise(0))
    found = {r.code: r for r in judged.groupBy("code").agg(
        count(F.col("has_s")).alias("source"), count(F.col("has_t")).alias("target"),
        *(count(F.col("kind") == kind).alias(kind) for kind in
          ("equal", *KINDS, "not_compared"))).collect()}
    names = [f.name for f in summary_schema()][2:]
    return [{"scope": lb[0], "collection": lb[1],
             **{name: int(getattr(found[i], name)) if i in found else 0 for name in names}}
            for i, lb in enumerate(labels)]


def rows_schema() -> pa.Schema:
    """``dcpfast.compare.diff_schema`` in the types Spark writes: unsigned integers
    widened (uint64 as its 64 bits in a long)."""
    widened = {pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64()}
    return pa.schema([pa.field(f.name, widened.get(f.type, f.type)) for f in diff_schema()])


def _signed(value: int) -> int:
    """A uint64 as the long Spark holds it."""
    return value - (1 << 64) if value >= 1 << 63 else value
