"""What the stream tables and the summary read from a batch: which rows, which bytes, and
the decoders of single frames (a Stream Request, a Rollback response's seqno).

The decoders of a batch's Stream Requests and Rollback responses (``read_requests``,
``rollback_seqnos``) return the malformed ones (a Rollback value that is not 8 bytes, a
Stream Request value that is not a JSON object with a valid ``sid``) beside what they
decode, whatever the batch's mode: their callers follow ``batch.mode`` with them.
"""

from __future__ import annotations

import json
import struct

import numpy as np

from .. import protocol as P
from ..batch import FrameBatch, view_of
from ..errors import SkippedRegion, text

_STREAM_REQUEST = struct.Struct(P.STREAM_REQUEST_EXTRAS)
_ROLLBACK = struct.Struct(P.ROLLBACK_VALUE)
NO_ROWS = np.zeros(0, np.int64)

#: Producer messages of a stream (its seqno items, markers, its end); each carries the
#: opaque of the request that opened it.
MESSAGE_OPCODES = P.SEQNO_ITEMS | {P.Opcode.SNAPSHOT_MARKER, P.Opcode.OSO_SNAPSHOT,
                                   P.Opcode.STREAM_END}
#: Every request counted against a vbucket stream (consumer requests included).
STREAM_OPCODES = MESSAGE_OPCODES | {
    P.Opcode.STREAM_REQUEST, P.Opcode.ADD_STREAM, P.Opcode.CLOSE_STREAM,
    P.Opcode.SET_VBUCKET_STATE, P.Opcode.SEQNO_ACKNOWLEDGED, P.Opcode.CACHE_TRANSFER,
    P.Opcode.CACHE_TRANSFER_END}


def opcode_table(opcodes) -> np.ndarray:
    """Bool lookup table indexed by opcode: which of the 256 are in ``opcodes``."""
    table = np.zeros(256, bool)
    table[sorted(opcodes)] = True
    return table


#: By opcode: a seqno item, a producer message, a request of a vbucket stream.
IS_ITEM = opcode_table(P.SEQNO_ITEMS)
IS_MESSAGE = opcode_table(MESSAGE_OPCODES)
IS_STREAM = opcode_table(STREAM_OPCODES)
_NAMES = {int(op): op.name.lower() for op in P.Opcode}
#: By opcode: its lower-case name, or its hex value when the protocol names none.
OPCODE_NAMES = [_NAMES.get(op, f"0x{op:02x}") for op in range(256)]


# -- rows --------------------------------------------------------------------------------


def requests(batch: FrameBatch) -> np.ndarray:
    """Mask of the batch's requests (client magics; DCP producer messages are requests)."""
    return _is_request(batch["magic"])


def responses(batch: FrameBatch) -> np.ndarray:
    """Mask of the batch's responses."""
    return _is_response(batch["magic"])


_REQUEST_MAGICS = sorted(int(m) for m in P.REQUEST_MAGICS)
_RESPONSE_MAGICS = sorted(int(m) for m in P.RESPONSE_MAGICS)


def _one_of(magic: np.ndarray, magics: list[int]) -> np.ndarray:
    """Whether each of ``magic`` is one of ``magics`` (a compare each: faster than a
    lookup table or ``np.isin`` over every frame)."""
    out = magic == magics[0]
    for m in magics[1:]:
        out |= magic == m
    return out


def _is_request(magic: np.ndarray) -> np.ndarray:
    return _one_of(magic, _REQUEST_MAGICS)


def _is_response(magic: np.ndarray) -> np.ndarray:
    return _one_of(magic, _RESPONSE_MAGICS)


def rows(batch: FrameBatch, opcode: int, *, response: bool, status=None) -> np.ndarray:
    """Rows of the requests (or responses, optionally of one status) with ``opcode``."""
    if not len(batch):
        return NO_ROWS
    at = np.flatnonzero(batch["opcode"] == opcode)      # few: their magic read there
    keep = (_is_response if response else _is_request)(batch["magic"].take(at))
    if status is not None:
        keep &= batch["status"].take(at) == status
    return at[keep]


# -- bytes -------------------------------------------------------------------------------


def _bytes(batch: FrameBatch, start: int, length: int) -> bytes:
    at = start - batch.base_offset
    return bytes(view_of(batch)[at:at + length])


def extras(batch: FrameBatch, i: int) -> bytes:
    """The extras of row ``i``."""
    start = int(batch["offset"][i]) + P.HEADER_SIZE + int(batch["framing_len"][i])
    return _bytes(batch, start, int(batch["extras_len"][i]))


