"""``changes``: the change feed of a DCP stream as one Arrow table, in stream order, with
what it cannot know in its metadata (``feed_metadata``); ``ChangesBuilder`` takes the
stream batch by batch."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import protocol as P
from .._core.contract import W_MARKER
from ..arrow import cast_map
from ..batch import FrameBatch
from ..documents import bodies
from ..documents.builder import Problem, StateBuilder
from ..documents.feeding import fed
from ..documents.options import flag, positive, scan_collections
from ..documents.output import columns_of, keys_of
from ..documents.rows import Rows
from ..documents.versions import Versions, tombstones
from ..streams import failover_logs
from ..streams.frames import requests
from ..streams.matching import message_opaques
from ..values import text_or_null
from .replay import CHANGES, Everything, Feed, replay

#: The schema metadata key of the feed's metadata (JSON).
METADATA_KEY = b"dcpfast.changes"
#: Changes per record batch of ``changes(stream=True)`` and ``ChangesBuilder.batches``.
BATCH_ROWS = 65536
#: Bytes of the stream read at a time for the feed (and the audit) by default: a quarter
#: of what ``state`` reads, so that the reading's working memory, which follows the batch,
#: is a quarter beside what the feed keeps, at the same speed (docs/changes.md).
FEED_BATCH_BYTES = 16 << 20
#: The fields of a version that the feed shows, after a change and, with ``before``, before.
_DOCUMENT = [("by_seqno", pa.uint64()), ("rev_seqno", pa.uint64()), ("cas", pa.uint64()),
             ("flags", pa.uint32()), ("expiration", pa.uint32()), ("datatype", pa.uint8()),
             ("delete_time", pa.uint32())]
_VALUES = [("body", pa.binary()), ("xattrs", pa.map_(pa.string(), pa.string()))]


def changes_schema(*, values: bool = True, before: bool = False) -> pa.Schema:
    """The Arrow schema of ``changes``' table (without its metadata)."""
    fields = [("vbucket", pa.uint16()), ("collection_id", pa.uint32()), ("scope", pa.string()),
              ("collection", pa.string()), ("key", pa.binary()), ("key_str", pa.string()),
              ("change", pa.string()), ("deleted", pa.bool_()), ("epoch", pa.uint32()),
              ("seqno", pa.uint64()), *_DOCUMENT,
              ("snap_start", pa.uint64()), ("snap_end", pa.uint64()),
              ("snap_flags", pa.uint32()), ("vbucket_uuid", pa.uint64())]
    if values:
        fields += _VALUES
    if before:
        inner = [*_DOCUMENT, *(_VALUES if values else [])]
        fields.append(("before", pa.struct(inner)))
    return pa.schema(fields)


