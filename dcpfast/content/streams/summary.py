"""Stream setup, responses and stream health: what was asked, what was answered, what ran.

Per-frame tables (one row per relevant frame; ``index`` is the row in the batch and
``offset`` the frame's stream offset, for joining back): ``opens``, ``controls``,
``stream_requests``, ``failover_logs``, ``rollbacks`` and ``stream_ends``. The frames they
read are few, so each is decoded in Python after a numpy mask has found it.

A response is matched to its request by opcode and opaque: the latest such request
before it in the batch, else one remembered by a ``StreamTracker`` from earlier batches
(feed it every batch, e.g. the client-to-server batches of a capture before or alongside
the server-to-client ones). A Stream Request response with no request in sight is still
placed when its opaque is used by the messages of exactly one stream: the server sends
every message of a stream under the opaque of the request that opened it.

``summarize`` (or ``Summary.update`` per batch) reports every vbucket stream: its seqno
range, snapshots, message counts, rollbacks, end status, and anomalies. Its per-frame
checks run on numpy arrays; only per-stream bookkeeping is Python.

Malformed content (a failover log whose length is not a multiple of 16, a rollback value
that is not 8 bytes, a Stream Request value that is not a JSON object with a valid
``sid``) follows ``batch.mode``: ``DcpFormatError`` in strict mode; in skip mode the frame
gets no row and a ``SkippedRegion`` for the whole frame is added to ``batch.errors`` once,
however often the tables are built.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from ... import protocol as P
from ...batch import FrameBatch
from ...errors import Reporter, text

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["StreamTracker", "Summary", "controls", "failover_logs", "opens", "rollbacks",
           "stream_ends", "stream_requests", "summarize"]

_OPEN = struct.Struct(P.OPEN_EXTRAS)
_STREAM_REQUEST = struct.Struct(P.STREAM_REQUEST_EXTRAS)
_ROLLBACK = struct.Struct(P.ROLLBACK_VALUE)
_ENTRY_SIZE = struct.calcsize(P.FAILOVER_ENTRY)
_ENTRY_DTYPE = np.dtype([("vbucket_uuid", ">u8"), ("seqno", ">u8")])
assert _ENTRY_DTYPE.itemsize == _ENTRY_SIZE
_NO_ROWS = np.zeros(0, np.int64)

#: Responses that carry a failover log when successful.
_FAILOVER_OPCODES = (P.Opcode.STREAM_REQUEST, P.Opcode.GET_FAILOVER_LOG,
                     P.Opcode.GET_FAILOVER_LOG_NON_DCP)
#: Producer messages of a stream (its seqno items, markers, its end); each carries the
#: opaque of the request that opened it.
_MESSAGE_OPCODES = P.SEQNO_ITEMS | {P.Opcode.SNAPSHOT_MARKER, P.Opcode.OSO_SNAPSHOT,
                                    P.Opcode.STREAM_END}
#: Every request counted against a vbucket stream (consumer requests included).
_STREAM_OPCODES = _MESSAGE_OPCODES | {
    P.Opcode.STREAM_REQUEST, P.Opcode.ADD_STREAM, P.Opcode.CLOSE_STREAM,
    P.Opcode.SET_VBUCKET_STATE, P.Opcode.SEQNO_ACKNOWLEDGED, P.Opcode.CACHE_TRANSFER,
    P.Opcode.CACHE_TRANSFER_END}


def _lut(opcodes) -> np.ndarray:
    table = np.zeros(256, bool)
    table[sorted(opcodes)] = True
    return table


_IS_ITEM = _lut(P.SEQNO_ITEMS)
_IS_MESSAGE = _lut(_MESSAGE_OPCODES)
_IS_STREAM = _lut(_STREAM_OPCODES)
_OPCODE_NAMES = [P.Opcode(op).name.lower() if op in P.Opcode._value2member_map_
                 else f"0x{op:02x}" for op in range(256)]


# -- shared helpers ----------------------------------------------------------------------


def _requests(batch: FrameBatch) -> np.ndarray:
    magic = batch["magic"]
    return (magic == P.Magic.CLIENT_REQUEST) | (magic == P.Magic.ALT_CLIENT_REQUEST)


def _responses(batch: FrameBatch) -> np.ndarray:
    magic = batch["magic"]
    return (magic == P.Magic.CLIENT_RESPONSE) | (magic == P.Magic.ALT_CLIENT_RESPONSE)


def _rows(batch: FrameBatch, opcode: int, *, response: bool, status=None) -> np.ndarray:
    """Rows of the requests (or responses, optionally of one status) with ``opcode``."""
    if not len(batch):
        return _NO_ROWS
    mask = (batch["opcode"] == opcode) & (_responses(batch) if response else _requests(batch))
    if status is not None:
        mask &= batch["status"] == status
    return np.flatnonzero(mask)


def _bytes(batch: FrameBatch, start: int, length: int) -> bytes:
    at = start - batch.base_offset
    return bytes(batch.view[at:at + length])


def _extras(batch: FrameBatch, i: int) -> bytes:
    start = int(batch["offset"][i]) + P.HEADER_SIZE + int(batch["framing_len"][i])
    return _bytes(batch, start, int(batch["extras_len"][i]))


def _key(batch: FrameBatch, i: int) -> bytes:
    return _bytes(batch, int(batch["key_offset"][i]), int(batch["key_len"][i]))


def _value(batch: FrameBatch, i: int) -> bytes:
    return _bytes(batch, int(batch["value_offset"][i]), int(batch["value_len"][i]))


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _malformed(batch: FrameBatch, i: int, reason: str) -> None:
    """Raise (strict) or record once (skip) that frame ``i`` has malformed content."""
    Reporter(batch.mode, batch.errors).report(
        int(batch["offset"][i]), P.HEADER_SIZE + int(batch["body_len"][i]), reason)


def _flag_names(enum, value: int) -> list[str]:
    """Names of the set flags; a bit with no name appears as its hex value."""
    known = {int(member): member.name.lower() for member in enum}
    names, bit = [], 1
    while bit <= value:
        if value & bit:
            names.append(known.get(bit, f"0x{bit:x}"))
        bit <<= 1
    return names


def _enum_name(enum, value: int) -> str | None:
    try:
        return enum(value).name.lower()
    except ValueError:
        return None


def _table(columns: dict, schema):
    import pyarrow as pa

    return pa.Table.from_pydict(columns, schema=schema)


def _schema(*fields):
    import pyarrow as pa

    return pa.schema([pa.field(name, kind) for name, kind in fields])


def _index_fields():
    import pyarrow as pa

    return [("index", pa.int64()), ("offset", pa.uint64())]


# -- connection setup --------------------------------------------------------------------


def opens(batch: FrameBatch) -> pa.Table:
    """DCP Open requests: ``index, offset, opaque, name, flags, flag_names``.

    ``name`` is the connection name (invalid UTF-8 shown as ``\\x..`` escapes); flags
    without a name in ``protocol.OpenFlag`` appear in ``flag_names`` as hex.
    """
    import pyarrow as pa

    out = {"index": [], "offset": [], "opaque": [], "name": [], "flags": [], "flag_names": []}
    for i in _rows(batch, P.Opcode.OPEN, response=False).tolist():
        _, flags = _OPEN.unpack(_extras(batch, i))
        out["index"].append(i)
        out["offset"].append(int(batch["offset"][i]))
        out["opaque"].append(int(batch["opaque"][i]))
        out["name"].append(_text(_key(batch, i)))
        out["flags"].append(flags)
        out["flag_names"].append(_flag_names(P.OpenFlag, flags))
    return _table(out, _schema(*_index_fields(), ("opaque", pa.uint32()),
                               ("name", pa.string()), ("flags", pa.uint32()),
                               ("flag_names", pa.list_(pa.string()))))


def controls(batch: FrameBatch) -> pa.Table:
    """DCP Control requests: ``index, offset, opaque, key, value`` (strings)."""
    import pyarrow as pa

    out = {"index": [], "offset": [], "opaque": [], "key": [], "value": []}
    for i in _rows(batch, P.Opcode.CONTROL, response=False).tolist():
        out["index"].append(i)
        out["offset"].append(int(batch["offset"][i]))
        out["opaque"].append(int(batch["opaque"][i]))
        out["key"].append(_text(_key(batch, i)))
        out["value"].append(_text(_value(batch, i)))
    return _table(out, _schema(*_index_fields(), ("opaque", pa.uint32()),
                               ("key", pa.string()), ("value", pa.string())))


_SEQNO_COLUMNS = ("start_seqno", "end_seqno", "vbucket_uuid", "snap_start_seqno",
                  "snap_end_seqno")


def _stream_request(batch: FrameBatch, i: int) -> dict | None:
    """The decoded Stream Request at row ``i``, or None when its value is malformed."""
    flags, _, start, end, uuid, snap_start, snap_end = _STREAM_REQUEST.unpack(
        _extras(batch, i))
    sid = int(batch["stream_id"][i])
    value = _value(batch, i)
    if value:
        try:
            body = json.loads(value)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            _malformed(batch, i, text("stream_request_value"))
            return None
        given = body.get(P.STREAM_REQUEST_SID)
        if given is not None:
            if type(given) is not int or not 1 <= given <= 0xFFFF:
                _malformed(batch, i, text("stream_request_sid", sid=given))
                return None
            sid = sid or given
    return {"vbucket": int(batch["vbucket"][i]), "opaque": int(batch["opaque"][i]),
            "stream_id": sid or None, "flags": flags, "start_seqno": start,
            "end_seqno": end, "vbucket_uuid": uuid, "snap_start_seqno": snap_start,
            "snap_end_seqno": snap_end, "filter": _text(value) if value else None}


def _decoded_requests(batch: FrameBatch) -> dict[int, dict]:
    """Row -> decoded Stream Request, for every well-formed one in the batch."""
    out = {}
    for i in _rows(batch, P.Opcode.STREAM_REQUEST, response=False).tolist():
        request = _stream_request(batch, i)
        if request is not None:
            out[i] = request
    return out


def stream_requests(batch: FrameBatch) -> pa.Table:
    """Stream Requests: ``index, offset, vbucket, opaque, stream_id, flags, flag_names,
    start_seqno, end_seqno, vbucket_uuid, snap_start_seqno, snap_end_seqno, filter``.

    ``stream_id`` comes from the stream-id frame info or the JSON value's ``sid`` (null
    when neither); ``filter`` is the JSON value as sent (null when empty).
    """
    import pyarrow as pa

    names = ("index", "offset", "vbucket", "opaque", "stream_id", "flags", "flag_names",
             *_SEQNO_COLUMNS, "filter")
    out = {name: [] for name in names}
    for i, request in _decoded_requests(batch).items():
        out["index"].append(i)
        out["offset"].append(int(batch["offset"][i]))
        out["flag_names"].append(_flag_names(P.StreamRequestFlag, request["flags"]))
        for name in names[2:]:
            if name != "flag_names":
                out[name].append(request[name])
    u64 = pa.uint64()
    return _table(out, _schema(*_index_fields(), ("vbucket", pa.uint16()),
                               ("opaque", pa.uint32()), ("stream_id", pa.uint16()),
                               ("flags", pa.uint32()), ("flag_names", pa.list_(pa.string())),
                               *((n, u64) for n in _SEQNO_COLUMNS),
                               ("filter", pa.string())))


# -- matching responses to requests ------------------------------------------------------

_AMBIGUOUS = -1


def _stream_key(vbucket: int, stream_id: int) -> int:
    return vbucket << 16 | stream_id


class StreamTracker:
    """What a response needs from earlier batches: requests and stream opaques.

    ``update(batch)`` remembers, by opaque, the Stream Requests and Get Failover Log
    requests of the batch (the latest wins) and the opaques that the producer messages
    of each vbucket stream carry (an opaque seen on two streams places nothing). Pass the
    tracker to ``failover_logs``/``rollbacks`` *before* updating it with the same batch.
    """

    def __init__(self):
        #: (opcode, opaque) -> (vbucket, stream_id or 0)
        self.requests: dict[tuple[int, int], tuple[int, int]] = {}
        #: opaque -> stream key (vbucket << 16 | stream_id), or -1 when ambiguous
        self.opaques: dict[int, int] = {}

    def update(self, batch: FrameBatch) -> None:
        """Learn the requests and stream opaques of ``batch``."""
        self._learn(_batch_requests(batch), _message_opaques(batch))

    def _learn(self, requests: dict, opaques: dict) -> None:
        self.requests.update(requests)
        for opaque, firsts in opaques.items():
            for _, key in firsts:
                known = self.opaques.get(opaque, key)
                self.opaques[opaque] = key if known == key else _AMBIGUOUS


def _batch_requests(batch: FrameBatch, decoded: dict | None = None) -> dict:
    """(opcode, opaque) -> (vbucket, stream_id) of the batch's requests, latest last."""
    if decoded is None:
        decoded = _decoded_requests(batch)
    out = {}
    rows = [(i, P.Opcode.STREAM_REQUEST, r["vbucket"], r["stream_id"] or 0)
            for i, r in decoded.items()]
    for opcode in (P.Opcode.GET_FAILOVER_LOG, P.Opcode.GET_FAILOVER_LOG_NON_DCP):
        rows += [(i, opcode, int(batch["vbucket"][i]), 0)
                 for i in _rows(batch, opcode, response=False).tolist()]
    for i, opcode, vbucket, sid in sorted(rows):
        out[(int(opcode), int(batch["opaque"][i]))] = (vbucket, sid)
    return out


