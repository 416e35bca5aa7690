"""The threaded scan: one buffer's frames decoded by several threads at once, exactly as
one scan finds them (``scanner`` hands ``scan``, ``read`` and ``iter_batches`` the scan
for their thread count; the threads are those of ``dcpfast.threads``).

A large buffer is cut into byte ranges, one a thread. Each range starts at its anchor
(``ranges.anchor``, the algorithm the Spark data source splits files with: the first frame
at or after the cut on the chain a resynchronising scan walks from a little before it) and
is walked, without the GIL, up to the first frame boundary at or past the next range's
anchor.

Every range writes into the batch's columns, sized for the whole buffer, from the first
row of a slot in proportion to its bytes; a thread done walking moves the rows of the
ranges after it down into place as soon as the walks before them are known to chain,
while the other ranges are still walked (measured faster than counting the frames of
every range first and writing each range at its final rows; and, unlike columns of each
range's own, it holds no memory besides the batch's). A range that outgrows its slot
writes the rest into columns of its own.

A range is kept only when the walk before it arrived exactly at its start; one that did
not (damage across a cut, or a value holding frames) is walked again from where the
previous range truly ended. So the columns, the frames, the skipped regions, a strict
scan's error and the resume state are those of a single-threaded scan, whatever the cuts.
"""

from __future__ import annotations

import threading

from .. import _core
from .._core import ScanRequest, ScanResult
from ..batch import Scanner
from ..schema import BINARY
from ..threads import parts_for, run
from .ranges import anchor

#: Bytes a thread scans at least: an input of fewer than twice this is scanned by one
#: thread, a larger one by at most one thread per this many bytes.
RANGE_BYTES = 4 << 20
#: Frames a thread scans at least, as the first frames suggest: the walk reads headers,
#: so its work follows the frames rather than the bytes (a buffer of a few hundred large
#: frames is scanned by one thread: a second would cost more than the whole walk).
RANGE_FRAMES = 16384
#: The least bytes of a piece: a range past the first is walked in pieces (about 16), each
#: moved into place while the other ranges are still walked.
WALK_PIECE_BYTES = 1 << 20
#: How far before a cut the anchor's chain starts (``ranges.anchor``). A wrong anchor costs
#: a second walk of one range, never a wrong result.
THREAD_LEAD_IN_BYTES = 64 << 10
_FIRST_LESS = 0.12          # the first range's share is this much below the others'
_PIECES = 16                # a range past the first is walked in about this many pieces
_SAMPLE_FRAMES = 256        # frames measured to size the columns of the whole buffer ...
_SAMPLE_BYTES = 1 << 20     # ... in at most this many bytes

