"""Pure-Python twin of the compiled scan core ``cscan`` (``DCPFAST_PUREPYTHON=1`` selects it).

The same names and signatures and the same tables, written for clarity; what a scan is
asked and answers is ``contract``. The test-suite runs against both.
"""

from __future__ import annotations

import struct

import numpy as np

from .. import protocol as P
from .. import schema as S
from .contract import ScanRequest, ScanResult

_HEADER = struct.Struct(">BBHBBHIIQ")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_LOAD = {1: struct.Struct(">B"), 2: _U16, 4: _U32, 8: struct.Struct(">Q")}

_REQUEST_RULES = {op: P.request_kinds(op) for op in range(256)}
_PR = P.Problem
#: Per kind: whether it carries the vbucket (a request of a vbucket, not the connection's).
_VBUCKET = tuple(S.carried(kind, "vbucket", False) for kind in P.KINDS)


class _Frame:
    """What ``parse`` learnt about one frame."""

    __slots__ = ("length", "kind", "fel", "extlen", "keylen", "value_len", "sid",
                 "server_us", "cid", "prefix", "a", "b")

    def __init__(self):
        self.length = 0
        self.a = self.b = 0


def _parse(buf, pos, end, collections, max_frame):
    """Validate the frame at ``pos``: (status, frame); status OK, INCOMPLETE or a Problem."""
    f = _Frame()
    avail = end - pos
    if avail == 0:
        return P.INCOMPLETE, f
    magic = buf[pos]
    if magic not in P.DCP_MAGICS:
        f.a = magic
        return _PR.BAD_MAGIC, f
    if avail < P.HEADER_SIZE:
        return P.INCOMPLETE, f
    _, opcode, keylen, extlen, datatype, _, body, _, _ = _HEADER.unpack_from(buf, pos)
    if magic in P.ALT_MAGICS:
        f.fel, f.keylen = keylen >> 8, keylen & 0xFF
    else:
        f.fel, f.keylen = 0, keylen
    f.extlen = extlen
    length = P.HEADER_SIZE + body
    if length > max_frame:
        f.a, f.b = length, max_frame
        return _PR.FRAME_TOO_LARGE, f
    need = f.fel + extlen + f.keylen
    if need > body:
        f.a, f.b = body, need
        return _PR.LENGTHS, f
    f.length = length
    f.value_len = body - need
    if datatype > P.MAX_DATATYPE:
        f.a = datatype
        return _PR.DATATYPE, f
    response = magic in P.RESPONSE_MAGICS
    if response:
        kind = P.RESPONSE_KIND
        allowed = P.RESPONSE_EXTRAS.get(opcode)
        if allowed is not None and extlen not in allowed:
            f.a, f.b = opcode, extlen
            return _PR.EXTRAS_LENGTH, f
    else:
        rules = _REQUEST_RULES[opcode]
        if not rules:
            kind = P.REQUEST_KIND
        elif extlen in rules:
            kind = rules[extlen]
        else:
            f.a, f.b = opcode, extlen
            return _PR.EXTRAS_LENGTH, f
    if avail < length:
        return P.INCOMPLETE, f
    if kind < 0:
        version = buf[pos + P.HEADER_SIZE + f.fel]
        flags_at = pos + P.HEADER_SIZE + f.fel + extlen + f.keylen + P.MARKER_V2_FLAGS_BYTE
        disk = f.value_len > P.MARKER_V2_FLAGS_BYTE and \
            bool(buf[flags_at] & P.SnapshotFlag.DISK)
        kind = P.MARKER_V2_KINDS.get((version, f.value_len, disk))
        if kind is None:
            f.a, f.b = version, f.value_len
            return _PR.MARKER_VERSION, f
    k = P.KINDS[kind]
    if not k.key[0] <= f.keylen <= k.key[1]:
        f.a, f.b = opcode, f.keylen
        return _PR.KEY_LENGTH, f
    if not k.value[0] <= f.value_len <= k.value[1]:
        f.a, f.b = opcode, f.value_len
        return _PR.VALUE_LENGTH, f
    f.kind = kind
    f.sid = f.server_us = 0
    problem = _frame_infos(buf, pos, f, response)
    if problem:
        return problem, f
    f.cid = f.prefix = 0
    if collections and k.prefixed:
        problem = _collection_prefix(buf, pos + P.HEADER_SIZE + f.fel + extlen, f)
        if problem:
            return problem, f
    return P.OK, f


