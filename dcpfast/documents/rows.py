"""A stretch of a stream as the state engine reads it: the rows that change documents or
the stream's position, in stream order, as numpy columns (``Rows``), and how a
``FrameBatch`` becomes one (``batch_rows``).

Each row has a ``what``: a document change (mutation, deletion, expiration, prepare,
commit, abort), a system event, a seqno advance, a snapshot marker, an OSO marker or a
restart (a Stream Request response placed on its stream, ``restarts``). ``pos`` orders
rows across stretches: twice the frame's number in the stream, and one less for a restart
placed just before the message that placed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import arrow
from .. import protocol as P
from ..batch import FrameBatch, kinds_of, view_of
from ..events import system_events

MUTATION, DELETION, EXPIRATION, PREPARE, COMMIT, ABORT, EVENT, ADVANCE, MARKER, OSO, \
    RESTART = range(11)
#: ``what`` below this is a document change.
DOCUMENTS = EVENT
#: Rows with a seqno of their own (the stream's items).
ITEMS = np.zeros(16, bool)
ITEMS[[MUTATION, DELETION, EXPIRATION, PREPARE, COMMIT, ABORT, EVENT, ADVANCE]] = True
#: Changes whose frame carries the document's CAS.
TIMED = np.zeros(16, bool)
TIMED[[MUTATION, DELETION, EXPIRATION, PREPARE]] = True
#: System events that empty a collection on their stream: its creation (and, since 8.0,
#: a flush, which re-sends it), the never-sent flush event, and its drop.
CLEARING_EVENTS = ("create_collection", "flush_collection", "drop_collection")

_WHAT = {"mutation": MUTATION, "deletion_v1": DELETION, "deletion_v2": DELETION,
         "expiration": EXPIRATION, "prepare": PREPARE, "commit": COMMIT, "abort": ABORT,
         "system_event": EVENT, "seqno_advanced": ADVANCE, "oso_snapshot": OSO}
#: Per frame kind: its ``what``, or 255 for the kinds the state does not read.
WHAT_OF_KIND = np.full(len(P.KINDS), 255, np.uint8)
for _i, _kind in enumerate(P.KINDS):
    if _kind.name in _WHAT:
        WHAT_OF_KIND[_i] = _WHAT[_kind.name]
    elif _kind.opcode == P.Opcode.SNAPSHOT_MARKER and not _kind.response:
        WHAT_OF_KIND[_i] = MARKER
_DELETE_TIMES = P.kinds_where(lambda k: "delete_time" in k.columns)
#: Columns of a batch that ``batch_rows`` reads.
NEEDED = ("offset", "magic", "opcode", "datatype", "vbucket", "status", "opaque", "cas",
          "body_len", "framing_len", "extras_len", "key_offset", "key_len", "value_offset",
          "value_len", "stream_id", "by_seqno", "rev_seqno", "prepared_seqno", "flags",
          "expiration", "delete_time", "deleted", "snap_start", "snap_end", "event_id",
          "event_version", "oso_flags")


@dataclass
class Rows:
    """Rows of a stretch in stream order. ``key`` holds one entry per document change, in
    row order; ``body``/``xattrs`` (None when values are not wanted) hold the values, and
    ``value_at`` gives each document change's entry in them (-1: none)."""

    pos: np.ndarray          # int64: stream order
    what: np.ndarray         # uint8
    unit: np.ndarray         # uint32: vbucket << 16 | stream id
    seqno: np.ndarray        # uint64: by_seqno; commit/abort seqno; a rollback's seqno
    prepared: np.ndarray     # uint64: commit/abort: the prepare's seqno
    rev: np.ndarray          # uint64
    cas: np.ndarray          # uint64
    flags: np.ndarray        # uint32
    expiration: np.ndarray   # uint32
    datatype: np.ndarray     # uint8
    delete_time: np.ndarray  # uint32
    timed_delete: np.ndarray  # bool: carries a delete time (deletion V2, expiration)
    deleted: np.ndarray      # bool: a prepared deletion
    cid: np.ndarray          # uint32: collection id (0 without collections)
    clear: np.ndarray        # bool: an event that empties collection ``cid``
    snap_start: np.ndarray   # uint64
    snap_end: np.ndarray     # uint64
    oso: np.ndarray          # uint32: OSO flags
    rolled: np.ndarray       # bool: a restart whose point is known (a rollback's seqno)
    offset: np.ndarray       # uint64: the frame's stream offset (for errors)
    length: np.ndarray       # uint64: the frame's length
    key: Any = None          # pa.Array (large_binary), one per document change
    value_at: Any = None     # int64 array, one per document change
    body: Any = None         # pa.Array (large_binary) or None
    xattrs: Any = None       # pa.Array (map<large_string, large_string>) or None

    def __len__(self):
        return len(self.pos)

    def documents(self, index: np.ndarray) -> np.ndarray:
        """The document-change number of each row at ``index`` (all document changes)."""
        return (np.cumsum(self.what < DOCUMENTS) - 1)[index]