def key(batch: FrameBatch, i: int) -> bytes:
    """The key of row ``i``."""
    return _bytes(batch, int(batch["key_offset"][i]), int(batch["key_len"][i]))


def value(batch: FrameBatch, i: int) -> bytes:
    """The value of row ``i``."""
    return _bytes(batch, int(batch["value_offset"][i]), int(batch["value_len"][i]))


def utf8(data: bytes) -> str:
    """``data`` as text, invalid UTF-8 shown as ``\\x..`` escapes."""
    return data.decode("utf-8", "backslashreplace")


def frame_region(batch: FrameBatch, i: int, reason: str) -> SkippedRegion:
    """The whole of frame ``i`` as a region passed over for ``reason``."""
    return SkippedRegion(int(batch["offset"][i]), P.HEADER_SIZE + int(batch["body_len"][i]),
                         reason)


def flag_names(enum, flags: int) -> list[str]:
    """Names of the set flags; a bit with no name appears as its hex value."""
    known = {int(member): member.name.lower() for member in enum}
    names, bit = [], 1
    while bit <= flags:
        if flags & bit:
            names.append(known.get(bit, f"0x{bit:x}"))
        bit <<= 1
    return names


def enum_name(enum, number: int) -> str | None:
    """The lower-case name of ``number`` in ``enum``, None when it has none."""
    try:
        return enum(number).name.lower()
    except ValueError:
        return None


# -- single frames -----------------------------------------------------------------------


def request_stream_id(sid: int, data: bytes) -> int:
    """The stream id a Stream Request asks for: its stream-id framing extra ``sid`` (0:
    none), else the ``sid`` of its JSON value ``data`` (0: none); ``ValueError`` with the
    reason when the value is not a JSON object with a valid ``sid``. The one reading of a
    Stream Request's value, for batches here and for rows on Spark."""
    if not data:
        return sid
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ValueError(text("stream_request_value"))
    given = body.get(P.STREAM_REQUEST_SID)
    if given is not None:
        if type(given) is not int or not 1 <= given <= 0xFFFF:
            raise ValueError(text("stream_request_sid", sid=given))
        sid = sid or given
    return sid


def rollback_seqno(data: bytes) -> int:
    """The seqno a Rollback response's value ``data`` rolls back to; ``ValueError`` with
    the reason when it is not 8 bytes."""
    if len(data) != _ROLLBACK.size:
        raise ValueError(text("rollback_size", size=len(data), must=_ROLLBACK.size))
    return _ROLLBACK.unpack(data)[0]


def stream_request(batch: FrameBatch, i: int) -> dict:
    """The decoded Stream Request at row ``i``; ``ValueError`` with the reason when its
    value is malformed."""
    flags, _, start, end, uuid, snap_start, snap_end = _STREAM_REQUEST.unpack(extras(batch, i))
    data = value(batch, i)
    sid = request_stream_id(int(batch["stream_id"][i]), data)
    return {"vbucket": int(batch["vbucket"][i]), "opaque": int(batch["opaque"][i]),
            "stream_id": sid or None, "flags": flags, "start_seqno": start,
            "end_seqno": end, "vbucket_uuid": uuid, "snap_start_seqno": snap_start,
            "snap_end_seqno": snap_end, "filter": utf8(data) if data else None}


def read_requests(batch: FrameBatch) -> tuple[dict[int, dict], list[SkippedRegion]]:
    """Row -> decoded Stream Request, for every well-formed one in the batch; and the
    malformed ones, in stream order, whatever the batch's mode."""
    out, damaged = {}, []
    for i in rows(batch, P.Opcode.STREAM_REQUEST, response=False).tolist():
        try:
            out[i] = stream_request(batch, i)
        except ValueError as e:
            damaged.append(frame_region(batch, i, str(e)))
    return out, damaged


def rollback_seqnos(batch: FrameBatch) -> tuple[dict[int, int], list[SkippedRegion]]:
    """Row -> rollback seqno of each well-formed Rollback response; and the malformed
    ones, in stream order, whatever the batch's mode."""
    out, damaged = {}, []
    for i in rows(batch, P.Opcode.STREAM_REQUEST, response=True,
                  status=P.Status.ROLLBACK).tolist():
        try:
            out[i] = rollback_seqno(value(batch, i))
        except ValueError as e:
            damaged.append(frame_region(batch, i, str(e)))
    return out, damaged
