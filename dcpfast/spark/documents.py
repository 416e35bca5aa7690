"""``state`` on Spark: the documents of decoded frames (``read_dcp``) as they stood at the
end of the dumps, at a seqno or at a time, with the semantics and rows of
``dcpfast.state``.

The frames are ordered by file (its path) and offset. On the driver, the few Stream
Request responses are placed on the streams they restart, as ``dcpfast.state`` places
them (the request before the response, else the one stream whose messages used its
opaque before it, else the first stream message with its opaque after it), and the system
events name the collections. The rows that change documents, the restarts and the stream
markers are then shuffled by vbucket, ordered, and each partition runs the state engine
over its vbuckets (``mapInArrow``). A stream that restarts keeps every version of its
documents in its partition, where the single-process ``state`` reads its input again.
Each partition adds a row with its report (consistent seqnos, the problems skip mode
passed over, which are also logged), which ``state`` leaves out and ``state_report``
gathers.
"""

from __future__ import annotations

import contextlib
import json
import logging

import numpy as np
import pyarrow as pa

from .. import protocol as P
from .._core import contract as C
from ..arrow import cast_map
from ..documents import StateBuilder, state_schema
from ..documents.bodies import xattr_type
from ..documents.builder import Problem
from ..documents.output import metadata
from ..documents.problems import LISTED
from ..documents.rows import DOCUMENTS, Rows, make_rows
from ..errors import DcpFormatError, text
from ..events import MalformedEvent, Manifest, event_fields, event_schema
from ..streams.frames import MESSAGE_OPCODES, request_stream_id, rollback_seqno
from ..streams.matching import placed, stream_key

log = logging.getLogger("dcpfast.spark")
_REQUESTS = tuple(sorted(int(m) for m in P.REQUEST_MAGICS))
_RESPONSES = tuple(sorted(int(m) for m in P.RESPONSE_MAGICS))
_WHAT = {P.Opcode.MUTATION: C.W_MUTATION, P.Opcode.DELETION: C.W_DELETION,
         P.Opcode.EXPIRATION: C.W_EXPIRATION, P.Opcode.PREPARE: C.W_PREPARE,
         P.Opcode.COMMIT: C.W_COMMIT, P.Opcode.ABORT: C.W_ABORT,
         P.Opcode.SYSTEM_EVENT: C.W_EVENT, P.Opcode.SEQNO_ADVANCED: C.W_ADVANCE,
         P.Opcode.SNAPSHOT_MARKER: C.W_MARKER, P.Opcode.OSO_SNAPSHOT: C.W_OSO,
         P.Opcode.STREAM_END: C.W_END}
_SOURCE_BITS = 46                 # pos = (file rank << 46 | offset) * 2
_OFFSET_MASK = (1 << _SOURCE_BITS) - 1
_REPORT = "_report"               # the column of each partition's report
_LONG = ("pos", "unit", "seqno", "prepared", "rev", "cas", "flags", "expiration",
         "delete_time", "cid", "event_id", "snap_start", "snap_end", "snap_flags", "oso",
         "end_status", "opaque", "offset", "length")
_NEEDED = ("magic", "opcode", "vbucket", "status", "opaque", "offset", "body_len", "cas",
           "datatype", "stream_id", "by_seqno", "rev_seqno", "prepared_seqno", "flags",
           "expiration", "delete_time", "deleted", "collection_id", "event_id",
           "event_version", "snap_start", "snap_end", "snap_flags", "oso_flags",
           "end_status", "key", "value")
_SPARK_INT = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(),
              pa.uint64(): pa.int64()}


def _input_schema(values: bool) -> pa.Schema:
    """The rows each partition's engine reads (Spark's signed types)."""
    fields = [(name, pa.int64()) for name in _LONG]
    fields += [("what", pa.int16()), ("datatype", pa.int16()), ("event_version", pa.int16()),
               ("info", pa.int16()), ("timed_delete", pa.bool_()), ("deleted", pa.bool_()),
               ("rolled", pa.bool_()), ("vb", pa.int32()), ("key", pa.binary()),
               ("value", pa.binary())]
    if values:
        fields += [("body", pa.binary()), ("xattrs", pa.map_(pa.string(), pa.string()))]
    return pa.schema(fields)


