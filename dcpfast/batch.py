"""``scan`` and ``FrameBatch``: columns of a scanned buffer, and their Arrow/pandas forms."""

from __future__ import annotations

import difflib
import importlib
import os
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, overload

import numpy as np

from . import _core
from . import protocol as P
from . import schema as S
from ._core import ScanRequest
from .errors import DcpFormatError, SkippedRegion, describe, text

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    import pyarrow as pa

#: "cython" or "python": which cores (scan, capture walk, values) this process uses.
IMPLEMENTATION = _core.IMPLEMENTATION

_ERRORS = ("strict", "skip")
_LARGEST_FRAME = P.HEADER_SIZE + 0xFFFFFFFF   # the body length is 32 bits
_WINDOW_BITS = 30                     # binary_view data buffers for inputs over 2 GiB
_INT32_MAX = 2**31 - 1
_LAST_OFFSET = 2**64 - 1            # stream positions are uint64


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


def scan(data, *, collections: bool | None = None, columns=None, errors: str = "strict",
         start: int = 0, max_frames: int | None = None,
         max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE, base_offset: int = 0,
         final: bool = False, binary_views: bool = False,
         threads: int | None = None) -> FrameBatch:
    """Decode the concatenated DCP frames in ``data[start:]`` into columns.

    ``data`` is any contiguous buffer; it is not copied, and the batch keeps it alive.
    A trailing incomplete frame is left alone: ``batch.consumed`` says where to resume.
    ``collections``: whether document keys carry a LEB128 collection id (None: infer
    from a HELLO exchange, a DCP Open flag, or system events / seqno-advanced messages).
    ``columns``: the columns to fill (None: all; ``"key"``/``"value"`` name their
    offset/length pairs). ``errors="strict"`` raises ``DcpFormatError`` at the first
    malformed frame; ``"skip"`` steps over damaged bytes and lists them in
    ``batch.errors``. ``base_offset`` is the stream position of ``data[0]``: it is added
    to every offset column and error offset. ``final=True`` says ``data`` ends the
    stream: a frame cut short there is damage, and skip mode may rely on the end of the
    data when it resynchronises (otherwise it stops where more bytes would decide).
    ``binary_views=True`` also writes the Arrow views of keys and values (those the columns
    include) while each frame is in cache, so ``to_arrow(binary_view=True)`` and
    ``to_polars()`` need no pass of their own over the data (the scan takes up to a fifth
    longer; the conversion then costs a few per cent of the scan instead of about half).
    ``threads``: how many threads decode a large buffer (None: the cores this process may
    use; see ``dcpfast.io.parallel``); the batch is the same whatever the number.
    """
    batch, _ = scan_view(data, byte_view(data), start=start, collections=collections,
                         columns=columns, errors=errors, max_frames=max_frames,
                         max_frame_size=max_frame_size, base_offset=base_offset,
                         final=final, binary_views=binary_views, threads=threads)
    return batch


def scan_view(data, view, *, start, collections, columns, errors, max_frames, max_frame_size,
              base_offset, final, unverified=False, binary_views=False, threads=1
              ) -> tuple[FrameBatch, bool]:
    """``scan`` of ``view`` (the byte view of ``data``), resuming a skip-mode scan whose
    first frame still awaits its resynchronisation checks when ``unverified``. Returns the
    batch and whether the frame at its ``consumed`` position awaits them (see
    ``_core.ScanRequest``): the state ``io.resume`` carries from chunk to chunk.
    ``threads`` as for ``scan`` (here 1 unless told)."""
    if errors not in _ERRORS:
        raise ValueError(f"errors must be one of {_ERRORS}, not {errors!r}")
    if max_frame_size < P.HEADER_SIZE:
        raise ValueError(f"max_frame_size must be at least {P.HEADER_SIZE}")
    if not 0 <= start <= len(view):
        raise ValueError(f"start {start} outside the buffer of {len(view)} bytes")
    if max_frames is not None and max_frames < 0:
        raise ValueError(f"max_frames must be None or at least 0, not {max_frames}")
    if not 0 <= base_offset <= _LAST_OFFSET - len(view):
        raise ValueError(f"base_offset {base_offset} with {len(view)} bytes puts stream "
                         "positions outside 0..2**64-1")
    names = S.resolve(columns)
    if collections is None:
        collections = bool(_core.scan.sniff_collections(view, start))
    request = ScanRequest(
        start, names, bool(collections), errors == "skip",
        -1 if max_frames is None else max_frames, min(max_frame_size, _LARGEST_FRAME),
        base_offset, final, unverified, window_bits(len(view)) if binary_views else 0)
    if threads == 1 and type(threads) is int:
        result = _core.scan.scan_buffer(view, request)
    else:           # threads run over byte ranges, which io cuts: imported when asked for
        from .io.parallel import scan_result, threads_of
        result = scan_result(view, request, threads_of(threads))
    if result.failure:
        pos, code, a, b = result.failure
        raise DcpFormatError(base_offset + pos, describe(code, a, b))
    skipped = [SkippedRegion(base_offset + pos, length, describe(code, a, b))
               for pos, length, code, a, b in result.regions]
    batch = FrameBatch(data, view, result.arrays, result.kinds, start=start,
                       consumed=result.consumed, errors=skipped, collections=bool(collections),
                       base_offset=base_offset, mode=errors, views=result.views)
    return batch, result.unverified


