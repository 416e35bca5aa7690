"""Connection setup and the server's answers, one ``pyarrow.Table`` row per frame.

``opens``, ``controls``, ``stream_requests``, ``failover_logs``, ``rollbacks``,
``high_seqnos`` and ``stream_ends``: ``index`` is the row in the batch and ``offset`` the
frame's stream offset, for joining back. The frames they read are few, so each is decoded
in Python after a numpy mask has found it. Responses get the vbucket and stream id of
their request (``matching``).

Malformed content (a failover log whose length is not a multiple of 16, a rollback value
that is not 8 bytes, a GetAllVbSeqnos value whose length is not a multiple of 10, a Stream
Request value that is not a JSON object with a valid ``sid``) follows ``batch.mode``:
``DcpFormatError`` in strict mode; in skip mode the frame gets no row and the table lists
it in its metadata as a ``SkippedRegion`` for the whole frame, in stream order
(``dcpfast.skipped_regions(table)``; ``failover_logs`` and ``rollbacks`` list the
malformed Stream Requests too, which place no response). The batch is left as it is: its
``errors`` keep what the scan skipped.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from .. import protocol as P
from ..batch import FrameBatch
from ..errors import SkippedRegion, checked, text, with_skipped
from . import frames as F
from .matching import Matcher, StreamTracker

_OPEN = struct.Struct(P.OPEN_EXTRAS)
_ENTRY_SIZE = struct.calcsize(P.FAILOVER_ENTRY)
_ENTRY_DTYPE = np.dtype([("vbucket_uuid", ">u8"), ("seqno", ">u8")])
assert _ENTRY_DTYPE.itemsize == _ENTRY_SIZE
#: Responses that carry a failover log when successful.
_FAILOVER_OPCODES = (P.Opcode.STREAM_REQUEST, P.Opcode.GET_FAILOVER_LOG,
                     P.Opcode.GET_FAILOVER_LOG_NON_DCP)
_HIGH_SIZE = struct.calcsize(P.HIGH_SEQNO_ENTRY)
_HIGH_DTYPE = np.dtype([("vbucket", ">u2"), ("seqno", ">u8")])
assert _HIGH_DTYPE.itemsize == _HIGH_SIZE
_SEQNO_COLUMNS = ("start_seqno", "end_seqno", "vbucket_uuid", "snap_start_seqno",
                  "snap_end_seqno")


def _table(columns: dict, schema):
    return pa.Table.from_pydict(columns, schema=schema)


def _schema(*fields):
    return pa.schema([pa.field(name, kind) for name, kind in fields])


def _index_fields():
    return [("index", pa.int64()), ("offset", pa.uint64())]


# -- connection setup --------------------------------------------------------------------


def opens(batch: FrameBatch) -> pa.Table:
    """DCP Open requests: ``index, offset, opaque, name, flags, flag_names``.

    ``name`` is the connection name (invalid UTF-8 shown as ``\\x..`` escapes); flags
    without a name in ``protocol.OpenFlag`` appear in ``flag_names`` as hex.
    """
    out: dict[str, list] = {"index": [], "offset": [], "opaque": [], "name": [], "flags": [],
                            "flag_names": []}
    for i in F.rows(batch, P.Opcode.OPEN, response=False).tolist():
        _, flags = _OPEN.unpack(F.extras(batch, i))
        out["index"].append(i)
        out["offset"].append(int(batch["offset"][i]))
        out["opaque"].append(int(batch["opaque"][i]))
        out["name"].append(F.utf8(F.key(batch, i)))
        out["flags"].append(flags)
        out["flag_names"].append(F.flag_names(P.OpenFlag, flags))
    return _table(out, _schema(*_index_fields(), ("opaque", pa.uint32()),
                               ("name", pa.string()), ("flags", pa.uint32()),
                               ("flag_names", pa.list_(pa.string()))))


def controls(batch: FrameBatch) -> pa.Table:
    """DCP Control requests: ``index, offset, opaque, key, value`` (strings)."""
    out: dict[str, list] = {"index": [], "offset": [], "opaque": [], "key": [], "value": []}
    for i in F.rows(batch, P.Opcode.CONTROL, response=False).tolist():
        out["index"].append(i)
        out["offset"].append(int(batch["offset"][i]))
        out["opaque"].append(int(batch["opaque"][i]))
        out["key"].append(F.utf8(F.key(batch, i)))
        out["value"].append(F.utf8(F.value(batch, i)))
    return _table(out, _schema(*_index_fields(), ("opaque", pa.uint32()),
                               ("key", pa.string()), ("value", pa.string())))


def stream_requests(batch: FrameBatch) -> pa.Table:
    """Stream Requests: ``index, offset, vbucket, opaque, stream_id, flags, flag_names,
    start_seqno, end_seqno, vbucket_uuid, snap_start_seqno, snap_end_seqno, filter``.

    ``stream_id`` comes from the stream-id frame info or the JSON value's ``sid`` (null
    when neither); ``filter`` is the JSON value as sent (null when empty).
    """
    decoded, damaged = _requests(batch)
    names = ("index", "offset", "vbucket", "opaque", "stream_id", "flags", "flag_names",
             *_SEQNO_COLUMNS, "filter")
    out: dict[str, list] = {name: [] for name in names}
    for i, request in decoded.items():
        out["index"].append(i)
        out["offset"].append(int(batch["offset"][i]))
        out["flag_names"].append(F.flag_names(P.StreamRequestFlag, request["flags"]))
        for name in names[2:]:
            if name != "flag_names":
                out[name].append(request[name])
    u64 = pa.uint64()
    return with_skipped(_table(out, _schema(
        *_index_fields(), ("vbucket", pa.uint16()), ("opaque", pa.uint32()),
        ("stream_id", pa.uint16()), ("flags", pa.uint32()),
        ("flag_names", pa.list_(pa.string())), *((n, u64) for n in _SEQNO_COLUMNS),
        ("filter", pa.string()))), damaged)


def _requests(batch: FrameBatch) -> tuple[dict[int, dict], list[SkippedRegion]]:
    """The batch's Stream Requests (``frames.read_requests``) and the malformed ones, under
    ``batch.mode`` ("strict" raises the first)."""
    decoded, damaged = F.read_requests(batch)
    return decoded, checked(batch.mode, damaged)


# -- responses ---------------------------------------------------------------------------


def _failover_rows(batch: FrameBatch) -> np.ndarray:
    if not len(batch):
        return F.NO_ROWS
    mask = F.responses(batch) & (batch["status"] == P.Status.SUCCESS)
    mask &= np.isin(batch["opcode"], _FAILOVER_OPCODES)
    return np.flatnonzero(mask)


def _entries(batch: FrameBatch, i: int, dtype: np.dtype, reason: str,
             malformed: list[SkippedRegion]) -> np.ndarray | None:
    """The fixed-size entries (``dtype``) that the value of row ``i`` holds, or None where
    its length is not a whole number of them: the frame then goes into ``malformed``, with
    the reason named ``reason``."""
    value = F.value(batch, i)
    if len(value) % dtype.itemsize:
        malformed.append(F.frame_region(batch, i, text(reason, size=len(value),
                                                       entry=dtype.itemsize)))
        return None
    return np.frombuffer(value, dtype)


def failover_logs(batch: FrameBatch, tracker: StreamTracker | None = None, *,
                  prefix: bool = False) -> pa.Table:
    """Failover logs of successful Stream Request / Get Failover Log responses, one row
    per entry: ``index, offset, opcode, opaque, vbucket, stream_id, entry, vbucket_uuid,
    seqno``. ``entry`` 0 is the newest; ``vbucket``/``stream_id`` are those of the
    matching request (see ``matching``), null when none is found; ``prefix``: placed by
    what comes before them only (the same wherever a stream is cut into batches).
    """
    decoded, damaged = _requests(batch)
    match = Matcher(batch, tracker, decoded, prefix=prefix)
    names = ("index", "offset", "opcode", "opaque", "vbucket", "stream_id", "entry",
             "vbucket_uuid", "seqno")
    out: dict[str, list] = {name: [] for name in names}
    logs: list[SkippedRegion] = []
    for i in _failover_rows(batch).tolist():
        entries = _entries(batch, i, _ENTRY_DTYPE, "failover_log_size", logs)
        if entries is None:
            continue
        place = match.place(i)
        vbucket, sid = place if place else (None, None)
        n = len(entries)
        out["index"] += [i] * n
        out["offset"] += [int(batch["offset"][i])] * n
        out["opcode"] += [int(batch["opcode"][i])] * n
        out["opaque"] += [int(batch["opaque"][i])] * n
        out["vbucket"] += [vbucket] * n
        out["stream_id"] += [sid or None] * n
        out["entry"] += range(n)
        out["vbucket_uuid"] += entries["vbucket_uuid"].tolist()
        out["seqno"] += entries["seqno"].tolist()
    table = _table(out, _schema(*_index_fields(), ("opcode", pa.uint8()),
                                ("opaque", pa.uint32()), ("vbucket", pa.uint16()),
                                ("stream_id", pa.uint16()), ("entry", pa.int32()),
                                ("vbucket_uuid", pa.uint64()), ("seqno", pa.uint64())))
    return with_skipped(table, sorted(damaged + checked(batch.mode, logs)))


def rollbacks(batch: FrameBatch, tracker: StreamTracker | None = None) -> pa.Table:
    """Stream Request responses with status Rollback (0x23): ``index, offset, opaque,
    vbucket, stream_id, rollback_seqno`` (vbucket/stream id of the matching request)."""
    decoded, damaged = _requests(batch)
    match = Matcher(batch, tracker, decoded)
    seqnos, malformed = F.rollback_seqnos(batch)
    names = ("index", "offset", "opaque", "vbucket", "stream_id", "rollback_seqno")
    out: dict[str, list] = {name: [] for name in names}
    for i, seqno in seqnos.items():
        place = match.place(i)
        vbucket, sid = place if place else (None, None)
        for name, value in zip(names, (i, int(batch["offset"][i]), int(batch["opaque"][i]),
                                       vbucket, sid or None, seqno)):
            out[name].append(value)
    table = _table(out, _schema(*_index_fields(), ("opaque", pa.uint32()),
                                ("vbucket", pa.uint16()), ("stream_id", pa.uint16()),
                                ("rollback_seqno", pa.uint64())))
    return with_skipped(table, sorted(damaged + checked(batch.mode, malformed)))


def high_seqnos(batch: FrameBatch) -> pa.Table:
    """The servers' high seqnos: one row per vbucket of each successful GetAllVbSeqnos
    (0x48) response, ``index, offset, opaque, vbucket, seqno``, in the order the server
    listed them. A client asks for them to see how far a bucket has got; beside its DCP
    streams they tell how far each stream was behind at that moment. (A request may ask
    for the vbuckets in one state, or for one collection's high seqnos: the request's
    extras say so, the response does not.)"""
    rows = np.flatnonzero(F.responses(batch) & (batch["opcode"] == P.Opcode.GET_ALL_VB_SEQNOS)
                          & (batch["status"] == P.Status.SUCCESS)) if len(batch) else F.NO_ROWS
    names = ("index", "offset", "opaque", "vbucket", "seqno")
    out: dict[str, list] = {name: [] for name in names}
    bad: list[SkippedRegion] = []
    for i in rows.tolist():
        entries = _entries(batch, i, _HIGH_DTYPE, "high_seqnos_size", bad)
        if entries is None:
            continue
        n = len(entries)
        out["index"] += [i] * n
        out["offset"] += [int(batch["offset"][i])] * n
        out["opaque"] += [int(batch["opaque"][i])] * n
        out["vbucket"] += entries["vbucket"].tolist()
        out["seqno"] += entries["seqno"].tolist()
    table = _table(out, _schema(*_index_fields(), ("opaque", pa.uint32()),
                                ("vbucket", pa.uint16()), ("seqno", pa.uint64())))
    return with_skipped(table, checked(batch.mode, bad))


def stream_ends(batch: FrameBatch) -> pa.Table:
    """Stream End messages: ``index, offset, vbucket, opaque, stream_id, end_status,
    end_status_name`` (name null for a status the protocol does not define)."""
    rows = F.rows(batch, P.Opcode.STREAM_END, response=False)
    status = batch["end_status"][rows].tolist()
    sids = batch["stream_id"][rows].tolist()
    return _table({
        "index": rows.tolist(), "offset": batch["offset"][rows].tolist(),
        "vbucket": batch["vbucket"][rows].tolist(), "opaque": batch["opaque"][rows].tolist(),
        "stream_id": [s or None for s in sids], "end_status": status,
        "end_status_name": [F.enum_name(P.StreamEndStatus, s) for s in status],
    }, _schema(*_index_fields(), ("vbucket", pa.uint16()), ("opaque", pa.uint32()),
               ("stream_id", pa.uint16()), ("end_status", pa.uint32()),
               ("end_status_name", pa.string())))
