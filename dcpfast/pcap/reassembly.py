"""TCP reassembly: each connection direction's segments in sequence order, then scanned.

A ``Direction`` takes the segments of one direction in arrival order, keeps retransmitted
and overlapping bytes once (the first copy wins), holds segments that arrive early until
the hole before them fills (or gives up on it: a gap), and scans what is in order with
the DCP scan core, resuming across flushes.

Held segments wait in a heap by stream offset; when the hole fills, a sweep over them
in offset order takes each byte from the earliest-arrived segment that holds it (a
second heap, by arrival). Every segment enters and leaves each heap once, so any order
of arrival costs O(n log n).
"""

from __future__ import annotations

import heapq

import numpy as np

from .. import _core as core
from .. import packets as PK
from .. import protocol
from ..batch import keep_columns, scan_view
from ..buffers import byte_view
from ..errors import DcpFormatError, SkippedRegion, describe, is_truncated, text
from ..io.resume import Resume
from ..options import SNIFF_BYTES, ScanOptions
from .batch import CLIENT_TO_SERVER, SERVER_TO_CLIENT, CaptureBatch, Connection

#: Out-of-order bytes held per direction before the hole in front of them is a gap.
REORDER_WINDOW = 16 * 1024 * 1024
#: What each held segment counts against ``REORDER_WINDOW`` besides its bytes: its
#: bookkeeping, so that tiny segments cannot hold unbounded memory.
HELD_SEGMENT_COST = 1024
#: Out-of-order bytes held by all the directions of a capture together (counted as for
#: ``REORDER_WINDOW``); past it, the direction taking a segment gives up its holes.
REORDER_BUDGET = 256 * 1024 * 1024


class Run:
    """Contiguous bytes of one direction: pieces ``src[starts[i]:][:lengths[i]]`` that end
    at stream offsets ``ends[i]``, each with its packet's capture time."""

    __slots__ = ("src", "starts", "lengths", "ends", "ts")

    def __init__(self, src, starts, lengths, ends, ts):
        self.src, self.starts, self.lengths, self.ends, self.ts = src, starts, lengths, ends, ts

    @property
    def lo(self) -> int:
        return int(self.ends[0] - self.lengths[0])

    @property
    def hi(self) -> int:
        return int(self.ends[-1])

    def cut(self, lo, hi) -> Run:
        """The part of this run between stream offsets ``lo`` and ``hi`` (non-empty).

        The pieces are contiguous (each starts where the one before ends), so the ones
        kept are found by bisection: the cost is that of the pieces kept.
        """
        a = int(np.searchsorted(self.ends, lo, side="right"))
        b = min(int(np.searchsorted(self.ends, hi, side="left")) + 1, len(self.ends))
        starts, lengths = self.starts[a:b].copy(), self.lengths[a:b].copy()
        ends, ts = self.ends[a:b].copy(), self.ts[a:b]
        head = lo - int(ends[0] - lengths[0])
        if head > 0:
            starts[0] += head
            lengths[0] -= head
        tail = int(ends[-1]) - hi
        if tail > 0:
            lengths[-1] -= tail
            ends[-1] = hi
        return Run(self.src, starts, lengths, ends, ts)

    def owned(self) -> Run:
        """A copy that holds its own bytes and arrays (the capture chunk and the walked
        rows it points into go away)."""
        bounds = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(self.lengths, out=bounds[1:])
        data = np.empty(int(bounds[-1]), np.uint8)
        core.scan.gather(self.src, self.starts.astype(np.uint64), bounds, data)
        return Run(data, bounds[:-1].copy(), self.lengths.copy(), self.ends.copy(),
                   self.ts.copy())


