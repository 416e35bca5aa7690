"""``scan_polars``: a dump as a polars ``LazyFrame``, decoded batch by batch as the query
asks, only the columns it reads and only the frames its filter keeps.

polars calls the source with the columns the query needs, its predicate, a row limit
and a batch size; the source scans just those columns (and the ones the predicate
reads), filters each batch as it is decoded and stops at the limit, so a query over a
dump larger than memory runs in bounded memory (``iter_batches``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .. import protocol as P
from .. import schema as S
from ..options import ScanOptions
from .dumps import DEFAULT_BATCH_BYTES, iter_batches

if TYPE_CHECKING:
    import polars as pl


def scan_polars(source, *, batch_bytes: int = DEFAULT_BATCH_BYTES,
                collections: bool | None = None, errors: str = "strict",
                max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE,
                threads: int | None = None) -> pl.LazyFrame:
    """The frames of ``source`` (what ``iter_batches`` reads: a path, a directory or a
    glob, a file object...) as a lazy polars frame of every column, ``key`` and ``value``
    as binary; nothing is read until the query is collected. Projections and filters
    (``opcode``, ``vbucket``, ``by_seqno``... any expression) are pushed into the scan;
    ``head(n)`` stops reading once it has its rows. The other options are those of
    ``iter_batches``."""
    import polars as pl
    from polars.io.plugins import register_io_source

    ScanOptions.of(collections=collections, errors=errors, max_frame_size=max_frame_size,
                   threads=threads)                          # checked now, not at collect
    empty = pl.from_arrow(S.arrow_schema().empty_table())
    assert isinstance(empty, pl.DataFrame)
    schema = empty.schema

    def frames(with_columns: list[str] | None, predicate: pl.Expr | None,
               n_rows: int | None, batch_size: int | None) -> Iterator[pl.DataFrame]:
        wanted = list(schema) if with_columns is None else with_columns
        read = set(wanted) | (set(predicate.meta.root_names()) if predicate is not None
                              else set())
        scanned = [name for name in (*S.NAMES, *S.BINARY) if name in read]
        left = n_rows
        for batch in iter_batches(source, batch_bytes, collections=collections,
                                  columns=scanned, errors=errors,
                                  max_frame_size=max_frame_size, binary_views=True,
                                  threads=threads):
            df = pl.from_arrow(batch.to_arrow(binary_view=True))
            assert isinstance(df, pl.DataFrame)
            if predicate is not None:
                df = df.filter(predicate)
            df = df.select(wanted)
            if left is not None:
                df = df.head(left)
                left -= df.height
            if df.height:
                yield df
            if left == 0:
                return

    return register_io_source(frames, schema=schema, explain_name="dcpfast.scan_polars")
