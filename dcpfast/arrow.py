"""Scanned columns as Arrow arrays: numeric columns zero-copy with their validity bitmaps,
keys and values gathered into ``binary`` columns or exported as ``binary_view`` columns
over the input, without a copy.

The functions take a scan's parts (its numpy columns by name, each frame's kind, the
input's byte view); ``FrameBatch.to_arrow`` is their user.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from . import _core, buffers
from . import protocol as P
from . import schema as S
from .buffers import recycled


def table(arrays: dict[str, np.ndarray], kinds: np.ndarray, view, *, collections: bool,
          base_offset: int, views: dict | None, binary_view: bool) -> pa.Table:
    """A ``pyarrow.Table`` of ``arrays`` (a scan's columns over ``view``), plus ``key`` and
    ``value`` where their offset/length pairs were scanned: gathered into ``binary``
    columns (``large_binary`` past 2 GiB), or with ``binary_view`` exported as views into
    ``view`` (from ``views``, the scan's own, when it wrote them)."""
    bitmaps = validity(arrays, kinds, collections)
    out, fields = [], []
    for name, column in arrays.items():
        out.append(pa.Array.from_buffers(
            S.arrow_type(name), len(column), [*bitmaps(name), pa.py_buffer(column)]))
        fields.append(name)
    pairs = {name: pair for name, pair in S.BINARY.items()
             if pair[0] in arrays and pair[1] in arrays}
    if binary_view:
        out += _binary_views(arrays, view, base_offset, views, pairs, bitmaps)
    else:
        out += [binary(view, positions(arrays[off], base_offset), arrays[length],
                       bitmaps(off)) for off, length in pairs.values()]
    fields += pairs
    return pa.Table.from_arrays(out, names=fields)


def validity(arrays: dict[str, np.ndarray], kinds: np.ndarray,
             collections: bool) -> Callable[[str], list]:
    """A function giving the Arrow validity buffer (``[buffer]``, or ``[None]`` when all
    valid) of a column of ``arrays``. Columns carried by the same frame kinds share one
    bitmap; the bitmaps of every such group among the columns are made together, in one
    compiled pass over the kinds, on the first column that needs one."""
    shared = {}

    def make(name):
        tables = {}
        for column in (*arrays, name):
            table = S.validity_table(column, collections)
            if table is not None and column not in S.WHERE_NONZERO:
                tables.setdefault(table.tobytes(), table)
        carried = np.array(list(tables.values()), np.uint8)
        state, bits = _core.scan.validity_bitmaps(kinds,
                                                  carried.reshape(len(tables), len(P.KINDS)))
        for key, full, row in zip(tables, state, bits):
            shared[key] = [None] if full == 2 else [pa.py_buffer(row)]

    def bitmap(name):
        if name in S.WHERE_NONZERO:
            return mask_bitmap(arrays[name] != 0)
        table = S.validity_table(name, collections)
        if table is None:
            return [None]
        key = table.tobytes()
        if key not in shared:
            make(name)
        return shared[key]
    return bitmap


def positions(offsets: np.ndarray, base_offset: int, out=None) -> np.ndarray:
    """Positions in the input of a stream-offset column, as uint64 (written to ``out``
    when given); frames that do not carry it hold 0 there as they do in the column."""
    if out is None:
        out = np.empty(len(offsets), np.uint64)
    if base_offset:
        base = np.uint64(base_offset)
        np.maximum(offsets, base, out=out)
        out -= base
    else:
        out[...] = offsets
    return out


def binary(view, starts: np.ndarray, lengths: np.ndarray, bitmap: list) -> pa.Array:
    """The bytes at ``starts`` (positions in ``view``) of ``lengths`` as a ``binary``
    column, gathered out of ``view`` (frames without the field are null and hold no bytes:
    their length is 0); ``bitmap`` is its Arrow validity buffer (from ``validity``)."""

    bounds = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, dtype=np.int64, out=bounds[1:])
    data = np.empty(int(bounds[-1]), np.uint8)
    _core.scan.gather(view, starts, bounds, data)
    return binary_column(data, bounds, bitmap)


def binary_column(data: np.ndarray, bounds: np.ndarray, bitmap: list, *,
                  wide: bool = False) -> pa.Array:
    """Value ``i`` = ``data[bounds[i]:bounds[i + 1]]`` (``bounds`` int64, from 0) as a
    ``binary`` column, ``large_binary`` past 2 GiB or with ``wide``; ``bitmap`` is its
    Arrow validity buffer (``[None]``: none null)."""
    small = bounds[-1] <= buffers.INT32_MAX and not wide
    return pa.Array.from_buffers(pa.binary() if small else pa.large_binary(), len(bounds) - 1,
                                 [*bitmap, pa.py_buffer(bounds.astype(np.int32) if small
                                                        else bounds), pa.py_buffer(data)])


def take_binary(column, index: np.ndarray, *, wide: bool = False) -> pa.Array:
    """The values of ``column`` (a ``binary`` or ``large_binary`` array, or a chunked one)
    at ``index`` (positions in the whole column; a negative one gives a null) as a
    ``binary`` column (``large_binary`` past 2 GiB, or with ``wide``): gathered out of
    the chunks in one pass, without joining them first as ``take`` of a chunked array
    does (one copy of every value less)."""
    chunks = _chunks(column)
    return take_binary_at(chunks, *_chunk_entries(chunks, index, "take_binary"), wide=wide)


def take_binary_at(chunks: list, chunk: np.ndarray, entry: np.ndarray, *,
                   wide: bool = False) -> pa.Array:
    """Value ``entry[i]`` of ``chunks[chunk[i]]`` (``binary`` or ``large_binary`` arrays;
    a negative ``chunk[i]`` gives a null) for each ``i``, as ``take_binary`` returns them:
    where each one lies is read from its chunk's offsets (``extents_at``), then all are
    copied at once (``gather_chunks``)."""
    chunk = np.asarray(chunk, np.int32)
    entry = np.asarray(entry, np.int64)
    offsets: list[np.ndarray] = []
    datas: list[np.ndarray] = []
    for piece in chunks:
        large = pa.types.is_large_binary(piece.type)
        if not (large or pa.types.is_binary(piece.type)):
            raise TypeError(f"take_binary: a {piece.type} column, not binary")
        if not len(piece):
            offsets.append(np.zeros(1, np.int64))
            datas.append(np.zeros(0, np.uint8))
            continue
        _, offsets_buffer, data = piece.buffers()
        offsets.append(np.frombuffer(offsets_buffer, np.int64 if large else np.int32,
                                     len(piece) + 1, piece.offset * (8 if large else 4)))
        datas.append(np.frombuffer(data, np.uint8) if data is not None
                     else np.zeros(0, np.uint8))
    n = len(chunk)
    starts, bounds, valid = _extents(chunks, offsets, chunk, entry)
    taken = None if valid.all() else valid.view(bool)
    out = buffers.pooled(int(bounds[-1]))
    if n and datas:
        _core.values.gather_chunks(datas, np.maximum(chunk, 0), starts, bounds, out)
    return binary_column(out, bounds, mask_bitmap(taken), wide=wide)


def _extents(chunks: list, offsets: list, chunk: np.ndarray, entry: np.ndarray):
    """Where value ``entry[i]`` of ``chunks[chunk[i]]`` (Arrow arrays whose ``offsets``
    are given) lies: its start, the running total of the lengths, and whether it is not
    null (a null of a chunk is taken as a null, and so is a negative ``chunk[i]``)."""
    n = len(chunk)
    starts = np.empty(n, np.int64)
    bounds = np.zeros(n + 1, np.int64)
    valid = np.empty(n, np.uint8)
    _core.values.extents_at(offsets, [piece.is_valid().to_numpy(zero_copy_only=False)
                                      if piece.null_count else None for piece in chunks],
                          chunk, entry, starts, bounds, valid)
    return starts, bounds, valid


def take_map(column, index: np.ndarray) -> pa.Array:
    """The maps of ``column`` (a map array of string keys and items, or a chunked one) at
    ``index`` (positions in the whole column; a negative one gives a null), of the
    column's type: the keys and items gathered as ``take_binary`` gathers (Arrow's own
    ``take`` of a map column walks it entry by entry, and joins chunks first)."""
    chunks = _chunks(column)
    return take_map_at(chunks, *_chunk_entries(chunks, index, "take_map"), column.type)


def take_map_at(chunks: list, chunk: np.ndarray, entry: np.ndarray, kind) -> pa.Array:
    """Map ``entry[i]`` of ``chunks[chunk[i]]`` (map arrays of string keys and items, of
    the type ``kind``; a negative ``chunk[i]`` gives a null) for each ``i``, as
    ``take_map`` returns them: where each map's pairs lie is read from its chunk's
    offsets (``extents_at``), then the keys and items are taken as ``take_binary_at`` takes
    values."""
    chunk = np.asarray(chunk, np.int32)
    entry = np.asarray(entry, np.int64)
    offsets: list[np.ndarray] = []
    keys, items = [], []
    for piece in chunks:
        offsets.append(piece.offsets.to_numpy() if len(piece) else np.zeros(1, np.int32))
        pairs = piece.values
        keys.append(pairs.field(0).cast(_as_binary(kind.key_type)))
        items.append(pairs.field(1).cast(_as_binary(kind.item_type)))
    first, bounds, valid = _extents(chunks, offsets, chunk, entry)
    taken = None if valid.all() else valid.view(bool)
    # each taken map's pairs, in order: its chunk, and its place there
    pair_chunk = np.empty(int(bounds[-1]), np.int32)
    pair_entry = np.empty(int(bounds[-1]), np.int64)
    _core.values.spread_extents(chunk, first, bounds, pair_chunk, pair_entry)
    out_keys = _retyped(take_binary_at(keys, pair_chunk, pair_entry,
                                       wide=pa.types.is_large_string(kind.key_type)),
                        kind.key_type)
    out_items = _retyped(take_binary_at(items, pair_chunk, pair_entry,
                                        wide=pa.types.is_large_string(kind.item_type)),
                         kind.item_type)
    return pa.MapArray.from_arrays(pa.array(bounds.astype(np.int32)), out_keys, out_items,
                                   type=kind, mask=None if taken is None
                                   else pa.array(~taken))


def _chunks(column) -> list:
    """The chunks of ``column`` (an array, or a chunked one) that hold values."""
    return [c for c in (column.chunks if isinstance(column, pa.ChunkedArray) else [column])
            if len(c)]


def _chunk_entries(chunks: list, index, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``index`` (positions in ``chunks`` one after the other; a negative one: a null) as
    each one's chunk (int32, -1 for a null) and entry there."""
    firsts = np.cumsum([0, *(len(c) for c in chunks)])
    index, taken = _positions(index, int(firsts[-1]), name)
    chunk = (np.searchsorted(firsts, index, side="right") - 1).astype(np.int32)
    entry = index - firsts[np.maximum(chunk, 0)] if len(chunks) else index
    if taken is not None:
        chunk[~taken] = -1
    return chunk, entry


def _positions(index, size: int, name: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``index`` as int64 positions in ``size`` values (at least one where ``index`` has
    any), a negative one (a null) pointed at the first, and which are not null (None:
    all)."""
    index = np.asarray(index, np.int64)
    if len(index) and index.max() >= size:
        raise IndexError(f"{name}: index outside the column's {size} values")
    nulls = index < 0
    if not nulls.any():
        return index, None
    return np.where(nulls, 0, index), ~nulls


def _as_binary(text):
    """The binary type of the same offsets as the string type ``text``."""
    return pa.large_binary() if pa.types.is_large_string(text) else pa.binary()


def _retyped(array, text):
    """The binary ``array`` as the string type ``text`` (its bytes came from strings of
    that type: no check again)."""
    return pa.Array.from_buffers(text, len(array), array.buffers(), offset=array.offset)


def _binary_views(arrays, view, base_offset, views, pairs, bitmaps):
    """``binary_view`` columns over ``view``, no bytes copied, one for each of ``pairs``
    (name: offset/length columns); ``bitmaps(off)`` gives a column's validity buffer.
    The structs come from the scan when it wrote them, else from one pass over the
    frames for all pairs."""
    if not pairs:
        return []
    n, size = len(next(iter(arrays.values()))), len(view)
    bits = buffers.window_bits(size)
    if views is not None:
        structs = [views[name] for name in pairs]
    else:
        starts = recycled((len(pairs), n), np.uint64)
        lengths = recycled((len(pairs), n), np.int64)
        for row, (off, length) in enumerate(pairs.values()):
            positions(arrays[off], base_offset, starts[row])
            lengths[row] = arrays[length]
        structs = recycled((len(pairs), 16 * n), np.uint8)
        _core.scan.views(view, starts, lengths, structs, bits)
    windows = [pa.py_buffer(view[lo:lo + 2 * (1 << bits)])
               for lo in range(0, max(size, 1), 1 << bits)]
    return [pa.Array.from_buffers(pa.binary_view(), n,
                                  [*bitmaps(off), pa.py_buffer(structs[row]), *windows])
            for row, (off, _) in enumerate(pairs.values())]


def mask_bitmap(valid) -> list:
    """Arrow validity buffer for a bool mask: ``[buffer]`` or ``[None]`` when all valid."""
    if valid is None or valid.all():
        return [None]
    return [pa.py_buffer(np.packbits(valid, bitorder="little"))]


def masked(values: np.ndarray, valid: np.ndarray, kind=None) -> pa.Array:
    """``values`` (a contiguous numeric array) as an Arrow array of their type (or
    ``kind``, of the same width), null where ``valid`` (bool, one per value) is false: the
    values' buffer taken as it is, the validity packed straight from ``valid``."""
    values = np.ascontiguousarray(values)
    if len(valid) != len(values):
        raise ValueError("one validity flag per value")
    return pa.Array.from_buffers(kind or pa.from_numpy_dtype(values.dtype), len(values),
                                 [*mask_bitmap(np.asarray(valid, bool)),
                                  pa.py_buffer(values)])


def joined(column) -> pa.Array:
    """``column`` (an array, or a chunked one) as one array: a lone chunk as it is
    (``combine_chunks`` copies even that one)."""
    if not isinstance(column, pa.ChunkedArray):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def cast_map(array, to: pa.MapType) -> pa.Array:
    """``array`` (a map array, or a chunked one) as the map type ``to``, rebuilt from its
    offsets, keys and items: pyarrow 25 aborts the process (a failed check, not an
    exception) when it casts a map array that ``take`` made."""
    array = joined(array)
    if array.type == to:
        return array
    if array.offset:                      # from_arrays takes no sliced offsets with nulls
        array = pa.concat_arrays([array])
    return pa.MapArray.from_arrays(array.offsets, array.keys.cast(to.key_type),
                                   array.items.cast(to.item_type), type=to,
                                   mask=array.is_null() if array.null_count else None)