def _frame_infos(buf, pos, f, response):
    """Walk the framing extras; pick up the stream id of a request and the server's
    duration of a response."""
    start = pos + P.HEADER_SIZE
    p, e = start, start + f.fel
    while p < e:
        at = p - start
        byte = buf[p]
        p += 1
        fid, flen = byte >> 4, byte & 15
        if (fid == 15) + (flen == 15) > e - p:          # escape bytes past the end
            f.a, f.b = at, f.fel
            return _PR.FRAMING_EXTRAS
        if fid == 15:
            fid = 15 + buf[p]
            p += 1
        if flen == 15:
            flen = 15 + buf[p]
            p += 1
        if flen > e - p:
            f.a, f.b = at, f.fel
            return _PR.FRAMING_EXTRAS
        if fid == P.FRAME_INFO_STREAM_ID and not response:
            if flen != 2:
                f.a = flen
                return _PR.STREAM_ID_LENGTH
            f.sid = _U16.unpack_from(buf, p)[0]
        elif fid == P.FRAME_INFO_SERVER_DURATION and response and flen == 2:
            f.server_us = int(_U16.unpack_from(buf, p)[0] ** P.SERVER_DURATION_POWER / 2)
        p += flen
    return 0


def _collection_prefix(buf, key, f):
    """Decode the strict, canonical LEB128 collection id at the start of the key."""
    cid = 0
    for j in range(5):
        if j >= f.keylen:
            f.a = f.keylen
            return _PR.LEB128_NO_STOP
        byte = buf[key + j]
        if j == 4 and 0x0F < byte < 0x80:
            f.a = byte
            return _PR.LEB128_OVERFLOW
        cid |= (byte & 0x7F) << (7 * j)
        if not byte & 0x80:
            f.prefix = j + 1
            break
    else:
        f.a = 5
        return _PR.LEB128_NO_STOP
    if f.prefix > 1 and buf[key + f.prefix - 1] == 0:
        f.a = f.prefix
        return _PR.LEB128_NON_CANONICAL
    if 1 <= cid <= 7:
        f.a = cid
        return _PR.RESERVED_COLLECTION
    if f.keylen <= f.prefix:
        return _PR.EMPTY_LOGICAL_KEY
    f.cid = cid
    return 0


#: Problems that leave a frame's length untrustworthy.
_STRUCTURAL = frozenset({_PR.BAD_MAGIC, _PR.FRAME_TOO_LARGE, _PR.LENGTHS, _PR.TRUNCATED,
                         _PR.RESYNC})