class ChangesBuilder:
    """``changes`` batch by batch: ``update`` with each batch of one stream, in order
    (``client`` with a capture's client side), then ``table``. Every batch goes on to a
    state builder whose engine keeps every version (``replay.Everything``); the server
    side's snapshot markers and failover logs are noted with their positions (twice the
    frame's number in the stream, as the engine counts)."""

    def __init__(self, *, values: bool = True, before: bool = False, errors: str = "strict",
                 threads: int | None = None):
        self.builder = StateBuilder(values=values, errors=errors, history=True,
                                    threads=threads)
        self.builder.engine.store = Everything()
        self.values, self.before = self.builder.values, flag("before", before)
        self.frames = 0
        self.markers: list[tuple[np.ndarray, ...]] = []
        self.uuids: list[tuple[np.ndarray, ...]] = []
        #: failover logs not placed yet: (opaque, row in the batch, newest vbucket uuid)
        self._waiting: list[tuple[int, int, int]] = []

    def client(self, batch: FrameBatch) -> ChangesBuilder:
        self.builder.client(batch)
        return self

    def update(self, batch: FrameBatch) -> ChangesBuilder:
        if len(batch):
            at = np.flatnonzero((batch["opcode"] == P.Opcode.SNAPSHOT_MARKER)
                                & requests(batch))
            if len(at):
                unit = (batch["vbucket"][at].astype(np.uint32) << np.uint32(16)) \
                    | batch["stream_id"][at].astype(np.uint32)
                self.markers.append((unit, 2 * (self.frames + at), batch["snap_start"][at],
                                     batch["snap_end"][at], batch["snap_flags"][at]))
            self._failover_logs(batch)
        self.builder.update(batch)
        self.frames += len(batch)
        return self

    def feed(self, rows: Rows, problems: Iterable[Problem] = ()) -> list[Problem]:
        """Take the next rows of the stream (what ``StateBuilder.update`` makes of a
        batch, or Spark's partitions of them): their snapshot markers noted, then the rows
        to the state builder (``StateBuilder.feed``), which returns what it reported."""
        at = np.flatnonzero(rows.what == W_MARKER)
        if len(at):
            got = rows.gathers(("unit", "pos", "snap_start", "snap_end", "snap_flags"), at)
            self.markers.append((got["unit"], got["pos"], got["snap_start"], got["snap_end"],
                                 got["snap_flags"]))
        return self.builder.feed(rows, problems=problems)

    def _failover_logs(self, batch: FrameBatch) -> None:
        """Note the newest entry of each failover log of ``batch`` on its vbucket: placed as
        the state builder places responses (by what came before, else by the first stream
        message with its opaque after it, in this batch or a later one)."""
        logs = failover_logs(batch, self.builder.placer.tracker, prefix=True)
        newest = logs.filter(pc.equal(logs["entry"], 0)).to_pydict()
        opaques = message_opaques(batch)
        waiting = self._waiting + [(opaque, row, uuid) for vb, opaque, row, uuid in zip(
            newest["vbucket"], newest["opaque"], newest["index"], newest["vbucket_uuid"])
            if vb is None]
        self._waiting = []
        found = [(vb << 16, 2 * (self.frames + row), uuid) for vb, row, uuid in zip(
            newest["vbucket"], newest["index"], newest["vbucket_uuid"]) if vb is not None]
        for opaque, row, uuid in waiting:     # row: in this batch, or below 0 (earlier)
            later = [key for first, key in opaques.get(opaque, ()) if first > row]
            if later:
                found.append((later[0] & 0xFFFF0000, 2 * (self.frames + row), uuid))
            else:
                self._waiting.append((opaque, row - len(batch), uuid))
        if found:
            unit, pos, uuid = zip(*found)
            self.uuids.append((np.array(unit, np.uint32), np.array(pos, np.int64),
                               np.array(uuid, np.uint64)))

    def replayed(self, *, placed: bool = True) -> Replayed:
        """What the stream taken holds, its feed replayed (``table`` shows it); ``placed``:
        report the Rollback responses that found no stream (rows fed by hand come with
        their restarts placed)."""
        builder = self.builder
        if placed:
            builder.placed()
        engine = builder.engine
        versions, consistent = engine.finish()
        clears = _joined(engine.clears, (np.uint32, np.uint32, np.int64, np.uint64))
        restarts = _joined(engine.restarts, (np.uint32, np.int64, np.uint64))
        lost = engine.streams.lost()
        if lost and versions is not None:
            versions, clears = stopped(versions, clears, {u: consistent[u] for u in lost})
        return Replayed(versions, restarts, clears, consistent, lost)

    def table(self, *, placed: bool = True) -> pa.Table:
        """The feed of the batches taken, with its metadata (``feed_metadata``);
        ``placed`` as for ``replayed``."""
        return self.batches(rows=None, placed=placed).read_all()

    def batches(self, *, rows: int | None = BATCH_ROWS,
                placed: bool = True) -> pa.RecordBatchReader:
        """The feed of the batches taken as a stream of record batches of at most ``rows``
        changes (None: one batch), each made as it is read, so that the feed is never
        held whole; the schema holds the metadata (``feed_metadata``). ``placed`` as for
        ``replayed``."""
        done = self.replayed(placed=placed)
        per_vbucket: dict[int, int] = {}
        for unit, seqno in done.consistent.items():
            per_vbucket[unit >> 16] = min(seqno, per_vbucket.get(unit >> 16, seqno))
        metadata = {"consistency": sorted([vb, s] for vb, s in per_vbucket.items()),
                    "lost": sorted({u >> 16 for u in done.lost}),
                    **self.builder.problems.metadata()}
        schema = changes_schema(values=self.values, before=self.before).with_metadata(
            {METADATA_KEY: json.dumps(metadata).encode()})
        if done.versions is None or not len(done.feed):
            return pa.RecordBatchReader.from_batches(schema, iter(()))
        feed = done.feed
        step = len(feed) if rows is None else positive("rows", rows)
        # the snapshot and the failover log of each change the stream sent (what a restart
        # undoes has none)
        markers = _latest_before(self.markers, feed.unit, feed.pos)
        markers[feed.change == CHANGES.index("rollback")] = -1
        uuids = _latest_before(self.uuids, feed.unit & np.uint32(0xFFFF0000), feed.pos)
        versions = done.versions
        del done
        pieces = (self._batch(feed.sliced(at, at + step), versions, markers[at:at + step],
                              uuids[at:at + step], schema)
                  for at in range(0, len(feed), step))
        return pa.RecordBatchReader.from_batches(schema, pieces)

    def keys(self, doc: np.ndarray) -> pa.Array:
        """The keys of documents ``doc`` (the engine's ids), as text where UTF-8."""
        return text_or_null(keys_of(self.builder.engine.index, doc))

    def _batch(self, feed: Feed, versions: Versions, markers: np.ndarray,
               uuids: np.ndarray, schema: pa.Schema) -> pa.RecordBatch:
        """The rows of ``feed``'s changes, each change's snapshot marker and failover log
        found (``markers``, ``uuids``: indices into those noted, -1 where none)."""
        values, before = self.values, self.before
        manifest = self.builder.manifest
        none = feed.after < 0
        rows = versions.take(np.maximum(feed.after, 0))
        rows["unit"], rows["cid"], rows["doc"] = feed.unit, feed.cid, feed.doc
        rows["key"] = keys_of(self.builder.engine.index, feed.doc)
        columns = columns_of(rows, manifest)
        document = _document(rows, columns, none, values=values)
        out = {name: columns[name] for name in ("vbucket", "collection_id", "scope",
                                                "collection", "key", "key_str")}
        out["change"] = pa.array(np.array(CHANGES, object)[feed.change], pa.string())
        out["deleted"] = pa.array(none | np.asarray(columns["deleted"]))
        out["epoch"] = feed.epoch.astype(np.uint32)
        out["seqno"] = feed.seqno.astype(np.uint64)
        out.update({name: document[name] for name, _ in _DOCUMENT})
        for k, name in enumerate(("snap_start", "snap_end", "snap_flags")):
            out[name] = _at(self.markers, 2 + k, markers, schema.field(name).type)
        out["vbucket_uuid"] = _at(self.uuids, 2, uuids, pa.uint64())
        if values:
            out["body"], out["xattrs"] = document["body"], document["xattrs"]
        if before:
            prior = versions.take(np.maximum(feed.before, 0))
            was = (feed.before < 0) | tombstones(prior)        # nothing stood: a tombstone
            prior["key"] = rows["key"]
            shown = _document(prior, columns_of(prior, manifest), was, values=values)
            inner = schema.field("before").type
            out["before"] = pa.StructArray.from_arrays(
                [shown[f.name] for f in inner], fields=list(inner), mask=pa.array(was))
        return pa.RecordBatch.from_pydict(
            {name: _array(column) for name, column in out.items()}, schema=schema)


