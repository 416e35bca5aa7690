"""Byte ranges of a file that decode independently, each frame in exactly one of them.

A large dump is cut into pieces ``[lo, hi)`` (``plan``); each piece starts at its
*anchor*, the first frame at or after ``lo`` on the chain a resynchronising scan walks
from ``lead_in`` bytes before it, and must reach the next piece's anchor exactly. Used by
the Spark data source; needs nothing of Spark.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np

from ..batch import FrameBatch
from ..buffers import byte_view, recycled
from ..errors import DcpFormatError, text
from ..options import ScanOptions
from .compression import read_into, zero_for
from .resume import Resume

#: Input bytes decoded per batch of a range.
BATCH_BYTES = 4 << 20
#: Target input bytes per partition of pieces; larger files are split into byte ranges.
PARTITION_BYTES = 128 << 20
#: How far before a byte-range cut the search for the first frame starts.
LEAD_IN_BYTES = 1 << 20
#: Bytes a split range reads beyond its end while its last resynchronisation is undecided.
_PAST_END = 64 << 10


@dataclasses.dataclass(frozen=True)
class Piece:
    """A byte range ``[lo, hi)`` of one file; ``hi == size`` and ``lo == 0`` is the file.
    ``files``: where the "file" is a dump cut into pieces, read as one stream, its files
    (``(uri, size)``, in order; ``uri`` then names the stream, ``size`` is their sum)."""

    uri: str
    lo: int
    hi: int
    size: int
    files: tuple[tuple[str, int], ...] = ()

    @property
    def whole(self) -> bool:
        return self.lo == 0 and self.hi == self.size


def plan(files: Sequence[tuple[str, int]], partition_bytes: int = PARTITION_BYTES,
         parallelism: int = 1, splittable=lambda uri: True) -> list[list[Piece]]:
    """Partitions of pieces, about ``partition_bytes`` each and a multiple of
    ``parallelism`` in number (so that no core idles at the end).

    Files larger than a partition that ``splittable`` allows are cut into equal byte
    ranges; the other files go whole. Pieces are dealt largest first to the partition
    holding the fewest bytes.
    """
    if partition_bytes < 1 or parallelism < 1:
        raise ValueError("partition_bytes and parallelism must be positive")
    total = sum(size for _, size in files)
    count = -(-max(-(-total // partition_bytes), 1) // parallelism) * parallelism
    target = max(-(-total // count), 1)
    pieces = []
    for uri, size in files:
        if size > target and splittable(uri):
            n = -(-size // target)
            cuts = [size * k // n for k in range(n + 1)]
            pieces += [Piece(uri, lo, hi, size) for lo, hi in zip(cuts, cuts[1:])]
        else:
            pieces.append(Piece(uri, 0, size, size))
    bins: list[list] = [[0, k, []] for k in range(count)]       # [bytes, order, pieces]
    for piece in sorted(pieces, key=lambda p: (-(p.hi - p.lo), p.uri, p.lo)):
        emptiest = min(bins)
        emptiest[0] += piece.hi - piece.lo
        emptiest[2].append(piece)
    return [sorted(b[2], key=lambda p: (p.uri, p.lo)) for b in bins if b[2]]


def _reader(f):
    """How ``chain`` reads ``f``: a function of ``(pos, tail, n)`` giving ``tail`` followed
    by the ``n`` bytes at ``pos``. A buffer in memory is sliced (the tail is the end of the
    previous slice), a file is read into recycled memory."""
    try:
        view = byte_view(f)
    except TypeError:
        return lambda pos, tail, n: _read_into(f, pos, tail, n)
    return lambda pos, tail, n: view[pos - len(tail):pos + n]


def _read_into(f, pos: int, tail, n: int) -> np.ndarray:
    """``tail`` followed by ``n`` bytes of ``f`` from ``pos``."""
    buf = recycled(len(tail) + n, np.uint8)
    buf[:len(tail)] = tail
    got = len(tail)
    f.seek(pos)
    view = buf.data
    zero_for(f, view[got:])
    while got < len(buf):
        read = read_into(f, view[got:], zeroed=True)
        if not read:
            raise OSError(f"file shorter than expected at byte {pos + got - len(tail)}")
        got += read
    return buf


def chain(f, start: int, size: int, options: ScanOptions, *, stop: int | None,
          unverified: bool, batch_bytes: int):
    """Walk the frames of ``f`` (a seekable file, or a buffer, of ``size`` bytes) from
    ``start``, scanned as ``options`` say (one thread), and yield ``(batch, consumed,
    pending)``.

    ``consumed`` is the stream position the walk has reached, ``pending`` whether the
    frame found there by resynchronising is still unproven. With ``stop`` the walk reads
    no further than ``stop`` until what lies before it is decided; then, in strict mode,
    only the one frame that runs past ``stop``, in skip mode what resynchronising needs.
    """
    resume = Resume(options.but(threads=1), base=start, unverified=unverified)
    strict = options.errors == "strict"
    read = _reader(f)
    while True:
        have, need = resume.reached, resume.needed()
        if stop is None or have < stop:
            n = max(batch_bytes if stop is None else min(batch_bytes, stop - have), need)
        else:
            n = max(need, _PAST_END)
        n = min(n, size - have)
        buf = read(have, resume.take_tail(), n)
        eof = have + n >= size
        past = stop is not None and resume.base + len(buf) > stop
        batch = resume.scan(buf, final=eof,
                            max_frames=1 if past and strict else None)
        yield batch, resume.base, resume.unverified
        if eof and not len(resume.tail):
            return


def anchor(f, lo: int, size: int, *, collections: bool, lead_in: int,
           max_frame_size: int, limit: int | None = None) -> int:
    """Where the range starting at ``lo`` begins: the first frame at or after ``lo`` on
    the chain walked (resynchronising, as ``errors="skip"`` does) from ``lead_in`` bytes
    before ``lo``; the file size when there is none. The same for every caller. With
    ``limit``, the search ends there: ``limit`` when no frame starts before it."""
    end = size if limit is None else max(min(limit, size), lo)
    if lo <= 0 or lo >= end:
        return min(max(lo, 0), end)
    start = max(0, lo - lead_in)
    options = ScanOptions(collections, ("offset",), "skip", max_frame_size)
    for batch, consumed, _ in chain(f, start, size, options, stop=None, unverified=start > 0,
                                    batch_bytes=max(lo - start, 1 << 16) + (1 << 16)):
        offsets = batch["offset"]
        i = int(np.searchsorted(offsets, lo))
        if i < len(offsets):
            return min(int(offsets[i]), end)
        if consumed >= end:
            break
    return end


def range_batches(f, piece: Piece, options: ScanOptions, *, batch_bytes: int = BATCH_BYTES,
                  lead_in: int = LEAD_IN_BYTES) -> Iterator[FrameBatch]:
    """The frames of one byte range of a file, as a whole-file scan with ``options``
    (their ``collections`` decided) would find them.

    The range owns the frames that start in ``[anchor(lo), anchor(hi))`` (``anchor``).
    It walks the chain from ``anchor(lo)`` and must arrive exactly at ``anchor(hi)``:
    then, by induction from the file's first range (anchored at 0), every range walks
    the whole-file chain and the ranges together yield each frame once. Where the walk
    arrives elsewhere (values holding valid-looking frames across a cut, beyond the
    lead-in), ``DcpFormatError`` says so rather than yield a frame twice or not at all.
    """
    collections, largest = bool(options.collections), options.max_frame_size
    lo = anchor(f, piece.lo, piece.size, collections=collections, lead_in=lead_in,
                max_frame_size=largest)
    hi = anchor(f, piece.hi, piece.size, collections=collections, lead_in=lead_in,
                max_frame_size=largest)
    if hi < lo:
        raise DcpFormatError(hi, text("range_overlaps", uri=piece.uri, lo=piece.lo,
                                      hi=piece.hi, anchor=lo))
    if lo == hi:
        return
    options = options.with_columns("offset")
    for batch, consumed, pending in chain(f, lo, piece.size, options, stop=hi,
                                          unverified=False, batch_bytes=batch_bytes):
        offsets = batch["offset"]
        k = int(np.searchsorted(offsets, hi))
        if k:
            yield batch if k == len(offsets) else batch.filter(np.arange(k))
        if k < len(offsets):
            if offsets[k] == hi:
                return
            break
        if consumed == hi and not pending:
            return
        if consumed > hi:
            break
    raise DcpFormatError(hi, text("range_misaligned", uri=piece.uri, lo=piece.lo, hi=piece.hi,
                                  anchor=hi))