#: The numpy columns of ``Rows`` and their dtypes.
NUMERIC = {"pos": np.int64, "what": np.uint8, "unit": np.uint32, "seqno": np.uint64,
           "prepared": np.uint64, "rev": np.uint64, "cas": np.uint64, "flags": np.uint32,
           "expiration": np.uint32, "datatype": np.uint8, "delete_time": np.uint32,
           "timed_delete": bool, "deleted": bool, "cid": np.uint32, "clear": bool,
           "snap_start": np.uint64, "snap_end": np.uint64, "oso": np.uint32, "rolled": bool,
           "offset": np.uint64, "length": np.uint64}


def xattr_type():
    """The Arrow type the state keeps xattrs in."""
    import pyarrow as pa

    return pa.map_(pa.large_string(), pa.large_string())


def make_rows(n: int, values: bool, **columns) -> Rows:
    """``n`` rows of ``columns`` (numpy arrays, or Arrow for ``key``/``body``/``xattrs``);
    the columns not given are zeros, and no document changes."""
    import pyarrow as pa

    out: dict = {name: np.zeros(n, dtype) for name, dtype in NUMERIC.items()}
    out.update(key=pa.array([], pa.large_binary()), value_at=np.zeros(0, np.int64),
               body=pa.array([], pa.large_binary()) if values else None,
               xattrs=pa.array([], xattr_type()) if values else None)
    for name, column in columns.items():
        out[name] = np.asarray(column, NUMERIC[name]) if name in NUMERIC else column
    return Rows(**out)


def concat(parts: list[Rows]) -> Rows:
    """Rows of several stretches, in the order given."""
    import pyarrow as pa

    out: dict = {name: np.concatenate([getattr(p, name) for p in parts]) for name in NUMERIC}
    out["key"] = pa.concat_arrays([p.key for p in parts])
    shift, value_at = 0, []
    for p in parts:
        value_at.append(np.where(p.value_at < 0, -1, p.value_at + shift))
        shift += 0 if p.body is None else len(p.body)
    out["value_at"] = np.concatenate(value_at)
    for name in ("body", "xattrs"):
        columns = [getattr(p, name) for p in parts]
        out[name] = None if columns[0] is None else pa.concat_arrays(columns)
    return Rows(**out)


def take(rows: Rows, index: np.ndarray) -> Rows:
    """The rows at ``index`` (ascending); their values stay where they are."""
    import pyarrow as pa

    out = {name: getattr(rows, name)[index] for name in NUMERIC}
    docs = rows.documents(index[rows.what[index] < DOCUMENTS])
    return Rows(**out, key=rows.key.take(pa.array(docs, pa.int64())),
                value_at=rows.value_at[docs], body=rows.body, xattrs=rows.xattrs)


