"""Decoding DCP dumps on Apache Spark: one schema, three read paths and a Parquet job.

Every path yields the same rows: one per frame, with the columns of ``dcpfast.COLUMNS``
in Spark types, ``key`` (binary), ``key_str`` (the key as a string where it is valid
UTF-8, else null), ``value`` (binary), ``source`` (the file) and, with ``values=True``,
``content`` (the document body, decompressed, without xattrs) and ``xattrs``.

Spark has no unsigned integers: uint8 columns become ``short``, uint16 ``int``, uint32
``long`` (values kept), and uint64 columns (CAS, seqnos, offsets) become ``long`` by
reinterpreting their 64 bits, so values of 2**63 and above read as negative numbers.
``unsigned`` turns such a column back into its unsigned value.

* ``read_dcp(spark, path, method="datasource")``: the ``dcp`` Python data source reads
  the files itself (local paths or any pyarrow filesystem URI), packs small files into
  partitions and splits large ones into byte ranges (see ``range_batches``).
* ``method="arrow"`` / ``"pandas"``: Spark's ``binaryFile`` source and ``mapInArrow``
  (``decode_arrow``) or ``mapInPandas`` (``decode_pandas``); files must be under 2 GiB.

pyspark is imported only by the functions that need it; the decoding itself runs on the
executors, which need dcpfast installed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from . import protocol as P
from . import schema as S
from .batch import FrameBatch, _byte_view, _core, _recycled, _scan
from .errors import DcpFormatError

log = logging.getLogger(__name__)

#: Input bytes decoded per Arrow batch handed to Spark: small enough (about 17,000 frames
#: of 240 bytes) for the Python worker to decode the next batch while Spark takes in the last.
BATCH_BYTES = 4 << 20
#: Target input bytes per data source partition; larger files are split into byte ranges.
PARTITION_BYTES = 128 << 20
#: How far before a byte-range cut the search for the first frame starts.
LEAD_IN_BYTES = 1 << 20
#: Bytes a split range reads beyond its end while its last resynchronisation is undecided.
_PAST_END = 64 << 10
_SPARK_INT = {"uint8": "int16", "uint16": "int32", "uint32": "int64", "uint64": "int64"}
#: Columns that are not scanner columns, in output order.
EXTRA = ("key", "key_str", "value", "source")
VALUE_COLUMNS = ("content", "xattrs")
#: Scanner columns that every frame carries, whatever the kind and the collections mode.
_ALWAYS = frozenset(n for n in S.NAMES if n != "stream_id" and all(
    S.validity_table(n, c) is None for c in (False, True)))
ERRORS = ("strict", "skip")


# -- the schema ------------------------------------------------------------------------------

def output_columns(columns: Sequence[str] | str | None = None, values: bool = False
                   ) -> tuple[str, ...]:
    """The output column names for a projection, in schema order.

    ``columns`` names any of the scanner columns, ``key``, ``key_str``, ``value``,
    ``source``, and with ``values`` ``content``/``xattrs`` (None: all of them).
    """
    everything = S.NAMES + EXTRA + (VALUE_COLUMNS if values else ())
    if columns is None:
        return everything
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    unknown = [c for c in columns if c not in everything]
    if unknown:
        more = "" if values else " (content and xattrs need values=True)"
        raise ValueError(f"unknown column(s) {', '.join(map(repr, unknown))}{more}; "
                         f"known: {', '.join(everything)}")
    return tuple(c for c in everything if c in columns)


def arrow_schema(columns: Sequence[str] | str | None = None, values: bool = False):
    """The Arrow schema of the batches handed to Spark (signed types). The header columns
    every frame carries are not nullable, which spares Spark a null check per value."""

    kinds = {"key": pa.binary(), "key_str": pa.string(), "value": pa.binary(),
             "source": pa.string(), "content": pa.binary(),
             "xattrs": pa.map_(pa.string(), pa.string())}
    fields = []
    for name in output_columns(columns, values):
        if name in S.DTYPES:
            kind = getattr(pa, _SPARK_INT.get(S.DTYPES[name].name, S.DTYPES[name].name))()
            fields.append(pa.field(name, kind, nullable=name not in _ALWAYS))
        else:
            fields.append(pa.field(name, kinds[name]))
    return pa.schema(fields)


def spark_schema(columns: Sequence[str] | str | None = None, values: bool = False):
    """The Spark ``StructType`` matching ``arrow_schema`` exactly."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema(columns, values))


