"""The values of versions, held by reference. Each stretch's decoded bodies and xattrs stay
in the Arrow arrays they were decoded into (a chunk, under an id of its own), and a
version holds ``vref``: its chunk's id << 32 | its entry there (-1: no value). Keeping,
dropping and moving versions then copies no value; the table gathers each one once, in
its own order (``gather``). Versions that hold few of a chunk's values copy them down
(``compacted``), so that what is held stays in proportion to the versions.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..arrow import take_binary_at, take_map

#: A ``Chunks``: chunk id -> (bodies, xattrs), the Arrow arrays of one stretch's values.
Chunks = dict
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
    import pyarrow as pa

    return pa.map_(pa.large_string(), pa.large_string())


def register(body, xattrs) -> tuple[int, Chunks]:
    """A new chunk of ``body`` (``large_binary``) and ``xattrs`` (``xattr_type``), one
    entry per value: its id, and the chunks that hold it."""
    import pyarrow as pa

    if len(body) > _ENTRY:
        raise ValueError(f"a chunk of values holds at most {_ENTRY} of them")
    chunk = next(_ids) % _ID_LIMIT
    return chunk, {chunk: (body.cast(pa.large_binary()), xattrs)}


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
    return sum(body.nbytes + xattrs.nbytes for body, xattrs in chunks.values())


def gather(chunks: Chunks | None, vref: np.ndarray):
    """The bodies (``binary``) and xattrs at ``vref`` (nulls where -1), each a new array in
    that order; xattrs of the chunks' map type."""
    import pyarrow as pa

    chunks = chunks or {}
    ids = sorted(chunks)
    bodies = [chunks[c][0] for c in ids]
    xattrs = [chunks[c][1] for c in ids]
    index, rank = _positions(ids, [len(b) for b in bodies], vref)
    body = take_binary_at(bodies, np.where(index >= 0, rank, -1),
                          np.asarray(vref, np.int64) & _ENTRY)
    maps = take_map(pa.chunked_array(xattrs, xattr_type()), index)
    return body, maps


def compacted(chunks: Chunks | None, vref: np.ndarray, slack: int | None = None
              ) -> tuple[Chunks | None, np.ndarray]:
    """``chunks`` and ``vref`` with the values of each chunk that holds more than twice the
    bytes the values at ``vref`` use of it copied into a chunk of their own (and chunks no
    value uses let go); as they are where the chunks hold no more than ``slack`` (by
    default ``SLACK_BYTES``) or none is so."""
    if not chunks or nbytes(chunks) <= (SLACK_BYTES if slack is None else slack):
        return chunks, vref
    used = _used(chunks, vref)
    sparse = {c for c, (body, xattrs) in chunks.items()
              if body.nbytes + xattrs.nbytes > 2 * used.get(c, 0)}
    if not sparse:
        return chunks, vref
    out = {c: chunk for c, chunk in chunks.items() if c not in sparse}
    moved = np.flatnonzero(np.isin(vref >> _SHIFT, np.array(sorted(sparse), np.int64))
                           & (vref >= 0))
    vref = vref.copy()
    if len(moved):
        body, xattrs = gather({c: chunks[c] for c in sparse}, vref[moved])
        chunk, mine = register(body, xattrs)
        out.update(mine)
        vref[moved] = refs(chunk, np.arange(len(moved)))
    return out, vref


def owned(chunks: Chunks | None, vref: np.ndarray) -> tuple[Chunks | None, np.ndarray]:
    """The values at ``vref`` copied into a chunk of their own, and their new refs."""
    if chunks is None:
        return None, vref
    body, xattrs = gather(chunks, vref)
    chunk, out = register(body, xattrs)
    return out, refs(chunk, np.where(vref >= 0, np.arange(len(vref)), -1))


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
    and each one's share of the rest of the chunk (its offsets, its validity, its
    xattrs), so that a chunk whose every entry is used uses all of it."""
    ids = sorted(chunks)
    bodies = [chunks[c][0] for c in ids]
    index, rank = _positions(ids, [len(b) for b in bodies], vref)
    some = index >= 0
    rank = rank[some]
    lengths, shares = [], []
    for body, xattrs in (chunks[c] for c in ids):
        offsets = np.frombuffer(body.buffers()[1], np.int64)[
            body.offset:body.offset + len(body) + 1] if len(body) else np.zeros(1, np.int64)
        lengths.append(np.diff(offsets))
        rest = max(body.nbytes - int(offsets[-1] - offsets[0]), 0) + xattrs.nbytes
        shares.append(-(-rest // max(len(body), 1)))
    data = np.bincount(rank, np.concatenate(lengths)[index[some]], minlength=len(ids)) \
        if len(rank) else np.zeros(len(ids))
    count = np.bincount(rank, minlength=len(ids))
    return {c: int(data[k]) + int(count[k]) * shares[k]
            for k, c in enumerate(ids) if count[k]}