def output_schema(*, values: bool = True, history: bool = False) -> pa.Schema:
    """``state_schema`` in the types Spark takes (``spark_types``)."""
    return spark_types(state_schema(values=values, history=history))


def spark_types(schema: pa.Schema) -> pa.Schema:
    """``schema`` in the types Spark takes: unsigned integers widened (uint64 as its 64
    bits in a long), timestamps in microseconds."""
    fields = []
    for f in schema:
        kind = _SPARK_INT.get(f.type, f.type)
        if pa.types.is_timestamp(kind):
            kind = pa.timestamp("us", tz="UTC")
        fields.append(pa.field(f.name, kind))
    return pa.schema(fields)


def state(frames_df, *, at_seqno=None, at_time=None, include_deleted: bool = False,
          values: bool = True, only_collections=None, errors: str = "strict",
          history: bool = False):
    """The documents of ``frames_df`` (the frames ``read_dcp(..., columns="all")``
    decodes: every column; with ``values`` also ``content`` and ``xattrs``:
    ``read_dcp(..., columns="all", values=True)``) as a Spark
    DataFrame of ``output_schema``: the rows of ``dcpfast.state`` on the
    same dumps (files in path order), in Spark's types. Options as for that function;
    ``errors="skip"`` logs what it skips (``state_report`` lists it)."""
    from pyspark.sql import functions as F

    found, _ = _combined(frames_df, at_seqno=at_seqno, at_time=at_time,
                         include_deleted=include_deleted, values=values,
                         only_collections=only_collections, errors=errors, history=history)
    return found.where(F.col(_REPORT).isNull()).drop(_REPORT)


def state_report(frames_df, **options) -> dict:
    """What ``state(frames_df, **options)`` would tell in the metadata of the
    single-process table, as a dict: ``consistency`` (per vbucket the end of the last
    complete snapshot covered, ``[[vbucket, seqno], ...]``), ``errors`` (``[[file,
    offset, length, reason], ...]`` in stream order: what skip mode passed over, the
    offsets within their file) and ``unrestored`` (always empty on Spark). It runs the
    state's job (once more, unless the caller persisted ``frames_df``'s decoded rows)."""
    from pyspark.sql import functions as F

    found, problems = _combined(frames_df, **options)
    reports = [json.loads(r[0]) for r in
               found.where(F.col(_REPORT).isNotNull()).select(_REPORT).collect()]
    return _merged(reports, problems)


def _merged(reports: list[dict], problems: list) -> dict:
    """The partitions' reports (and the driver's ``problems``) as one: the first problems
    in stream order, and how many of each kind there were."""
    points: dict[int, int] = {}
    began: dict[int, int] = {}
    for report in reports:
        for vbucket, seqno in report["consistency"]:
            points[vbucket] = min(seqno, points.get(vbucket, seqno))
        for vbucket, seqno in report["lacks"]["history"]:
            began[vbucket] = max(seqno, began.get(vbucket, seqno))
    found = sorted([tuple(e) for r in reports for e in r["errors"]]
                   + [tuple(p[:4]) for p in problems], key=lambda e: (e[0] or "", e[1]))
    counts: dict[str, int] = {}
    for report in reports:
        for kind, n in report["error_counts"].items():
            counts[kind] = counts.get(kind, 0) + n
    for *_, kind in problems:
        counts[kind] = counts.get(kind, 0) + 1
    return {"consistency": sorted([list(p) for p in points.items()]),
            "errors": [list(e) for e in found[:LISTED]],
            "error_counts": dict(sorted(counts.items())),
            "errors_total": sum(counts.values()),
            "unrestored": sorted({v for r in reports for v in r["unrestored"]}),
            "lost": sorted({v for r in reports for v in r["lost"]}),
            "lacks": {"history": sorted([list(p) for p in began.items()]), "values": False,
                      "backfill_tombstones": False}}