def sort(rows: Rows) -> Rows:
    """The rows in ``pos`` order; the document changes must be in order already."""
    order = np.argsort(rows.pos, kind="stable")
    if (order == np.arange(len(order))).all():
        return rows
    docs = order[rows.what[order] < DOCUMENTS]
    assert (np.diff(docs) > 0).all(), "document changes out of order"
    out = {name: getattr(rows, name)[order] for name in NUMERIC}
    return Rows(**out, key=rows.key, value_at=rows.value_at, body=rows.body,
                xattrs=rows.xattrs)


def batch_rows(batch: FrameBatch, first: int, *, values: bool, events=None) -> Rows:
    """The rows of ``batch`` (its ``mode`` decides how damaged values and events are
    reported); ``first`` is the number of its first frame in the stream, ``events`` its
    ``system_events`` when already at hand."""
    import pyarrow as pa

    missing = [name for name in NEEDED if name not in batch]
    if missing:
        raise ValueError(f"state needs the columns {', '.join(missing)}; this batch was "
                         "scanned without them")
    magic = batch["magic"]
    requests = (magic == P.Magic.CLIENT_REQUEST) | (magic == P.Magic.ALT_CLIENT_REQUEST)
    what_all = WHAT_OF_KIND[kinds_of(batch)]
    at = np.flatnonzero(requests & (what_all != 255))
    what = what_all[at]

    def col(name, dtype=None):
        column = batch[name][at]
        return column if dtype is None else column.astype(dtype)

    cid = col("collection_id") if batch.collections and "collection_id" in batch \
        else np.zeros(len(at), np.uint32)
    if batch.collections and "collection_id" not in batch:
        raise ValueError("state needs the collection_id column on a collection stream")
    if events is None:
        events = system_events(batch)
    clear = np.zeros(len(at), bool)
    wiped = np.isin(events.column("event").to_numpy(zero_copy_only=False),
                    CLEARING_EVENTS) & events.column("collection_id").is_valid().to_numpy(
                        zero_copy_only=False)
    if wiped.any():
        rows = np.searchsorted(at, events.column("index").to_numpy()[wiped])
        clear[rows] = True
        cid[rows] = events.column("collection_id").to_numpy(zero_copy_only=False)[wiped]
    docs = what < DOCUMENTS
    doc_rows = at[docs]
    key = arrow.binary(view_of(batch), arrow.positions(batch["key_offset"][doc_rows],
                                                        batch.base_offset),
                       batch["key_len"][doc_rows], [None]).cast(pa.large_binary())
    body = xattrs = None
    value_at = np.full(len(doc_rows), -1, np.int64)
    if values:
        value_at, body, xattrs = _values(batch, doc_rows)
    return Rows(
        pos=(first + at.astype(np.int64)) * 2, what=what,
        unit=col("vbucket", np.uint32) << np.uint32(16) | col("stream_id", np.uint32),
        seqno=col("by_seqno"), prepared=col("prepared_seqno"), rev=col("rev_seqno"),
        cas=col("cas"), flags=col("flags"), expiration=col("expiration"),
        datatype=col("datatype"), delete_time=col("delete_time"),
        timed_delete=_DELETE_TIMES[kinds_of(batch)[at]], deleted=col("deleted") != 0, cid=cid,
        clear=clear, snap_start=col("snap_start"), snap_end=col("snap_end"),
        oso=col("oso_flags"), rolled=np.zeros(len(at), bool), offset=col("offset"),
        length=col("body_len", np.uint64) + np.uint64(P.HEADER_SIZE),
        key=key, value_at=value_at, body=body, xattrs=xattrs)


def _values(batch: FrameBatch, doc_rows: np.ndarray):
    """The values of the batch (bodies, xattrs; null where they do not decode) and the
    entry of each document row in them (-1 for commits and aborts)."""
    import pyarrow as pa

    table = batch.values()
    where = np.full(len(batch), -1, np.int64)
    where[table.column("index").to_numpy()] = np.arange(table.num_rows)
    body = table.column("body").combine_chunks().cast(pa.large_binary())
    xattrs = table.column("xattrs").combine_chunks().cast(xattr_type())
    return where[doc_rows], body, xattrs
