"""Document values in bulk: bodies (Snappy inflated, xattr section removed), xattrs, JSON flag.

The per-value loops (Snappy preambles, xattr sections, the final copy) run in the values
core (``_core.values``: compiled, or its pure-Python twin); the only
Python call made per value is the Snappy library's, for the values that are compressed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import numpy as np
import pyarrow as pa

from . import _core as core
from . import buffers
from . import protocol as P
from .arrow import cast_map, mask_bitmap
from .batch import kinds_of, view_of
from .errors import SkippedRegion, checked, checked_mode, describe, with_skipped
from .threads import parts_for, run, shares, threads_of

if TYPE_CHECKING:
    from .batch import FrameBatch

__all__ = ["PIECE_BYTES", "iter_values", "values", "values_schema"]
_XATTRS = ("split", "drop", "keep")
_NEEDED = ("offset", "datatype", "value_offset", "value_len")
_THREAD_BYTES = 1 << 20       # values a thread decodes at least, in inflated bytes
_ROW_WEIGHT = 64              # the work of one value besides its bytes, in bytes
#: Inflated bytes of values one piece of ``values`` works on (``iter_values``).
PIECE_BYTES = 64 << 20
_Piece = TypeVar("_Piece")      # what ``_pieces`` makes of a piece: a table, its extents


def values_schema(*, large: bool = False) -> pa.Schema:
    """Arrow schema of ``values``; ``large`` is the form for a batch whose values may take
    more than 2 GiB inflated (``large_binary``/``large_string``)."""
    text = pa.large_string() if large else pa.string()
    return pa.schema([("index", pa.int64()), ("offset", pa.uint64()),
                      ("body", pa.large_binary() if large else pa.binary()),
                      ("xattrs", pa.map_(text, text)), ("is_json", pa.bool_())])


def values(batch: FrameBatch, *, decompress: bool = True, xattrs: str = "split",
           errors: str | None = None, threads: int | None = None) -> pa.Table:
    """The document values of ``batch`` as a ``pyarrow.Table`` (see ``values_schema``).

    One row per mutation, prepare, deletion and expiration, in batch order: every frame
    whose kind can carry a document, including those whose value is empty (a plain
    tombstone, a prepared delete, a stream opened without values), so that the rows are
    exactly the batch's document changes and line up with its keys and seqnos. ``index``
    is the frame's row in ``batch`` and ``offset`` its stream position, for joining back.

    ``body``: the value, Snappy-inflated when its datatype has 0x02 and ``decompress`` is
    true, without its xattr section when the datatype has 0x04, unless ``xattrs="keep"``.
    ``xattrs`` is the section as a map under ``"split"``, and null for values without a
    section or under ``"drop"``/``"keep"``. ``is_json`` is datatype bit 0x01 as sent.

    An empty value gives an empty body and null xattrs whatever its datatype says: a
    stream opened with NoValueWithUnderlyingDatatype keeps the document's bits on empty
    values (MB-40493), so nothing is inflated or parsed there. With ``decompress=False``
    a Snappy value is returned as sent, with null xattrs: its section cannot be found
    without inflating it; uncompressed values are split as usual.

    A section must be well formed (the reference's rules): its length fits the value,
    each pair is a length word, a non-empty key, NUL, the value, NUL, with the length
    exact, the pairs end exactly at the section's end, keys and values are valid UTF-8
    without NULs and keys are unique. Values are not checked to be JSON and the server's
    key-naming rules are not applied: they restrict what clients may store, not how the
    bytes read. ``"split"`` and ``"drop"`` check sections alike; ``"keep"`` does not look
    inside them.

    ``errors`` (None: ``batch.mode``): under ``"strict"`` the first value that does not
    decode (broken Snappy block or xattr section) raises ``DcpFormatError`` with its
    frame's offset; under ``"skip"`` its body and xattrs are null and the frame is listed
    in the table's metadata as ``SkippedRegion(frame offset, frame length, reason)``, in
    stream order (``dcpfast.skipped_regions(table)``). The batch is left as it is: its
    ``errors`` keep what the scan skipped, however often ``values`` is called.

    ``threads`` (None: the cores this process may use) decode the values of a batch
    holding many of them in parallel, each thread a run of them; the table is the same
    whatever the number (but for its chunks).

    Memory: the table holds the inflated bodies (Snappy inflates up to about 21 times);
    besides it, the work runs in pieces of at most ``PIECE_BYTES`` of inflated values
    (``iter_values``), so that what is inflated and copied at once stays bounded whatever
    the batch holds, with any number of threads. The columns of a table of several pieces
    have one chunk per piece (with threads, one per run of a piece).
    """
    mode = _mode(batch, errors)
    pieces, damaged = [], []
    for piece, found in _pieces(batch, _piece, decompress=decompress, xattrs=xattrs,
                                piece_bytes=0, threads=threads):
        damaged += checked(mode, found)
        pieces.append(piece)
    return with_skipped(pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces), damaged)


def iter_values(batch: FrameBatch, *, decompress: bool = True, xattrs: str = "split",
                errors: str | None = None, piece_bytes: int = 0,
                threads: int | None = None) -> Iterator[pa.Table]:
    """``values(batch)`` in consecutive pieces: tables of the same schema whose rows, one
    after the other, are those of ``values``; each inflates and copies at most
    ``piece_bytes`` of values (0: ``PIECE_BYTES``; a larger value is a piece of its own).
    A caller that writes each piece before taking the next holds one piece at a time.
    With ``threads``, a piece of at least 2 MiB is cut again into up to one piece
    a thread, decoded at the same time and yielded in order: what is decoded at once stays
    within ``piece_bytes``. Damage is met in stream order: in strict mode raised before
    the piece that holds it is yielded, in skip mode listed in that piece's metadata
    (``dcpfast.skipped_regions(piece)``).
    """
    mode = _mode(batch, errors)
    for piece, damaged in _pieces(batch, _piece, decompress=decompress, xattrs=xattrs,
                                  piece_bytes=piece_bytes, threads=threads):
        yield with_skipped(piece, checked(mode, damaged))


def value_extents(batch: FrameBatch, *, threads: int | None = None,
                  frames: np.ndarray | None = None
                  ) -> tuple[list[Extents], list[SkippedRegion]]:
    """Where the values of ``batch`` lie once decoded, without copying them: per piece
    of ``iter_values`` (inflated, xattrs split), an ``Extents``; and the damaged values, in
    stream order, whatever the batch's mode (they do not decode: ``valid`` is false).
    ``frames`` (a flag per frame) limits it to those frames."""
    extents: list[Extents] = []
    damaged: list[SkippedRegion] = []
    for piece, found in _pieces(batch, _extents, decompress=True, xattrs="split",
                                piece_bytes=0, threads=threads, frames=frames):
        extents.append(piece)
        damaged += found
    return extents, damaged


def _mode(batch: FrameBatch, errors: str | None) -> str:
    """The errors mode of a call: ``errors``, checked, or None: the batch's."""
    return batch.mode if errors is None else checked_mode(errors)


def _pieces(batch: FrameBatch, build: Callable[..., tuple[_Piece, list[SkippedRegion]]], *,
            decompress: bool, xattrs: str, piece_bytes: int, threads: int | None,
            frames: np.ndarray | None = None) -> Iterator[tuple[_Piece, list[SkippedRegion]]]:
    """``build(batch, rows, decompress, xattrs, large)`` of each piece of the values of
    ``batch`` (see ``iter_values``; of ``frames`` only, a flag per frame, where given),
    in order, each with its damaged values."""
    threads = threads_of(threads)
    if xattrs not in _XATTRS:
        raise ValueError(f"xattrs must be one of {_XATTRS}, not {xattrs!r}")
    missing = [name for name in _NEEDED if name not in batch.columns]
    if missing:
        raise ValueError(f"values() needs the columns {', '.join(_NEEDED)}; this batch was "
                         f"scanned without {', '.join(missing)}")

    valued = P.DOCUMENT_VALUE_KINDS[kinds_of(batch)]
    rows = np.flatnonzero(valued if frames is None else valued & frames)
    declared = _sizes(batch, rows, decompress)
    sizes = np.maximum(declared, 0)
    large = int(sizes.sum()) > buffers.INT32_MAX
    ends = np.cumsum(sizes)
    limit, at = piece_bytes or PIECE_BYTES, 0
    while True:                     # pieces by the running total: n log n at worst
        stop = max(at + 1, int(np.searchsorted(ends, (ends[at - 1] if at else 0) + limit,
                                               side="right")))
        weights = sizes[at:stop] + _ROW_WEIGHT
        cuts = [at + cut for cut in shares(weights, parts_for(int(weights.sum()), threads,
                                                              _THREAD_BYTES))]
        for piece, damaged in run([lambda a=a, b=b: build(batch, rows[a:b], declared[a:b],
                                                          decompress, xattrs, large)
                                   for a, b in zip(cuts, cuts[1:])], threads):
            yield piece, damaged
        if stop >= len(rows):
            return
        at = stop


def text_or_null(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Binary values (keys) as strings; one that is not valid UTF-8 becomes null. The
    buffers are taken as they are where every value is valid (the usual case); where
    every byte they hold is ASCII (keys mostly are) no value needs a closer look."""
    keys = keys.cast(pa.binary())
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    buffers = keys.buffers()
    text = pa.Array.from_buffers(pa.string(), len(keys), buffers, offset=keys.offset)
    try:
        text.validate(full=not _ascii(buffers[2]))
        return text
    except pa.ArrowInvalid:
        out = []
        for key in keys.to_pylist():
            try:
                out.append(None if key is None else key.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
        return pa.array(out, pa.string())


def _ascii(data) -> bool:
    """Whether every byte of ``data`` (an Arrow buffer, or None) is ASCII."""
    return data is None or not data.size or int(np.frombuffer(data, np.uint8).max()) < 0x80


def _sizes(batch, rows, decompress) -> np.ndarray:
    """What each value at ``rows`` takes inflated: its length, or with ``decompress`` the
    length its Snappy block declares (-1 when it declares none that can be)."""
    lengths = batch["value_len"][rows].astype(np.int64)
    snappy = np.flatnonzero((lengths > 0) &
                            (batch["datatype"][rows] & int(P.Datatype.SNAPPY) != 0))
    if decompress and len(snappy):
        starts = batch["value_offset"][rows[snappy]].astype(np.int64) - batch.base_offset
        declared = np.empty(len(snappy), np.int64)
        core.values.snappy_lengths(view_of(batch), starts, lengths[snappy], declared)
        lengths[snappy] = declared
    return lengths


class Extents(NamedTuple):
    """Where the decoded values of some frames lie (``value_extents``): value ``i`` (of
    frame ``rows[i]`` of its batch) is ``length[i]`` bytes at ``start[i]`` of ``view``
    (``source[i]`` 0: the batch's bytes) or of ``inflated`` (1); ``valid`` is false where
    it did not decode (length 0); ``xattrs`` its section as a map (null where none)."""

    rows: np.ndarray
    view: memoryview
    inflated: np.ndarray
    source: np.ndarray
    start: np.ndarray
    length: np.ndarray
    valid: np.ndarray
    xattrs: pa.Array


def _piece(batch, rows, sizes, decompress, xattrs, large
           ) -> tuple[pa.Table, list[SkippedRegion]]:
    """The values table of the frames at ``rows`` (see ``values``; ``sizes``: ``_sizes``
    of them), on one thread, and its damaged values as ``(frame offset, frame length,
    reason)`` in stream order; ``large``: the schema with 64-bit offsets, chosen for the
    whole batch."""
    extents, damaged = _extents(batch, rows, sizes, decompress, xattrs, large)
    n = len(rows)
    bounds = np.zeros(n + 1, np.int64)
    np.cumsum(extents.length, out=bounds[1:])
    data = buffers.pooled(int(bounds[-1]))
    core.values.gather_chunks([extents.view, extents.inflated],
                              extents.source.astype(np.int32), extents.start, bounds, data)
    schema = values_schema(large=large)
    body = pa.Array.from_buffers(schema.field("body").type, n, [
        *mask_bitmap(extents.valid),
        pa.py_buffer(bounds if large else bounds.astype(np.int32)),
        pa.py_buffer(data)])
    map_array = extents.xattrs
    if map_array.type != schema.field("xattrs").type:     # large bodies, small xattrs
        map_array = cast_map(map_array, schema.field("xattrs").type)
    is_json = batch["datatype"][rows] & int(P.Datatype.JSON) != 0
    return pa.Table.from_arrays([pa.array(rows), pa.array(batch["offset"][rows]), body,
                                 map_array, pa.array(is_json)], schema=schema), damaged


def _extents(batch, rows, sizes, decompress, xattrs, large
             ) -> tuple[Extents, list[SkippedRegion]]:
    """Where the values of the frames at ``rows`` (of ``_sizes`` ``sizes``) lie decoded
    (Snappy inflated into a buffer of their own, xattr sections checked and split off), on
    one thread, and the damaged ones as ``(frame offset, frame length, reason)`` in stream
    order."""
    view = view_of(batch)
    n = len(rows)
    offsets = batch["offset"][rows]
    datatype = batch["datatype"][rows]
    starts = batch["value_offset"][rows].astype(np.int64)
    starts -= batch.base_offset
    lengths = batch["value_len"][rows].astype(np.int64)
    frame_ends = starts + lengths       # the value ends its frame
    source = np.zeros(n, np.uint8)
    present = lengths > 0
    problems: list[tuple] = []

    compressed = present & (datatype & int(P.Datatype.SNAPPY) != 0)
    inflated = np.empty(0, np.uint8)
    if decompress and compressed.any():
        at = np.flatnonzero(compressed)
        inflated = _inflate(view, at, sizes[at], starts, lengths, source, problems)
        compressed[:] = False           # every block is inflated or failed
        present = lengths > 0
    failed = np.zeros(n, bool)
    for row, *_ in problems:
        failed[row] = True

    sections = present & ~compressed & ~failed & (datatype & int(P.Datatype.XATTR) != 0)
    map_array = None
    if xattrs != "keep" and sections.any():
        map_array = _split(view, inflated, np.flatnonzero(sections), starts, lengths, source,
                           failed, problems, build=xattrs == "split", n=n)

    damaged = _damaged(batch, problems, offsets, frame_ends)
    lengths[failed] = 0
    if map_array is None:
        map_array = pa.nulls(n, values_schema(large=large).field("xattrs").type)
    return Extents(rows, view, inflated, source, starts, lengths, ~failed, map_array), damaged


def _inflate(view, rows, declared, starts, lengths, source, problems) -> np.ndarray:
    """Inflate the Snappy values at ``rows`` (which declare the lengths ``declared``, -1
    where unsound) into one buffer; point their ``starts``, ``lengths`` and ``source`` at
    it. Failures join ``problems`` with a zero length."""
    import cramjam

    sound = declared >= 0
    unsound = rows[~sound]
    if len(unsound):               # what is wrong with them, as snappy_lengths words it
        for i, *problem in core.values.snappy_lengths(view, starts[unsound],
                                                      lengths[unsound],
                                                      np.empty(len(unsound), np.int64)):
            problems.append((int(unsound[i]), *problem))
    rows, declared = rows[sound], declared[sound]
    bounds = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(declared, out=bounds[1:])
    out = buffers.pooled(int(bounds[-1]))
    for i, *problem in core.values.inflate(view, starts[rows], lengths[rows], out, bounds,
                                           cramjam.snappy.decompress_raw_into):
        problems.append((int(rows[i]), *problem))
    starts[rows] = bounds[:-1]
    lengths[rows] = declared
    source[rows] = 1
    return out


def _split(view, inflated, rows, starts, lengths, source, failed, problems, *, build, n):
    """Check the xattr sections of the values at ``rows`` and move their ``starts`` past
    them; mark damaged ones in ``failed``. With ``build``, return the sections as an
    Arrow map column of ``n`` rows (null where a row has no sound section)."""
    skip = np.empty(len(rows), np.int64)
    pairs = np.empty(len(rows), np.int64)
    key_bytes, value_bytes, found = core.values.parse_xattrs(
        view, inflated, source[rows], starts[rows], lengths[rows], skip, pairs)
    for i, *problem in found:
        problems.append((int(rows[i]), *problem))
        failed[rows[i]] = True
    result = None
    if build:
        total = int(pairs.sum())
        key_offsets = np.empty(total + 1, np.int64)
        value_offsets = np.empty(total + 1, np.int64)
        key_data = np.empty(key_bytes, np.uint8)
        value_data = np.empty(value_bytes, np.uint8)
        core.values.xattr_strings(view, inflated, source[rows], starts[rows], lengths[rows], pairs,
                            key_offsets, key_data, value_offsets, value_data)
        large = max(key_bytes, value_bytes) > buffers.INT32_MAX
        text = pa.large_string() if large else pa.string()
        offset_type = np.int64 if large else np.int32
        keys = pa.Array.from_buffers(text, total, [None, pa.py_buffer(
            key_offsets.astype(offset_type)), pa.py_buffer(key_data)])
        texts = pa.Array.from_buffers(text, total, [None, pa.py_buffer(
            value_offsets.astype(offset_type)), pa.py_buffer(value_data)])
        counts = np.zeros(n, np.int64)
        counts[rows] = pairs
        map_offsets = np.zeros(n + 1, np.int32)
        np.cumsum(counts, out=map_offsets[1:])
        valid = np.zeros(n, bool)
        valid[rows] = True
        valid &= ~failed
        result = pa.MapArray.from_arrays(pa.array(map_offsets), keys, texts,
                                         type=pa.map_(text, text), mask=pa.array(~valid))
    starts[rows] += skip
    lengths[rows] -= skip
    return result


def _damaged(batch, problems, offsets, frame_ends) -> list[SkippedRegion]:
    """``problems`` (row, code, a, b) as regions (frame offset, frame length, reason), in
    stream order."""
    problems.sort(key=lambda p: p[0])
    return [SkippedRegion(int(offsets[row]),
                          int(frame_ends[row]) + batch.base_offset - int(offsets[row]),
                          describe(P.ValueProblem(code), a, b))
            for row, code, a, b in problems]
