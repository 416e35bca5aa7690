"""The values of versions, held by reference. Each stretch's values stay where decoding
left them (a ``Chunk``, under an id of its own): the bodies as extents of the batch's own
bytes or of the buffer its Snappy values were inflated into, the xattrs in an Arrow map
array. A version holds ``vref``: its chunk's id << 32 | its entry there (-1: no value).
Keeping, dropping and moving versions then copies no value; the table copies each body
once, out of those buffers into its own order (``gather``). Versions that hold few of a
chunk's values copy them down (``compacted``), so that what is held stays in proportion
to the versions. A store that keeps every version writes its chunks' bodies to a
temporary file (``SpillFile``, ``spilled``) and keeps their places: ``gather`` reads back
the bodies it needs.
"""

from __future__ import annotations

import itertools
import tempfile
import threading
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import _core, buffers
from ..arrow import binary_column, cast_map, mask_bitmap, take_map_at

if TYPE_CHECKING:
    from ..values import Extents

_SHIFT = 32
_ENTRY = (1 << _SHIFT) - 1
#: Chunk ids count up and wrap at 2**31: two chunks of one id would have to be held at
#: once across two billion others made between them.
_ids = itertools.count(1)
_ID_LIMIT = 1 << 31
#: Chunks holding more than twice the bytes their versions use, and more than this, are
#: copied down.
SLACK_BYTES = 64 << 10


def xattr_type():
    """The Arrow type the state keeps xattrs in."""
    return pa.map_(pa.large_string(), pa.large_string())


class Chunk:
    """The values of one stretch: entry ``i``'s body is ``length[i]`` bytes at
    ``start[i]`` of ``buffers[source[i]]`` (a null where ``valid`` is false; None: none
    is), its xattrs ``xattrs[i]`` (``xattr_type``)."""

    __slots__ = ("buffers", "source", "start", "length", "valid", "xattrs")

    def __init__(self, buffers: tuple, source: np.ndarray, start: np.ndarray,
                 length: np.ndarray, valid: np.ndarray | None, xattrs: pa.Array):
        if not len(start) == len(source) == len(length) == len(xattrs) \
                or (valid is not None and len(valid) != len(start)):
            raise ValueError("a chunk's columns need one value per entry")
        if len(start) > _ENTRY:
            raise ValueError(f"a chunk of values holds at most {_ENTRY} of them")
        self.buffers, self.xattrs = buffers, xattrs
        self.source = np.asarray(source, np.int32)
        self.start = np.asarray(start, np.int64)
        self.length = np.asarray(length, np.int64)
        self.valid = None if valid is None or valid.all() else np.asarray(valid, bool)

    def __len__(self) -> int:
        return len(self.start)

    @property
    def nbytes(self) -> int:
        """The bytes it holds: its buffers whole (a batch's bytes among them), its
        columns and its xattrs."""
        return sum(memoryview(b).nbytes for b in self.buffers) + self.source.nbytes \
            + self.start.nbytes + self.length.nbytes \
            + (0 if self.valid is None else self.valid.nbytes) + self.xattrs.nbytes


class Spilled(Chunk):
    """A chunk whose bodies are in a spill file: entry ``i``'s ``length[i]`` bytes at
    ``start[i]`` of ``file`` (its xattrs stay in memory). It holds no buffer; ``gather``
    reads back what it needs (``SpillFile.read``)."""

    __slots__ = ("file",)

    def __init__(self, file: SpillFile, start: np.ndarray, length: np.ndarray,
                 valid: np.ndarray | None, xattrs: pa.Array):
        super().__init__((), np.zeros(len(start), np.int32), start, length, valid, xattrs)
        self.file = file


#: Bodies of a spill file this near each other are read back in one piece.
READ_GAP = 16 << 10


