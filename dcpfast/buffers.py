"""Byte buffers the scan reads and writes: flat views of any contiguous buffer, recycled
memory, and the windows of Arrow binary views over large inputs."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from . import _core
from .errors import text

#: The largest offset of an Arrow ``binary`` array (and of a binary view's buffer).
INT32_MAX = 2**31 - 1
_WINDOW_BITS = 30                     # binary_view data buffers for inputs over 2 GiB
#: Columns from this size up are taken into Arrow's memory pool (``pooled_take``); the C
#: library serves smaller ones from pages it keeps (the pool's reuse pays for large columns,
#: such as a history's, and costs smaller ones time).
POOLED_FROM = 4 << 20
#: A column of up to ``READ_THROUGH_MAX`` bytes that a take of ``READ_THROUGH_FROM`` rows
#: or more reads a quarter of or more is read through once, in order, first
#: (``pooled_take``).
READ_THROUGH_MAX = 16 << 20
READ_THROUGH_FROM = 1 << 16


def byte_view(data) -> memoryview:
    """A flat unsigned-byte view of any contiguous buffer, without copying."""
    if isinstance(data, (str, os.PathLike)):
        raise TypeError(text("buffer_is_path", path=os.fspath(data)))
    view = memoryview(data)
    if not view.contiguous:
        raise ValueError("data must be a contiguous buffer")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def recycled(shape, dtype) -> np.ndarray:
    """An uninitialised array in memory the scan core recycles (a large one would cost a
    fault and a zeroing per page if it were fresh)."""
    dtype = np.dtype(dtype)
    room = _core.scan.room(int(np.prod(shape)) * dtype.itemsize)
    return np.frombuffer(room, dtype).reshape(shape)


def pooled(size: int) -> np.ndarray:
    """``size`` uninitialised bytes in Arrow's memory pool, for the data of an Arrow column
    (``pa.py_buffer`` of it holds no copy): the pool hands out again the pages it freed
    lately, where a fresh array of this size costs a fault and a zeroing per page."""
    return np.frombuffer(pa.allocate_buffer(size), np.uint8)


def pooled_take(columns: dict, names, index: np.ndarray) -> dict[str, np.ndarray]:
    """``columns[name][index]`` for each of ``names`` (columns of one length), each of
    ``POOLED_FROM`` bytes or more into Arrow's memory pool (``pooled``): the pages it freed
    lately, not fresh ones that cost a fault and a zeroing each; a column that fits in the
    cache read through first (``_read_through``). ``index``: positions, or a mask."""
    index = np.asarray(index)
    if index.dtype == bool:
        index = np.flatnonzero(index)
    elif index.dtype == np.uint64:            # which np.take does not cast to positions
        index = index.astype(np.intp)
    out: dict[str, np.ndarray] = {}
    checked = not len(index)
    for name in names:
        column = columns[name]
        if len(index) >= READ_THROUGH_FROM and column.nbytes <= READ_THROUGH_MAX \
                and 4 * len(index) >= len(column):
            _read_through(column)
        if len(index) * column.itemsize < POOLED_FROM:
            out[name] = np.take(column, index)          # the bounds checked as it takes
            continue
        if not checked and (int(index.max()) >= len(column)
                            or int(index.min()) < -len(column)):
            raise IndexError(f"an index outside the {len(column)} rows of {name}")
        checked = True
        into = pooled(len(index) * column.itemsize).view(column.dtype)
        out[name] = np.take(column, index, out=into, mode="wrap")   # bounds checked above
    return out


def _read_through(column: np.ndarray) -> None:
    """Read one byte of each cache line of ``column``, in order: a take in another order
    (rows in key order, say) then finds a column that fits in the cache there, where it
    would fetch a line from memory for almost every value (the read through costs less
    than the misses it saves)."""
    if column.flags.c_contiguous:
        column.reshape(-1).view(np.uint8)[::64].max(initial=0)


def window_bits(size: int) -> int:
    """Log2 of the data buffers of binary views over ``size`` bytes (one buffer, or windows
    overlapping by half past 2 GiB, since a view's offset is a signed 32-bit number)."""
    return 31 if size <= INT32_MAX else _WINDOW_BITS