@dataclass
class Replayed:
    """What a stream holds, as its feed is made of it: every version it sent (those of a
    stream that lost frames up to its consistent seqno), its restarts (unit, position,
    point) and collection clears (unit, collection id, position, seqno), each stream's
    consistent seqno, the streams that lost frames, and the feed (replayed when first
    asked for: the audit needs the versions only)."""

    versions: Versions | None
    restarts: tuple
    clears: tuple
    consistent: dict[int, int]
    lost: list[int]

    @cached_property
    def feed(self) -> Feed:
        """The feed: every change in stream order (``replay.replay``)."""
        return replay(self.versions, self.restarts, self.clears)


def stopped(versions: Versions, clears: tuple, cuts: dict[int, int]) -> tuple:
    """The versions and clears of the streams that lost frames (``cuts``: stream ->
    consistent seqno) at or below their consistent seqno, the others all: the feed of
    such a stream is then ``state`` at that seqno (its restarts still apply)."""
    units = np.array(sorted(cuts), np.uint32)
    limits = np.array([cuts[u] for u in units.tolist()], np.uint64)

    def within(unit: np.ndarray, seqno: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(units, unit), len(units) - 1)
        cut = np.where(units[at] == unit, limits[at], np.uint64(2**64 - 1))
        return seqno <= cut

    kept = within(clears[0], clears[3])
    return (versions.take(np.flatnonzero(within(versions["unit"], versions["seqno"]))),
            tuple(c[kept] for c in clears))