def __getattr__(name):
    if name == "SCHEMA":              # built on first use: pyspark is imported lazily
        return spark_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def unsigned(column):
    """A uint64 column read back as its unsigned value (``decimal(20,0)``).

    ``column`` is a column name or a Spark ``Column``. Seqnos and CAS stay below 2**63
    in practice, so the ``long`` columns already sort and compare correctly; this
    matters for values such as a snapshot end of 0xffffffffffffffff (read as -1).
    On numpy data, ``array.view(numpy.uint64)`` does the same.
    """
    from pyspark.sql import functions as F

    col = F.col(column) if isinstance(column, str) else column
    wide = col.cast("decimal(20,0)")
    return F.when(col < 0, wide + F.lit(2 ** 64).cast("decimal(20,0)")).otherwise(wide) \
        .cast("decimal(20,0)")


# -- frames to Spark's Arrow form --------------------------------------------------------------

def _scanner_columns(names) -> list[str]:
    wanted = [n for n in names if n in S.INDEX]
    wanted += [b for b in ("key", "value") if b in names]
    if "key_str" in names and "key" not in wanted:
        wanted.append("key")
    if "content" in names or "xattrs" in names:      # what values() reads
        wanted += [c for c in ("offset", "datatype", "value") if c not in wanted]
    return wanted


def to_record_batch(batch: FrameBatch, source: str | None, schema, *,
                    errors: str = "strict"):
    """The frames of ``batch`` as a ``pyarrow.RecordBatch`` of ``schema``
    (from ``arrow_schema``), with ``source`` as the provenance of every row."""
    n = len(batch)
    body = keys = None
    arrays = []
    validity = batch._bitmaps()           # columns carried by the same kinds share one

    for field in schema:
        name = field.name
        if name in S.DTYPES:
            column = batch[name]
            wide = column.view(np.int64) if column.dtype == np.uint64 else \
                column.astype(field.type.to_pandas_dtype())
            arrays.append(pa.Array.from_buffers(field.type, n, [
                *validity(name), pa.py_buffer(wide)]))
        elif name in ("key", "value") or name == "key_str":
            if name == "value":
                arrays.append(_binary(batch, "value", validity))
                continue
            keys = _binary(batch, "key", validity) if keys is None else keys
            arrays.append(keys if name == "key" else _utf8(keys))
        elif name == "source":
            arrays.append(_repeated(source, n))
        else:
            if body is None:
                body = _values(batch, errors)
            arrays.append(body[name])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _binary(batch: FrameBatch, name: str, validity):
    """The ``key`` or ``value`` column as ``binary`` (a batch holds well under 2 GiB)."""
    off, length = S.BINARY[name]
    column = batch._binary(off, length, validity(off))
    return column if column.type == pa.binary() else column.cast(pa.binary())


def _repeated(text: str | None, n: int):
    """A string column holding ``text`` ``n`` times."""

    if text is None:
        return pa.nulls(n, pa.string())
    raw = text.encode()
    offsets = (np.arange(n + 1, dtype=np.int64) * len(raw)).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(raw * n)])


