"""``FrameBatch``: the columns of a scanned buffer, and the one place that turns a scan
core's answer into a batch (``scan_view``)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, overload

import numpy as np
import pyarrow as pa

from . import _core, arrow, buffers
from . import protocol as P
from . import schema as S
from ._core import ScanRequest, ScanResult
from .buffers import byte_view, window_bits
from .errors import DcpFormatError, SkippedRegion, describe, optional, text
from .formats import HEAD_BYTES, other_format
from .options import ScanOptions

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

#: "cython" or "python": which cores (scan, capture walk, values) this process uses.
IMPLEMENTATION = _core.IMPLEMENTATION

_LAST_OFFSET = 2**64 - 1            # stream positions are uint64

#: How a buffer's frames are found: the core's ``scan_buffer`` (one thread), or a function
#: of the same arguments that spreads the walk over threads (``io.threaded``).
Scanner = Callable[[memoryview, ScanRequest], ScanResult]


def scan_view(data, view, options: ScanOptions, *, start: int = 0,
              max_frames: int | None = None, base_offset: int = 0, final: bool = False,
              unverified: bool = False, scanner: Scanner | None = None
              ) -> tuple[FrameBatch, bool]:
    """The frames of ``view`` (the byte view of ``data``) from ``start`` as a batch, found
    by ``scanner`` (None: the core, one thread), resuming a skip-mode scan whose first
    frame still awaits its resynchronisation checks when ``unverified``. Returns the batch
    and whether the frame at its ``consumed`` position awaits them (see
    ``_core.ScanRequest``): the state ``io.resume`` carries from chunk to chunk. The
    other arguments are those of ``dcpfast.scan``."""
    if not 0 <= start <= len(view):
        raise ValueError(f"start {start} outside the buffer of {len(view)} bytes")
    if max_frames is not None and max_frames < 0:
        raise ValueError(f"max_frames must be None or at least 0, not {max_frames}")
    if not 0 <= base_offset <= _LAST_OFFSET - len(view):
        raise ValueError(f"base_offset {base_offset} with {len(view)} bytes puts stream "
                         "positions outside 0..2**64-1")
    collections = options.collections
    if collections is None:
        collections = bool(_core.scan.sniff_collections(view, start))
    request = ScanRequest(
        start, options.columns, collections, options.errors == "skip",
        -1 if max_frames is None else max_frames, options.max_frame_size, base_offset, final,
        unverified, window_bits(len(view)) if options.binary_views else 0)
    result = (scanner or _core.scan.scan_buffer)(view, request)
    if result.failure:
        pos, code, a, b = result.failure
        reason = describe(code, a, b)
        if base_offset + pos == 0 and code == P.Problem.BAD_MAGIC:    # the input's first byte
            what = other_format(bytes(view[pos:pos + HEAD_BYTES]))
            reason += text("other_format", what=what) if what else ""
        raise DcpFormatError(base_offset + pos, reason)
    skipped = [SkippedRegion(base_offset + pos, length, describe(code, a, b))
               for pos, length, code, a, b in result.regions]
    batch = FrameBatch(data, view, result.arrays, result.kinds, start=start,
                       consumed=result.consumed, errors=skipped, collections=collections,
                       base_offset=base_offset, mode=options.errors, views=result.views)
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

    def __len__(self) -> int:
        """The number of frames."""
        return len(self._kinds)

    def __repr__(self):
        lo, hi = self._covered() if len(self) else (self.start, self.consumed)
        if not len(self) or lo >= hi:       # no offsets scanned: the bytes the scan walked
            lo, hi = self.start, self.consumed
        return (f"<FrameBatch {len(self)} frames, bytes {self.base_offset + lo}.."
                f"{self.base_offset + hi}, collections={self.collections}, "
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
        schema = self[:0].to_arrow().schema
        for name, (_, length) in S.BINARY.items():
            if name in schema.names and int(self[length].sum(dtype=np.uint64)) > buffers.INT32_MAX:
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
        """Pickled by value: the columns and the bytes of ``data`` the frames cover, not the
        whole buffer (a memory map cannot be pickled); offsets keep their stream positions."""
        lo, hi = self._covered()
        state = parts_of(self)
        state.update(data=bytes(self._view[lo:hi]), view=None, views=None,
                     base_offset=self.base_offset + lo,
                     start=min(max(self.start - lo, 0), hi - lo),
                     consumed=min(max(self.consumed - lo, 0), hi - lo))
        added = {k: v for k, v in vars(self).items() if k not in _BATCH_FIELDS}
        return _unpickled, (type(self), state, added)

    def _covered(self) -> tuple[int, int]:
        """Positions in ``data`` of the first byte the frames use and past the last: whole
        frames where ``offset`` and ``body_len`` were scanned, and keys and values."""
        extents = []
        if "offset" in self._arrays and "body_len" in self._arrays:
            extents.append((self._arrays["offset"], self._arrays["body_len"] + P.HEADER_SIZE))
        extents += [(self._arrays[off], self._arrays[length])
                    for off, length in S.BINARY.values()
                    if off in self._arrays and length in self._arrays]
        lo, hi = len(self._view), 0
        for starts, lengths in extents:
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
        if name in S.WHERE_NONZERO:
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
        if name in S.WHERE_NONZERO:
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

        See ``dcpfast.values.values``.
        """
        from .values import values  # a convenience above this layer: imported when called
        return values(self, decompress=decompress, xattrs=xattrs, errors=errors,
                      threads=threads)

    def system_events(self) -> pa.Table:
        """One row per system event (collection and scope changes); see
        ``dcpfast.events``."""
        from .events import system_events  # a convenience above this layer
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
        return arrow.table(self._arrays, self._kinds, self._view,
                           collections=self.collections, base_offset=self.base_offset,
                           views=self._views, binary_view=binary_view)

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
        pd = optional("pandas", "pandas", "to_pandas()")
        table = self.to_arrow()
        if arrow_dtypes:
            return table.to_pandas(types_mapper=pd.ArrowDtype)
        return table.to_pandas()

    def to_polars(self) -> pl.DataFrame:
        """A polars DataFrame (keys and values as zero-copy binary views)."""
        pl = optional("polars", "polars", "to_polars()")
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