class Held:
    """What the directions of one capture hold out of order, together."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes = 0


def _address(key: bytes, at: int) -> str:
    import ipaddress
    return str(ipaddress.ip_address(key[at:at + (4 if key[36] == 4 else 16)]))


class Direction:
    """Reassembly and scanning state of one direction of one TCP connection.

    ``origin`` is the sequence number of stream offset 0 (None until the first segment);
    ``next`` the offset of the first byte not yet in order. In-order bytes wait in
    ``parts`` (runs and gap markers) until a flush scans them after ``tail``, the bytes
    the previous scan left (an incomplete frame).
    """

    def __init__(self, key: bytes, dport: int, closed, *, ports, options: ScanOptions,
                 counters: dict, held: Held):
        sport = int.from_bytes(key[32:34], "big")
        self.connection = Connection(_address(key, 0), sport, _address(key, 16), dport,
                                     CLIENT_TO_SERVER if dport in ports else SERVER_TO_CLIENT)
        self.options, self.counters, self.held = options, counters, held
        self.closed = closed
        self.origin: int | None = None
        self.next = 0
        self.fin_at = None
        self.parts: list = []          # runs, and (lo, hi) gap markers
        #: Segments waiting for the hole before them: a heap of (lo, arrival, run, what
        #: it counts against ``REORDER_WINDOW``).
        self.pending: list[tuple[int, int, Run, int]] = []
        #: What they count against ``REORDER_WINDOW``.
        self.pending_bytes = 0
        self.arrivals = 0              # segments (runs) taken so far: their arrival order
        #: The scan's state between flushes: the unscanned tail, its offset, and whether
        #: the next scan starts at no known frame boundary (one thread: the capture's
        #: directions are scanned in turn, each a step's bytes).
        self.resume = Resume(options.with_columns("offset", "body_len").but(threads=1))
        self.tail_ends = np.empty(0, np.int64)     # where the tail's packets end ...
        self.tail_ts = np.empty(0, np.int64)       # ... and their capture times
        self.resync = False          # looking for the first frame after a gap or mid-stream
        self.gap_end: int | None = None     # where the last gap ended, till a frame is found

    def start(self, origin):
        self.origin, self.next = origin, 0

    def offsets(self, seqs) -> np.ndarray:
        """Stream offsets of 32-bit sequence numbers, unwrapped around ``next``."""
        assert self.origin is not None
        rel = (seqs.astype(np.uint32) - np.uint32(self.origin)).astype(np.uint32)
        delta = (rel - np.uint32(self.next & PK.TCP_SEQ_MASK)).view(np.int32)
        return self.next + delta.astype(np.int64)

    def finished(self) -> bool:
        return self.fin_at is not None and self.next >= self.fin_at and not self.pending

    # -- reassembly ----------------------------------------------------------------------

    def data(self, buf, ts, seqs, starts, lengths):
        """Take segments (arrival order) whose payloads lie in ``buf``."""
        keep = lengths > 0
        if not keep.all():
            ts, seqs, starts, lengths = ts[keep], seqs[keep], starts[keep], lengths[keep]
        if not len(ts):
            return
        if self.origin is None:
            if self.closed is not None:          # late copies of a finished connection
                origin, end = self.closed
                rel = (seqs.astype(np.uint32) - np.uint32(origin)).astype(np.int64)
                late = rel + lengths <= end
                ts, seqs, starts, lengths, rel = (a[~late] for a in (ts, seqs, starts,
                                                                     lengths, rel))
                if not len(ts):
                    return
            if self.closed is not None and 0 <= rel[0] - self.closed[1] <= REORDER_WINDOW:
                # a direction closed to make room goes on: its offsets, after a gap if any
                self.start(self.closed[0])
                self.next = self.closed[1]
                self.resume.restart(self.next)
            else:
                self.start(int(seqs[0]))        # the capture began inside this stream
            self.resume.unverified = self.resync = True
        off = self.offsets(seqs)
        ends = off + lengths
        if off[0] < 0 or (off < 0).any():          # bytes before the SYN or capture start
            early = ends <= 0
            cut = np.maximum(0, -off)
            starts, lengths, off = starts + cut, lengths - cut, off + cut
            ts, starts, lengths, off, ends = (a[~early] for a in (ts, starts, lengths, off,
                                                                  ends))
            if not len(ts):
                return
        if not self.pending and off[0] == self.next and (off[1:] == ends[:-1]).all():
            self.parts.append(Run(buf, starts, lengths, ends, ts))      # in order
            self.next = int(ends[-1])
            return
        runs = np.flatnonzero(off[1:] != ends[:-1]) + 1
        for a, b in zip([0, *runs.tolist()], [*runs.tolist(), len(off)]):
            self._take(Run(buf, starts[a:b], lengths[a:b], ends[a:b], ts[a:b]))

    def _take(self, run):
        """Take a run of contiguous segments (consecutive in arrival order)."""
        if run.hi <= self.next:
            return                                   # all retransmitted
        if not self.pending and run.lo <= self.next:
            if run.lo < self.next:
                run = run.cut(self.next, run.hi)
            self.parts.append(run)                   # in order, nothing held to weigh
            self.next = run.hi
            return
        self.arrivals += 1
        cost = 0
        if run.lo > self.next:
            run = run.owned()                        # it waits past this chunk
            cost = run.hi - run.lo + HELD_SEGMENT_COST
            self.pending_bytes += cost
            self.held.bytes += cost
        heapq.heappush(self.pending, (run.lo, self.arrivals, run, cost))
        if run.lo <= self.next:
            self._drain()
        while self.pending and (self.pending_bytes > REORDER_WINDOW or
                                self.held.bytes > REORDER_BUDGET):
            self._gap()

    def _drain(self):
        """Move the held bytes from ``next`` on into ``parts`` while they are contiguous:
        each byte from the earliest-arrived segment that holds it."""
        at, active = self.next, list[tuple[int, Run]]()       # (arrival, run) over ``at``
        while True:
            while self.pending and self.pending[0][0] <= at:
                _, arrival, run, cost = heapq.heappop(self.pending)
                self.pending_bytes -= cost
                self.held.bytes -= cost
                if run.hi > at:
                    heapq.heappush(active, (arrival, run))
            while active and active[0][1].hi <= at:
                heapq.heappop(active)
            if not active:
                break
            first = active[0][1]                     # the first copy of the bytes at ``at``
            to = min(first.hi, self.pending[0][0]) if self.pending else first.hi
            self.parts.append(first.cut(at, to))
            at = to
        self.next = at

    def _gap(self, to=None):
        """Give up on the bytes before the first held run (or before ``to``)."""
        lo = self.pending[0][0] if to is None else to
        self.parts.append((self.next, lo))
        self.counters["gaps"] += 1
        self.next = lo
        self._drain()

    # -- scanning ------------------------------------------------------------------------

    def flush(self, final):
        """Scan what is in order; ``final``: the direction ends here."""
        if final:
            while self.pending:
                self._gap()
            if self.fin_at is not None and self.next < self.fin_at:
                self._gap(self.fin_at)
        parts, self.parts, group = self.parts, [], []
        for part in parts:
            if isinstance(part, tuple):
                yield from self._scan(group, part, False)
                group = []
            else:
                group.append(part)
        yield from self._scan(group, None, final)

    def _scan(self, runs, gap, final):
        resume, opts = self.resume, self.options
        tail = resume.take_tail()
        size = len(tail) + sum(s.hi - s.lo for s in runs)
        if not size and gap is None:
            return
        buf = np.empty(size, np.uint8)
        buf[:len(tail)] = tail
        at = len(tail)
        for s in runs:
            bounds = np.empty(len(s.lengths) + 1, np.int64)
            bounds[0] = at
            np.cumsum(s.lengths, out=bounds[1:])
            bounds[1:] += at
            core.scan.gather(s.src, s.starts.astype(np.uint64), bounds, buf)
            at = int(bounds[-1])
        ends = np.concatenate([self.tail_ends, *(s.ends for s in runs)])
        stamps = np.concatenate([self.tail_ts, *(s.ts for s in runs)])
        base, ended = resume.base, final or gap is not None
        # decide later, on more of a server's frames; a client's are decided now (its
        # handshake says; its requests carry no keys), for its requests to be yielded
        # before the server's answers
        if resume.options.collections is None and not ended and size < SNIFF_BYTES and \
                self.connection.direction != CLIENT_TO_SERVER:
            resume.tail, self.tail_ends, self.tail_ts = buf, ends, stamps
            return
        if resume.options.collections is None:
            resume.options = resume.options.but(collections=self._sniff(buf, ended))
        skip = opts.errors == "skip" or self.resync
        batch = resume.scan(buf, final=ended and skip, errors="skip" if skip else "strict")
        batch.errors = list(batch.errors)
        # a scan told that the data end here calls the frame they cut short truncated: it
        # is a frame the gap (or the capture's end) cut, neither damage nor an error
        cut = batch.errors.pop() if ended and batch.errors \
            and _cut_at(batch.errors[-1], base + size) else None
        if self.gap_end is not None and (len(batch) or batch.errors):
            first_region = batch.errors[0] if batch.errors else None
            if first_region is not None and first_region.offset == self.gap_end \
                    and first_region.reason == _RESYNC:   # the rest of a frame the gap cut
                batch.errors[0] = first_region._replace(reason=text("frame_cut_by_gap"))
            self.gap_end = None
        if self.resync and len(batch):
            self.resync = False
            if opts.errors == "strict":
                first = int(batch["offset"][0])
                for region in batch.errors:
                    if region.offset > first:
                        raise DcpFormatError(region.offset, region.reason)
        left = size - batch.consumed
        if ended:
            why = text("frame_cut_by_gap" if gap is not None else "frame_cut_by_end")
            if cut is not None:
                batch.errors.append(cut._replace(reason=why))
            elif left:
                batch.errors.append(SkippedRegion(base + batch.consumed, left, why))
            if gap is not None:
                lo, hi = gap
                batch.errors.append(SkippedRegion(lo, hi - lo,
                                                  text("capture_gap", length=hi - lo)))
                resume.restart(hi)
                self.resync, self.gap_end = True, hi
            else:
                resume.restart(base + size, unverified=resume.unverified)
            self.tail_ends = self.tail_ts = np.empty(0, np.int64)
        else:
            keep = ends > resume.base
            self.tail_ends, self.tail_ts = ends[keep], stamps[keep]
        if not len(batch) and not batch.errors:
            return
        frame_ends = batch["offset"].astype(np.int64) + protocol.HEADER_SIZE + batch["body_len"]
        times = stamps[np.searchsorted(ends, frame_ends - 1, side="right")] \
            if len(batch) else np.empty(0, np.int64)
        if opts.columns != resume.options.columns:
            keep_columns(batch, opts.columns)
        yield CaptureBatch(batch, self.connection, times)

    def _sniff(self, buf, ended) -> bool:
        """Collections on or off, judged from the first frame of ``buf`` on (past the
        bytes before it when the stream was joined mid-way)."""
        first = 0
        if self.resume.unverified:
            probe, _ = scan_view(buf, byte_view(buf), ScanOptions(
                False, ("offset",), "skip", self.options.max_frame_size), max_frames=1,
                final=ended, unverified=True)
            first = int(probe["offset"][0]) if len(probe) else len(buf)
        return bool(core.scan.sniff_collections(byte_view(buf), first))


#: The scan's reason for the bytes it stepped over to find a frame.
_RESYNC = describe(protocol.Problem.RESYNC)


def _cut_at(region: SkippedRegion, end: int) -> bool:
    """Whether ``region`` is a frame that the end of the data at stream offset ``end`` cut
    short (the scan's truncated frame)."""
    return region.offset + region.length == end and is_truncated(region.reason)