def _utf8(keys):
    """Keys as strings; a key that is not valid UTF-8 becomes null."""

    text = pa.Array.from_buffers(pa.string(), len(keys), keys.buffers(), offset=keys.offset)
    try:
        text.validate(full=True)
        return text
    except pa.ArrowInvalid:
        out = []
        for key in keys.to_pylist():
            try:
                out.append(None if key is None else key.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
        return pa.array(out, pa.string())


def _values(batch: FrameBatch, errors: str) -> dict:
    """``content`` and ``xattrs`` per frame (null where a frame carries no document)."""

    from .values import values

    table = values(batch, errors=errors)
    where = np.full(len(batch), -1, np.int64)
    where[table.column("index").to_numpy()] = np.arange(table.num_rows)
    take = pa.array(where, mask=where < 0)
    text = pa.string()
    return {"content": table.column("body").combine_chunks().cast(pa.binary()).take(take),
            "xattrs": table.column("xattrs").combine_chunks().cast(pa.map_(text, text))
            .take(take)}


# -- the binaryFile paths ------------------------------------------------------------------------

def _file_batches(content, source, schema, *, collections, errors, batch_bytes,
                  max_frame_size):
    """Record batches of one whole file held in memory (a complete stream)."""
    from .io import iter_batches

    with _noted(source):
        for fb in _reported(iter_batches(content, batch_bytes, collections=collections,
                                         columns=_scanner_columns(schema.names),
                                         errors=errors, max_frame_size=max_frame_size),
                            source):
            if len(fb):
                yield to_record_batch(fb, source, schema, errors=errors)


def _reported(batches, where: str):
    """Pass ``batches`` on; when frames were skipped, log how much of ``where`` at the end
    (a warning on the executor: a skip-mode job drops damaged bytes but says so)."""
    spans = []
    for fb in batches:
        spans += [(r.offset, r.offset + r.length) for r in fb.errors]
        yield fb
    merged: list[list[int]] = []
    for start, end in sorted(spans):             # a region cut by a batch end comes twice
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if merged:
        log.warning("%s: skipped %d damaged region(s), %d bytes, the first at byte %d",
                    where, len(merged), sum(end - start for start, end in merged),
                    merged[0][0])


@contextlib.contextmanager
def _noted(source):
    """Name the file in a ``DcpFormatError`` raised while decoding it."""
    try:
        yield
    except DcpFormatError as e:
        e.add_note(f"while decoding {source}")
        raise


def spark_error(exc: BaseException) -> str:
    """A one-line account of a failed Spark job: the decoding error inside it, if any."""
    text = str(exc)
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return "Spark could not start: it needs Java 17 or later (on PATH, or JAVA_HOME)"
    found = re.search(r"DcpFormatError: ([^\n]*)(?:\n(while decoding [^\n]*))?", text)
    if found:
        return found.group(1) + (f" ({found.group(2)})" if found.group(2) else "")
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def decode_arrow(batches, *, columns=None, values: bool = False, errors: str = "strict",
                 collections: bool | None = None, batch_bytes: int = BATCH_BYTES,
                 max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE) -> Iterator:
    """``mapInArrow`` function: rows of ``binaryFile`` (``path``, ``content``) to frames.

    Use with ``arrow_schema``'s Spark twin: ``df.mapInArrow(decode_arrow, SCHEMA)``; for
    other options bind them with ``functools.partial`` and pass ``spark_schema(...)``.
    """
    schema = arrow_schema(columns, values)
    for rb in batches:
        contents = rb.column("content")
        paths = rb.column("path") if "path" in rb.schema.names else None
        for i in range(rb.num_rows):
            cell = contents[i]
            if not cell.is_valid:
                continue
            source = paths[i].as_py() if paths is not None else None
            yield from _file_batches(cell.as_buffer(), source, schema,
                                     collections=collections, errors=errors,
                                     batch_bytes=batch_bytes, max_frame_size=max_frame_size)


def decode_pandas(frames, *, columns=None, values: bool = False, errors: str = "strict",
                  collections: bool | None = None, batch_bytes: int = BATCH_BYTES,
                  max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE) -> Iterator:
    """``mapInPandas`` function: rows of ``binaryFile`` (``path``, ``content``) to frames.

    ``df.mapInPandas(decode_pandas, SCHEMA)``. Integer columns use pandas' nullable
    dtypes, so 64-bit values and nulls survive the trip through pandas.
    """
    schema = arrow_schema(columns, values)
    for pdf in frames:
        paths = pdf["path"] if "path" in pdf.columns else [None] * len(pdf)
        for source, content in zip(paths, pdf["content"]):
            if content is None:
                continue
            for rb in _file_batches(content, source, schema, collections=collections,
                                    errors=errors, batch_bytes=batch_bytes,
                                    max_frame_size=max_frame_size):
                yield rb.to_pandas(types_mapper=_pandas_type, maps_as_pydicts="strict")


def _pandas_type(kind):
    """Nullable pandas dtypes for Arrow integers (others: pandas' defaults)."""
    import pandas as pd

    if pa.types.is_integer(kind):
        return pd.ArrowDtype(kind)
    return None


# -- the dcp data source: files, byte ranges and the frame chain ------------------------------

@dataclasses.dataclass(frozen=True)
class Piece:
    """A byte range ``[lo, hi)`` of one file; ``hi == size`` and ``lo == 0`` is the file."""

    uri: str
    lo: int
    hi: int
    size: int

    @property
    def whole(self) -> bool:
        return self.lo == 0 and self.hi == self.size


def _filesystem(uri: str):
    """The pyarrow filesystem and in-filesystem path of a local path or a URI."""
    from pyarrow import fs

    if uri.startswith("file:"):
        uri = "/" + uri[5:].lstrip("/")
    if "://" in uri:
        return fs.FileSystem.from_uri(uri)
    return fs.LocalFileSystem(), os.path.abspath(uri)


def _source_name(uri: str) -> str:
    """How a file appears in ``source``: Spark's ``file:/...`` form for local files."""
    if uri.startswith("file:"):
        uri = "/" + uri[5:].lstrip("/")
    elif "://" in uri:
        return uri
    return "file:" + os.path.abspath(uri)


def list_files(paths: Sequence[str]) -> list[tuple[str, int]]:
    """``(uri, size)`` of every file under ``paths`` (directories are walked; names
    starting with ``.`` or ``_`` are skipped, as Spark's file sources do)."""
    from pyarrow import fs

    out = []
    for path in paths:
        filesystem, where = _filesystem(path)
        info = filesystem.get_file_info(where)
        if info.type == fs.FileType.NotFound:
            raise FileNotFoundError(path)
        if info.type == fs.FileType.File:
            found = [info]
        else:
            found = [i for i in filesystem.get_file_info(fs.FileSelector(where, recursive=True))
                     if i.type == fs.FileType.File
                     and not i.base_name.startswith((".", "_"))]
        prefix = path[:path.index("://") + 3] if "://" in path else ""
        for i in sorted(found, key=lambda i: i.path):
            uri = prefix + i.path if prefix and not i.path.startswith(prefix) else i.path
            out.append((uri if prefix else i.path, i.size))
    return out


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


def _compressed(uri: str) -> bool:
    """Whether a file starts with a compression magic number (then it is read whole)."""
    from .io import compression

    filesystem, where = _filesystem(uri)
    with filesystem.open_input_file(where) as f:
        return compression(bytes(f.read_at(64, 0))) is not None


def _read_into(f, pos: int, tail: np.ndarray, n: int) -> np.ndarray:
    """``tail`` followed by ``n`` bytes of ``f`` from ``pos``."""
    buf = _recycled(len(tail) + n, np.uint8)
    buf[:len(tail)] = tail
    got = len(tail)
    f.seek(pos)
    view = memoryview(buf)
    while got < len(buf):
        read = f.readinto(view[got:])
        if not read:
            raise OSError(f"file shorter than expected at byte {pos + got - len(tail)}")
        got += read
    return buf


def _frame_length(head) -> int:
    if len(head) < P.HEADER_SIZE:
        return 0
    return P.HEADER_SIZE + int.from_bytes(bytes(head[8:12]), "big")


def _chain(f, start: int, size: int, *, stop: int | None, names, collections: bool,
           errors: str, unverified: bool, batch_bytes: int, max_frame_size: int):
    """Walk the frames of ``f`` from ``start`` and yield ``(batch, consumed, pending)``.

    ``consumed`` is the stream position the walk has reached, ``pending`` whether the
    frame found there by resynchronising is still unproven. With ``stop`` the walk reads
    no further than ``stop`` until what lies before it is decided; then, in strict mode,
    only the one frame that runs past ``stop``, in skip mode what resynchronising needs.
    """
    base, tail = start, np.empty(0, np.uint8)
    while True:
        have = base + len(tail)
        need = max(_frame_length(tail) - len(tail), 0)
        if stop is None or have < stop:
            n = max(batch_bytes if stop is None else min(batch_bytes, stop - have), need)
        else:
            n = max(need, _PAST_END)
        n = min(n, size - have)
        buf = _read_into(f, have, tail, n)
        eof = have + n >= size
        past = stop is not None and base + len(buf) > stop
        batch = _scan(buf, _byte_view(buf), start=0, collections=collections, columns=names,
                      errors=errors, max_frames=1 if past and errors == "strict" else None,
                      max_frame_size=max_frame_size, base_offset=base, final=eof,
                      unverified=unverified)
        unverified = batch._unverified
        consumed = base + batch.consumed
        yield batch, consumed, unverified
        if eof and batch.consumed == len(buf):
            return
        tail = buf[batch.consumed:]
        base = consumed


def _anchor(f, lo: int, size: int, *, collections: bool, lead_in: int,
            max_frame_size: int) -> int:
    """Where the range starting at ``lo`` begins: the first frame at or after ``lo`` on
    the chain walked (resynchronising, as ``errors="skip"`` does) from ``lead_in`` bytes
    before ``lo``; the file size when there is none. The same for every caller."""
    if lo <= 0 or lo >= size:
        return min(max(lo, 0), size)
    start = max(0, lo - lead_in)
    for batch, _, _ in _chain(f, start, size, stop=None, names=("offset",),
                              collections=collections, errors="skip", unverified=start > 0,
                              batch_bytes=max(lo - start, 1 << 16) + (1 << 16),
                              max_frame_size=max_frame_size):
        offsets = batch["offset"]
        i = int(np.searchsorted(offsets, lo))
        if i < len(offsets):
            return int(offsets[i])
    return size


def range_batches(f, piece: Piece, *, names, collections: bool, errors: str,
                  batch_bytes: int = BATCH_BYTES, lead_in: int = LEAD_IN_BYTES,
                  max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE) -> Iterator[FrameBatch]:
    """The frames of one byte range of a file, as a whole-file scan would find them.

    The range owns the frames that start in ``[anchor(lo), anchor(hi))`` (``_anchor``).
    It walks the chain from ``anchor(lo)`` and must arrive exactly at ``anchor(hi)``:
    then, by induction from the file's first range (anchored at 0), every range walks
    the whole-file chain and the ranges together yield each frame once. Where the walk
    arrives elsewhere (values holding valid-looking frames across a cut, beyond the
    lead-in), ``DcpFormatError`` says so rather than yield a frame twice or not at all.
    """
    lo = _anchor(f, piece.lo, piece.size, collections=collections, lead_in=lead_in,
                 max_frame_size=max_frame_size)
    hi = _anchor(f, piece.hi, piece.size, collections=collections, lead_in=lead_in,
                 max_frame_size=max_frame_size)
    if hi < lo:
        raise DcpFormatError(hi, f"{_cut_reason(piece)}: the range after byte {piece.hi} "
                                 f"starts before this one (at {lo})")
    if lo == hi:
        return
    names = tuple(names) if "offset" in names else ("offset", *names)
    for batch, consumed, pending in _chain(
            f, lo, piece.size, stop=hi, names=names, collections=collections, errors=errors,
            unverified=False, batch_bytes=batch_bytes, max_frame_size=max_frame_size):
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
    raise DcpFormatError(hi, f"{_cut_reason(piece)}: the frames before byte {hi} do not end "
                             f"there (frames embedded in a value near the cut?); use a larger "
                             f"partition size or lead-in")


def _cut_reason(piece: Piece) -> str:
    return f"byte-range split of {piece.uri} at {piece.lo}..{piece.hi}"


def _sniff(f, size: int) -> bool:
    from .io import SNIFF_BYTES

    head = f.read_at(min(size, SNIFF_BYTES), 0)
    return bool(_core.sniff_collections(_byte_view(head), 0))


def read_piece(piece: Piece, schema, *, collections: bool | None, errors: str,
               batch_bytes: int = BATCH_BYTES, lead_in: int = LEAD_IN_BYTES,
               max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE):
    """Record batches of ``schema`` for the frames of one piece of a file."""
    with _noted(_source_name(piece.uri)):
        yield from _read_piece(piece, schema, collections=collections, errors=errors,
                               batch_bytes=batch_bytes, lead_in=lead_in,
                               max_frame_size=max_frame_size)


def _read_piece(piece, schema, *, collections, errors, batch_bytes, lead_in, max_frame_size):
    from .io import iter_batches

    filesystem, where = _filesystem(piece.uri)
    names = _scanner_columns(schema.names)
    source = _source_name(piece.uri)
    if piece.whole:
        local = filesystem.type_name == "local"  # a path: iter_batches maps it, no copy
        with contextlib.nullcontext(where) if local else \
                filesystem.open_input_stream(where) as f:
            batches = iter_batches(f, batch_bytes, collections=collections, columns=names,
                                   errors=errors, max_frame_size=max_frame_size)
            for fb in _reported(batches, source):
                if len(fb):
                    yield to_record_batch(fb, source, schema, errors=errors)
        return
    with filesystem.open_input_file(where) as f:
        if collections is None:
            collections = _sniff(f, piece.size)
        for fb in _reported(range_batches(f, piece, names=names, collections=collections,
                                          errors=errors, batch_bytes=batch_bytes,
                                          lead_in=lead_in, max_frame_size=max_frame_size),
                            f"{source} (bytes {piece.lo} to {piece.hi})"):
            yield to_record_batch(fb, source, schema, errors=errors)


def _option(options, name, default, kind=str):
    value = options.get(name.lower(), options.get(name))
    if value is None:
        return default
    if kind is bool:
        text = str(value).strip().lower()
        if text in ("auto", "none", ""):
            return None
        if text not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"option {name}: expected true/false, not {value!r}")
        return text in ("true", "1", "yes")
    return kind(value)