class SpillFile:
    """A temporary file (in the system's temporary directory) that chunks' bodies are
    written to, each chunk's one after the other; it is closed, and gone, when the last
    chunk spilled into it goes."""

    def __init__(self):
        self._file = tempfile.TemporaryFile(prefix="dcpfast-spill-")
        self._lock = threading.Lock()
        self.size = 0

    def spill(self, chunk: Chunk) -> Spilled:
        """``chunk`` with its bodies written here."""
        n = len(chunk)
        data, bounds, _ = _copy([chunk], np.zeros(n, np.int32), np.arange(n, dtype=np.int64))
        with self._lock:
            at = self.size
            self._file.seek(at)
            self._file.write(data.data)
            self.size += len(data)
        return Spilled(self, at + bounds[:-1], np.diff(bounds), chunk.valid, chunk.xattrs)

    def read(self, chunk: Spilled, entries: np.ndarray) -> Chunk:
        """A chunk in memory of the same entries as ``chunk``, whose bodies at ``entries``
        (sorted, unique) are read back from here (the others empty): the bodies read in
        runs of those no more than ``READ_GAP`` apart."""
        entries = entries[chunk.length[entries] > 0]
        at = chunk.start[entries]
        end = at + chunk.length[entries]
        new = np.ones(len(at), bool)
        new[1:] = at[1:] > end[:-1] + READ_GAP
        first = np.flatnonzero(new)
        low = at[first]
        size = np.append(end[first[1:] - 1], end[-1:]) - low
        place = np.zeros(len(first), np.int64)
        np.cumsum(size[:-1], out=place[1:])
        data = np.empty(int(size.sum()), np.uint8)
        view = data.data
        with self._lock:
            for lo, count, to in zip(low.tolist(), size.tolist(), place.tolist()):
                self._file.seek(lo)
                if self._file.readinto(view[to:to + count]) != count:
                    raise OSError("a spill file ended before the bodies written to it")
        run = np.cumsum(new) - 1
        start = np.zeros(len(chunk), np.int64)
        length = np.zeros(len(chunk), np.int64)
        start[entries] = place[run] + at - low[run]
        length[entries] = chunk.length[entries]
        return Chunk((data,), np.zeros(len(chunk), np.int32), start, length, chunk.valid,
                     chunk.xattrs)


#: A ``Chunks``: chunk id -> ``Chunk``.
Chunks = dict


def arrow_chunk(body, xattrs) -> Chunk:
    """The chunk of the values ``body`` (``large_binary``) and ``xattrs``
    (``xattr_type``), one entry per value, its bytes left where they are."""
    body = body.cast(pa.large_binary())
    if not len(body):
        return Chunk((), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64),
                     None, xattrs)
    _, offsets_buffer, data = body.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64, len(body) + 1, body.offset * 8)
    valid = body.is_valid().to_numpy(zero_copy_only=False) if body.null_count else None
    length = np.diff(offsets)
    if valid is not None:
        length[~valid] = 0
    return Chunk((np.frombuffer(data, np.uint8) if data is not None
                  else np.zeros(0, np.uint8),), np.zeros(len(body), np.int32), offsets[:-1],
                 length, valid, xattrs)


def extents_chunk(pieces: list[Extents]) -> tuple[np.ndarray, Chunk]:
    """The chunk of the decoded values of a batch (``values.value_extents``), no body
    copied: its entries in order, and the batch's row of each one."""
    if not pieces:
        return np.zeros(0, np.int64), arrow_chunk(pa.array([], pa.large_binary()),
                                                  pa.array([], xattr_type()))
    held = [pieces[0].view, *(p.inflated for p in pieces)]
    # a piece's source 0 is the batch's bytes, buffer 0; its 1, its inflated values, 1 + k
    source = np.concatenate([np.multiply(p.source, 1 + k, dtype=np.int32)
                             for k, p in enumerate(pieces)])
    maps = [cast_map(p.xattrs, xattr_type()) for p in pieces]
    return np.concatenate([p.rows for p in pieces]), Chunk(
        tuple(held), source, np.concatenate([p.start for p in pieces]),
        np.concatenate([p.length for p in pieces]),
        np.concatenate([p.valid for p in pieces]),
        maps[0] if len(maps) == 1 else pa.concat_arrays(maps))


def register(chunk: Chunk) -> tuple[int, Chunks]:
    """``chunk`` under a new id: that id, and the chunks that hold it."""
    ident = next(_ids) % _ID_LIMIT
    return ident, {ident: chunk}


def refs(chunk: int, entry: np.ndarray) -> np.ndarray:
    """The ``vref`` of the entries ``entry`` of chunk ``chunk`` (negative: no value)."""
    entry = np.asarray(entry, np.int64)
    return np.where(entry >= 0, (chunk << _SHIFT) | entry, -1)


def union(parts: list[Chunks | None]) -> Chunks | None:
    """The chunks of ``parts`` together (None where none holds values)."""
    held = [p for p in parts if p is not None]
    if not held:
        return None
    if all(p is held[0] for p in held):
        return held[0]
    out: Chunks = {}
    for p in held:
        out.update(p)
    return out


def nbytes(chunks: Chunks | None) -> int:
    """The bytes ``chunks`` hold."""
    if not chunks:
        return 0
    return sum(chunk.nbytes for chunk in chunks.values())


