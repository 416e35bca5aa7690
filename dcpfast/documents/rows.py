"""A stretch of a stream as the state engine reads it: the rows that change documents or
the stream's position, in stream order, as numpy columns (``Rows``), and how a
``FrameBatch`` becomes one (``batch_rows``).

Each row has a ``what`` (``_core.contract.W_*``): a document change (mutation, deletion,
expiration, prepare, commit, abort), a system event, a seqno advance, a snapshot marker,
an OSO marker, a Stream End, a Stream Request (its start seqno in ``seqno``), a restart
(a Stream Request response placed on its stream, ``restarts``), a loss (bytes skipped
that may have held frames of any stream), or a frame of no stream the state reads (a
response, an opcode it has no use for: ``W_SKIP``), so that a batch's rows are its frames
and their columns the batch's own. ``pos``
orders rows across stretches: twice the frame's number in the stream, one less for a
restart placed just before the message that placed it or a loss just before the frame
after it. A document change's key is ``keys[key_pos:key_pos + key_len]``; its value, where
values are wanted, is entry ``value_at`` of the rows' chunk of values (``bodies``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import arrow, buffers
from .. import protocol as P
from .._core import contract as C
from ..arrays import at
from ..batch import FrameBatch, kinds_of, view_of
from ..errors import SkippedRegion
from ..streams.checks import EVENT_OF_OPCODE, oso_events
from ..values import value_extents
from . import bodies
from .bodies import xattr_type

#: ``what`` below this is a document change.
DOCUMENTS = C.W_EVENT
#: Changes whose frame carries the document's CAS.
TIMED = np.zeros(C.W_NONE + 1, bool)
TIMED[[C.W_MUTATION, C.W_DELETION, C.W_EXPIRATION, C.W_PREPARE]] = True
#: System events that empty a collection on their stream: its creation (and, since 8.0,
#: a flush, which re-sends it), the never-sent flush event, and its drop.
CLEARING_EVENTS = ("create_collection", "flush_collection", "drop_collection")
#: Per ``what``: the stream checks' event (OSO markers are told apart by their flags).
EVENT_OF_WHAT = np.full(C.W_NONE + 1, C.EV_NONE, np.uint8)
EVENT_OF_WHAT[[C.W_MUTATION, C.W_DELETION, C.W_EXPIRATION, C.W_PREPARE, C.W_COMMIT,
               C.W_ABORT, C.W_EVENT]] = C.EV_ITEM
EVENT_OF_WHAT[C.W_ADVANCE] = C.EV_ADVANCE
EVENT_OF_WHAT[C.W_MARKER] = C.EV_MARKER
EVENT_OF_WHAT[C.W_END] = C.EV_END
EVENT_OF_WHAT[C.W_RESTART] = C.EV_RESPONSE
EVENT_OF_WHAT[C.W_REQUEST] = C.EV_REQUEST

_WHAT = {"mutation": C.W_MUTATION, "deletion_v1": C.W_DELETION, "deletion_v2": C.W_DELETION,
         "expiration": C.W_EXPIRATION, "prepare": C.W_PREPARE, "commit": C.W_COMMIT,
         "abort": C.W_ABORT, "system_event": C.W_EVENT, "seqno_advanced": C.W_ADVANCE,
         "oso_snapshot": C.W_OSO, "stream_end": C.W_END, "stream_request": C.W_REQUEST}
#: Per frame kind: its ``what``, or ``W_SKIP`` for the kinds the state does not read.
WHAT_OF_KIND = np.full(len(P.KINDS), C.W_SKIP, np.uint8)
for _i, _kind in enumerate(P.KINDS):
    if _kind.response:                  # responses are placed by ``restarts``
        continue
    if _kind.name in _WHAT:
        WHAT_OF_KIND[_i] = _WHAT[_kind.name]
    elif _kind.opcode == P.Opcode.SNAPSHOT_MARKER:
        WHAT_OF_KIND[_i] = C.W_MARKER
_DELETE_TIMES = P.kinds_where(lambda k: "delete_time" in k.columns)
#: Columns of a batch that ``batch_rows`` reads.
NEEDED = ("offset", "magic", "opcode", "datatype", "vbucket", "status", "opaque", "cas",
          "body_len", "framing_len", "extras_len", "key_offset", "key_len", "value_offset",
          "value_len", "stream_id", "by_seqno", "rev_seqno", "prepared_seqno", "flags",
          "expiration", "delete_time", "deleted", "snap_start", "snap_end", "snap_flags",
          "event_id", "event_version", "oso_flags", "end_status")
assert (EVENT_OF_OPCODE[[P.Opcode.MUTATION, P.Opcode.SEQNO_ADVANCED]] ==
        EVENT_OF_WHAT[[C.W_MUTATION, C.W_ADVANCE]]).all()


class _Columns(dict):
    """Columns by name, each made when first asked for (``fill``)."""

    def __init__(self, columns: dict, fill):
        super().__init__(columns)
        self.fill = fill

    def __missing__(self, name):
        if self.fill is None:
            raise KeyError(name)
        column = self[name] = self.fill(name)
        return column


class Rows:
    """Rows of a stretch in stream order: the numpy columns of ``NUMERIC`` (``columns``,
    made when first asked for), the buffer ``keys`` the document keys are in, and the
    values (the ``body``/``xattrs`` given) as a chunk of ``bodies``: ``chunk``, its id and
    the chunks that hold it (None when values are not wanted; given instead of
    ``body``/``xattrs`` where rows share another's values). ``gather(name, index)`` gives
    a column at a few rows without making the whole column."""

    def __init__(self, columns: dict, keys=None, body=None, xattrs=None, *, size=None,
                 fill=None, pick=None, picks=None, chunk: tuple | None = None, ids=None):
        self.columns = _Columns(columns, fill)
        self.keys = keys
        if chunk is None and body is not None:
            chunk = bodies.register(bodies.arrow_chunk(body, xattrs))
        #: (chunk id, chunks) of the values, or None
        self.chunk = chunk
        self.size = len(columns["pos"]) if size is None else size
        self._pick, self._picks = pick, picks
        self._ids = ids

    def __len__(self):
        return self.size

    def __getattr__(self, name):
        if name in NUMERIC:
            return self.columns[name]
        raise AttributeError(name)

    def gather(self, name: str, index: np.ndarray) -> np.ndarray:
        """Column ``name`` at the rows ``index``."""
        if self._pick is None or name in self.columns:
            return at(self.columns[name], index)
        return self._pick(name, index)

    def gathers(self, names, index: np.ndarray) -> dict[str, np.ndarray]:
        """Columns ``names`` at the rows ``index`` (where rows were put in, the places of
        ``index`` worked out once for all of them)."""
        made = [name for name in names if self._pick is None or name in self.columns]
        out = buffers.pooled_take(self.columns, made, index)
        rest = [name for name in names if name not in out]
        if rest and self._picks is not None:
            out.update(self._picks(rest, index))
        elif rest:
            out.update((name, self._pick(name, index)) for name in rest)
        return out

    def ids(self, index, docs: np.ndarray) -> np.ndarray:
        """The id in ``index`` (a ``KeyIndex``) of the document of each of the rows
        ``docs`` (document changes); rows of a batch read it from the batch's columns."""
        if self._ids is not None:
            return self._ids(index, docs)
        g = self.gather
        return index.ids(self.keys if self.keys is not None else b"", g("key_pos", docs),
                         g("key_len", docs), g("unit", docs), g("cid", docs))

    def events(self) -> np.ndarray:
        """The stream checks' event of each row."""
        event = EVENT_OF_WHAT.take(self.columns["what"])
        oso = self.columns["what"] == C.W_OSO
        event[oso] = oso_events(self.columns["oso"][oso])
        return event


#: The numpy columns of ``Rows`` and their dtypes.
NUMERIC = {"pos": np.int64, "what": np.uint8, "unit": np.uint32, "seqno": np.uint64,
           "prepared": np.uint64, "rev": np.uint64, "cas": np.uint64, "flags": np.uint32,
           "expiration": np.uint32, "datatype": np.uint8, "delete_time": np.uint32,
           "timed_delete": bool, "deleted": bool, "cid": np.uint32, "clear": bool,
           "snap_start": np.uint64, "snap_end": np.uint64, "snap_flags": np.uint32,
           "oso": np.uint32, "end_status": np.uint32, "opaque": np.uint32, "info": np.uint8,
           "rolled": bool, "offset": np.uint64, "length": np.uint64, "key_pos": np.int64,
           "key_len": np.int64, "value_at": np.int64}


def make_rows(n: int, values: bool, keys=None, body=None, xattrs=None, **columns) -> Rows:
    """``n`` rows of ``columns`` (numpy arrays); the columns not given are zeros (-1 for
    ``value_at``: no value)."""
    out: dict = {name: np.zeros(n, dtype) for name, dtype in NUMERIC.items()}
    out["value_at"] = np.full(n, -1, np.int64)
    for name, column in columns.items():
        out[name] = np.asarray(column, NUMERIC[name])
    if values:
        body = pa.array([], pa.large_binary()) if body is None else body
        xattrs = pa.array([], xattr_type()) if xattrs is None else xattrs
    return Rows(out, keys, body, xattrs)


#: Up to this many rows put in among others, each column is copied run by run between them.
_FEW_PUT_IN = 64


def merged(rows: Rows, extra: Rows) -> Rows:
    """``rows`` (in ``pos`` order) with the few rows ``extra`` (restarts, losses: no
    document changes) put in their places by ``pos``."""
    extra = sort(extra)
    at = np.searchsorted(rows.columns["pos"], extra.columns["pos"], side="right")
    moved = at + np.arange(len(at))                   # where each extra row lands

    def fill(name):
        column, more = rows.columns[name], extra.columns[name]
        if len(at) > _FEW_PUT_IN:
            return np.insert(column, at, more)
        out = np.empty(len(column) + len(at), column.dtype)   # the runs between, copied
        start = 0
        for k, (a, m) in enumerate(zip(at.tolist(), moved.tolist())):
            out[start + k:m] = column[start:a]
            out[m] = more[k]
            start = a
        out[start + len(at):] = column[start:]
        return out

    def picks(names, index):
        after = np.searchsorted(moved, index, side="right")   # extra rows at or before
        source = index - after                                 # a row of ``rows``
        hit = moved[np.maximum(after - 1, 0)] == index          # an extra row (few)
        hit &= after > 0
        hits = np.flatnonzero(hit)
        source[hits] = 0
        out = rows.gathers(names, source)
        for name in names if len(hits) else ():
            out[name][hits] = extra.columns[name][after[hits] - 1]
        return out

    def pick(name, index):
        return picks([name], index)[name]

    return Rows({}, rows.keys, size=len(rows) + len(extra), fill=fill, pick=pick,
                picks=picks, chunk=rows.chunk)


def concat(parts: list[Rows]) -> Rows:
    """Rows without document changes, in the order given."""
    return Rows({name: np.concatenate([p.columns[name] for p in parts]) for name in NUMERIC})


def take(rows: Rows, index: np.ndarray) -> Rows:
    """The rows at ``index`` (ascending); their keys and values stay where they are."""
    return Rows(rows.gathers(list(NUMERIC), index), rows.keys, chunk=rows.chunk)


def subset(rows: Rows, index: np.ndarray) -> Rows:
    """The rows at ``index`` (ascending), each column but ``what`` taken when first asked
    for; their keys and values stay where they are."""
    return Rows({"what": at(rows.columns["what"], index)}, rows.keys, size=len(index),
                fill=lambda name: rows.gather(name, index),
                pick=lambda name, at: rows.gather(name, index[at]),
                picks=lambda names, at: rows.gathers(names, index[at]), chunk=rows.chunk,
                ids=lambda key_index, docs: rows.ids(key_index, index[docs]))


def sort(rows: Rows) -> Rows:
    """The rows in ``pos`` order."""
    order = np.argsort(rows.pos, kind="stable")
    if (order == np.arange(len(order))).all():
        return rows
    return take(rows, order)


#: Columns of ``Rows`` read straight from a batch's column of that name.
_STRAIGHT = {"seqno": "by_seqno", "prepared": "prepared_seqno", "rev": "rev_seqno",
             "cas": "cas", "flags": "flags", "expiration": "expiration",
             "datatype": "datatype", "delete_time": "delete_time",
             "snap_start": "snap_start", "snap_end": "snap_end", "snap_flags": "snap_flags",
             "oso": "oso_flags", "end_status": "end_status", "opaque": "opaque",
             "offset": "offset"}


def batch_rows(batch: FrameBatch, first: int, *, values: bool, events,
               threads: int | None = None, valued: np.ndarray | None = None
               ) -> tuple[Rows, list[SkippedRegion]]:
    """The rows of ``batch``, one per frame, and the frames whose values did not decode
    (in stream order; their values are null); ``first`` is the number of its first frame
    in the stream, ``events`` its system events (``events.read_events``), ``threads``
    those that decode its values (None: the cores idle now), ``valued`` (a flag per frame)
    the frames whose values are decoded where not all (the others' ``value_at`` is -1).
    Its columns are read from the batch when first asked for (``_Source``): the batch's
    own, where the state reads them as they are."""
    missing = [name for name in NEEDED if name not in batch]
    if missing:
        raise ValueError(f"state needs the columns {', '.join(missing)}; this batch was "
                         "scanned without them")
    if batch.collections and "collection_id" not in batch:
        raise ValueError("state needs the collection_id column on a collection stream")
    kinds = kinds_of(batch)
    what = WHAT_OF_KIND.take(kinds)
    source = _Source(batch, first, what, kinds, events)
    chunk, damaged = None, []
    if values:
        wanted = what < DOCUMENTS
        docs = np.flatnonzero(wanted if valued is None else wanted & valued)
        source.value_at = np.full(len(what), -1, np.int64)
        source.value_at[docs], values_chunk, damaged = _values(batch, docs, threads, valued)
        chunk = bodies.register(values_chunk)
    keys = view_of(batch)
    return Rows({"what": what}, keys, size=len(what), chunk=chunk,
                fill=lambda name: source.column(name, None), pick=source.column,
                picks=source.columns,
                ids=lambda index, docs: source.ids(index, keys, docs)), damaged


class _Source:
    """The columns of a batch's rows (one per frame), read when asked for."""

    def __init__(self, batch: FrameBatch, first: int, what: np.ndarray, kinds: np.ndarray,
                 events):
        self.batch, self.first, self.what, self.kinds = batch, first, what, kinds
        wiped = np.isin(events.column("event").to_numpy(zero_copy_only=False),
                        CLEARING_EVENTS) & events.column("collection_id").is_valid().to_numpy(
                            zero_copy_only=False)
        #: the rows of the events that clear a collection, and that collection
        self.clears = events.column("index").to_numpy()[wiped].astype(np.int64)
        self.cleared = events.column("collection_id").to_numpy(zero_copy_only=False)[wiped]
        self.value_at: np.ndarray | None = None
        self.info = C.INFO_COLLECTIONS if batch.collections else 0

    def column(self, name: str, rows: np.ndarray | None) -> np.ndarray:
        """Column ``name`` at ``rows`` (None: all; a whole column read as it is may be
        the batch's own, not to be written to)."""
        batch = self.batch
        if name in _STRAIGHT:
            return self._at(batch[_STRAIGHT[name]], rows)
        n = len(self.what) if rows is None else len(rows)

        def docs():
            return self._at(self.what, rows) < DOCUMENTS
        derived = {
            "unit": lambda: self._at(batch["vbucket"], rows).astype(np.uint32)
            << np.uint32(16) | self._at(batch["stream_id"], rows),
            "cid": lambda: self._cids(rows),
            "clear": lambda: self._clearing(n, rows),
            "key_pos": lambda: np.where(docs(), arrow.positions(
                self._at(batch["key_offset"], rows), batch.base_offset).astype(np.int64), -1),
            "key_len": lambda: np.where(docs(), self._at(batch["key_len"], rows),
                                        0).astype(np.int64),
            "value_at": lambda: np.full(n, -1, np.int64) if self.value_at is None
            else self._at(self.value_at, rows),
            "pos": lambda: (self.first + (np.arange(n, dtype=np.int64) if rows is None
                                          else rows.astype(np.int64))) * 2,
            "what": lambda: self._at(self.what, rows),
            "length": lambda: self._at(batch["body_len"], rows).astype(np.uint64)
            + np.uint64(P.HEADER_SIZE),
            "timed_delete": lambda: _DELETE_TIMES.take(self._at(self.kinds, rows)),
            "deleted": lambda: self._at(batch["deleted"], rows) != 0,
            "info": lambda: np.full(n, self.info, np.uint8),
            "rolled": lambda: np.zeros(n, bool),
        }
        return derived[name]()

    def columns(self, names, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Columns ``names`` at ``rows``: those read as they are taken together."""
        straight = [name for name in names if name in _STRAIGHT]
        out = buffers.pooled_take({name: self.batch[_STRAIGHT[name]] for name in straight},
                                  straight, rows)
        out.update((name, self.column(name, rows)) for name in names if name not in out)
        return out

    def ids(self, index, keys, docs: np.ndarray) -> np.ndarray:
        """The id in ``index`` of the document of each frame ``docs`` (document changes,
        whose collection is the batch's column), its key in ``keys``."""
        batch = self.batch
        return index.frame_ids(keys, batch.base_offset, docs, batch["key_offset"],
                               batch["key_len"], batch["vbucket"], batch["stream_id"],
                               batch["collection_id"] if batch.collections else None)

    def _clearing(self, n: int, rows: np.ndarray | None) -> np.ndarray:
        """Whether each row (of ``rows``, None: all ``n``) is an event that clears a
        collection."""
        if rows is not None and len(self.clears):
            return np.isin(rows, self.clears)
        out = np.zeros(n, bool)
        if rows is None:
            out[self.clears] = True
        return out

    @staticmethod
    def _at(column: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        """``column`` at ``rows`` (None: all of it, as it is)."""
        return column if rows is None else at(column, rows)

    def _cids(self, rows: np.ndarray | None) -> np.ndarray:
        """Collection ids; a clearing event's is the collection it clears."""
        batch = self.batch
        out = self._at(batch["collection_id"], rows) if batch.collections \
            else np.zeros(len(self.what) if rows is None else len(rows), np.uint32)
        if not len(self.clears):
            return out
        out = out.copy()
        if rows is None:
            out[self.clears] = self.cleared
        else:
            k = np.minimum(np.searchsorted(self.clears, rows), len(self.clears) - 1)
            hit = self.clears[k] == rows
            out[hit] = self.cleared[k[hit]]
        return out


def losses(batch: FrameBatch, first: int, regions) -> Rows:
    """A ``W_LOSS`` row for each of ``regions`` (what the scan skipped in ``batch``), just
    before the frame after it."""
    offsets = np.array([r.offset for r in regions], np.uint64)
    after = np.searchsorted(batch["offset"], offsets).astype(np.int64)
    return make_rows(len(regions), False, pos=(first + after) * 2 - 1,
                     what=np.full(len(regions), C.W_LOSS), offset=offsets,
                     length=np.array([r.length for r in regions], np.uint64))


def _values(batch: FrameBatch, doc_rows: np.ndarray, threads: int | None,
            valued: np.ndarray | None):
    """The entry of each document row in the values of the batch (-1 for commits and
    aborts), those values (of the frames ``valued`` flags, where given) as a chunk
    (null where they do not decode): where they lie decoded, none copied; and the ones
    that do not decode."""
    extents, damaged = value_extents(batch, threads=threads, frames=valued)
    rows, chunk = bodies.extents_chunk(extents)
    where = np.full(len(batch), -1, np.int64)
    where[rows] = np.arange(len(rows))
    return where[doc_rows], chunk, damaged
