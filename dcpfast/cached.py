"""Cache Transfer (0x66) records as rows: the documents a producer sends from its cache
ahead of a stream's first snapshot (kv_engine master builds, DCP Open flag 0x100), so that
a consumer starts warm.

A Cache Transfer frame's value holds one or more records back to back (``CACHE_RECORD``:
CAS, seqnos, lengths, flags, expiration, datatype, cache hint; then the key, always
behind its LEB128 collection id, and the value). They are documents the vbucket already
holds at or below the stream's start seqno, not changes: ``dcpfast.state`` leaves them
out, and ``cache_records`` reads them.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from . import protocol as P
from .batch import FrameBatch, kinds_of, require_columns, view_of
from .errors import SkippedRegion, checked, text, with_skipped

__all__ = ["NEEDED", "cache_records", "cache_schema"]

_KIND = P.KIND_INDEX["cache_transfer"]
_RECORD = struct.Struct(P.CACHE_RECORD)
_KEY_LOW, _KEY_HIGH = P.CACHE_RECORD_KEY
#: Columns of the batch that ``cache_records`` reads.
NEEDED = ("offset", "vbucket", "stream_id", "value_offset", "value_len")


def cache_schema() -> pa.Schema:
    """Arrow schema of ``cache_records``: one row per record. ``index`` and ``offset`` are
    its frame's row in the batch and stream offset, ``record`` its place in the frame;
    ``key`` the logical key (without the collection id)."""
    return pa.schema([
        ("index", pa.int64()), ("offset", pa.uint64()), ("record", pa.int32()),
        ("vbucket", pa.uint16()), ("stream_id", pa.uint16()), ("cas", pa.uint64()),
        ("by_seqno", pa.uint64()), ("rev_seqno", pa.uint64()), ("flags", pa.uint32()),
        ("expiration", pa.uint32()), ("datatype", pa.uint8()), ("cache_hint", pa.uint8()),
        ("collection_id", pa.uint32()), ("key", pa.binary()), ("value", pa.binary()),
    ])


class _Malformed(ValueError):
    """A record that does not decode; carries the reason."""


def collection_prefix(key: bytes) -> tuple[int, int]:
    """(collection id, bytes it takes) of the strict, canonical LEB128 id that starts
    ``key`` (at most 5 bytes, 32 bits, no needless zero byte, not a reserved id 1-7, a
    logical key after it), as the scanners read a document key; raises ValueError."""
    cid = 0
    for j, byte in enumerate(key[:5]):
        cid |= (byte & 0x7F) << (7 * j)
        if not byte & 0x80:
            if (j and byte == 0) or cid > 0xFFFFFFFF or 1 <= cid <= 7 or len(key) <= j + 1:
                break
            return cid, j + 1
    raise ValueError("not a collection id")


def _records(value: bytes) -> list[dict]:
    """The records of one frame's value; raises ``_Malformed``."""
    out: list[dict] = []
    at = 0
    while at < len(value):
        n = len(out)
        if len(value) - at < _RECORD.size:
            raise _Malformed(text("cache_record_cut", record=n, at=at, size=len(value)))
        cas, by, rev, vlen, flags, exp, klen, datatype, hint = _RECORD.unpack_from(value, at)
        start = at + _RECORD.size
        if not _KEY_LOW <= klen <= _KEY_HIGH:
            raise _Malformed(text("cache_record_key", record=n, length=klen, low=_KEY_LOW,
                                  high=_KEY_HIGH))
        if start + klen + vlen > len(value):
            raise _Malformed(text("cache_record_cut", record=n, at=at, size=len(value)))
        key = value[start:start + klen]
        try:
            cid, prefix = collection_prefix(key)
        except ValueError:
            raise _Malformed(text("cache_record_collection", record=n)) from None
        out.append({"record": n, "cas": cas, "by_seqno": by, "rev_seqno": rev,
                    "flags": flags, "expiration": exp, "datatype": datatype,
                    "cache_hint": hint, "collection_id": cid, "key": key[prefix:],
                    "value": value[start + klen:start + klen + vlen]})
        at = start + klen + vlen
    return out


def cache_records(batch: FrameBatch) -> pa.Table:
    """One row per record of the Cache Transfer frames of ``batch`` (``cache_schema``).

    A value whose records do not fit it, or a record key that is not a collection id and
    a key, follows ``batch.mode``: "strict" raises ``DcpFormatError`` at the frame's
    offset; "skip" leaves the frame's records out and lists the frame in the table's
    metadata (``dcpfast.skipped_regions(table)``). The batch must hold the columns in
    ``NEEDED``."""
    require_columns(batch, NEEDED, "cache_records")
    schema = cache_schema()
    rows: dict[str, list] = {name: [] for name in schema.names}
    damaged: list[SkippedRegion] = []
    view = view_of(batch)
    for i in np.flatnonzero(kinds_of(batch) == _KIND).tolist():
        offset = int(batch["offset"][i])
        start = int(batch["value_offset"][i]) - batch.base_offset
        end = start + int(batch["value_len"][i])
        try:
            records = _records(bytes(view[start:end]))
        except _Malformed as exc:
            damaged.append(SkippedRegion(offset, end + batch.base_offset - offset, str(exc)))
            continue
        frame = {"index": i, "offset": offset, "vbucket": int(batch["vbucket"][i]),
                 "stream_id": int(batch["stream_id"][i]) or None}
        for record in records:
            for name, column in rows.items():
                column.append(record[name] if name in record else frame[name])
    table = pa.table({name: pa.array(column, type=schema.field(name).type)
                      for name, column in rows.items()}, schema=schema)
    return with_skipped(table, checked(batch.mode, damaged))