def scan_result(view, request: ScanRequest, threads: int, *,
                range_bytes: int = RANGE_BYTES, range_frames: int = RANGE_FRAMES,
                lead_in: int = THREAD_LEAD_IN_BYTES, piece_bytes: int = WALK_PIECE_BYTES,
                rows: int | None = None) -> ScanResult:
    """The core's ``scan_buffer(view, request)``, computed by up to ``threads`` threads
    (``range_bytes`` bytes and ``range_frames`` frames a thread at least, walked in pieces
    of at least ``piece_bytes`` past the first range, into ``rows`` rows reserved for the
    whole buffer, or as many as its first frames suggest); a frame limit is walked by one
    thread."""
    start, size = request.start, len(view)
    parts = parts_for(size - start, threads, range_bytes)
    if parts < 2 or request.max_frames >= 0 or request.stop >= 0:
        return _core.scan.scan_buffer(view, request)
    frames, reserve = _estimate(view, request)
    parts = min(parts, max(1, frames // max(range_frames, 1)))
    if parts < 2:
        return _core.scan.scan_buffer(view, request)
    # the first range is a little shorter: its thread then places the second's rows
    weights = [1 - _FIRST_LESS] + [1 + _FIRST_LESS / (parts - 1)] * (parts - 1)
    cuts = [start + int((size - start) * sum(weights[:k]) / parts) for k in range(1, parts)]
    cuts = sorted({c for c in cuts if start < c < size})    # a few bytes: fewer ranges
    parts = len(cuts) + 1
    if parts < 2:
        return _core.scan.scan_buffer(view, request)
    limits = [*cuts[1:], size]

    def anchored(k):
        return lambda: anchor(view, cuts[k], size, collections=request.collections,
                              lead_in=lead_in, max_frame_size=request.max_frame_size,
                              limit=limits[k])
    anchors = run([anchored(k) for k in range(len(cuts))], threads)
    for k in range(1, len(anchors)):              # non-decreasing, whatever the chains
        anchors[k] = max(anchors[k], anchors[k - 1])
    if rows is None:
        rows = reserve
    job = _Job(view, request, [start, *anchors, size], piece_bytes, rows)
    run([job.worker(k) for k in range(parts)], threads)
    return job.result(threads)


class _Job:
    """One scan by several threads, in the batch's columns (``out``). Each range has a
    slot of rows there, in proportion to its bytes; thread ``k`` walks range ``k`` in
    pieces into its slot from the slot's first row, publishing each piece as it is
    walked, and into columns of its own (a spill) once the slot is full. A thread done
    walking moves pieces down into place: in stream order, each to the rows after the
    frames before it, as soon as the walks before it are known to chain (each range
    starting where the previous one ended) and the rows it goes to hold nothing still
    needed (a move under way reads them, or the next range writes there). What was not
    placed then (a range that did not chain, a spill that would land in the next slot)
    is placed by ``result`` after a sequential check of the chain (``_chained``)."""

    def __init__(self, view, request: ScanRequest, bounds: list[int], piece_bytes: int,
                 rows: int):
        self.view, self.request, self.bounds = view, request, bounds
        self.piece_bytes = piece_bytes
        self.parts = len(bounds) - 1
        self.viewed = _viewed(request)
        self.out = _core.scan.Columns(request.names, rows, self.viewed)
        width = max(bounds[-1] - bounds[0], 1)
        self.slots = [rows * (b - bounds[0]) // width for b in bounds]
        # per range, its pieces as (result, Columns of a spill or None, first row in out)
        self.found: list[list] = [[] for _ in range(self.parts)]
        self.done = [False] * self.parts
        self.started = [False] * self.parts   # a thread walks it (never waits on a queued one)
        self.chains = [True] + [None] * (self.parts - 1)   # starts where the last ended
        self.cond = threading.Condition()
        self.next = (0, 0)             # the next piece to place: (range, piece)
        self.row = 0                   # where it goes
        self.placed = 0                # pieces placed
        self.moving: list[tuple[int, int]] = []   # rows of out that moves under way read
        self.open = True               # placing goes on

    def worker(self, k: int):
        def task():
            with self.cond:
                self.started[k] = True
            try:
                self._walk(k)
                self._place_while_possible()
            except BaseException:
                with self.cond:              # no thread waits for what will not come
                    self.open = False
                    self.cond.notify_all()
                raise
        return task

    def _walk(self, k: int) -> None:
        """Walk range ``k`` in pieces (the first range in one, unless its slot fills),
        into its slot and then into spills, publishing each piece."""
        lo, hi, last = self.bounds[k], self.bounds[k + 1], k == self.parts - 1
        row, end = self.slots[k], self.slots[k + 1]
        piece = hi - lo if k == 0 else max(self.piece_bytes, (hi - lo) // _PIECES)
        pos = lo
        while True:
            stop = -1 if last and pos + piece >= hi else min(pos + piece, hi)
            request = self.request._replace(start=pos, stop=stop, unverified=(
                self.request.unverified and pos == self.request.start))
            full = False
            if row < end:
                found = _core.scan.scan_buffer(self.view, request._replace(
                    max_frames=end - row), self.out, row)
                cols, first = None, row
                row += found.frames
                full = row == end and not found.failure and not found.unverified
            else:
                cols, first = _core.scan.Columns(self.request.names, 0, self.viewed), 0
                found = _core.scan.scan_buffer(self.view, request, cols)
            pos = found.consumed
            ended = pos >= hi or not full and (stop < 0 or _ends(found, stop))
            self._publish(k, (found, cols, first), ended)
            if ended:
                return

    def _publish(self, k: int, piece, ended: bool) -> None:
        with self.cond:
            self.found[k].append(piece)
            if ended:
                self.done[k] = True
                self._check_chains()
            self.cond.notify_all()

    def _check_chains(self) -> None:
        """Decide, in order, which ranges start where the walk before them ended (under
        the lock)."""
        for k in range(1, self.parts):
            if self.chains[k] is not None:
                continue
            if not (self.chains[k - 1] and self.done[k - 1]):
                return
            found = self.found[k - 1][-1][0]
            if _ends(found, self.bounds[k]):
                self.chains[k:] = [False] * (self.parts - k)     # the scan ends before it
                return
            self.chains[k] = found.consumed == self.bounds[k]

    def _claim(self):
        """The next piece to place and its row; None when there is none now; False when
        its rows are still read by a move under way (under the lock)."""
        k, j = self.next
        if not self.open or k >= self.parts or not self.chains[k] \
                or j >= len(self.found[k]):
            return None
        found, cols, first = self.found[k][j]
        row, count = self.row, found.frames
        # a slot's rows only move down; a spill must land before the next slot
        free = first if cols is None else self.slots[k + 1]
        if found.failure or row > free or cols is not None and row + count > free:
            self.open = False
            return None
        if any(lo < row + count and row < hi for lo, hi in self.moving):
            return False
        if cols is None and row != first:
            self.moving.append((first, first + count))
        self.row += count
        self.placed += 1
        self.next = (k + 1, 0) if self.done[k] and j + 1 == len(self.found[k]) else (k, j + 1)
        return row, found, cols, first

    def _stuck(self) -> bool:
        """Whether no piece can be placed now without waiting for a walk that has not
        started (under the lock). A thread never waits for one: its task may be queued
        behind tasks of other scans sharing the workers, themselves waiting; ``result``
        places what is left."""
        k, j = self.next
        return not self.open or k >= self.parts or self.chains[k] is False or \
            (self.done[k] and j >= len(self.found[k])) or not self.started[k]

    def _place_while_possible(self) -> None:
        """Place pieces in stream order while there are some, or walks under way that
        will publish them."""
        while True:
            with self.cond:
                claim = self._claim()
                while claim is False or claim is None and not self._stuck():
                    self.cond.wait()
                    claim = self._claim()
            if claim is None:
                return
            row, found, cols, first = claim
            if cols is not None:
                self.out.put(row, cols, first, found.frames)
            elif row != first:
                try:
                    self.out.put(row, self.out, first, found.frames)
                finally:
                    with self.cond:
                        self.moving.remove((first, first + found.frames))
                        self.cond.notify_all()

    def result(self, threads: int) -> ScanResult:
        """The scan's result, once every thread is done: the walks chained as one scan
        walks, the pieces not placed yet placed after the others."""
        kept = _chained(self.view, self.request, self.bounds, self.found)
        last = kept[-1][0]
        if last.failure:
            return last
        total = sum(found.frames for found, _, _ in kept)
        self.out.reserve(total, self.out.rows)
        rest, row = [], self.row
        for found, cols, first in kept[self.placed:]:
            rest.append((row, found, cols, first))
            row += found.frames
        _place(self.out, rest, threads)
        arrays, kinds, views = self.out.finish(total)
        if not self.request.view_bits or any(found.views is None for found, _, _ in kept):
            views = None
        regions = [region for found, _, _ in kept for region in found.regions]
        return ScanResult(total, last.consumed, arrays, kinds, regions, last.unverified, views)


def _viewed(request: ScanRequest) -> tuple[str, ...]:
    """The pairs whose binary views a scan for ``request`` writes."""
    return tuple(name for name, pair in BINARY.items()
                 if request.view_bits and set(pair) <= set(request.names))


def _estimate(view, request: ScanRequest) -> tuple[int, int]:
    """The frames of the whole buffer, judged by its size at the mean length of its first
    frames (a 64-byte mean where none is found), and the rows to reserve for them: an
    eighth more, or, as the core does, no more than ``_core.FIRST_ROWS`` when that is more
    than frames of ``_core.MIN_MEAN`` bytes would need (the first frames are no guide: the first
    range grows its columns as it goes)."""
    sample = _core.scan.scan_buffer(view[:request.start + _SAMPLE_BYTES], request._replace(
        names=("offset",), skip=True, max_frames=_SAMPLE_FRAMES, view_bits=0,
        unverified=False))
    size = len(view) - request.start
    if not sample.frames:
        return size // 64, size // 64 + 1024
    frames = size // max((sample.consumed - request.start) // sample.frames, 24)
    rows = frames * 9 // 8 + 1024
    return frames, _core.FIRST_ROWS if rows > size // _core.MIN_MEAN + _core.FIRST_ROWS \
        else rows


def _chained(view, request: ScanRequest, bounds, found) -> list:
    """The pieces of a single-threaded scan, in order, as ``_Job.found`` holds them: each
    range's own where it starts exactly where the walk before it ended, else one walk of
    the range from there into columns of its own; up to the first failure, or the first
    walk that stopped short of its range's end."""
    kept: list = []
    pos, last = request.start, len(found) - 1
    for k, pieces in enumerate(found):
        hi = bounds[k + 1] if k < last else -1
        if k and pos != bounds[k]:
            if k < last and pos >= hi:
                continue                          # the walk before ran past this range
            cols = _core.scan.Columns(request.names, 0, _viewed(request))
            pieces = [(_core.scan.scan_buffer(view, request._replace(
                start=pos, stop=hi, unverified=False), cols), cols, 0)]
        kept += pieces
        end = pieces[-1][0]
        if k == last or _ends(end, hi):
            break
        pos = end.consumed
    return kept


def _ends(found: ScanResult, stop: int) -> bool:
    """Whether a walk that was to go on to ``stop`` ended the scan instead: it failed,
    stopped short of ``stop``, or stopped where the next chunk must decide (skip mode,
    ``unverified``)."""
    return bool(found.failure) or found.consumed < stop or found.unverified


def _place(out, pieces, threads: int) -> None:
    """Put each ``(row, result, Columns or None, first)`` of ``pieces`` (in stream order) at
    ``row`` of ``out``, from ``first`` of its spill or, for None, of ``out`` itself. Rows
    of ``out`` move one piece at a time: first those that move down, in order, then those
    that move up, last first, so that none lands on rows still to be read (the pieces'
    rows in ``out`` and their places both rise with the stream); then the spills, their
    rows shared out among ``threads`` threads."""
    moves = [(row, found.frames, first) for row, found, cols, first in pieces
             if cols is None and row != first]
    for row, count, first in [m for m in moves if m[0] < m[2]] + \
            [m for m in reversed(moves) if m[0] > m[2]]:
        out.put(row, out, first, count)
    spills = [piece for piece in pieces if piece[2] is not None]
    total = sum(found.frames for _, found, _, _ in spills)
    if not total:
        return
    shares = min(threads, max(1, total // 4096))
    bounds = [total * k // shares for k in range(shares + 1)]

    def share(k):
        lo, hi = bounds[k], bounds[k + 1]

        def task():
            at = 0                                 # rows of the spills before this one
            for row, found, cols, first in spills:
                a, b = max(lo - at, 0), min(hi - at, found.frames)
                if a < b:
                    out.put(row + a, cols, first + a, b - a)
                at += found.frames
        return task
    run([share(k) for k in range(shares)], threads)


def scanner(threads: int) -> Scanner:
    """What scans a buffer with ``threads`` threads: the core itself for one thread, else
    ``scan_result`` (which still walks a small buffer with one)."""
    if threads == 1:
        return _core.scan.scan_buffer
    return lambda view, request: scan_result(view, request, threads)