def _message_opaques(batch: FrameBatch) -> dict[int, list[tuple[int, int]]]:
    """opaque -> [(first row, stream key)] of the producer messages in ``batch``."""
    if not len(batch):
        return {}
    rows = np.flatnonzero(_requests(batch) & _IS_MESSAGE[batch["opcode"]])
    pairs = batch["opaque"][rows].astype(np.uint64) << np.uint64(32)
    pairs |= batch["vbucket"][rows].astype(np.uint64) << np.uint64(16)
    pairs |= batch["stream_id"][rows]
    if len(pairs) > 1:              # runs first: streams arrive in long stretches
        heads = np.concatenate(([True], pairs[1:] != pairs[:-1]))
        rows, pairs = rows[heads], pairs[heads]
    unique, first = np.unique(pairs, return_index=True)
    out: dict[int, list[tuple[int, int]]] = {}
    for pair, row in sorted(zip(unique.tolist(), rows[first].tolist()), key=lambda x: x[1]):
        out.setdefault(pair >> 32, []).append((row, pair & 0xFFFFFFFF))
    return out


class _Matcher:
    """Places responses of one batch: request in the batch, then tracker, then opaques."""

    def __init__(self, batch: FrameBatch, tracker: StreamTracker | None,
                 decoded: dict | None = None, *, prefix: bool = False, opaques=None):
        self.batch, self.tracker, self.prefix = batch, tracker, prefix
        self.by_opaque: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        if decoded is None:
            decoded = _decoded_requests(batch)
        for i, r in decoded.items():
            self._add(i, P.Opcode.STREAM_REQUEST, r["vbucket"], r["stream_id"] or 0)
        for opcode in (P.Opcode.GET_FAILOVER_LOG, P.Opcode.GET_FAILOVER_LOG_NON_DCP):
            for i in _rows(batch, opcode, response=False).tolist():
                self._add(i, opcode, int(batch["vbucket"][i]), 0)
        self._opaques = opaques

    def _add(self, i, opcode, vbucket, sid):
        key = (int(opcode), int(self.batch["opaque"][i]))
        self.by_opaque.setdefault(key, []).append((i, vbucket, sid))

    def place(self, i: int) -> tuple[int, int] | None:
        """(vbucket, stream_id) of the request answered by response row ``i``.

        With ``prefix`` only the stream messages before the response are considered,
        so that the answer does not depend on where a stream is cut into batches.
        """
        opcode, opaque = int(self.batch["opcode"][i]), int(self.batch["opaque"][i])
        before = [r for r in self.by_opaque.get((opcode, opaque), ()) if r[0] < i]
        if before:
            return before[-1][1:]
        if self.tracker is not None and (opcode, opaque) in self.tracker.requests:
            return self.tracker.requests[(opcode, opaque)]
        if opcode != P.Opcode.STREAM_REQUEST:
            return None
        if self._opaques is None:
            self._opaques = _message_opaques(self.batch)
        keys = {key for row, key in self._opaques.get(opaque, ()) if row < i or not self.prefix}
        if self.tracker is not None and opaque in self.tracker.opaques:
            keys.add(self.tracker.opaques[opaque])
        if len(keys) != 1 or _AMBIGUOUS in keys:
            return None
        key = keys.pop()
        return key >> 16, key & 0xFFFF


