"""What the suite times besides the public API: the scan core called as ``dcpfast.read``
calls it (the compiled core and its pure-Python twin), a ``struct`` header walk as the
plain-Python baseline, and ``iter_batches`` over a file."""

from __future__ import annotations

import struct

from dcpfast import _core as core
from dcpfast import iter_batches, protocol, schema

#: The scan core's pure-Python twin, and the compiled core (None where none was built).
TWIN = core.twins()["scan"]
COMPILED = (core.compiled() or {}).get("scan")
#: The five columns of the projected scan, and all columns.
PROJECTION = schema.resolve(["offset", "opcode", "vbucket", "by_seqno", "key_len"])
ALL_COLUMNS = schema.resolve(None)
_HEADER = struct.Struct(">BBHBBHIIQ")


def core_scan(scanner, view, names):
    """One ``scan_buffer`` call as ``dcpfast.read`` makes it: collections on, strict, no
    frame limit, the buffer is the whole stream."""
    result = scanner.scan_buffer(view, core.ScanRequest(
        0, names, True, False, -1, protocol.DEFAULT_MAX_FRAME_SIZE, 0, True))
    return result, result.failure


def header_walk(view) -> tuple[list, list, list, list, list]:
    """Baseline: follow the body lengths with ``struct`` and list a few header fields."""
    unpack = _HEADER.unpack_from
    opcodes, vbuckets, bodies, opaques, cas_values = [], [], [], [], []
    pos, end = 0, len(view)
    while end - pos >= 24:
        _, opcode, _, _, _, vbucket, body, opaque, cas = unpack(view, pos)
        opcodes.append(opcode)
        vbuckets.append(vbucket)
        bodies.append(body)
        opaques.append(opaque)
        cas_values.append(cas)
        pos += 24 + body
    return opcodes, vbuckets, bodies, opaques, cas_values


def file_scan(path, columns=None, memory_map=False) -> int:
    """Frames of ``iter_batches`` over a file (64 MiB batches, collections on, one
    thread; read into memory, or mapped)."""
    return sum(len(b) for b in iter_batches(path, collections=True, columns=columns,
                                            threads=1, memory_map=memory_map))