def _combined(frames_df, *, at_seqno=None, at_time=None, include_deleted: bool = False,
              values: bool = True, only_collections=None, errors: str = "strict",
              history: bool = False):
    """The rows of ``state`` and, in column ``_REPORT``, one more row per partition with its
    report (JSON); and the problems the driver skipped (file, offset, length, reason)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    probe = StateBuilder(at_seqno=at_seqno, at_time=at_time, include_deleted=include_deleted,
                         values=values, only_collections=only_collections, errors=errors,
                         history=history)         # checks the options
    facts, rows, restarts, problems = engine_rows(frames_df, values=values, errors=errors)
    files = facts.files()
    # a stream that restarts (or, cut at a time, has an OSO snapshot) keeps every version
    # of its documents in its partition, so that what a restart or the cut makes current
    # again is there
    exact = {r["unit"] for r in restarts}
    if at_time is not None:
        exact |= {r.vbucket << 16 | (r.stream_id or 0) for _, r in
                  facts.rows(int(P.Opcode.OSO_SNAPSHOT), _REQUESTS)}
    options = dict(at_seqno=probe.at_seqno, at_time=probe.at_time,
                   include_deleted=probe.include_deleted, values=probe.values,
                   only_collections=probe.only_collections, errors=errors,
                   history=probe.history, exact_units=sorted(exact))
    manifest = facts.manifest()
    schema = output_schema(values=values, history=history).append(pa.field(_REPORT,
                                                                            pa.string()))

    def run(batches):
        yield from _partition(batches, manifest, options, files, schema)

    located = [(*_where(files, at), length, reason, kind)
               for at, length, reason, kind in problems]
    return (rows.repartition("vb").sortWithinPartitions("pos")
            .mapInArrow(run, from_arrow_schema(schema)), located)


def engine_rows(frames_df, *, values: bool, errors: str):
    """What the state engine reads of ``frames_df``, as a Spark DataFrame of its rows (the
    restarts placed on the driver among them; ``repartition("vb")`` and sort by ``pos``
    to feed a partition's engine, ``partition_rows`` to make them engine rows); with the
    driver's ``_Facts``, the restarts and the problems it skipped (position, length,
    reason, kind)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    missing = [c for c in (*_NEEDED, *(("content", "xattrs") if values else ()))
               if c not in frames_df.columns]
    if missing:
        raise ValueError("the engine needs the frame columns " + ", ".join(missing)
                         + ": read them with read_dcp(..., columns=\"all\""
                         + (", values=True)" if "content" in missing else ")"))
    facts = _Facts(frames_df)
    frames = facts.ordered(frames_df)
    restarts, problems = _restarts(facts, frames, errors, values, facts.files())
    rows = _rows(frames, values, facts.collection_ranks).unionByName(
        frames.sparkSession.createDataFrame(restarts, from_arrow_schema(_input_schema(values))))
    return facts, rows, restarts, problems