def gather(chunks: Chunks | None, vref: np.ndarray):
    """The bodies (``binary``) and xattrs at ``vref`` (nulls where -1), each a new array in
    that order; xattrs of the chunks' map type."""
    data, bounds, valid, maps = _gathered(chunks, vref)
    return binary_column(data, bounds, mask_bitmap(valid)), maps


def compacted(chunks: Chunks | None, vref: np.ndarray, slack: int | None = None
              ) -> tuple[Chunks | None, np.ndarray]:
    """``chunks`` and ``vref`` with the values of each chunk that holds more than twice the
    bytes the values at ``vref`` use of it copied into a chunk of their own (and chunks no
    value uses let go); as they are where the chunks hold no more than ``slack`` (by
    default ``SLACK_BYTES``) or none is so."""
    if not chunks or nbytes(chunks) <= (SLACK_BYTES if slack is None else slack):
        return chunks, vref
    used = _used(chunks, vref)
    sparse = {c for c, chunk in chunks.items() if chunk.nbytes > 2 * used.get(c, 0)}
    if not sparse:
        return chunks, vref
    out = {c: chunk for c, chunk in chunks.items() if c not in sparse}
    moved = np.flatnonzero(np.isin(vref >> _SHIFT, np.array(sorted(sparse), np.int64))
                           & (vref >= 0))
    vref = vref.copy()
    if len(moved):
        chunk, mine = register(_copied({c: chunks[c] for c in sparse}, vref[moved]))
        out.update(mine)
        vref[moved] = refs(chunk, np.arange(len(moved)))
    return out, vref


def owned(chunks: Chunks | None, vref: np.ndarray) -> tuple[Chunks | None, np.ndarray]:
    """The values at ``vref`` copied into a chunk of their own, and their new refs."""
    if chunks is None:
        return None, vref
    chunk, out = register(_copied(chunks, vref))
    return out, refs(chunk, np.where(vref >= 0, np.arange(len(vref)), -1))


def spilled(chunks: Chunks | None, into: SpillFile, done: dict[int, Chunk]
            ) -> Chunks | None:
    """``chunks`` with the bodies of each written to ``into`` (``Spilled``); ``done``: the
    chunks spilled before, by id, taken as they are (and each chunk spilled here noted)."""
    if not chunks:
        return chunks
    out: Chunks = {}
    for ident, chunk in chunks.items():
        if ident not in done:
            done[ident] = chunk if isinstance(chunk, Spilled) else into.spill(chunk)
        out[ident] = done[ident]
    return out


def _copied(chunks: Chunks, vref: np.ndarray) -> Chunk:
    """The values at ``vref`` copied into a chunk of their own, one entry each."""
    data, bounds, valid, maps = _gathered(chunks, vref)
    return Chunk((data,), np.zeros(len(vref), np.int32), bounds[:-1], np.diff(bounds), valid,
                 maps)


def _gathered(chunks: Chunks | None, vref: np.ndarray):
    """The bodies at ``vref`` copied out in that order (their bytes, their bounds, which
    are not null: None where all are) and their xattrs (an Arrow map array); the bodies of
    spilled chunks read back first."""
    chunks = _loaded(chunks or {}, np.asarray(vref, np.int64))
    ids = sorted(chunks)
    held = [chunks[c] for c in ids]
    vref = np.asarray(vref, np.int64)
    which = _places(ids, vref)
    data, bounds, taken = _copy(held, which, vref & _ENTRY)
    valid = None if taken.all() else taken.view(bool)
    maps = take_map_at([c.xattrs for c in held], which, vref & _ENTRY, xattr_type())
    return data, bounds, valid, maps


def _copy(held: list[Chunk], which: np.ndarray, entry: np.ndarray):
    """The bodies of entries ``entry`` of chunks ``held[which]`` (-1: none) copied out in
    that order: their bytes, their bounds, and which are not null (uint8)."""
    base = np.cumsum([0, *(len(c.buffers) for c in held)])[:-1].astype(np.int32)
    n = len(entry)
    source = buffers.pooled(4 * n).view(np.int32)
    start = buffers.pooled(8 * n).view(np.int64)
    bounds = buffers.pooled(8 * (n + 1)).view(np.int64)
    bounds[0] = 0
    taken = np.empty(n, np.uint8)                  # a null of a chunk is taken as a null
    _core.values.chunk_extents([c.source for c in held], [c.start for c in held],
                               [c.length for c in held], [c.valid for c in held], base, which,
                               entry, source, start, bounds, taken)
    data = buffers.pooled(int(bounds[-1]))
    every = [b for c in held for b in c.buffers]
    if n and every:
        _core.values.gather_chunks(every, source, start, bounds, data)
    return data, bounds, taken