def _byte_size(value) -> int:
    """An int, or a size such as ``256m``/``1g``/``64k``."""
    text = str(value).strip().lower().rstrip("b")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _paths(options) -> list[str]:
    paths = options.get("paths")
    if paths:
        return list(json.loads(paths)) if paths.lstrip().startswith("[") else [paths]
    if options.get("path"):
        return [options["path"]]
    raise ValueError("the dcp data source needs a path: spark.read.format('dcp').load(path)")


def _datasource_classes():
    """The ``dcp`` data source classes (built on demand: they subclass pyspark's)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class DcpDataSource(DataSource):
        """``spark.read.format("dcp").options(...).load(path)``: DCP dumps as frame rows.

        Options: ``columns`` (comma-separated projection, reaching the scanner),
        ``values`` (add ``content``/``xattrs``), ``errors`` (strict/skip),
        ``collections`` (true/false/auto), ``partitionBytes`` (default 128m; files above
        it are split into byte ranges), ``parallelism`` (the partition count is made a
        multiple of it; ``read_dcp`` passes the session's), ``leadInBytes``,
        ``batchBytes``, ``maxFrameSize``. ``load`` takes a file, a directory or a list of them, local or
        any URI pyarrow's filesystems open (s3://, gs://, hdfs://...).
        """

        @classmethod
        def name(cls):
            return "dcp"

        def schema(self):
            return spark_schema(self.options.get("columns"),
                                bool(_option(self.options, "values", False, bool)))

        def reader(self, schema):
            return DcpReader(self.options, schema)

    class DcpReader(DataSourceReader):
        def __init__(self, options, schema):
            from pyspark.sql.pandas.types import to_arrow_schema

            self.paths = _paths(options)
            self.schema = to_arrow_schema(schema, timezone="UTC")
            self.errors = _option(options, "errors", "strict")
            if self.errors not in ERRORS:
                raise ValueError(f"option errors must be one of {ERRORS}, not {self.errors!r}")
            self.collections = _option(options, "collections", None, bool)
            self.partition_bytes = _byte_size(_option(options, "partitionBytes",
                                                      PARTITION_BYTES))
            self.parallelism = _option(options, "parallelism", 1, int)
            self.lead_in = _byte_size(_option(options, "leadInBytes", LEAD_IN_BYTES))
            self.batch_bytes = _byte_size(_option(options, "batchBytes", BATCH_BYTES))
            self.max_frame_size = _byte_size(_option(options, "maxFrameSize",
                                                     P.DEFAULT_MAX_FRAME_SIZE))

        def partitions(self):
            files = list_files(self.paths)
            parts = plan(files, self.partition_bytes, self.parallelism,
                         splittable=lambda u: not _compressed(u))
            return [InputPartition(tuple(p)) for p in parts] or [InputPartition(())]

        def read(self, partition):
            for piece in partition.value:
                yield from read_piece(piece, self.schema, collections=self.collections,
                                      errors=self.errors, batch_bytes=self.batch_bytes,
                                      lead_in=self.lead_in,
                                      max_frame_size=self.max_frame_size)

    return DcpDataSource


@functools.cache
def data_source():
    """The ``dcp`` data source class, for ``spark.dataSource.register``."""
    return _datasource_classes()


def register(spark) -> None:
    """Make ``spark.read.format("dcp")`` available in this session."""
    spark.dataSource.register(data_source())


def _parallelism(spark) -> int:
    """The session's default parallelism (1 where it cannot be asked, as on Connect)."""
    try:
        return max(int(spark.sparkContext.defaultParallelism), 1)
    except Exception:
        return 1


# -- one entry point ------------------------------------------------------------------------------

_METHODS = ("datasource", "arrow", "pandas")


def read_dcp(spark, path, method: str = "datasource", *, columns=None, values: bool = False,
             errors: str = "strict", collections: bool | None = None,
             partition_bytes: int | None = None, **options):
    """A DataFrame of the frames in ``path`` (a file, a directory, or a list of them).

    ``method``: ``"datasource"`` (the ``dcp`` source: fastest, splits large files, any
    size), ``"arrow"`` (``binaryFile`` + ``mapInArrow``) or ``"pandas"`` (``binaryFile``
    + ``mapInPandas``); the binaryFile paths read what Spark's JVM can reach, files under
    2 GiB, and lower ``spark.sql.execution.arrow.maxRecordsPerBatch`` to 1 (one file per
    batch) if it is at its default. Further ``options`` go to the ``dcp`` source.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, not {method!r}")
    if errors not in ERRORS:
        raise ValueError(f"errors must be one of {ERRORS}, not {errors!r}")
    paths = [os.fspath(path)] if isinstance(path, (str, os.PathLike)) else \
        [os.fspath(p) for p in path]
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",")]
    if method == "datasource":
        register(spark)
        reader = spark.read.format("dcp").option("errors", errors).option("values", values)
        if columns is not None:
            reader = reader.option("columns", ",".join(output_columns(columns, values)))
        if collections is not None:
            reader = reader.option("collections", collections)
        if partition_bytes is not None:
            reader = reader.option("partitionBytes", partition_bytes)
        if "parallelism" not in options:
            reader = reader.option("parallelism", _parallelism(spark))
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.option("paths", json.dumps(paths)).load()
    if options:
        raise TypeError(f"options {sorted(options)} apply to method='datasource' only")
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    if spark.conf.get(key) == "10000":
        spark.conf.set(key, "1")
    files = spark.read.format("binaryFile").load(paths).select("path", "content")
    decode = decode_arrow if method == "arrow" else decode_pandas
    func = functools.partial(decode, columns=columns, values=values, errors=errors,
                             collections=collections)
    schema = spark_schema(columns, values)
    if method == "arrow":
        return files.mapInArrow(func, schema)
    return files.mapInPandas(func, schema)


# -- the Parquet job ----------------------------------------------------------------------------

def session(master: str | None = None, app_name: str = "dcpfast", *,
            conf: dict | None = None):
    """A SparkSession: embedded ``local[*]`` by default, or on ``master``.

    On a local master the Python workers run this interpreter (``PYSPARK_PYTHON``), so
    they find the same dcpfast, and Spark's web UI stays off.
    """
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.showConsoleProgress", "false"))
    if master.startswith("local"):
        builder = builder.config("spark.ui.enabled", "false")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def task_progress(spark, desc: str, *, enabled: bool = True):
    """A tqdm bar of the finished tasks of the running Spark stages, polled twice a
    second while the block runs; on standard error, and only when that is a terminal."""
    from tqdm import tqdm

    if not (enabled and sys.stderr.isatty()):
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    bar = tqdm(desc=desc, unit="task")
    stop = threading.Event()

    def poll():
        while not stop.wait(0.5):
            stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            stages = [st for st in stages if st is not None]
            if stages:
                bar.total = sum(st.numTasks for st in stages)
                bar.n = sum(st.numCompletedTasks for st in stages)
                bar.refresh()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield
    finally:
        stop.set()
        poller.join()
        bar.close()


def decode_to_parquet(inputs: Sequence[str], out: str, *, master: str | None = None,
                      method: str = "datasource", partition_by: Sequence[str] = ("vbucket",),
                      columns=None, values: bool = False, errors: str = "strict",
                      collections: bool | None = None, mode: str = "errorifexists",
                      progress: bool = True, spark=None) -> dict:
    """Decode DCP dumps into a Parquet dataset at ``out``, partitioned by ``partition_by``.

    Returns ``{"frames", "bytes", "seconds", "partitions"}``. Runs on ``spark`` if given,
    else on a session from ``session(master)``.
    """
    own = spark is None
    if own:
        spark = session(master, "dcpfast spark-decode")
    try:
        size = sum(s for _, s in list_files(inputs)) if method == "datasource" else None
        began = time.perf_counter()
        df = read_dcp(spark, list(inputs), method, columns=columns, values=values,
                      errors=errors, collections=collections)
        missing = [c for c in partition_by if c not in df.columns]
        if missing:
            raise ValueError(f"cannot partition by {missing}: not among the output columns")
        writer = df.write.mode(mode)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        with task_progress(spark, "decoding", enabled=progress):
            writer.parquet(out)
        seconds = time.perf_counter() - began
        frames = spark.read.parquet(out).count()
        return {"frames": frames, "bytes": size, "seconds": seconds,
                "partitions": list(partition_by)}
    finally:
        if own:
            spark.stop()