class _Walk:
    def __init__(self, buf, collections, skip, final, max_frame, unverified):
        self.buf, self.end = buf, len(buf)
        self.collections, self.skip, self.final, self.max_frame = (
            collections, skip, final, max_frame)
        self.unverified = unverified
        self.stalled = False

    def parse(self, pos):
        return _parse(self.buf, pos, self.end, self.collections, self.max_frame)

    def plausible_after(self, q):
        """Whether a frame ending at ``q`` is believable: True, False, or None when the
        bytes that decide are not in this chunk yet. A frame header that holds together
        (or the end of the data) must follow; that frame may be damaged or cut short, but
        a header cut short by the end of the data proves nothing."""
        if q == self.end:
            return True if self.final else None
        s, _ = self.parse(q)
        if s == P.INCOMPLETE and self.end - q < P.HEADER_SIZE:
            return False if self.final else None
        return s not in _STRUCTURAL

    def resync(self, p, code, f):
        """Where the next trustworthy frame starts after a bad frame at ``p``.

        When the bytes that decide lie beyond this chunk: ``p`` itself with
        ``self.stalled`` set (decide again with more data), or a frame start with
        ``self.unverified`` set (checked when the next chunk arrives).
        """
        if code not in _STRUCTURAL and f.length > self.end - p and not self.final:
            self.stalled = True          # a frame wrong from its header alone, cut short here
            return p
        if code not in _STRUCTURAL and f.length <= self.end - p:
            after = self.plausible_after(p + f.length)
            if after:
                return p + f.length
            if after is None:
                self.stalled = True
                return p
        buf = self.buf
        for q in range(p + 1, self.end):
            if buf[q] not in P.DCP_MAGICS:
                continue
            s, g = self.parse(q)
            if s == P.OK:
                if buf[q + 1] in P.KNOWN_OPCODES:
                    after = self.plausible_after(q + g.length)
                    if after is not False:
                        self.unverified = after is None
                        return q
            elif s == P.INCOMPLETE and not self.final:
                if self.end - q < P.HEADER_SIZE or buf[q + 1] in P.KNOWN_OPCODES:
                    self.unverified = True
                    return q
        self.unverified = not self.final     # whatever the next chunk starts with is unproven
        return self.end

    def count(self, pos, limit, stop):
        """First pass: frame starts, damaged regions, and the first failure (strict); no
        frame is taken at or past ``stop``."""
        starts, regions, failure, start = [], [], None, pos
        while len(starts) < limit and pos < stop:
            s, f = self.parse(pos)
            if self.unverified and pos == start and s != P.INCOMPLETE:
                # still resynchronising: only a frame start that resync would accept will do
                if s != P.OK or self.buf[pos + 1] not in P.KNOWN_OPCODES:
                    s = _PR.RESYNC
                else:
                    after = self.plausible_after(pos + f.length)
                    if after is None:
                        break
                    if after is False:
                        s = _PR.RESYNC
            if s == P.OK:
                self.unverified = False
                starts.append((pos, f))
                pos += f.length
                continue
            if s == P.INCOMPLETE:
                if not self.final or pos == self.end:
                    break
                s = _PR.TRUNCATED
                f.a = self.end - pos
                f.b = f.length if self.end - pos >= P.HEADER_SIZE else P.HEADER_SIZE
            if not self.skip:
                failure = (pos, int(s), f.a, f.b)
                break
            self.unverified = False
            q = self.resync(pos, s, f)
            if self.stalled:
                self.stalled = False
                break
            regions.append((pos, q - pos, int(s), f.a, f.b))
            pos = q
            if self.unverified:          # the next chunk decides whether a frame starts here
                break
        return starts, pos, regions, failure