# -- responses ---------------------------------------------------------------------------


def _failover_rows(batch: FrameBatch) -> np.ndarray:
    if not len(batch):
        return _NO_ROWS
    mask = _responses(batch) & (batch["status"] == P.Status.SUCCESS)
    mask &= np.isin(batch["opcode"], _FAILOVER_OPCODES)
    return np.flatnonzero(mask)


def failover_logs(batch: FrameBatch, tracker: StreamTracker | None = None) -> pa.Table:
    """Failover logs of successful Stream Request / Get Failover Log responses, one row
    per entry: ``index, offset, opcode, opaque, vbucket, stream_id, entry, vbucket_uuid,
    seqno``. ``entry`` 0 is the newest; ``vbucket``/``stream_id`` are those of the
    matching request (see the module docstring), null when none is found.
    """
    import pyarrow as pa

    match = _Matcher(batch, tracker)
    names = ("index", "offset", "opcode", "opaque", "vbucket", "stream_id", "entry",
             "vbucket_uuid", "seqno")
    out = {name: [] for name in names}
    for i in _failover_rows(batch).tolist():
        value = _value(batch, i)
        if len(value) % _ENTRY_SIZE:
            _malformed(batch, i, text("failover_log_size", size=len(value), entry=_ENTRY_SIZE))
            continue
        entries = np.frombuffer(value, _ENTRY_DTYPE)
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
    return _table(out, _schema(*_index_fields(), ("opcode", pa.uint8()),
                               ("opaque", pa.uint32()), ("vbucket", pa.uint16()),
                               ("stream_id", pa.uint16()), ("entry", pa.int32()),
                               ("vbucket_uuid", pa.uint64()), ("seqno", pa.uint64())))


def _rollback_seqnos(batch: FrameBatch) -> dict[int, int]:
    """Row -> rollback seqno of each well-formed Rollback response."""
    out = {}
    for i in _rows(batch, P.Opcode.STREAM_REQUEST, response=True,
                   status=P.Status.ROLLBACK).tolist():
        value = _value(batch, i)
        if len(value) != _ROLLBACK.size:
            _malformed(batch, i, text("rollback_size", size=len(value), must=_ROLLBACK.size))
            continue
        out[i] = _ROLLBACK.unpack(value)[0]
    return out