class _Facts:
    """What the driver learns in two passes over the frames: the few control frames
    (system events, OSO snapshot markers, Stream Requests and their responses) and the
    first message of every stream opaque per file; and from them the order of the files
    (by path)."""

    def __init__(self, frames_df):
        from pyspark.sql import functions as F

        source = F.col("source") if "source" in frames_df.columns else F.lit(None)
        frames_df = frames_df.withColumn("file", source.cast("string"))
        request = F.col("magic").isin(*_REQUESTS)
        stream_request = F.col("opcode") == int(P.Opcode.STREAM_REQUEST)
        answer = F.col("magic").isin(*_RESPONSES) & \
            F.col("status").isin(int(P.Status.SUCCESS), int(P.Status.ROLLBACK))
        control = (request & F.col("opcode").isin(int(P.Opcode.SYSTEM_EVENT),
                                                  int(P.Opcode.OSO_SNAPSHOT))) | \
            (stream_request & (request | answer))
        self.control = frames_df.where(control).select(
            "file", "offset", "magic", "opcode", "status", "opaque", "vbucket", "stream_id",
            "event_id", "event_version", "key", "value", "body_len").collect()
        self.message = request & F.col("opcode").isin(*(int(o) for o in MESSAGE_OPCODES))
        self.unit = F.col("vbucket") * 65536 + F.coalesce(F.col("stream_id"), F.lit(0))
        collection = F.col("collection_id").isNotNull() | F.col("opcode").isin(
            int(P.Opcode.SYSTEM_EVENT), int(P.Opcode.SEQNO_ADVANCED))
        firsts = (frames_df.where(self.message)
                  .groupBy("opaque", self.unit.alias("unit"), "file")
                  .agg(F.min("offset").alias("first"),
                       F.max(collection.cast("int")).alias("collections")).collect())
        files = {r.file for r in self.control} | {r.file for r in firsts}
        self.ranks = {name: i for i, name in enumerate(sorted(files, key=lambda f: f or ""))}
        #: the ranks of the files whose streams carry collections
        self.collection_ranks = sorted({self.ranks[r.file] for r in firsts if r.collections})
        self.firsts: dict[tuple[int, int], int] = {}
        for r in firsts:
            at = self.pos(r.file, r.first)
            key = (r.opaque, r.unit)
            self.firsts[key] = min(at, self.firsts.get(key, at))

    def files(self) -> list:
        """The files by rank (None: frames without a ``source``)."""
        out: list = [None] * max(len(self.ranks), 1)
        for name, rank in self.ranks.items():
            out[rank] = name
        return out

    def pos(self, file, offset: int) -> int:
        """Twice (the file's rank by path << 46 | the frame's offset)."""
        return (self.ranks.get(file, 0) << _SOURCE_BITS | offset) * 2

    def ordered(self, frames_df):
        """The frames with ``pos``."""
        from pyspark.sql import functions as F

        if "source" in frames_df.columns and self.ranks:
            ranks = frames_df.sparkSession.createDataFrame(
                [(name, i) for name, i in self.ranks.items()], "source string, rank long")
            frames_df = frames_df.join(F.broadcast(ranks), "source", "left")
        else:
            frames_df = frames_df.withColumn("rank", F.lit(0).cast("long"))
        pos = (F.coalesce(F.col("rank"), F.lit(0)) * (1 << _SOURCE_BITS) + F.col("offset")) * 2
        return frames_df.withColumn("pos", pos)

    def rows(self, opcode: int, magics) -> list:
        """The control frames of ``opcode`` with one of ``magics``, in stream order, each
        with its ``pos``."""
        found = [(self.pos(r.file, r.offset), r) for r in self.control
                 if r.opcode == opcode and r.magic in magics]
        return sorted(found, key=lambda pair: pair[0])

    def manifest(self) -> Manifest:
        """The collection names the system events tell, in stream order."""
        decoded = []
        for _, row in self.rows(int(P.Opcode.SYSTEM_EVENT), _REQUESTS):
            try:
                decoded.append(event_fields(row.event_id, row.event_version,
                                            bytes(row.key or b""), bytes(row.value or b"")))
            except MalformedEvent:
                continue                      # the executors report it
        schema = event_schema()
        columns = {name: [d.get(name) for d in decoded] for name in
                   ("event", "manifest_uid", "scope_id", "collection_id", "name")}
        return Manifest().update(pa.table({n: pa.array(v, schema.field(n).type)
                                           for n, v in columns.items()}))