def scan_buffer(buf, request: ScanRequest, out: Columns | None = None,
                first: int = 0) -> ScanResult:
    """Scan ``buf[request.start:]`` as ``request`` says; see ``contract`` for the fields of
    the request and of the result. The rows go to ``out`` from its row ``first`` when
    given (its rows before ``first`` kept); a frame limit that fits the rows ``out``
    holds from ``first`` never grows it."""
    buf = memoryview(buf).cast("B")
    start, names, view_bits = request.start, tuple(request.names), request.view_bits
    if not 0 <= start <= len(buf):
        raise ValueError(f"start {start} outside the buffer of {len(buf)} bytes")
    if not 0 <= view_bits <= 31:
        raise ValueError(f"view_bits {view_bits} outside 0..31")
    if not 0 <= request.base <= 2**64 - 1 - len(buf):
        raise ValueError(f"base {request.base} puts offsets outside 0..2**64-1")
    viewed = tuple(name for name, pair in S.BINARY.items()
                   if view_bits and set(pair) <= set(names))
    if out is not None and (out.names != names or not set(viewed) <= set(out.viewed)):
        raise ValueError("the output holds other columns than the request names")
    if out is None and first:
        raise ValueError("a first row needs an output")
    if out is not None and not 0 <= first <= out.rows:
        raise ValueError(f"first row {first} outside the {out.rows} rows of the output")
    walk = _Walk(buf, request.collections, request.skip, request.final,
                 request.max_frame_size, request.unverified)
    limit = request.max_frames if request.max_frames >= 0 else float("inf")
    stop = len(buf) if request.stop < 0 else request.stop
    starts, consumed, regions, failure = walk.count(start, limit, stop)
    if failure:
        return ScanResult(0, start, {}, np.zeros(0, np.uint8), [], False, None, failure)
    n = len(starts)
    if out is None:
        out = Columns(names, n, viewed)
    out.reserve(first + n, first)
    arrays, kinds, views = out.arrays(first + n)
    arrays = {name: column[first:] for name, column in arrays.items()}
    kinds = kinds[first:]
    views = {name: view[first:] for name, view in views.items()}
    for array in arrays.values():
        array[:] = 0
    for i, (pos, f) in enumerate(starts):
        kinds[i] = f.kind
        for name, value in _row(buf, pos, f, request.base).items():
            if name in arrays:
                arrays[name][i] = value
    if view_bits:
        found = _binary_views(buf, starts, names, view_bits)
        if found is not None:
            for name in viewed:
                views[name][:] = found[name]
        views = None if found is None else {name: views[name] for name in viewed}
    else:
        views = None
    return ScanResult(n, consumed, arrays, kinds, regions, walk.unverified, views)


class Columns:
    """The output memory of a scan: ``rows`` rows of the columns ``names``, of the frame
    kinds and of the binary-view structs of the pairs ``viewed`` (names of
    ``schema.BINARY``). ``scan_buffer`` fills it from a given row (growing it when the
    frames need more rows)."""

    def __init__(self, names, rows, viewed=()):
        if rows < 0:
            raise ValueError("negative rows")
        if not set(viewed) <= set(S.BINARY):
            raise ValueError("unknown columns or views")
        self.names, self.viewed, self.rows = tuple(names), tuple(viewed), 0
        self._columns = {name: np.empty(0, S.DTYPES[name]) for name in self.names}
        self._kinds = np.empty(0, np.uint8)
        self._views = {name: np.empty((0, 16), np.uint8) for name in self.viewed}
        self.reserve(rows, 0)

    def reserve(self, rows, keep):
        """Room for at least ``rows`` rows, the first ``keep`` of every part kept."""
        if rows <= self.rows:
            return
        if not 0 <= keep <= self.rows:
            raise ValueError("keep outside the rows held")

        def grown(a):
            b = np.empty((rows, *a.shape[1:]), a.dtype)
            b[:keep] = a[:keep]
            return b
        self._columns = {name: grown(a) for name, a in self._columns.items()}
        self._kinds = grown(self._kinds)
        self._views = {name: grown(a) for name, a in self._views.items()}
        self.rows = rows

    def put(self, row, other, first, count):
        """Copy rows ``first ... first + count`` of every part of ``other`` (a Columns of
        the same columns and views, or this one: overlapping rows are moved) to rows
        ``row ...`` of this one."""
        if other.names != self.names or other.viewed != self.viewed:
            raise ValueError("put: the Columns hold other parts")
        if (row < 0 or first < 0 or count < 0 or row + count > self.rows
                or first + count > other.rows):
            raise ValueError("put: rows outside the Columns")
        columns, kinds, views = self.arrays(self.rows)
        theirs, their_kinds, their_views = other.arrays(other.rows)
        for name, column in columns.items():
            column[row:row + count] = theirs[name][first:first + count]
        kinds[row:row + count] = their_kinds[first:first + count]
        for name, view in views.items():
            view[row:row + count] = their_views[name][first:first + count]

    def arrays(self, count):
        """The first ``count`` rows as numpy arrays: the columns by name, the kinds, and
        the views by name (``(count, 16)`` uint8)."""
        if not 0 <= count <= self.rows:
            raise ValueError("count outside the rows held")
        return ({name: a[:count] for name, a in self._columns.items()}, self._kinds[:count],
                {name: a[:count] for name, a in self._views.items()})

    def finish(self, count):
        """``arrays(count)``; the compiled core also gives back the memory past them."""
        return self.arrays(count)