def rollbacks(batch: FrameBatch, tracker: StreamTracker | None = None) -> pa.Table:
    """Stream Request responses with status Rollback (0x23): ``index, offset, opaque,
    vbucket, stream_id, rollback_seqno`` (vbucket/stream id of the matching request)."""
    import pyarrow as pa

    match = _Matcher(batch, tracker)
    names = ("index", "offset", "opaque", "vbucket", "stream_id", "rollback_seqno")
    out = {name: [] for name in names}
    for i, seqno in _rollback_seqnos(batch).items():
        place = match.place(i)
        vbucket, sid = place if place else (None, None)
        for name, value in zip(names, (i, int(batch["offset"][i]), int(batch["opaque"][i]),
                                       vbucket, sid or None, seqno)):
            out[name].append(value)
    return _table(out, _schema(*_index_fields(), ("opaque", pa.uint32()),
                               ("vbucket", pa.uint16()), ("stream_id", pa.uint16()),
                               ("rollback_seqno", pa.uint64())))


def stream_ends(batch: FrameBatch) -> pa.Table:
    """Stream End messages: ``index, offset, vbucket, opaque, stream_id, end_status,
    end_status_name`` (name null for a status the protocol does not define)."""
    import pyarrow as pa

    rows = _rows(batch, P.Opcode.STREAM_END, response=False)
    status = batch["end_status"][rows].tolist()
    sids = batch["stream_id"][rows].tolist()
    return _table({
        "index": rows.tolist(), "offset": batch["offset"][rows].tolist(),
        "vbucket": batch["vbucket"][rows].tolist(), "opaque": batch["opaque"][rows].tolist(),
        "stream_id": [s or None for s in sids], "end_status": status,
        "end_status_name": [_enum_name(P.StreamEndStatus, s) for s in status],
    }, _schema(*_index_fields(), ("vbucket", pa.uint16()), ("opaque", pa.uint32()),
               ("stream_id", pa.uint16()), ("end_status", pa.uint32()),
               ("end_status_name", pa.string())))


# -- stream health -----------------------------------------------------------------------

#: Anomaly kinds, in code order.
ANOMALIES = ("seqno_not_increasing", "outside_snapshot", "snapshot_ended_early",
             "ended_in_snapshot", "unmatched_rollback")
_BACKWARDS, _OUTSIDE, _EARLY, _ENDED_INSIDE, _UNMATCHED = range(len(ANOMALIES))
#: What opened the snapshot a frame belongs to.
_NO_SNAPSHOT, _MARKER, _OSO_OPEN, _OSO_CLOSED = range(4)
_U64 = np.uint64


class _Carry:
    """The check state of an unfinished stream at the end of a batch."""

    __slots__ = ("started", "last_start", "opaque", "chain", "snapshot", "range", "reach")

    def __init__(self, started, last_start, opaque, chain, snapshot, range_, reach):
        self.started = started          # the stream's request (or response) was seen
        self.last_start = last_start    # its latest message is that request or response
        self.opaque = opaque            # opaque of its latest message, or None
        self.chain = chain              # by_seqno the next item must exceed, or None
        self.snapshot = snapshot        # _NO_SNAPSHOT, _MARKER, _OSO_OPEN or _OSO_CLOSED
        self.range = range_             # (start, end, flags) of the current marker
        self.reach = reach              # highest seqno since the snapshot opened, or None


class _Stream:
    """What the summary reports for one vbucket stream, and its carried check state."""

    def __init__(self, key: int, slot: int):
        self.vbucket, self.stream_id = key >> 16, key & 0xFFFF
        self.slot = slot                # its row in the summary's table of opcode counts
        self.opaque = None
        self.streams = 0
        self.first_seqno = self.last_seqno = None
        self.snapshots: list[np.ndarray] = []
        self.rollbacks: list[int] = []
        self.end_status = None
        self.anomalies = 0
        self.carry: _Carry | None = None


