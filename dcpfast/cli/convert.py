"""``dcpfast convert``: frames to Parquet, Arrow IPC or CSV, batch by batch."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from typing import Any

import click
import numpy as np

from .. import schema as S
from ..batch import scan
from .app import INPUT, inputs, main, opened, reported, sample_option, scan_options, shown

_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".arrow": "ipc", ".feather": "ipc",
            ".ipc": "ipc", ".csv": "csv"}


def _column_list(ctx, param, values) -> list[str] | None:
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    if not names:
        return None
    try:
        S.resolve(names)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return names


class _Writer:
    """Parquet, Arrow IPC or CSV output, written one table at a time."""

    def __init__(self, path: str, fmt: str):
        import pyarrow as pa

        self.path, self.format = path, fmt
        self._sink = pa.OSFile(path, "wb")
        self._writer: Any = None
        self.schema: Any = None

    def write(self, table) -> None:
        import pyarrow as pa

        if self.format == "csv":
            table = _csv_ready(table)
        elif self.format == "ipc":                # IPC files hold one dictionary per field
            table = table.cast(pa.schema([
                f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
                for f in table.schema]))
        if self._writer is not None and table.column_names != self.schema.names:
            raise click.ClickException(f"{self.path}: cannot write these inputs together "
                                       f"(columns {', '.join(table.column_names)} after "
                                       f"{', '.join(self.schema.names)})")
        if self._writer is None:
            self.schema = table.schema
            if self.format == "parquet":
                import pyarrow.parquet as pq
                self._writer = pq.ParquetWriter(self._sink, self.schema)
            elif self.format == "ipc":
                self._writer = pa.ipc.new_file(self._sink, self.schema)
            else:
                import pyarrow.csv as pcsv
                self._writer = pcsv.CSVWriter(self._sink, self.schema)
        self._writer.write_table(table.cast(self.schema))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._sink.close()


def _csv_ready(table):
    """CSV holds text: binary values (keys, values, bodies) are written as text where they
    are UTF-8 without control characters, else as ``0x`` and hex; maps become JSON
    objects."""
    import pyarrow as pa

    columns = []
    for column in table.columns:
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            column = _text(column)
        elif pa.types.is_map(column.type):
            column = pa.array([None if m is None else json.dumps(dict(m))
                               for m in column.to_pylist()], pa.string())
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


#: Control characters (tab, line feed and carriage return are text).
_CONTROL = "[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]"


def _text(column):
    """A binary Arrow array as strings: each value as text where it is UTF-8 without
    control characters, else ``0x`` and its lower-case hex; nulls kept. A column that is
    all text is converted at once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        text = column.cast(pa.large_string())
    except pa.ArrowInvalid:
        pass
    else:
        if not pc.any(pc.match_substring_regex(text, _CONTROL)).as_py():
            return text
    return pa.array([None if v is None else _utf8_or_hex(v) for v in column.to_pylist()],
                    pa.large_string())


def _utf8_or_hex(value: bytes) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or re.search(_CONTROL, text):
        return "0x" + value.hex()
    return text


def _with_values(batch, table, keep, threads=None):
    """``table`` (only the columns ``keep``) plus body, xattrs and is_json by frame."""
    import pyarrow as pa

    found = batch.values(threads=threads)
    rows = np.full(len(batch), -1, np.int64)
    rows[np.asarray(found.column("index"))] = np.arange(found.num_rows)
    take = pa.array(rows, mask=rows < 0)
    table = table.select(keep)
    for name in ("body", "xattrs", "is_json"):
        table = table.append_column(name, found.column(name).take(take))
    return table


def _progress(name, source, quiet):
    """A progress bar over the DCP bytes of one input (on standard error, when a terminal)."""
    from tqdm import tqdm

    total = None
    if name != "-" and not source.compression and not source.capture:
        with contextlib.suppress(OSError):
            total = os.path.getsize(name)
    return tqdm(total=total, desc=shown(name), unit="B", unit_scale=True, unit_divisor=1000,
                disable=quiet or not sys.stderr.isatty())


@main.command()
@click.argument("files", nargs=-1, type=INPUT)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, writable=True),
              help="OUT.parquet, OUT.arrow / .feather (Arrow IPC) or OUT.csv.")
@click.option("--columns", "columns", multiple=True, callback=_column_list,
              metavar="NAME[,NAME...]", help="Only these columns (key and value stand for "
              "their offset/length pairs and add the bytes).")
@click.option("--values", "with_values", is_flag=True,
              help="Add the decoded document bodies, xattrs and is_json.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads that read and decode each batch (default: the cores this "
                   "process may use).")
@sample_option
@scan_options
def convert(files, output, columns, with_values, quiet, threads, sample, collections, errors):
    """Write the frames of every FILE to one Parquet, Arrow IPC or CSV file.

    The format follows the extension of OUTPUT. Offsets are positions in each FILE
    (decompressed). CSV holds keys, values and bodies as text where they are UTF-8 (else
    0x and hex) and xattrs as JSON text. Ends with a line saying what it wrote.
    """
    fmt = _FORMATS.get(os.path.splitext(output)[1].lower())
    if fmt is None:
        raise click.BadParameter(f"unknown extension; use one of {', '.join(_FORMATS)}",
                                 param_hint="'-o' / '--output'")
    files = inputs(files, sample)                # each one there before OUTPUT is touched

    keep = scan(b"", columns=columns).to_arrow().column_names
    frame_columns = set(scan(b"").to_arrow().column_names)
    scanned = None if with_values else columns
    try:
        writer = _Writer(output, fmt)
    except OSError as e:
        raise click.ClickException(f"{output}: {e.strerror or e}") from None
    done, written = False, 0
    try:
        for name in files:
            with reported(name), opened(name, errors) as source, \
                    _progress(name, source, quiet) as bar:
                frames, started = 0, time.perf_counter()
                for batch in source.batches(collections=collections, columns=scanned,
                                            errors=errors, threads=threads):
                    table = batch.to_arrow()          # captures add their own columns
                    names = keep + [n for n in table.column_names if n not in frame_columns]
                    table = _with_values(batch, table, names, threads) if with_values \
                        else table.select(names)
                    writer.write(table)
                    frames += len(batch)
                    written += len(batch)
                    bar.update(batch.consumed - batch.start)
                    rate = frames / max(time.perf_counter() - started, 1e-9)
                    bar.set_postfix_str(f"{frames:,} frames, {rate:,.0f} frames/s")
        if writer.schema is None:                 # no frames at all: an empty table
            empty = scan(b"", columns=scanned)
            table = empty.to_arrow()
            writer.write(_with_values(empty, table, keep) if with_values
                         else table.select(keep))
        done = True
    except OSError as e:
        raise click.ClickException(f"{output}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):
            writer.close()
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(output)
    if not quiet:
        click.echo(f"wrote {written:,} frames to {output} ({os.path.getsize(output):,} bytes)")