def _binary_views(buf, frames, names, bits):
    """The key and value views of ``frames`` (``(pos, frame)`` pairs) for the pairs in
    ``names``, or None when a value is longer than a data buffer window."""
    pairs = {name: pair for name, pair in S.BINARY.items() if set(pair) <= set(names)}
    starts = np.zeros((len(pairs), len(frames)), np.uint64)
    lengths = np.zeros((len(pairs), len(frames)), np.int64)
    for i, (pos, f) in enumerate(frames):
        row = _row(buf, pos, f, 0)
        for j, (off, length) in enumerate(pairs.values()):
            if off in row:
                starts[j, i], lengths[j, i] = row[off], row[length]
    if lengths.size and lengths.max() >= 1 << bits:
        return None
    out = np.zeros((len(pairs), 16 * len(frames)), np.uint8)
    views(buf, starts, lengths, out, bits)
    return {name: out[j].reshape(-1, 16) for j, name in enumerate(pairs)}


def _row(buf, pos, f, base):
    """Every column a frame carries, by name."""
    magic, opcode, _, _, datatype, vbs, body, opaque, cas = _HEADER.unpack_from(buf, pos)
    kind = P.KINDS[f.kind]
    row = dict(offset=base + pos, magic=magic, opcode=opcode, datatype=datatype,
               opaque=opaque, cas=cas, body_len=body, framing_len=f.fel,
               extras_len=f.extlen)
    if kind.response:
        row["status"] = vbs
    elif _VBUCKET[f.kind]:
        row["vbucket"] = vbs
    extras = pos + P.HEADER_SIZE + f.fel
    value = extras + f.extlen + f.keylen
    if kind.key[1]:
        row["key_offset"] = base + extras + f.extlen + f.prefix
        row["key_len"] = f.keylen - f.prefix
    if kind.value[1]:
        row["value_offset"] = base + value
        row["value_len"] = f.value_len
    if f.prefix:
        row["collection_id"] = f.cid
    if f.sid:
        row["stream_id"] = f.sid
    if f.server_us:
        row["server_duration_us"] = f.server_us
    for fld in kind.fields:
        at = (value if fld.base == P.VALUE else extras) + fld.offset
        row[fld.column] = _LOAD[fld.width].unpack_from(buf, at)[0]
    return row


def sniff_collections(buf, start):
    """Collections on or off, judged from the handshake and stream messages in ``buf``."""
    buf = memoryview(buf).cast("B")
    if not 0 <= start <= len(buf):
        raise ValueError(f"start {start} outside the buffer of {len(buf)} bytes")
    pos, end, hello_request = start, len(buf), None
    while end - pos >= P.HEADER_SIZE:
        magic, opcode, keylen, extlen, _, vbs, body, _, _ = _HEADER.unpack_from(buf, pos)
        if magic not in P.DCP_MAGICS or P.HEADER_SIZE + body > end - pos:
            break
        fel, keylen = (keylen >> 8, keylen & 0xFF) if magic in P.ALT_MAGICS else (0, keylen)
        if fel + extlen + keylen > body:
            break
        response = magic in P.RESPONSE_MAGICS
        if opcode == P.Opcode.HELLO:
            v = pos + P.HEADER_SIZE + fel + extlen + keylen
            features = {_U16.unpack_from(buf, k)[0]
                        for k in range(v, pos + P.HEADER_SIZE + body - 1, 2)}
            has = P.FEATURE_COLLECTIONS in features
            if response:
                if vbs == 0:
                    return has
            else:
                hello_request = has
        elif hello_request is None and not response:
            if opcode == P.Opcode.OPEN and extlen == 8:
                flags = _U32.unpack_from(buf, pos + P.HEADER_SIZE + fel + 4)[0]
                if flags & P.OPEN_FLAG_COLLECTIONS:
                    return True
            elif opcode in P.COLLECTIONS_ONLY:
                return True
        pos += P.HEADER_SIZE + body
    return hello_request is True