class Summary:
    """Health of every vbucket stream in a DCP dump, built batch by batch.

    ``update(batch)`` takes the batches of one stream in order (``iter_batches`` gives
    them); the result does not depend on where the batches are cut. A stream is a
    vbucket (and stream id, when there is one); it restarts at a Stream Request, after a
    Stream End, at a successful or Rollback response placed on it, and when its messages
    change opaque (the server sends a stream's messages under its request's opaque).
    Give it one ordered stream: a dump, or a capture's server-to-client direction (feed
    the client-to-server batches to ``summary.tracker.update`` so that responses find
    their requests without those requests restarting streams out of order).

    Anomalies (``summary.anomalies``), each checked within one run of a stream:

    - ``seqno_not_increasing``: an item's by_seqno is not above the previous item's (or
      the Stream Request's start seqno). Items are mutations, deletions, expirations,
      prepares, commits/aborts (their own seqno), system events and seqno advances.
      Inside an OSO snapshot (0x65 start .. end) items come in key order and are not
      compared; after its end the next item must exceed the highest seqno inside it.
    - ``outside_snapshot``: an item outside the current marker's [start, end], or, once
      the stream's request was seen, an item before any marker.
    - ``snapshot_ended_early``: a marker (or OSO start) arrives before the previous
      snapshot reached its end seqno. The server ends a snapshot with its last item or
      closes it with a seqno advance (filtered collections, prepares the client does not
      take); a consumer that negotiated neither can see a legitimate short snapshot.
    - ``ended_in_snapshot``: a Stream End inside an unfinished snapshot (the client
      must resume from that snapshot's start).
    - ``unmatched_rollback``: a Rollback response that neither a request nor a stream
      opaque places on a vbucket.
    """

    def __init__(self):
        #: Frames seen.
        self.frames = 0
        #: Requests and stream opaques of the batches seen so far.
        self.tracker = StreamTracker()
        self._streams: dict[int, _Stream] = {}
        self._counts = np.zeros((16, 256), np.int64)       # frames by stream slot, opcode
        self._anomalies: list[dict[str, np.ndarray]] = []
        self._pending: list[tuple[int, int, int]] = []     # opaque, seqno, offset

    # -- input ---------------------------------------------------------------------------

    def update(self, batch: FrameBatch) -> Summary:
        """Add the next batch of the stream; returns the summary."""
        self.frames += len(batch)
        if not len(batch):
            return self
        decoded = _decoded_requests(batch)
        opaques = _message_opaques(batch)
        self._update(batch, decoded, opaques)
        self.tracker._learn(_batch_requests(batch, decoded), opaques)
        return self

    def _stream(self, key: int) -> _Stream:
        stream = self._streams.get(key)
        if stream is None:
            slot = len(self._streams)
            if slot == len(self._counts):
                self._counts = np.concatenate([self._counts, np.zeros_like(self._counts)])
            stream = self._streams[key] = _Stream(key, slot)
        return stream

    def _place_responses(self, batch, match) -> dict[int, int]:
        """Stream keys of the Stream Request responses that open (or refuse) a stream;
        rollback seqnos go to their stream or wait for an opaque to place them."""
        rolled = _rollback_seqnos(batch)
        ok = _rows(batch, P.Opcode.STREAM_REQUEST, response=True, status=P.Status.SUCCESS)
        placed = {}
        for i in sorted([*ok.tolist(), *rolled]):
            where = match.place(i)
            if where is not None:
                placed[i] = _stream_key(*where)
            if i in rolled:
                if where is None:
                    self._pending.append((int(batch["opaque"][i]), rolled[i],
                                          int(batch["offset"][i])))
                else:
                    self._stream(placed[i]).rollbacks.append(rolled[i])
        return placed

    def _update(self, batch: FrameBatch, decoded: dict, opaques: dict) -> None:
        op = batch["opcode"]
        real_mask = _requests(batch) & _IS_STREAM[op]
        placed = self._place_responses(batch, _Matcher(batch, self.tracker, decoded,
                                                       prefix=True, opaques=opaques))
        mask = real_mask.copy()
        mask[list(placed)] = True
        rows = np.flatnonzero(mask)
        keys = batch["vbucket"][rows].astype(np.uint32) << 16 | batch["stream_id"][rows]
        start = ~real_mask[rows]                       # placed responses
        chain = np.zeros(len(rows), bool)
        chain_val = np.zeros(len(rows), _U64)
        fixes = {**placed, **{i: _stream_key(r["vbucket"], r["stream_id"] or 0)
                              for i, r in decoded.items()}}
        if fixes:
            keys[np.searchsorted(rows, list(fixes))] = list(fixes.values())
        if decoded:
            at = np.searchsorted(rows, list(decoded))
            start[at] = chain[at] = True
            chain_val[at] = [r["start_seqno"] for r in decoded.values()]
        if (keys & 0xFFFF).any():
            order = np.argsort(keys, kind="stable")
        else:                                          # a 16-bit key sorts in linear time
            order = np.argsort((keys >> 16).astype(np.uint16), kind="stable")
        rows = rows[order]
        cols = {"key": keys[order], "start": start[order], "chain": chain[order],
                "chain_val": chain_val[order]}
        self._check(batch, rows, real_mask[rows], cols)

    def _check(self, batch: FrameBatch, rows: np.ndarray, real: np.ndarray, c: dict) -> None:
        """Run the checks over one batch's stream rows, grouped by stream key."""
        op = batch["opcode"][rows]
        seq = batch["by_seqno"][rows]
        oso = batch["oso_flags"][rows]
        c.update(
            row=rows.astype(np.int64, copy=False), real=real, op=op,
            opaque=batch["opaque"][rows], item=real & _IS_ITEM[op], reach_val=seq,
            def_kind=np.where(real & (op == P.Opcode.SNAPSHOT_MARKER), _MARKER,
                              np.where(real & (op == P.Opcode.OSO_SNAPSHOT)
                                       & (oso & P.OsoFlag.START != 0)
                                       & (oso & P.OsoFlag.END == 0), _OSO_OPEN,
                                       _NO_SNAPSHOT)).astype(np.int8),
            oso_end=real & (op == P.Opcode.OSO_SNAPSHOT) & (oso & P.OsoFlag.END != 0),
            end=real & (op == P.Opcode.STREAM_END),
            snap_start=batch["snap_start"][rows], snap_end=batch["snap_end"][rows],
            snap_flags=batch["snap_flags"][rows], end_status=batch["end_status"][rows],
            offset=batch["offset"][rows])
        c["msg"] = (real & _IS_MESSAGE[op]) | c["start"]
        c["opens"] = c["start"].copy()
        c["reach"] = c["item"].copy()
        c["chain_val"] = np.where(c["item"], seq, c["chain_val"])
        c, firsts = self._carry_in(c)
        self._scan_rows(c, firsts)

    def _carry_in(self, c: dict) -> tuple[dict, np.ndarray]:
        """Put one pseudo row holding the carried state in front of each continuing
        stream; returns the columns and the first row of each stream group."""
        keys = c["key"]
        firsts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) \
            if len(keys) else _NO_ROWS
        where, carries = [], []
        for g, key in zip(firsts.tolist(), keys[firsts].tolist()):
            carry = self._stream(key).carry
            if carry is not None:
                where.append(g)
                carries.append(carry)
        n = len(where)
        ranges = [cy.range or (0, 0, 0) for cy in carries]
        pseudo = {"key": keys[where], "start": [cy.last_start for cy in carries],
                  "opens": [cy.started for cy in carries],
                  "chain": [cy.chain is not None for cy in carries],
                  "chain_val": [cy.chain or 0 for cy in carries], "row": [-1] * n,
                  "real": [False] * n, "op": [0] * n,
                  "opaque": [cy.opaque or 0 for cy in carries], "item": [False] * n,
                  "reach_val": [cy.reach or 0 for cy in carries],
                  "def_kind": [cy.snapshot for cy in carries], "oso_end": [False] * n,
                  "end": [False] * n, "snap_start": [r[0] for r in ranges],
                  "snap_end": [r[1] for r in ranges], "snap_flags": [r[2] for r in ranges],
                  "end_status": [0] * n, "offset": [0] * n,
                  "msg": [cy.opaque is not None for cy in carries],
                  "reach": [cy.reach is not None for cy in carries]}
        if where:
            c = {name: np.insert(col, where, np.asarray(pseudo[name], col.dtype))
                 for name, col in c.items()}
            firsts = firsts + np.searchsorted(where, firsts)
        return c, firsts

    def _scan_rows(self, c: dict, firsts: np.ndarray) -> None:
        """The checks proper, on rows sorted by stream (pseudo rows first)."""
        m = len(c["key"])
        if not m:
            return
        key, real, item, start, msg = c["key"], c["real"], c["item"], c["start"], c["msg"]
        end, opaque, def_kind, seq = c["end"], c["opaque"], c["def_kind"], c["reach_val"]
        snap_start, snap_end = c["snap_start"], c["snap_end"]

        # runs of a stream: new at its first row, after a Stream End, at a request or
        # placed response (unless it answers the request just before it), at a new opaque
        run_start = np.zeros(m, bool)
        run_start[firsts] = True
        run_start[1:] |= end[:-1]
        mpos = np.flatnonzero(msg)
        if len(mpos):
            a, b = mpos[:-1], mpos[1:]
            same = key[a] == key[b]
            same_opaque = same & (opaque[a] == opaque[b])
            run_start[b[(start[b] & ~(same_opaque & start[a])) | (same & ~same_opaque)]] = True
            run_start[mpos[0]] |= start[mpos[0]]
        run_id = np.cumsum(run_start, dtype=np.int32) - 1
        run_first = np.flatnonzero(run_start)
        started = c["opens"][run_first]                        # per run

        # intervals between run starts, snapshot starts (markers, OSO starts), OSO ends
        # and Stream Ends; an OSO end counts when its run's latest snapshot start is OSO
        is_def = def_kind != _NO_SNAPSHOT
        dpos = np.flatnonzero(is_def)
        opos = np.flatnonzero(c["oso_end"]) if len(dpos) else _NO_ROWS
        if len(opos):
            k = np.searchsorted(dpos, opos) - 1
            d = dpos[np.maximum(k, 0)]
            opos = opos[(k >= 0) & (run_id[d] == run_id[opos]) & (def_kind[d] == _OSO_OPEN)]
        bound = run_start | is_def | end
        bound[opos] = True
        bpos = np.flatnonzero(bound)
        bkind = def_kind[bpos]
        bkind[np.searchsorted(bpos, opos)] = _OSO_CLOSED
        reach = c["reach"]
        rmax = np.maximum.reduceat(np.where(reach, seq, _U64(0)), bpos)
        rmin = np.minimum.reduceat(np.where(reach, seq, _U64(2**64 - 1)), bpos)
        rcnt = np.add.reduceat(reach, bpos, dtype=np.int64)
        bounds_end = np.append(bpos[1:], m)

        # the chain of seqnos that must rise: items outside OSO snapshots, a request's
        # start seqno, the highest seqno of an OSO snapshot at its end, the carried one
        check = item.copy()
        for j in np.flatnonzero(bkind == _OSO_OPEN).tolist():
            check[bpos[j]:bounds_end[j]] = False
        chain = check | c["chain"]
        chain_val = c["chain_val"]
        if len(opos):
            j = np.searchsorted(bpos, opos) - 1
            filled = rcnt[j] > 0
            chain[opos[filled]] = True
            chain_val = chain_val.copy()
            chain_val[opos[filled]] = rmax[j[filled]]
        found = []
        cpos = np.flatnonzero(chain)
        if len(cpos) > 1:
            cv = chain_val[cpos]
            back = np.flatnonzero(check[cpos[1:]] & (run_id[cpos[1:]] == run_id[cpos[:-1]])
                                  & (cv[1:] <= cv[:-1]))
            found.append(self._found(_BACKWARDS, c, cpos[back + 1], cv[back + 1], cv[back]))

        # items outside their marker's range, or (once the request was seen) before any
        runs = run_id[bpos]
        suspect = (bkind == _MARKER) & (rcnt > 0) & ((rmin < snap_start[bpos])
                                                    | (rmax > snap_end[bpos]))
        loose = (bkind == _NO_SNAPSHOT) & (rcnt > 0) & started[runs]
        for j in np.flatnonzero(suspect | loose).tolist():
            lo, hi, b = bpos[j], bounds_end[j], bpos[j]
            s = seq[lo:hi]
            if suspect[j]:
                at = lo + np.flatnonzero(check[lo:hi] & ((s < snap_start[b]) | (s > snap_end[b])))
                found.append(self._found(_OUTSIDE, c, at, seq[at],
                                         np.full(len(at), snap_start[b]),
                                         np.full(len(at), snap_end[b])))
            else:
                at = lo + np.flatnonzero(check[lo:hi])
                found.append(self._found(_OUTSIDE, c, at, seq[at]))

        # a snapshot start or Stream End before the previous snapshot reached its end
        closer = np.flatnonzero(real & (is_def | end))
        cj = np.searchsorted(bpos, closer) - 1
        pj = np.maximum(cj, 0)
        p = bpos[pj]
        ok = (cj >= 0) & (runs[pj] == run_id[closer])
        pk = bkind[pj]
        reached, has = rmax[pj], rcnt[pj] > 0
        short = ok & (pk == _MARKER) & (~has | (reached < snap_end[p]))
        unended = ok & (pk == _OSO_OPEN)
        for kind, sel in ((_EARLY, ~end[closer]), (_ENDED_INSIDE, end[closer])):
            hit = short & sel
            found.append(self._found(kind, c, closer[hit], reached[hit], snap_start[p[hit]],
                                     snap_end[p[hit]], seqno_ok=has[hit]))
            hit = unended & sel
            found.append(self._found(kind, c, closer[hit], reached[hit], seqno_ok=has[hit]))
        found = [f for f in found if f is not None]
        if found:
            self._anomalies.append({name: np.concatenate([f[name] for f in found])
                                    for name in found[0]})
            for k, n in zip(*np.unique(np.concatenate([f["key"] for f in found]),
                                       return_counts=True)):
                self._stream(int(k)).anomalies += int(n)

        state = {"mpos": mpos, "cpos": cpos, "chain_val": chain_val, "bpos": bpos,
                 "bkind": bkind, "rmax": rmax, "rcnt": rcnt, "run_first": run_first,
                 "run_id": run_id, "started": started}
        self._tally(c, firsts, run_start, state)

    @staticmethod
    def _found(kind, c, at, seqno, low=None, high=None, seqno_ok=None):
        """Anomaly columns for rows ``at``."""
        n = len(at)
        if not n:
            return None
        return {"kind": np.full(n, kind, np.int8), "offset": c["offset"][at],
                "key": c["key"][at], "seqno": seqno.astype(_U64),
                "seqno_ok": np.ones(n, bool) if seqno_ok is None else seqno_ok,
                "low": np.zeros(n, _U64) if low is None else low.astype(_U64),
                "high": np.zeros(n, _U64) if high is None else high.astype(_U64),
                "range_ok": np.full(n, low is not None),
                "end_status": c["end_status"][at].astype(np.int64)}

    def _tally(self, c: dict, firsts: np.ndarray, run_start: np.ndarray, state: dict) -> None:
        """Per-stream counts, seqnos, snapshots and end status; carry the check state."""
        m = len(c["key"])
        real, seq = c["real"], c["reach_val"]
        groups = len(firsts)
        lasts = np.append(firsts[1:], m) - 1
        gid = np.repeat(np.arange(groups), np.diff(np.append(firsts, m)))
        counts = np.bincount(gid[real] * 256 + c["op"][real], minlength=groups * 256)
        counts = counts.reshape(groups, 256)
        news = np.flatnonzero(run_start & (c["row"] >= 0))
        runs = np.diff(np.searchsorted(news, np.append(firsts, m))).tolist()
        markers = np.flatnonzero(real & (c["def_kind"] == _MARKER))
        bounds = np.searchsorted(markers, np.append(firsts, m)).tolist()
        snapshots = np.stack([c["snap_start"][markers], c["snap_end"][markers],
                              c["snap_flags"][markers].astype(_U64)], axis=1)

        items = np.flatnonzero(c["item"])
        first_item, has_item = _first_from(items, firsts, lasts)
        last_item, _ = _last_upto(items, lasts, firsts)
        first_seq, last_seq = _pick(seq, first_item, has_item), _pick(seq, last_item, has_item)
        end, has_end = _last_upto(np.flatnonzero(c["end"]), lasts, firsts)
        end_status = _pick(c["end_status"], end, has_end)
        msg, has_msg = _last_upto(state["mpos"], lasts, firsts)
        opaque = _pick(c["opaque"], msg, has_msg & (c["row"][msg] >= 0))
        run_first = state["run_first"][state["run_id"][lasts]]
        in_run = has_msg & (msg >= run_first)
        carried_opaque = _pick(c["opaque"], msg, in_run)
        last_start = (in_run & c["start"][msg]).tolist()
        chain_row, has_chain = _last_upto(state["cpos"], lasts, run_first)
        chain = _pick(state["chain_val"], chain_row, has_chain)
        j = np.searchsorted(state["bpos"], lasts, "right") - 1
        b, kind = state["bpos"][j], state["bkind"][j]
        reach = _pick(state["rmax"], j, np.isin(kind, (_MARKER, _OSO_OPEN))
                      & (state["rcnt"][j] > 0))
        ranges = np.stack([c["snap_start"][b], c["snap_end"][b],
                           c["snap_flags"][b].astype(_U64)], axis=1).tolist()
        opens = c["opens"][run_first].tolist()
        closed = c["end"][lasts].tolist()
        kind = kind.tolist()
        streams = [self._stream(k) for k in c["key"][firsts].tolist()]
        self._counts[[s.slot for s in streams]] += counts
        for g, stream in enumerate(streams):
            stream.streams += runs[g]
            if first_seq[g] is not None:
                if stream.first_seqno is None:
                    stream.first_seqno = first_seq[g]
                stream.last_seqno = last_seq[g]
            if bounds[g + 1] > bounds[g]:
                stream.snapshots.append(snapshots[bounds[g]:bounds[g + 1]])
            if end_status[g] is not None:
                stream.end_status = end_status[g]
            if opaque[g] is not None:
                stream.opaque = opaque[g]
            stream.carry = None if closed[g] else _Carry(
                opens[g], last_start[g], carried_opaque[g], chain[g], kind[g],
                tuple(ranges[g]) if kind[g] == _MARKER else None, reach[g])


    # -- output --------------------------------------------------------------------------

    def _resolved_pending(self) -> tuple[dict[int, list[int]], list[tuple[int, int, int]]]:
        """Pending rollbacks placed by the stream opaques learnt since, and the rest."""
        placed: dict[int, list[int]] = {}
        rest = []
        for opaque, seqno, offset in self._pending:
            key = self.tracker.opaques.get(opaque, _AMBIGUOUS)
            if key == _AMBIGUOUS:
                rest.append((opaque, seqno, offset))
            else:
                placed.setdefault(key, []).append(seqno)
        return placed, rest

    def to_arrow(self) -> pa.Table:
        """One row per vbucket stream, ordered by vbucket and stream id.

        ``vbucket, stream_id`` (null without one), ``opaque`` (of its latest message),
        ``streams`` (runs of it that began in the data), ``first_seqno, last_seqno`` (of
        the first and last item in arrival order), ``snapshots`` and ``snapshot_ranges``
        (start, end, flags of each marker), ``counts`` (frames by opcode name),
        ``rollbacks`` (rollback seqnos), ``end_status`` (name of the latest Stream End's
        status, null if none) and ``anomalies`` (how many).
        """
        import pyarrow as pa

        late, _ = self._resolved_pending()
        streams = [self._streams[k] for k in sorted(self._streams)]
        ranges = []
        for s in streams:
            chunk = np.concatenate(s.snapshots) if s.snapshots else np.zeros((0, 3), _U64)
            ranges.append([{"start": a, "end": b, "flags": f} for a, b, f in chunk.tolist()])
        range_type = pa.struct([("start", pa.uint64()), ("end", pa.uint64()),
                                ("flags", pa.uint32())])
        return pa.table({
            "vbucket": pa.array([s.vbucket for s in streams], pa.uint16()),
            "stream_id": pa.array([s.stream_id or None for s in streams], pa.uint16()),
            "opaque": pa.array([s.opaque for s in streams], pa.uint32()),
            "streams": pa.array([s.streams for s in streams], pa.int64()),
            "first_seqno": pa.array([s.first_seqno for s in streams], pa.uint64()),
            "last_seqno": pa.array([s.last_seqno for s in streams], pa.uint64()),
            "snapshots": pa.array([len(r) for r in ranges], pa.int64()),
            "snapshot_ranges": pa.array(ranges, pa.list_(range_type)),
            "counts": pa.array([[(_OPCODE_NAMES[op], int(self._counts[s.slot, op]))
                                 for op in np.flatnonzero(self._counts[s.slot]).tolist()]
                                for s in streams], pa.map_(pa.string(), pa.int64())),
            "rollbacks": pa.array([s.rollbacks + late.get(_stream_key(s.vbucket, s.stream_id),
                                                          [])
                                   for s in streams], pa.list_(pa.uint64())),
            "end_status": pa.array([None if s.end_status is None else
                                    _enum_name(P.StreamEndStatus, s.end_status)
                                    or str(s.end_status) for s in streams], pa.string()),
            "anomalies": pa.array([s.anomalies for s in streams], pa.int64()),
        })

    def to_pandas(self) -> pd.DataFrame:
        """``to_arrow()`` as a pandas DataFrame with Arrow-backed dtypes."""
        import pandas as pd

        return self.to_arrow().to_pandas(types_mapper=pd.ArrowDtype)

    @property
    def anomalies(self) -> pa.Table:
        """Every anomaly found, by stream offset: ``kind, offset, vbucket, stream_id,
        by_seqno, details`` (``by_seqno``: the item's, or the seqno a snapshot reached)."""
        import pyarrow as pa

        _, unmatched = self._resolved_pending()
        cols = {name: np.concatenate([a[name] for a in self._anomalies])
                for name in self._anomalies[0]} if self._anomalies else None
        rows = []
        if cols is not None:
            for k, off, key, s, s_ok, lo, hi, r_ok, status in zip(
                    *(cols[n].tolist() for n in ("kind", "offset", "key", "seqno",
                                                 "seqno_ok", "low", "high", "range_ok",
                                                 "end_status"))):
                rows.append((off, ANOMALIES[k], key >> 16, key & 0xFFFF or None,
                             s if s_ok else None, _details(k, s if s_ok else None,
                                                           (lo, hi) if r_ok else None,
                                                           status)))
        for opaque, seqno, offset in unmatched:
            rows.append((offset, ANOMALIES[_UNMATCHED], None, None, seqno,
                         f"rollback to seqno {seqno} for opaque 0x{opaque:x}: no request "
                         f"or stream uses that opaque"))
        rows.sort(key=lambda r: r[0])
        columns = list(zip(*rows)) or [()] * 6
        return pa.table({
            "kind": pa.array(columns[1], pa.string()),
            "offset": pa.array(columns[0], pa.uint64()),
            "vbucket": pa.array(columns[2], pa.uint16()),
            "stream_id": pa.array(columns[3], pa.uint16()),
            "by_seqno": pa.array(columns[4], pa.uint64()),
            "details": pa.array(columns[5], pa.string()),
        })

    def report(self, max_anomalies: int = 20) -> str:
        """A readable account: one line per stream, then the first anomalies."""
        table = self.to_arrow().to_pylist()
        anomalies = self.anomalies
        lines = [f"{self.frames} frames, {len(table)} vbucket streams, "
                 f"{anomalies.num_rows} anomalies"]
        for s in table:
            name = f"vb {s['vbucket']}" + (f" sid {s['stream_id']}" if s["stream_id"] else "")
            seqnos = ("no items" if s["first_seqno"] is None
                      else f"seqno {s['first_seqno']}..{s['last_seqno']}")
            counts = ", ".join(f"{n} {op}" for op, n in sorted(s["counts"],
                                                                key=lambda x: -x[1])[:4])
            extra = f", rollbacks to {s['rollbacks']}" if s["rollbacks"] else ""
            lines.append(f"  {name}: {seqnos}, {s['snapshots']} snapshots ({counts}){extra}, "
                         f"end {s['end_status'] or '-'}, {s['anomalies']} anomalies")
        for a in anomalies.slice(0, max_anomalies).to_pylist():
            lines.append(f"  ! {a['kind']} at byte {a['offset']}"
                         + (f" (vb {a['vbucket']})" if a["vbucket"] is not None else "")
                         + f": {a['details']}")
        if anomalies.num_rows > max_anomalies:
            lines.append(f"  ... {anomalies.num_rows - max_anomalies} more anomalies")
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def __repr__(self):
        return (f"<Summary {self.frames} frames, {len(self._streams)} vbucket streams, "
                f"{sum(s.anomalies for s in self._streams.values())} anomalies>")