class Frame(dict):
    """One frame's carried fields, by column name, with enums where the value has a name."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        return "Frame(" + ", ".join(f"{k}={v!r}" for k, v in self.items()) + ")"


def _named(enum, value):
    try:
        return enum(value)
    except ValueError:
        return value


_ENUMS = {"magic": P.Magic, "opcode": P.Opcode, "datatype": P.Datatype, "status": P.Status,
          "snap_flags": P.SnapshotFlag, "end_status": P.StreamEndStatus,
          "vb_state": P.VBucketState, "durability_level": P.DurabilityLevel,
          "event_id": P.SystemEventId, "oso_flags": P.OsoFlag}


class FrameBatch:
    """Columns of scanned DCP frames over a buffer they share (see ``schema.COLUMNS``).

    A column a frame does not carry holds 0 in numpy and is null in Arrow and pandas.
    """

    def __init__(self, data, view, arrays, kinds, *, start, consumed, errors, collections,
                 base_offset, mode="strict", views=None):
        self.data = data
        self._view = view
        self._arrays = arrays
        self._kinds = kinds
        self._views = views          # binary-view structs by name (scan(binary_views=True))
        #: Where in ``data`` the scan began.
        self.start = start
        #: End of the complete frames in ``data`` (resume a chunked stream there).
        self.consumed = consumed
        #: Regions skipped by ``errors="skip"`` (and values that failed to decode).
        self.errors = errors
        #: The ``errors`` mode of the scan ("strict" or "skip"); value decoders follow it.
        self.mode = mode
        #: Whether keys were read with a collection-id prefix.
        self.collections = collections
        #: Stream position of ``data[0]``.
        self.base_offset = base_offset

    # -- the internal API: for dcpfast's own modules (content, capture, io, spark) --------

    @property
    def view(self) -> memoryview:
        """The flat byte view of ``data`` the columns point into (positions are
        ``offset - base_offset``)."""
        return self._view

    @property
    def kinds(self) -> np.ndarray:
        """The kind of each frame: an index into ``protocol.KINDS``."""
        return self._kinds

    def state(self) -> dict:
        """The constructor arguments of this batch, for a subclass that adds to it."""
        return dict(data=self.data, view=self._view, arrays=self._arrays, kinds=self._kinds,
                    start=self.start, consumed=self.consumed, errors=self.errors,
                    collections=self.collections, base_offset=self.base_offset,
                    mode=self.mode, views=self._views)

    def keep_columns(self, names) -> None:
        """Drop every numpy column but ``names`` (a capture scans a few more than asked)."""
        self._arrays = {k: v for k, v in self._arrays.items() if k in names}

    def __len__(self) -> int:
        """The number of frames."""
        return len(self._kinds)

    def __repr__(self):
        return (f"<FrameBatch {len(self)} frames, bytes {self.base_offset + self.start}.."
                f"{self.base_offset + self.consumed}, collections={self.collections}, "
                f"{len(self.errors)} skipped regions>")

    @property
    def columns(self) -> tuple[str, ...]:
        """Names of the scanned numpy columns, in schema order."""
        return tuple(self._arrays)

    # -- rows, columns and slices: as in a numpy structured array ---------------------------

    @overload
    def __getitem__(self, key: str) -> np.ndarray: ...
    @overload
    def __getitem__(self, key: int) -> Frame: ...
    @overload
    def __getitem__(self, key: slice) -> FrameBatch: ...

    def __getitem__(self, key):
        """``batch["name"]``: a numpy column; ``batch[i]``: frame ``i`` (``frame(i)``);
        ``batch[a:b:c]``: a batch of those frames, sharing the buffer."""
        if isinstance(key, str):
            try:
                return self._arrays[key]
            except KeyError:
                raise KeyError(text("no_column", name=key,
                                    scanned=", ".join(self._arrays))) from None
        if isinstance(key, slice):
            return self.filter(np.arange(len(self))[key])
        if isinstance(key, (int, np.integer)):
            return self.frame(int(key))
        raise TypeError(text("batch_key", kind=type(key).__name__))

    def __iter__(self) -> Iterator[Frame]:
        """The frames, one ``Frame`` each, in stream order (a Python object per frame: the
        columns are the fast way to read many)."""
        return (self.frame(i) for i in range(len(self)))

    def __contains__(self, name) -> bool:
        """Whether column ``name`` was scanned."""
        return name in self._arrays

    # -- the shape and schema of the Arrow table -------------------------------------------

    @property
    def num_rows(self) -> int:
        """The number of frames (``len(batch)``), as pyarrow and polars name it."""
        return len(self)

    @property
    def schema(self) -> pa.Schema:
        """The schema of ``to_arrow()``, found without making the table."""
        import pyarrow as pa

        schema = self[:0].to_arrow().schema
        for name, (_, length) in S.BINARY.items():
            if name in schema.names and int(self[length].sum(dtype=np.uint64)) > _INT32_MAX:
                schema = schema.set(schema.get_field_index(name),
                                    pa.field(name, pa.large_binary()))
        return schema

    @property
    def column_names(self) -> list[str]:
        """The column names of ``to_arrow()``: the numpy columns, then ``key`` and
        ``value`` where their offset/length pairs were scanned (and a capture's columns)."""
        return list(self.schema.names)

    @property
    def num_columns(self) -> int:
        """The number of columns of ``to_arrow()``."""
        return len(self.column_names)

    @property
    def shape(self) -> tuple[int, int]:
        """``(num_rows, num_columns)`` of ``to_arrow()``."""
        return len(self), self.num_columns

    # -- pickling ----------------------------------------------------------------------------

    def __reduce__(self):
        """Pickled by value: the columns and the bytes of ``data`` the frames span, not the
        whole buffer (a memory map cannot be pickled); offsets keep their stream positions."""
        lo, hi = self._span()
        state = self.state()
        state.update(data=bytes(self._view[lo:hi]), view=None, views=None,
                     base_offset=self.base_offset + lo,
                     start=min(max(self.start - lo, 0), hi - lo),
                     consumed=min(max(self.consumed - lo, 0), hi - lo))
        added = {k: v for k, v in vars(self).items() if k not in _BATCH_FIELDS}
        return _unpickled, (type(self), state, added)

    def _span(self) -> tuple[int, int]:
        """Positions in ``data`` of the first byte the frames use and past the last: whole
        frames where ``offset`` and ``body_len`` were scanned, and keys and values."""
        spans = []
        if "offset" in self._arrays and "body_len" in self._arrays:
            spans.append((self._arrays["offset"], self._arrays["body_len"] + P.HEADER_SIZE))
        spans += [(self._arrays[off], self._arrays[length]) for off, length in S.BINARY.values()
                  if off in self._arrays and length in self._arrays]
        lo, hi = len(self._view), 0
        for starts, lengths in spans:
            used = lengths > 0
            if used.any():
                first = starts[used].astype(np.int64) - self.base_offset
                lo = min(lo, int(first.min()))
                hi = max(hi, int((first + lengths[used]).max()))
        return (lo, hi) if lo < hi else (0, 0)

    def to_dict(self) -> dict[str, np.ndarray]:
        """The numpy columns by name (the arrays themselves, not copies)."""
        return dict(self._arrays)

    def validity(self, name: str) -> np.ndarray | None:
        """Which frames carry column ``name`` (None: all of them)."""
        column = self[name]
        if name == "stream_id":
            return column != 0
        table = S.validity_table(name, self.collections)
        return None if table is None else table[self._kinds]

    # -- one frame -------------------------------------------------------------------------

    def _index(self, i):
        if not -len(self) <= i < len(self):
            raise IndexError(f"frame index {i} out of range for {len(self)} frames")
        return i % len(self)

    def _carries(self, name, i) -> bool:
        """Whether frame ``i`` carries column ``name``, judged from that frame alone."""
        if name == "stream_id":
            return self._arrays[name][i] != 0
        table = S.validity_table(name, self.collections)
        return table is None or bool(table[self._kinds[i]])

    def _slice(self, i, offset, length):
        i = self._index(i)
        if not self._carries(offset, i):
            return None
        start = int(self[offset][i]) - self.base_offset
        return bytes(self._view[start:start + int(self[length][i])])

    def key(self, i: int) -> bytes | None:
        """The logical key of frame ``i`` (after any collection prefix), or None."""
        return self._slice(i, "key_offset", "key_len")

    def value(self, i: int) -> bytes | None:
        """The value of frame ``i``, or None when its kind carries no value."""
        return self._slice(i, "value_offset", "value_len")

    def frame(self, i: int) -> Frame:
        """Every carried field of frame ``i``, with enum names, key and value."""
        i = self._index(i)
        out = Frame(kind=P.KINDS[self._kinds[i]].name)
        for name, column in self._arrays.items():
            if self._carries(name, i):
                out[name] = _named(_ENUMS[name], int(column[i])) if name in _ENUMS \
                    else int(column[i])
        for name, (off, length) in S.BINARY.items():
            if off in self._arrays and length in self._arrays and off in out:
                out[name] = self._slice(i, off, length)
        return out

    # -- selections ------------------------------------------------------------------------

    def filter(self, mask) -> FrameBatch:
        """The frames selected by a boolean mask or an index array, sharing the buffer."""
        mask = np.asarray(mask)
        if mask.dtype == bool and mask.shape != (len(self),):
            raise ValueError(f"mask of shape {mask.shape} for {len(self)} frames")
        views = self._views and {n: v[mask] for n, v in self._views.items()}
        return FrameBatch(self.data, self._view,
                          {n: a[mask] for n, a in self._arrays.items()}, self._kinds[mask],
                          start=self.start, consumed=self.consumed, errors=self.errors,
                          collections=self.collections, base_offset=self.base_offset,
                          mode=self.mode, views=views)

    def only(self, *opcodes: int | str) -> FrameBatch:
        """The frames with one of ``opcodes`` (ints, ``Opcode`` members or their names, in
        any case; an unknown name is a ``ValueError`` that lists the names)."""
        return self.filter(np.isin(self["opcode"], [_opcode(op) for op in opcodes]))

    # -- contents ----------------------------------------------------------------------------

    def values(self, *, decompress: bool = True, xattrs: str = "split",
               errors: str | None = None, threads: int | None = None) -> pa.Table:
        """Document bodies, xattrs and JSON flags of the frames that carry a value.

        See ``dcpfast.content.values.values``.
        """
        from .content.values import values
        return values(self, decompress=decompress, xattrs=xattrs, errors=errors,
                      threads=threads)

    def system_events(self) -> pa.Table:
        """One row per system event (collection and scope changes); see
        ``dcpfast.content.events``."""
        from .content.events import system_events
        return system_events(self)

    def with_names(self, manifest) -> pa.Table:
        """``to_arrow()`` plus ``scope`` and ``collection`` names from ``manifest``."""
        return manifest.label(self)

    # -- Arrow, pandas, polars ---------------------------------------------------------------

    def to_arrow(self, *, binary_view: bool = False) -> pa.Table:
        """A ``pyarrow.Table``: numeric columns zero-copy, plus ``key`` and ``value``.

        Keys and values are gathered into ``binary`` columns (``large_binary`` past
        2 GiB), or, with ``binary_view=True``, exported as views into ``data``
        without a copy.
        """
        import pyarrow as pa

        bitmaps = self.validity_buffers()
        arrays, fields = [], []
        for name, column in self._arrays.items():
            arrays.append(pa.Array.from_buffers(
                S.arrow_type(name), len(column), [*bitmaps(name), pa.py_buffer(column)]))
            fields.append(name)
        pairs = {name: pair for name, pair in S.BINARY.items()
                 if pair[0] in self._arrays and pair[1] in self._arrays}
        if binary_view:
            arrays += self._binary_views(pairs, bitmaps)
        else:
            arrays += [self.binary_array(off, length, bitmaps(off))
                       for off, length in pairs.values()]
        fields += pairs
        return pa.Table.from_arrays(arrays, names=fields)

    def validity_buffers(self) -> Callable[[str], list]:
        """A function giving the Arrow validity buffer (``[buffer]``, or ``[None]`` when all
        valid) of a column. Columns carried by the same frame kinds share one bitmap; the
        bitmaps of every such group among the batch's columns are made together, in one
        compiled pass over the kinds, on the first column that needs one."""
        import pyarrow as pa

        shared = {}

        def make(name):
            tables = {}
            for column in (*self._arrays, name):
                table = S.validity_table(column, self.collections)
                if table is not None and column != "stream_id":
                    tables.setdefault(table.tobytes(), table)
            carried = np.array(list(tables.values()), np.uint8)
            state, bits = _core.scan.validity_bitmaps(self._kinds,
                                                 carried.reshape(len(tables), len(P.KINDS)))
            for key, full, row in zip(tables, state, bits):
                shared[key] = [None] if full == 2 else [pa.py_buffer(row)]

        def bitmap(name):
            if name == "stream_id":
                return _bitmap(self[name] != 0)
            table = S.validity_table(name, self.collections)
            if table is None:
                return [None]
            key = table.tobytes()
            if key not in shared:
                make(name)
            return shared[key]
        return bitmap

    def _starts(self, off, out=None):
        """Positions in ``data`` of the column ``off`` (a stream-offset column), as uint64
        (written to ``out`` when given); frames that do not carry it hold 0 there as they
        do in the column."""
        starts = self[off]
        if out is None:
            out = np.empty(len(starts), np.uint64)
        if self.base_offset:
            base = np.uint64(self.base_offset)
            np.maximum(starts, base, out=out)
            out -= base
        else:
            out[...] = starts
        return out

    def binary_array(self, off, length, validity) -> pa.Array:
        """The offset/length pair as a ``binary`` column, bytes gathered out of ``data``
        (frames without the field are null and hold no bytes: their length column is 0);
        ``validity`` is its Arrow validity buffer (from ``validity_buffers``)."""
        import pyarrow as pa

        bounds = np.zeros(len(self) + 1, np.int64)
        np.cumsum(self[length], dtype=np.int64, out=bounds[1:])
        data = np.empty(int(bounds[-1]), np.uint8)
        _core.scan.gather(self._view, self._starts(off), bounds, data)
        offsets: np.ndarray
        if bounds[-1] <= _INT32_MAX:
            kind, offsets = pa.binary(), bounds.astype(np.int32)
        else:
            kind, offsets = pa.large_binary(), bounds
        return pa.Array.from_buffers(kind, len(self), [*validity, pa.py_buffer(offsets),
                                                       pa.py_buffer(data)])

    def _binary_views(self, pairs, bitmaps):
        """``binary_view`` columns over ``data``, no bytes copied, one for each of ``pairs``
        (name: offset/length columns); ``bitmaps(off)`` gives a column's validity buffer.
        The structs come from the scan when it wrote them, else from one pass over the
        frames for all pairs."""
        import pyarrow as pa

        if not pairs:
            return []
        n, size = len(self), len(self._view)
        bits = window_bits(size)
        if self._views is not None:
            views = [self._views[name] for name in pairs]
        else:
            starts = recycled((len(pairs), n), np.uint64)
            lengths = recycled((len(pairs), n), np.int64)
            for row, (off, length) in enumerate(pairs.values()):
                self._starts(off, starts[row])
                lengths[row] = self[length]
            views = recycled((len(pairs), 16 * n), np.uint8)
            _core.scan.views(self._view, starts, lengths, views, bits)
        windows = [pa.py_buffer(self._view[lo:lo + 2 * (1 << bits)])
                   for lo in range(0, max(size, 1), 1 << bits)]
        return [pa.Array.from_buffers(pa.binary_view(), n,
                                      [*bitmaps(off), pa.py_buffer(views[row]), *windows])
                for row, (off, _) in enumerate(pairs.values())]

    def __arrow_c_stream__(self, requested_schema=None):
        """``to_arrow()`` as an Arrow C stream: ``pa.table(batch)``, ``pl.DataFrame(batch)``
        and DuckDB read a batch directly."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)

    def __dataframe__(self, nan_as_null: bool = False, allow_copy: bool = True):
        """``to_arrow()`` through the dataframe interchange protocol
        (``pandas.api.interchange.from_dataframe(batch)``)."""
        return self.to_arrow().__dataframe__(nan_as_null=nan_as_null, allow_copy=allow_copy)

    def to_pandas(self, *, arrow_dtypes: bool = True) -> pd.DataFrame:
        """A pandas DataFrame; Arrow-backed dtypes keep nulls and unsigned types intact."""
        pd = _optional("pandas", "pandas", "to_pandas()")
        table = self.to_arrow()
        if arrow_dtypes:
            return table.to_pandas(types_mapper=pd.ArrowDtype)
        return table.to_pandas()

    def to_polars(self) -> pl.DataFrame:
        """A polars DataFrame (keys and values as zero-copy binary views)."""
        pl = _optional("polars", "polars", "to_polars()")
        return pl.from_arrow(self.to_arrow(binary_view=True))


#: The attributes a ``FrameBatch`` sets itself (a subclass's others are pickled as they are).
_BATCH_FIELDS = frozenset({"data", "_view", "_arrays", "_kinds", "_views", "start",
                           "consumed", "errors", "mode", "collections", "base_offset"})


def _unpickled(cls: type[FrameBatch], state: dict, added: dict) -> FrameBatch:
    """A pickled batch made again: ``state`` is the constructor's, ``added`` a subclass's."""
    batch = cls.__new__(cls)
    FrameBatch.__init__(batch, **{**state, "view": byte_view(state["data"])})
    vars(batch).update(added)
    return batch


def _opcode(op: int | str) -> int:
    """An opcode given as a number, an ``Opcode`` member or a name in any case."""
    if not isinstance(op, str):
        return int(op)
    try:
        return int(P.Opcode[op.upper()])
    except KeyError:
        names = [o.name.lower() for o in P.Opcode]
        close = difflib.get_close_matches(op.lower(), names, n=1)
        hint = text("did_you_mean", name=close[0]) if close else ""
        raise ValueError(text("unknown_opcode", name=op, hint=hint,
                              names=", ".join(names))) from None


def _optional(module: str, extra: str, what: str) -> ModuleType:
    """An optional dependency, or an ImportError that names the extra installing it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        raise ImportError(text("needs_extra", what=what, module=module, extra=extra),
                          name=module) from e


def window_bits(size: int) -> int:
    """Log2 of the data buffers of binary views over ``size`` bytes (one buffer, or windows
    overlapping by half past 2 GiB, since a view's offset is a signed 32-bit number)."""
    return 31 if size <= _INT32_MAX else _WINDOW_BITS


def recycled(shape, dtype) -> np.ndarray:
    """An uninitialised array in memory the scan core recycles (a large one would cost a
    fault and a zeroing per page if it were fresh)."""
    dtype = np.dtype(dtype)
    room = _core.scan.room(int(np.prod(shape)) * dtype.itemsize)
    return np.frombuffer(room, dtype).reshape(shape)


def _bitmap(valid):
    """Arrow validity buffer for a bool mask: ``[buffer]`` or ``[None]`` when all valid."""
    import pyarrow as pa

    if valid is None or valid.all():
        return [None]
    return [pa.py_buffer(np.packbits(valid, bitorder="little"))]
