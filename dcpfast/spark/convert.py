"""Frames to the Arrow batches Spark takes, and the ``binaryFile`` + ``mapInArrow`` /
``mapInPandas`` decoding functions.

Every path yields the same rows: one per frame, with the columns of ``dcpfast.COLUMNS``
in Spark types, ``key`` (binary), ``key_str`` (the key as a string where it is valid
UTF-8, else null), ``value`` (binary), ``source`` (the file) and, with ``values=True``,
``content`` (the document body, decompressed, without xattrs) and ``xattrs``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from .. import protocol as P
from .. import schema as S
from ..arrow import cast_map
from ..batch import FrameBatch, binary_of, validity_of
from ..errors import DcpFormatError
from ..io.dumps import iter_batches
from ..io.ranges import BATCH_BYTES
from ..values import text_or_null, values
from .schema import spark_arrow_schema

log = logging.getLogger("dcpfast.spark")


def scanner_columns(names) -> list[str]:
    """The scanner columns that the output columns ``names`` are made from."""
    wanted = [n for n in names if n in S.INDEX]
    if "opcode_name" in names and "opcode" not in wanted:
        wanted.append("opcode")
    wanted += [b for b in ("key", "value") if b in names]
    if "key_str" in names and "key" not in wanted:
        wanted.append("key")
    if "content" in names or "xattrs" in names:      # what values() reads
        wanted += [c for c in ("offset", "datatype", "value") if c not in wanted]
    return wanted


def to_record_batch(batch: FrameBatch, source: str | None, schema, *,
                    errors: str = "strict"):
    """The frames of ``batch`` as a ``pyarrow.RecordBatch`` of ``schema``
    (from ``spark_arrow_schema``), with ``source`` as the provenance of every row."""
    n = len(batch)
    body = keys = None
    arrays = []
    validity = validity_of(batch)   # columns carried by the same kinds share one

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
            arrays.append(keys if name == "key" else text_or_null(keys))
        elif name == "source":
            arrays.append(_repeated(source, n))
        elif name == "opcode_name":
            named = S.opcode_names(batch["opcode"])
            arrays.append(named if pa.types.is_dictionary(field.type) else
                          named.dictionary_decode())
        else:
            if body is None:
                body = _values(batch, errors)
            arrays.append(body[name])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _binary(batch: FrameBatch, name: str, validity):
    """The ``key`` or ``value`` column as ``binary`` (a batch holds well under 2 GiB)."""
    off, length = S.BINARY[name]
    column = binary_of(batch, off, length, validity(off))
    return column if column.type == pa.binary() else column.cast(pa.binary())


def _repeated(text: str | None, n: int):
    """A string column holding ``text`` ``n`` times."""

    if text is None:
        return pa.nulls(n, pa.string())
    raw = text.encode()
    offsets = (np.arange(n + 1, dtype=np.int64) * len(raw)).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(raw * n)])


def _values(batch: FrameBatch, errors: str) -> dict:
    """``content`` and ``xattrs`` per frame (null where a frame carries no document)."""

    table = values(batch, errors=errors, threads=1)          # Spark runs a task per core
    where = np.full(len(batch), -1, np.int64)
    where[table.column("index").to_numpy()] = np.arange(table.num_rows)
    take = pa.array(where, mask=where < 0)
    text = pa.string()
    return {"content": table.column("body").combine_chunks().cast(pa.binary()).take(take),
            "xattrs": cast_map(table.column("xattrs"), pa.map_(text, text)).take(take)}


# -- the binaryFile paths ------------------------------------------------------------------------

def _file_batches(content, source, schema, *, collections, errors, batch_bytes,
                  max_frame_size):
    """Record batches of one whole file held in memory (a complete stream)."""
    with noted(source):
        for fb in reported(iter_batches(content, batch_bytes, collections=collections,
                                         columns=scanner_columns(schema.names),
                                         errors=errors, max_frame_size=max_frame_size,
                                         threads=1),
                            source):
            if len(fb):
                yield to_record_batch(fb, source, schema, errors=errors)


class Skipped:
    """What skip mode stepped over in one stream: the damaged regions of its batches,
    merged where a batch end cut one in two, counted in constant memory."""

    def __init__(self):
        self.regions = self.bytes = 0
        self.first: int | None = None
        self._end = -1

    def add(self, batch: FrameBatch) -> None:
        for region in batch.errors:          # in stream order, batch after batch
            start, end = region.offset, region.offset + region.length
            if start <= self._end:
                self.bytes += max(end - self._end, 0)
            else:
                self.regions += 1
                self.bytes += end - start
                self.first = start if self.first is None else self.first
            self._end = max(self._end, end)

    def __str__(self) -> str:
        return (f"skipped {self.regions} damaged region(s), {self.bytes} bytes, the first "
                f"at byte {self.first}")


def reported(batches, where: str):
    """Pass ``batches`` on; when frames were skipped, log how much of ``where`` at the end
    (a warning on the executor: a skip-mode job drops damaged bytes but says so)."""
    skipped = Skipped()
    for fb in batches:
        skipped.add(fb)
        yield fb
    if skipped.regions:
        log.warning("%s: %s", where, skipped)


@contextlib.contextmanager
def noted(source):
    """Name the file in a ``DcpFormatError`` raised while decoding it."""
    try:
        yield
    except DcpFormatError as e:
        e.add_note(f"while decoding {source}")
        raise


def decode_arrow(batches, *, columns=None, values: bool = False, errors: str = "strict",
                 collections: bool | None = None, batch_bytes: int = BATCH_BYTES,
                 max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE) -> Iterator:
    """``mapInArrow`` function: rows of ``binaryFile`` (``path``, ``content``) to frames.

    Use with ``spark_arrow_schema``'s Spark twin: ``df.mapInArrow(decode_arrow, SCHEMA)``; for
    other options bind them with ``functools.partial`` and pass ``spark_schema(...)``.
    """
    schema = spark_arrow_schema(columns, values)
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
    schema = spark_arrow_schema(columns, values)
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