def _first_from(positions: np.ndarray, lows: np.ndarray, highs: np.ndarray):
    """The first of ``positions`` in each [low, high], and whether there is one."""
    k = np.searchsorted(positions, lows)
    at = positions[np.minimum(k, len(positions) - 1)] if len(positions) else lows
    return at, (k < len(positions)) & (at <= highs)


def _last_upto(positions: np.ndarray, highs: np.ndarray, lows: np.ndarray):
    """The last of ``positions`` in each [low, high], and whether there is one."""
    k = np.searchsorted(positions, highs, "right") - 1
    at = positions[np.maximum(k, 0)] if len(positions) else highs
    return at, (k >= 0) & (at >= lows)


def _pick(values: np.ndarray, at: np.ndarray, valid: np.ndarray) -> list:
    """``values[at]`` as Python numbers, None where not ``valid``."""
    return [v if ok else None for v, ok in zip(values[at].tolist(), valid.tolist())]


def _details(kind: int, seqno, span, status: int) -> str:
    where = f"snapshot [{span[0]}, {span[1]}]" if span else "an OSO snapshot"
    at = f"seqno {seqno}" if seqno is not None else "no item"
    if kind == _BACKWARDS:
        return f"by_seqno {seqno} does not exceed the previous {span[0]}"
    if kind == _OUTSIDE:
        return (f"by_seqno {seqno} outside {where}" if span
                else f"by_seqno {seqno} before any snapshot marker of the stream")
    if kind == _EARLY:
        return (f"{where} ended at {at}" if span
                else "an OSO snapshot ended without its end marker")
    name = _enum_name(P.StreamEndStatus, status) or str(status)
    return f"stream end ({name}) inside {where}" + (f", reached {at}" if span else "")


def summarize(batches: FrameBatch | Iterable[FrameBatch]) -> Summary:
    """Stream health of one batch or an iterable of batches (e.g. ``iter_batches``)."""
    summary = Summary()
    for batch in [batches] if isinstance(batches, FrameBatch) else batches:
        summary.update(batch)
    return summary