def _loaded(chunks: Chunks, vref: np.ndarray) -> Chunks:
    """``chunks`` with each spilled one that ``vref`` refers to read back into memory, as
    far as ``vref`` needs it (``SpillFile.read``)."""
    spilled = [c for c, chunk in chunks.items() if isinstance(chunk, Spilled)]
    if not spilled:
        return chunks
    refs = np.unique(vref[vref >= 0])                 # sorted: by chunk, then by entry
    ids = refs >> _SHIFT
    out = dict(chunks)
    for c in spilled:
        lo, hi = np.searchsorted(ids, [c, c + 1])
        chunk = chunks[c]
        assert isinstance(chunk, Spilled)
        out[c] = chunk.file.read(chunk, refs[lo:hi] & _ENTRY)
    return out


def _places(ids: list[int], vref: np.ndarray) -> np.ndarray:
    """The chunk of each of ``vref`` as its place in ``ids`` (int32; -1 for -1)."""
    if not ids:
        if (vref >= 0).any():
            raise ValueError("a version refers to a value chunk it does not hold")
        return np.full(len(vref), -1, np.int32)
    lowest, width = ids[0], ids[-1] - ids[0] + 1
    if width > 4 * len(ids) + 1024:                         # ids that wrapped
        _, rank = _positions(ids, [0] * len(ids), vref)
        return np.where(vref >= 0, rank, -1).astype(np.int32)
    # place of chunk id lowest + k at k + 1; -1 below (a -1 ref), -2 where no chunk is
    table = np.full(width + 2, -2, np.int32)
    table[0] = -1
    table[np.array(ids, np.int64) - lowest + 1] = np.arange(len(ids), dtype=np.int32)
    shifted = vref >> _SHIFT
    shifted -= lowest - 1
    np.clip(shifted, 0, width + 1, out=shifted)
    out = table[shifted]
    if len(out) and int(out.min()) < 0 and ((out < 0) & (vref >= 0)).any():
        raise ValueError("a version refers to a value chunk it does not hold")
    return out


def _positions(ids: list[int], sizes: list[int], vref: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """``vref`` as positions in the chunks ``ids`` (of ``sizes`` entries) one after the
    other (-1 stays -1), and each one's chunk as its place in ``ids`` (0 for -1)."""
    vref = np.asarray(vref, np.int64)
    if not len(vref):
        return vref, vref
    starts = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(sizes, out=starts[1:])
    some = vref >= 0
    chunk = np.where(some, vref >> _SHIFT, ids[0] if ids else 0)
    if ids and ids[-1] - ids[0] < 4 * len(ids) + 1024:   # ids made one after the other
        ranks = np.full(ids[-1] - ids[0] + 1, -1, np.int64)
        ranks[np.array(ids, np.int64) - ids[0]] = np.arange(len(ids))
        rank = ranks[np.clip(chunk - ids[0], 0, len(ranks) - 1)]
        rank[(chunk < ids[0]) | (chunk > ids[-1])] = -1
    else:                                                 # ids that wrapped, or none
        ids_arr = np.array(ids, np.int64)
        rank = np.minimum(np.searchsorted(ids_arr, chunk), max(len(ids) - 1, 0))
        if ids:
            rank[ids_arr[rank] != chunk] = -1
        else:
            rank[:] = -1
    if (some & (rank < 0)).any():
        raise ValueError("a version refers to a value chunk it does not hold")
    rank[~some] = 0
    return np.where(some, starts[rank] + (vref & _ENTRY), -1), rank


def _used(chunks: Chunks, vref: np.ndarray) -> dict[int, int]:
    """Per chunk, about the bytes the values at ``vref`` use of it: their bodies' lengths,
    and each one's share of the rest of the chunk (its buffers' other bytes, its columns,
    its xattrs), so that a chunk whose every entry is used uses all of it."""
    ids = sorted(chunks)
    held = [chunks[c] for c in ids]
    index, rank = _positions(ids, [len(c) for c in held], vref)
    some = index >= 0
    rank = rank[some]
    shares = [-(-max(c.nbytes - int(c.length.sum()), 0) // max(len(c), 1)) for c in held]
    data = np.bincount(rank, np.concatenate([c.length for c in held])[index[some]],
                       minlength=len(ids)) if len(rank) else np.zeros(len(ids))
    count = np.bincount(rank, minlength=len(ids))
    return {c: int(data[k]) + int(count[k]) * shares[k]
            for k, c in enumerate(ids) if count[k]}