def changes(source, *, values: bool = True, before: bool = False,
            collections: bool | None = None, errors: str = "strict",
            batch_bytes: int = FEED_BATCH_BYTES, threads: int | None = None,
            stream: bool = False) -> pa.Table | pa.RecordBatchReader:
    """The change feed of a DCP stream: one row per change of a document, in stream
    order, such that applying the rows in order (a row with ``deleted`` removes its
    document, any other sets it) gives ``dcpfast.state(source)``; a vbucket whose stream
    lost frames stops at its consistent seqno (``feed_metadata`` names it), as
    ``state(source, at_seqno=...)`` does. See docs/changes.md.

    ``source`` as for ``state``. ``change`` says what made the row: ``mutation``,
    ``deletion``, ``expiration`` (the stream's changes, a durable write at its commit),
    ``rollback`` (a restart took back the version that stood: the row holds the version
    it makes current again, or a deletion) or ``clear`` (a collection drop or flush).
    ``(epoch, change != "rollback", seqno)`` orders a document's changes (``by_seqno``
    alone does not after a rollback). ``values`` adds ``body`` and ``xattrs``; ``before`` a
    struct of the version that stood before the change (null: none). ``errors``,
    ``collections``, ``batch_bytes`` (by default ``FEED_BATCH_BYTES``) and ``threads`` as
    for ``state``. ``stream=True``
    returns the same rows as a ``pyarrow.RecordBatchReader`` of batches of
    ``BATCH_ROWS``, each made as it is read: the feed is then never held whole.
    """
    reading = dict(collections=scan_collections(collections),
                   batch_bytes=positive("batch_bytes", batch_bytes),
                   threads=None if threads is None else positive("threads", threads))
    builder = ChangesBuilder(values=values, before=before, errors=errors,
                             threads=reading["threads"])
    with fed(builder, source, errors, reading, again=False):
        return builder.batches() if flag("stream", stream) else builder.table()


def feed_metadata(table: pa.Table | pa.RecordBatchReader | pa.Schema) -> dict:
    """The metadata of a ``changes`` table (or stream, or their schema): each vbucket's
    consistent seqno (``consistency``), the vbuckets whose stream lost frames (``lost``)
    and the problems skip mode passed over."""
    schema = table if isinstance(table, pa.Schema) else table.schema
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError("not a table of dcpfast.changes (no dcpfast.changes metadata)")
    return json.loads(raw)


def _joined(parts: list[tuple], dtypes: tuple) -> tuple:
    """Arrays kept per stretch, joined (empty arrays of ``dtypes`` where none)."""
    if not parts:
        return tuple(np.zeros(0, d) for d in dtypes)
    return tuple(np.concatenate(column).astype(d, copy=False)
                 for column, d in zip(zip(*parts), dtypes))


def _array(column) -> pa.Array | np.ndarray:
    """A column of one record batch: a chunked array's chunks joined."""
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _document(rows: Versions, columns: dict, none: np.ndarray, *, values: bool) -> dict:
    """A version's fields (``_DOCUMENT``, with values ``body`` and ``xattrs``), null where
    ``none`` says no version stands."""
    mask = pa.array(none)
    out = {}
    for name, kind in _DOCUMENT:
        column = columns[name]
        column = pa.array(column, kind) if not isinstance(column, pa.Array) else column
        out[name] = pc.if_else(mask, pa.scalar(None, kind), column)
    if values:
        body, xattrs = bodies.gather(rows.values, rows["vref"])
        body = body.cast(pa.binary())
        xattrs = cast_map(xattrs, pa.map_(pa.string(), pa.string()))
        out["body"] = pc.if_else(mask, pa.scalar(None, pa.binary()), body)
        out["xattrs"] = pc.if_else(mask, pa.scalar(None, xattrs.type), xattrs)
    return out


def _latest_before(noted: list[tuple], unit: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Per (``unit``, ``pos``), the index of the last of ``noted`` (arrays per batch: the
    unit, the position, ...) of the same unit before it, -1 where none."""
    if not noted:
        return np.full(len(unit), -1, np.int64)
    n_unit = np.concatenate([n[0] for n in noted]).astype(np.uint32)
    n_pos = np.concatenate([n[1] for n in noted]).astype(np.int64)
    m = len(n_unit)
    units = np.concatenate([n_unit, unit.astype(np.uint32)])
    places = np.concatenate([n_pos, pos.astype(np.int64)])
    noting = np.concatenate([np.zeros(m, np.int8), np.ones(len(unit), np.int8)])
    order = np.lexsort((noting, places, units))
    is_noted = order < m
    step = np.arange(len(order))
    last = np.maximum.accumulate(np.where(is_noted, step, -1))
    sorted_units = units[order]
    starts = np.ones(len(order), bool)
    starts[1:] = sorted_units[1:] != sorted_units[:-1]
    group = np.maximum.accumulate(np.where(starts, step, 0))
    found = np.where(last >= group, order[np.maximum(last, 0)], -1)
    out = np.empty(len(unit), np.int64)
    events = ~is_noted
    out[order[events] - m] = found[events]
    return out


def _at(noted: list[tuple], column: int, index: np.ndarray, kind: pa.DataType) -> pa.Array:
    """Column ``column`` of ``noted`` at ``index`` (null where -1), as ``kind``."""
    if not noted:
        return pa.nulls(len(index), kind)
    values = np.concatenate([n[column] for n in noted])
    return pa.array(values[np.maximum(index, 0)], mask=index < 0).cast(kind)
