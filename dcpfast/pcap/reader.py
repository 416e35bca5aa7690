"""Packet captures: DCP frames out of pcap/pcapng files of Couchbase traffic.

``read_pcap`` walks the capture's records in a compiled loop (``_core.pcap``), hands each
TCP segment to its connection direction (``reassembly``), and yields the frames each
direction's byte stream holds. Every ``CaptureBatch`` holds frames of one connection
direction, with the capture timestamp of the packet that carried each frame's last byte.
Of a connection, the client's frames come first: the client-to-server frames of the
bytes read so far are yielded before the server-to-client frames of the same bytes, so
that a server's answer is never yielded before the request it follows (in capture time)
unless TCP reassembly still holds that request behind a hole.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator

import numpy as np

from .. import _core as core
from .. import packets as PK
from .. import protocol
from ..arrays import unique as distinct
from ..buffers import recycled
from ..errors import CaptureFormatError, Reporter, SkippedRegion, describe, text
from ..io.compression import read_into, zero_for
from ..io.dumps import MIN_BATCH_BYTES
from ..io.kinds import is_capture
from ..io.sources import checked_size
from ..options import ScanOptions
from .batch import CLIENT_TO_SERVER, CaptureBatch
from .reassembly import Direction, Held

#: Capture bytes read per step. Each step's reassembled bytes are scanned while they are
#: still in the CPU cache, which makes steps of a few MiB faster than larger ones.
CAPTURE_BATCH_BYTES = 8 * 1024 * 1024
_ROWS = 1 << 14                # TCP segments per walker call
_CONTROL = PK.TCP_SYN | PK.TCP_FIN | PK.TCP_RST
_CLOSED_MEMORY = 4096          # finished directions remembered to drop late retransmissions
_NO_LINK = -1                  # the link type of a damaged interface block: none is read
#: Connection directions open at once; past it, the least recently active one is closed
#: (its frames so far decoded, what follows it read as a connection joined mid-stream).
MAX_DIRECTIONS = 1 << 16
#: Damaged capture records listed in ``problems``; the others are only counted.
MAX_PROBLEMS = 1000


def read_pcap(source, ports: int | Iterable[int] = (PK.DCP_PORT,), *,
              collections: bool | None = None, columns=None,
              errors: str = "skip", batch_bytes: int = CAPTURE_BATCH_BYTES,
              max_frame_size: int = protocol.DEFAULT_MAX_FRAME_SIZE) -> CaptureReader:
    """Decode the DCP traffic of a pcap or pcapng capture, one connection direction a batch.

    ``source`` is a path or a binary file object. TCP segments to or from ``ports`` (a port
    number or several) are reassembled per direction (sequence order, retransmitted and
    overlapping bytes taken once, first copy wins); bytes the capture lacks are reported as
    a gap in ``batch.errors`` and decoding resumes at the next plausible frame after it, as
    it does on a connection whose start was not captured. ``collections``, ``columns``,
    ``errors`` and ``max_frame_size`` are as for ``dcpfast.scan``; ``collections=None`` is
    decided per direction on its first MiB (a client's on what it sent by the first time
    its frames are yielded). ``errors`` defaults to ``"skip"``, unlike the dump
    readers': a capture is lossy by nature (packets dropped or cut by the snap length,
    a capture stopped mid-packet), and skip mode keeps every frame the capture holds
    whole, listing what it lost. ``errors="strict"`` raises for malformed DCP
    frames and for a damaged capture file, but gaps and mid-stream starts are always
    reported, never raised: they are capture loss. The capture is read ``batch_bytes`` at a
    time; memory stays near that plus, per open direction, its last incomplete frame and at
    most ``REORDER_WINDOW`` of out-of-order data. Port 11207 carries TLS, which cannot be
    decoded: asking for it raises ``ValueError``; its traffic seen in the capture brings a
    warning.
    """
    return CaptureReader(source, ports, collections=collections, columns=columns,
                         errors=errors, batch_bytes=batch_bytes, max_frame_size=max_frame_size)


class CaptureReader(Iterator):
    """The iterator ``read_pcap`` returns; after iteration it tells what it saw.

    ``counters``: packets, TCP segments, packets that are not IPv4/IPv6 TCP, IP
    fragments (not reassembled), packets whose headers the capture cut short, segments
    of other ports, gaps, and damaged pcapng blocks stepped over. ``problems``:
    capture-level damage found in skip mode, as ``SkippedRegion`` entries whose offsets
    are positions in the capture file (the first ``MAX_PROBLEMS`` damaged blocks;
    ``problems_not_listed`` counts the rest).
    """

    def __init__(self, source, ports, *, collections, columns, errors, batch_bytes,
                 max_frame_size):
        ports = tuple(int(p) for p in ((ports,) if isinstance(ports, int) else ports))
        if PK.DCP_TLS_PORT in ports:
            raise ValueError(f"port {PK.DCP_TLS_PORT} carries TLS: encrypted DCP cannot be "
                             f"decoded from a capture (capture port {PK.DCP_PORT}, or decrypt "
                             "first)")
        if not ports or not all(0 < p < 65536 for p in ports):
            raise ValueError(f"ports must be TCP port numbers, not {ports!r}")
        options = ScanOptions.of(collections=collections, columns=columns, errors=errors,
                                 max_frame_size=max_frame_size)
        batch_bytes = checked_size("batch_bytes", batch_bytes, MIN_BATCH_BYTES)
        self.ports = ports
        self.counters = dict.fromkeys(
            PK.WALK_COUNTERS + ("other_ports", "gaps", "damaged_blocks"), 0)
        self.problems: list[SkippedRegion] = []
        self.problems_not_listed = 0
        self._damage = Reporter(errors, self.problems, CaptureFormatError)
        self._options = options
        self._batch_bytes = batch_bytes
        self._tls_warned = False
        self._gen = self._run(source)

    def __next__(self) -> CaptureBatch:
        return next(self._gen)

    def __iter__(self) -> CaptureReader:
        return self

    # -- capture records -------------------------------------------------------------------

    def _run(self, source):
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as f:
                yield from self._read(f)
        elif hasattr(source, "readinto") or hasattr(source, "read"):
            yield from self._read(source)
        else:
            raise TypeError(f"cannot read a capture from {type(source).__name__}")

    def _read(self, f):
        reader = _Chunks(f, self._batch_bytes)
        buf = reader.next(PK.PCAP_HEADER_SIZE)
        if not is_capture(bytes(buf[:4])):
            raise CaptureFormatError(0, text("not_a_capture"))
        self._directions: dict[bytes, Direction] = {}      # least recently active first
        self._closed: dict[bytes, tuple[int, int]] = {}
        self._held = Held()
        cols = (np.empty(_ROWS, np.int64), np.empty((_ROWS, PK.CONNECTION_KEY_SIZE), np.uint8),
                np.empty(_ROWS, np.uint32), np.empty(_ROWS, np.uint8),
                np.empty(_ROWS, np.int64), np.empty(_ROWS, np.int32))
        counters = np.zeros(len(PK.WALK_COUNTERS), np.int64)
        magic = int.from_bytes(bytes(buf[:4]), "little")
        fmt, pos = (1, 0) if magic == PK.PCAPNG_SECTION else (0, PK.PCAP_HEADER_SIZE)
        self._big, self._links, self._tsres, self._tsoff = False, [], [], []
        if fmt == 0:
            if len(buf) < PK.PCAP_HEADER_SIZE:
                raise CaptureFormatError(0, text("pcap_header_cut"))
            self._big = magic not in (PK.PCAP_MAGIC_US, PK.PCAP_MAGIC_NS)
            order = "big" if self._big else "little"
            nanos = int.from_bytes(bytes(buf[:4]), order) == PK.PCAP_MAGIC_NS
            self._links = [int.from_bytes(bytes(buf[20:24]), order) & 0xFFFF]
            self._tsres, self._tsoff = [9 if nanos else 6], [0]
        try:
            while True:
                n, pos, status, detail = core.pcap.walk(
                    buf, pos, fmt, self._big, np.array(self._links, np.int32),
                    np.array(self._tsres, np.uint8), np.array(self._tsoff, np.int64),
                    *cols, counters)
                if n:
                    yield from self._segments(buf, *(c[:n] for c in cols))
                if status == PK.WalkStatus.FULL:
                    continue
                if status == PK.WalkStatus.BLOCK:
                    got = self._block(buf, pos, reader)
                    if got == -1:
                        break
                    if got is not None:
                        pos = got
                        continue
                elif status == PK.WalkStatus.SKIP:         # one damaged block: step over it
                    length = int.from_bytes(bytes(buf[pos + 4:pos + 8]),
                                            "big" if self._big else "little")
                    self.counters["damaged_blocks"] += 1
                    if len(self.problems) < MAX_PROBLEMS or self._damage.mode == "strict":
                        self._damage.report(reader.offset(pos), length,
                                            describe(PK.CaptureProblem(detail)))
                    else:
                        self.problems_not_listed += 1
                    pos += length
                    continue
                elif status == PK.WalkStatus.BAD:
                    self._damage.report(reader.offset(pos), 0, describe(PK.CaptureProblem(detail)))
                    break
                # the end of the chunk, or a record that continues past it
                yield from self._flush_all(final=False)
                if reader.eof:
                    if pos < len(buf):
                        self._damage.report(reader.offset(pos), 0, text(
                            "capture_cut_short", present=len(buf) - pos))
                    break
                buf, pos = reader.more(buf, pos), 0
        finally:
            for name, value in zip(PK.WALK_COUNTERS, counters.tolist()):
                self.counters[name] = value
        yield from self._flush_all(final=True)

    def _block(self, buf, pos, reader):
        """Read the pcapng section header or interface block at ``pos``: where the walk
        goes on, None when the block is not all in ``buf`` yet, -1 when it is damaged."""
        head = bytes(buf[pos:pos + 12])
        if len(head) < 12:
            return None
        if int.from_bytes(head[:4], "little") == PK.PCAPNG_SECTION:
            bom = int.from_bytes(head[8:12], "little")
            if bom not in (PK.PCAPNG_BYTE_ORDER, int.from_bytes(
                    PK.PCAPNG_BYTE_ORDER.to_bytes(4, "little"), "big")):
                self._damage.report(reader.offset(pos), 0, text("pcapng_byte_order"))
                return -1
            self._big = bom != PK.PCAPNG_BYTE_ORDER
            self._links, self._tsres, self._tsoff = [], [], []
        order = "big" if self._big else "little"
        length = int.from_bytes(head[4:8], order)
        if length < 12 or length % 4 or length > PK.MAX_CAPTURE_RECORD:
            self._damage.report(reader.offset(pos), 0, describe(PK.CaptureProblem.BLOCK_LENGTH))
            return -1
        if len(buf) - pos < length:
            return None
        block = bytes(buf[pos:pos + length])
        if int.from_bytes(block[-4:], order) != length:
            self._damage.report(reader.offset(pos), 0, describe(PK.CaptureProblem.BLOCK_TRAILER))
            return -1
        if int.from_bytes(head[:4], order) == PK.PCAPNG_INTERFACE:
            if length < 20:       # it still numbers an interface: one whose packets are not read
                self._damage.report(reader.offset(pos), length,
                                    describe(PK.CaptureProblem.BLOCK_LENGTH))
                self._links.append(_NO_LINK)
                self._tsres.append(6)
                self._tsoff.append(0)
                return pos + length
            code, offset, at = 6, 0, 16
            while at + 4 <= length - 4:
                opt = int.from_bytes(block[at:at + 2], order)
                size = int.from_bytes(block[at + 2:at + 4], order)
                if opt == PK.PCAPNG_OPT_END:
                    break
                value = block[at + 4:at + 4 + size]
                if opt == PK.PCAPNG_OPT_TSRESOL and size >= 1:
                    code = value[0]
                elif opt == PK.PCAPNG_OPT_TSOFFSET and size >= 8:
                    offset = int.from_bytes(value[:8], order, signed=True)
                at += 4 + size + (-size % 4)
            self._links.append(int.from_bytes(block[8:10], order))
            self._tsres.append(code)
            self._tsoff.append(offset)
        return pos + length

    # -- segments to directions ------------------------------------------------------------

    def _segments(self, buf, ts, keys, seqs, flags, starts, lengths):
        """Hand the walked TCP segments of one chunk to their connection directions."""
        sport = (keys[:, 32].astype(np.int32) << 8) | keys[:, 33]
        dport = (keys[:, 34].astype(np.int32) << 8) | keys[:, 35]
        mine = np.zeros(len(ts), bool)
        for port in self.ports:
            mine |= (dport == port) | (sport == port)
        if not self._tls_warned and ((sport == PK.DCP_TLS_PORT) |
                                     (dport == PK.DCP_TLS_PORT)).any():
            self._tls_warned = True
            warnings.warn(f"the capture holds TLS traffic on port {PK.DCP_TLS_PORT}: it is "
                          "encrypted and cannot be decoded", stacklevel=4)
        self.counters["other_ports"] += int(len(mine) - np.count_nonzero(mine))
        mine &= (lengths > 0) | ((flags & _CONTROL) != 0)      # pure ACKs carry nothing
        if not mine.all():
            index = np.flatnonzero(mine)
            ts, keys, seqs, flags, starts, lengths, dport = (
                a[index] for a in (ts, keys, seqs, flags, starts, lengths, dport))
        if not len(ts):
            return
        # the client's side first: a server direction that closes here flushes its
        # client's bytes of the chunk first
        for rows in sorted(_groups(keys), key=lambda rows: int(dport[rows[0]]) not in self.ports):
            yield from self._feed(bytes(keys[rows[0]]), int(dport[rows[0]]), buf, ts[rows],
                                  seqs[rows], flags[rows], starts[rows],
                                  lengths[rows].astype(np.int64))

    def _feed(self, key, dport, buf, ts, seqs, flags, starts, lengths):
        yield from self._room(key)
        control = np.flatnonzero(flags & _CONTROL)
        at = 0
        for i in control.tolist():
            self._direction(key, dport).data(buf, ts[at:i], seqs[at:i], starts[at:i],
                                             lengths[at:i])
            yield from self._control(key, dport, buf, int(ts[i]), int(seqs[i]),
                                     int(flags[i]), int(starts[i]), int(lengths[i]))
            at = i + 1
        if at < len(ts):
            self._direction(key, dport).data(buf, ts[at:], seqs[at:], starts[at:],
                                             lengths[at:])

    def _room(self, key):
        """Close the least recently active directions while ``key`` would open one past
        ``MAX_DIRECTIONS``."""
        while key not in self._directions and len(self._directions) >= MAX_DIRECTIONS:
            yield from self._close(next(iter(self._directions)))

    def _direction(self, key, dport):
        """The direction of ``key``, opened if need be, now the most recently active."""
        d = self._directions.pop(key, None)
        if d is None:
            d = Direction(key, dport, self._closed.pop(key, None), ports=self.ports,
                          options=self._options, counters=self.counters, held=self._held)
        self._directions[key] = d
        return d

    def _control(self, key, dport, buf, ts, seq, flags, start, length):
        one = (np.array([ts], np.int64), np.array([seq], np.uint32),
               np.array([start], np.int64), np.array([length], np.int64))
        d = self._directions.get(key)
        if flags & PK.TCP_SYN:
            if d is not None and d.origin is not None and d.origin != (seq + 1) & PK.TCP_SEQ_MASK:
                yield from self._close(key)            # the ports are reused: a new connection
                d = None
            if d is None or d.origin is None:
                d = self._direction(key, dport)
                d.start((seq + 1) & PK.TCP_SEQ_MASK)
            one[1][0] = (seq + 1) & PK.TCP_SEQ_MASK
        d = self._direction(key, dport)
        d.data(buf, *one)
        if flags & PK.TCP_RST:
            yield from self._close(key)
        elif flags & PK.TCP_FIN:
            if d.origin is not None:
                end = np.array([(seq + length) & PK.TCP_SEQ_MASK], np.uint32)
                d.fin_at = int(d.offsets(end)[0])
            if d.finished():
                yield from self._close(key)

    def _close(self, key):
        peer = self._directions.get(_peer(key))
        if peer is not None and peer.connection.direction == CLIENT_TO_SERVER:
            yield from peer.flush(final=False)          # the requests before the answers
        d = self._directions.pop(key)
        yield from d.flush(final=True)
        if d.origin is not None:
            self._closed[key] = (d.origin, d.next)
            while len(self._closed) > _CLOSED_MEMORY:
                del self._closed[next(iter(self._closed))]

    def _flush_all(self, final):
        for key in sorted(self._directions, key=lambda k: self._directions[k].connection
                          .direction != CLIENT_TO_SERVER):        # clients first
            d = self._directions[key]
            if final:
                yield from self._close(key)
            else:
                yield from d.flush(final=False)
                if d.finished():
                    yield from self._close(key)


def _peer(key: bytes) -> bytes:
    """The connection key of the other direction: addresses and ports swapped."""
    return key[16:32] + key[:16] + key[34:36] + key[32:34] + key[36:]


_MIX = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                 0x27D4EB2F165667C5, 0xFF51AFD7ED558CCD], np.uint64)


def _groups(keys) -> list[np.ndarray]:
    """Row indices (in order) of each distinct connection key, first appearance first."""
    words = keys.view(np.uint64)
    hashes = (words * _MIX).sum(axis=1, dtype=np.uint64)
    rest, out = np.arange(len(keys)), list[np.ndarray]()
    while len(rest) and len(out) < 16:           # few connections: peel them one by one
        same = hashes[rest] == hashes[rest[0]]
        out.append(rest[same])
        rest = rest[~same]
    if len(rest):
        _, inverse = distinct(hashes[rest], inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.flatnonzero(np.diff(inverse[order])) + 1
        out += [rest[g] for g in np.split(order, bounds)]
    checked = []
    for rows in out:                              # a hash collision splits by the key itself
        group = keys[rows]
        if (group == group[0]).all():
            checked.append(rows)
            continue
        void = group.view(np.dtype((np.void, PK.CONNECTION_KEY_SIZE))).ravel()
        _, inverse = np.unique(void, return_inverse=True)
        checked += [rows[inverse == g] for g in range(inverse.max() + 1)]
    return checked


class _Chunks:
    """Reads a capture in chunks, carrying the unwalked end of one into the next.

    Every file is read into memory, a regular one too: a mapped file that another process
    truncates would kill this process (SIGBUS) when the walk touched the lost pages.
    """

    def __init__(self, f, size):
        self.f, self.size, self.eof, self.base = f, size, False, 0

    def next(self, want):
        return self._fill(np.empty(0, np.uint8), max(want, self.size))

    def more(self, buf, pos):
        """The rest of ``buf`` from ``pos`` followed by the next chunk of the file."""
        self.base += pos
        # no progress: a record longer than a chunk; twice the room, for it to fit soon
        return self._fill(buf[pos:], self.size if pos else max(self.size, len(buf)))

    def offset(self, pos):
        """File position of ``pos`` in the current chunk."""
        return self.base + pos

    def _fill(self, tail, size):
        buf = recycled(len(tail) + size, np.uint8)
        buf[:len(tail)] = tail
        view, filled = memoryview(buf), len(tail)
        zero_for(self.f, view[filled:])
        while filled < len(buf):
            n = read_into(self.f, view[filled:], zeroed=True)
            if not n:
                self.eof = True
                return buf[:filled]
            filled += n
        return buf