def _restarts(facts: _Facts, frames, errors: str, values: bool,
              files: list) -> tuple[list[dict], list]:
    """The ``W_RESTART`` rows of the placed Stream Request responses, and the problems found
    (file rank << 46 | offset, length, reason); ``files`` are ``facts.files()``."""
    from pyspark.sql import functions as F

    answers = facts.rows(int(P.Opcode.STREAM_REQUEST), _RESPONSES)
    answers = [(pos, r) for pos, r in answers
               if r.status in (P.Status.SUCCESS, P.Status.ROLLBACK)]
    if not answers:
        return [], []
    problems: list[tuple[str | None, int, int, str, str]] = []
    asked = _requests(facts.rows(int(P.Opcode.STREAM_REQUEST), _REQUESTS), problems)
    placed, waiting = _place(answers, asked, facts.firsts)
    if waiting:
        wanted = frames.sparkSession.createDataFrame(
            [(i, answers[i][1].opaque, answers[i][0]) for i in waiting],
            "answer long, opaque long, after long")
        found = (frames.where(facts.message).join(F.broadcast(wanted), "opaque")
                 .where(F.col("pos") > F.col("after"))
                 .groupBy("answer").agg(F.min_by(facts.unit, F.col("pos")).alias("unit"),
                                        F.min("pos").alias("at")).collect())
        for row in found:
            placed[row.answer] = (row.unit, row.at - 1)
    out = []
    for i, (_, row) in enumerate(answers):
        rolled = row.status == P.Status.ROLLBACK
        where = (row.file, row.offset, P.HEADER_SIZE + row.body_len)
        try:
            seqno = rollback_seqno(bytes(row.value or b"")) if rolled else 0
        except ValueError as e:
            problems.append((*where, str(e), "malformed_response"))
            continue
        if i not in placed:
            if rolled:
                problems.append((*where, text("state_unplaced_rollback", seqno=seqno),
                                 "unplaced_rollback"))
            continue
        restart = {f.name: None if f.name in ("key", "value", "body", "xattrs") else 0
                   for f in _input_schema(values)}
        unit, pos = placed[i]
        info = C.INFO_COLLECTIONS if facts.ranks.get(row.file, 0) in facts.collection_ranks \
            else 0
        restart.update(pos=pos, what=C.W_RESTART, unit=unit, vb=unit >> 16, rolled=rolled,
                       seqno=_signed(seqno), offset=row.offset, timed_delete=False,
                       deleted=False, length=P.HEADER_SIZE + row.body_len,
                       opaque=row.opaque, info=info)
        out.append(restart)
    located = [(facts.pos(file, offset) // 2, length, reason, kind)
               for file, offset, length, reason, kind in problems]
    _report([p[:3] for p in located], errors, files)
    return out, located


def _requests(asked, problems) -> list[tuple[int, int, int]]:
    """(pos, opaque, stream key) of the well-formed Stream Requests (read as
    ``streams.frames.request_stream_id`` reads them)."""
    out = []
    for pos, row in asked:
        try:
            sid = request_stream_id(row.stream_id or 0, bytes(row.value or b""))
        except ValueError as e:
            problems.append((row.file, row.offset, P.HEADER_SIZE + row.body_len, str(e),
                             "malformed_response"))
            continue
        out.append((pos, row.opaque, stream_key(row.vbucket, sid)))
    return out


def _place(answers, requests, firsts):
    """Responses placed by their request or by the one stream that used their opaque
    before them (``streams.matching.placed``): index -> (stream key, pos); and the indices
    of those left waiting."""
    placed_at, waiting = {}, []
    for i, (at, row) in enumerate(answers):
        before = [key for pos, opaque, key in requests if opaque == row.opaque and pos < at]
        units = {unit for (opaque, unit), first in firsts.items()
                 if opaque == row.opaque and first < at}
        key = placed(before, units)
        if key is None:
            waiting.append(i)
        else:
            placed_at[i] = (key, at)
    return placed_at, waiting


def _rows(frames, values: bool, collection_ranks: list[int]):
    """The rows that change documents or mark the streams, in the engine's columns
    (``collection_ranks``: the files whose streams carry collections)."""
    from pyspark.sql import functions as F

    what = F.lit(None).cast("short")
    for opcode, code in _WHAT.items():
        what = F.when(F.col("opcode") == int(opcode), F.lit(code)).otherwise(what)
    zero = F.lit(0)
    out = frames.where(F.col("magic").isin(*_REQUESTS)).withColumn("what", what) \
        .where(F.col("what").isNotNull())
    columns = {
        "pos": F.col("pos"), "unit": F.col("vbucket") * 65536 + F.coalesce("stream_id", zero),
        "seqno": F.coalesce("by_seqno", zero), "prepared": F.coalesce("prepared_seqno", zero),
        "rev": F.coalesce("rev_seqno", zero), "cas": F.col("cas"),
        "flags": F.coalesce("flags", zero), "expiration": F.coalesce("expiration", zero),
        "delete_time": F.coalesce("delete_time", zero),
        "cid": F.coalesce("collection_id", zero), "event_id": F.coalesce("event_id", zero),
        "snap_start": F.coalesce("snap_start", zero), "snap_end": F.coalesce("snap_end", zero),
        "snap_flags": F.coalesce("snap_flags", zero), "end_status": F.coalesce("end_status", zero),
        "opaque": F.col("opaque"),
        "info": F.when(F.coalesce(F.col("rank"), zero).isin(*collection_ranks),
                       F.lit(C.INFO_COLLECTIONS)).otherwise(zero),
        "oso": F.coalesce("oso_flags", zero), "offset": F.shiftright("pos", 1),
        "length": F.col("body_len") + P.HEADER_SIZE, "what": F.col("what"),
        "datatype": F.col("datatype"), "event_version": F.coalesce("event_version", zero),
        "timed_delete": F.col("delete_time").isNotNull(),
        "deleted": F.coalesce(F.col("deleted") != 0, F.lit(False)), "rolled": F.lit(False),
        "vb": F.col("vbucket"), "key": F.col("key"),
        "value": F.when(F.col("what") == C.W_EVENT, F.col("value")),
    }
    if values:
        columns.update(body=F.col("content"), xattrs=F.col("xattrs"))
    schema = _input_schema(values)
    return out.select(*(columns[f.name].cast(_spark_type(f.type)).alias(f.name)
                        for f in schema))


def _spark_type(kind) -> str:
    if pa.types.is_map(kind):
        return "map<string,string>"
    return {pa.int64(): "long", pa.int32(): "int", pa.int16(): "short",
            pa.bool_(): "boolean", pa.binary(): "binary"}[kind]


def _signed(value: int) -> int:
    """A uint64 as the long Spark holds it."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _where(files: list, at: int) -> tuple:
    """(file, offset) of ``at`` (file rank << 46 | offset)."""
    return files[at >> _SOURCE_BITS], at & _OFFSET_MASK


def _report(problems, errors: str, files: list) -> None:
    """Raise the first of ``problems`` ((file rank << 46 | offset, length, reason)) in
    strict mode, naming its file; log them in skip mode."""
    if problems and errors == "strict":
        at, _, reason = min(problems)[:3]
        with located(files):
            raise DcpFormatError(at, reason)
    _logged(problems, files)


def _logged(problems, files: list) -> None:
    """Log how many ``problems`` (file rank << 46 | offset first) skip mode passed over,
    and where the first is."""
    if problems:
        file, offset = _where(files, min(p[0] for p in problems))
        log.warning("state: skipped %d problem(s), the first at byte %d%s", len(problems),
                    offset, f" of {file}" if file is not None else "")


@contextlib.contextmanager
def located(files: list):
    """A strict error raised at file rank << 46 | offset (by the engine, or
    ``_report``) raised again at its offset in its file, which it names."""
    try:
        yield
    except DcpFormatError as e:
        file, offset = _where(files, e.offset)
        error = DcpFormatError(offset, e.reason)
        if file is not None:
            error.add_note(f"while decoding {file}")
        raise error from None


def _partition(batches, manifest: Manifest, options: dict, files: list, schema: pa.Schema):
    """The state engine over one partition's rows (ordered by ``pos``): its rows, then a
    row with its report (``_REPORT``)."""
    builder = StateBuilder(**options)
    builder.manifest = manifest
    for rb in batches:
        if rb.num_rows:
            rows, damaged = partition_rows(rb, options["values"])
            with located(files):
                _logged(builder.feed(rows, problems=damaged), files)
    table = builder.result()
    meta = metadata(table)
    skipped = builder.problems
    report = {"consistency": meta["consistency"], "unrestored": meta["unrestored"],
              "lost": meta["lost"], "lacks": meta["lacks"],
              "errors": [[*_where(files, at), length, reason]
                         for at, length, reason in skipped.first],
              "error_counts": skipped.counts}
    table = table.cast(schema.remove(schema.get_field_index(_REPORT)), safe=False)
    yield from table.append_column(_REPORT, pa.nulls(table.num_rows, pa.string())).to_batches()
    yield pa.RecordBatch.from_pylist([{_REPORT: json.dumps(report)}], schema=schema)


def partition_rows(rb: pa.RecordBatch, values: bool) -> tuple[Rows, list[Problem]]:
    """A record batch of ``_input_schema`` as engine rows, and the damaged events (which
    clear nothing) as a state's problems."""
    column = {name: rb.column(name) for name in rb.schema.names}

    def u64(name):
        return column[name].to_numpy(zero_copy_only=False).view(np.uint64)

    def num(name, dtype):
        return column[name].to_numpy(zero_copy_only=False).astype(dtype)

    what = num("what", np.uint8)
    cid = num("cid", np.uint32)
    clear = np.zeros(rb.num_rows, bool)
    problems: list[Problem] = []
    for i in np.flatnonzero(what == C.W_EVENT).tolist():
        try:
            fields = event_fields(int(column["event_id"][i].as_py()),
                                  int(column["event_version"][i].as_py()),
                                  column["key"][i].as_py() or b"",
                                  column["value"][i].as_py() or b"")
        except MalformedEvent as e:
            problems.append((int(u64("offset")[i]), int(u64("length")[i]), str(e),
                             "damaged_event", ""))
            continue
        if fields["event"] in ("create_collection", "flush_collection", "drop_collection") \
                and fields.get("collection_id") is not None:
            clear[i], cid[i] = True, fields["collection_id"]
    docs = np.flatnonzero(what < DOCUMENTS)
    keys = column["key"].take(pa.array(docs)).cast(pa.large_binary())
    offsets = np.frombuffer(keys.buffers()[1], np.int64)[keys.offset:keys.offset + len(docs) + 1]
    key_pos = np.full(rb.num_rows, -1, np.int64)
    key_len = np.zeros(rb.num_rows, np.int64)
    key_pos[docs], key_len[docs] = offsets[:-1], np.diff(offsets)
    value_at = np.full(rb.num_rows, -1, np.int64)
    value_at[docs] = np.arange(len(docs))
    body = xattrs = None
    if values:
        body = column["body"].take(pa.array(docs)).cast(pa.large_binary())
        xattrs = cast_map(column["xattrs"].take(pa.array(docs)), xattr_type())
    data = keys.buffers()[2]
    rows = make_rows(
        rb.num_rows, values, keys=b"" if data is None else data, body=body, xattrs=xattrs,
        pos=num("pos", np.int64), what=what, unit=num("unit", np.uint32), seqno=u64("seqno"),
        prepared=u64("prepared"), rev=u64("rev"), cas=u64("cas"),
        flags=num("flags", np.uint32), expiration=num("expiration", np.uint32),
        datatype=num("datatype", np.uint8), delete_time=num("delete_time", np.uint32),
        timed_delete=num("timed_delete", bool), deleted=num("deleted", bool), cid=cid,
        clear=clear, snap_start=u64("snap_start"), snap_end=u64("snap_end"),
        snap_flags=num("snap_flags", np.uint32), oso=num("oso", np.uint32),
        end_status=num("end_status", np.uint32), opaque=num("opaque", np.uint32),
        info=num("info", np.uint8), rolled=num("rolled", bool), offset=u64("offset"),
        length=u64("length"), key_pos=key_pos, key_len=key_len, value_at=value_at)
    return rows, problems