# -- the internal API: what dcpfast's own modules (values, events, streams, documents,
# pcap, spark) read of a batch besides its public members ------------------------------


def require_columns(batch: FrameBatch, names, what: str) -> None:
    """``ValueError`` where ``batch`` was scanned without one of the columns ``names``
    that ``what`` reads."""
    missing = [name for name in names if name not in batch]
    if missing:
        raise ValueError(f"{what} needs the columns {', '.join(missing)}; scan with "
                         "columns=None or include them")


def view_of(batch: FrameBatch) -> memoryview:
    """The flat byte view of ``batch.data`` the columns point into (positions are
    ``offset - base_offset``)."""
    return batch._view


def kinds_of(batch: FrameBatch) -> np.ndarray:
    """The kind of each frame: an index into ``protocol.KINDS``."""
    return batch._kinds


def parts_of(batch: FrameBatch) -> dict:
    """The constructor arguments of ``batch``, for a batch made from its parts (a subclass
    that adds to it, a copy with other errors or rows)."""
    return dict(data=batch.data, view=batch._view, arrays=batch._arrays, kinds=batch._kinds,
                start=batch.start, consumed=batch.consumed, errors=batch.errors,
                collections=batch.collections, base_offset=batch.base_offset,
                mode=batch.mode, views=batch._views)


def keep_columns(batch: FrameBatch, names) -> None:
    """Drop every numpy column of ``batch`` but ``names`` (a capture scans a few more
    than asked)."""
    batch._arrays = {k: v for k, v in batch._arrays.items() if k in names}


def validity_of(batch: FrameBatch) -> Callable[[str], list]:
    """``arrow.validity`` of the batch's columns: a column's Arrow validity buffer."""
    return arrow.validity(batch._arrays, batch._kinds, batch.collections)


def binary_of(batch: FrameBatch, off: str, length: str, bitmap: list) -> pa.Array:
    """The offset/length pair ``off``/``length`` as a ``binary`` column gathered out of
    the batch's input; ``bitmap`` is its validity buffer (from ``validity_of``)."""
    return arrow.binary(batch._view, arrow.positions(batch[off], batch.base_offset),
                        batch[length], bitmap)