def gather(buf, starts, bounds, out):
    """Copy ``buf[starts[i]:starts[i] + bounds[i+1] - bounds[i]]`` to ``out[bounds[i]:]``."""
    buf, out = memoryview(buf).cast("B"), memoryview(out).cast("B")
    if len(bounds) != len(starts) + 1 or bounds[0] < 0 or len(out) < bounds[-1]:
        raise ValueError("gather: bounds do not match")
    for i, start in enumerate(starts.tolist()):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        if hi < lo or start + hi - lo > len(buf):
            raise ValueError(f"gather: range {i} outside the buffer")
        out[lo:hi] = buf[start:start + hi - lo]


def views(buf, starts, lengths, out, window_bits):
    """Arrow binary-view structs for slices of ``buf``: row j of ``out`` (16 bytes a slice)
    describes row j of ``starts``/``lengths`` (1-D arrays are one row); data buffer index =
    start >> window_bits."""
    buf = memoryview(buf).cast("B")
    starts, lengths, out = np.atleast_2d(starts), np.atleast_2d(lengths), np.atleast_2d(out)
    mask = (1 << window_bits) - 1
    if lengths.shape != starts.shape or out.shape != (starts.shape[0], 16 * starts.shape[1]):
        raise ValueError("views: sizes do not match")
    rows = [list(zip(s.tolist(), n.tolist())) for s, n in zip(starts, lengths)]
    for i in range(starts.shape[1]):
        for j, row in enumerate(rows):
            start, size = row[i]
            if size < 0 or start + size > len(buf):
                raise ValueError(f"views: range {i} outside the buffer")
            if size > mask:
                raise ValueError(f"views: range {i} longer than a window")
            view = bytearray(16)
            struct.pack_into("<i", view, 0, size)
            if size <= 12:
                view[4:4 + size] = buf[start:start + size]
            else:
                view[4:8] = buf[start:start + 4]
                struct.pack_into("<ii", view, 8, start >> window_bits, start & mask)
            out[j, 16 * i:16 * i + 16] = np.frombuffer(view, np.uint8)


def room(n):
    """``n`` bytes of writable, uninitialised memory (a buffer-protocol object)."""
    if n < 0:
        raise ValueError("negative size")
    return np.empty(n, np.uint8)


def validity_bitmaps(kinds, carried, wide=True):
    """Arrow validity bitmaps (little-endian bit order) of groups of frame kinds: bit i of
    row g is set where ``carried[g, kinds[i]]`` is not 0 (bits past the rows are 0). Also
    the state of each group: 2 every row valid (so too with no rows), 0 none, 1 some.
    (``wide`` chooses between the compiled core's two paths; numpy has one.)"""
    kinds = np.asarray(kinds, np.uint8)
    carried = np.asarray(carried, np.uint8) != 0
    if len(carried) and carried.shape[1] > 256:
        raise ValueError("more than 256 kinds")
    if kinds.size and kinds.max() >= carried.shape[1]:
        raise ValueError(f"kind {int(kinds.max())} outside 0..{carried.shape[1] - 1}")
    valid = carried[:, kinds]
    count = valid.sum(axis=1)
    state = np.where(count == len(kinds), 2, np.where(count == 0, 0, 1)).astype(np.int8)
    bits = np.ascontiguousarray(np.packbits(valid, axis=1, bitorder="little"))
    return state, bits.reshape(len(carried), (len(kinds) + 7) // 8)

