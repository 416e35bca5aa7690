"""``dcpfast convert``: frames to Parquet, Arrow IPC or CSV, batch by batch."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import click
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema as S
from ..io.dumps import scan
from ..threads import beside, threads_of
from ..values import iter_values
from .app import (
    INPUT,
    TABLE_FORMATS,
    Name,
    atomic_output,
    check_output,
    inputs,
    main,
    opened,
    output_format,
    paths_of,
    pieces_option,
    reported,
    sample_option,
    say,
    scan_options,
    shown,
    threads_option,
    writing,
)


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
    """Parquet, Arrow IPC or CSV output. Small tables (a capture gives one per connection
    direction) are gathered until they hold ``GROUP_BYTES``, each counted with
    ``TABLE_COST`` for its objects, and written together: one row group or record batch
    per group, in memory bounded by bytes whatever the number of tables. With
    ``background``, a group is written by a thread of its own while the next is decoded and
    gathered (pyarrow writes a file on one thread): one group more in memory, the same
    file."""

    #: Bytes of tables gathered before they are written as one.
    GROUP_BYTES = 64 << 20
    #: What a table counts besides its Arrow data (its Python objects and column arrays).
    TABLE_COST = 128 << 10

    def __init__(self, path: str, fmt: str, background: bool = False):
        self.path, self.format = path, fmt
        if path == "-":                       # a copy of standard output: closed at the end
            sys.stdout.flush()                # without closing standard output itself
            self._sink = pa.PythonFile(os.fdopen(os.dup(sys.stdout.fileno()), "wb"), mode="w")
        else:
            self._sink = pa.OSFile(os.fsencode(path), "wb")
        self._writer: Any = None
        self.schema: Any = None
        self._pending: list = []
        self._pending_bytes = 0
        self._background = background
        self._written: Callable[[], object] | None = None   # waits for the group being written
        # held by a group's write beside: abandon() takes it before closing, so that the
        # file is never closed under a write, even one whose handle an interrupt lost
        self._gate = threading.Lock()
        self._abandoned = False

    def write(self, table) -> None:
        if self.schema is not None and table.column_names != self.schema.names:
            raise click.ClickException(f"{shown(self.path, output=True)}: cannot write these "
                                       f"inputs together (columns "
                                       f"{', '.join(table.column_names)} "
                                       f"after {', '.join(self.schema.names)})")
        if self.schema is None:
            self.schema = table.schema
        elif not table.schema.equals(self.schema):
            table = table.cast(self.schema)
        self._pending.append(table)
        self._pending_bytes += table.nbytes + self.TABLE_COST
        if self._pending_bytes >= self.GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the tables gathered so far, as one."""
        if not self._pending:
            return
        table = pa.concat_tables(self._pending)
        self._pending, self._pending_bytes = [], 0
        if self.format == "csv":
            table = _csv_ready(table)
        elif self.format == "ipc":                # IPC files hold one dictionary per field
            table = table.cast(pa.schema([        # (``file``'s is the same throughout),
                f.with_type(f.type.value_type)    # and one record batch per group
                if pa.types.is_dictionary(f.type) and f.name != FILE_COLUMN else f
                for f in table.schema])).combine_chunks()
        if self._writer is None:
            if self.format == "parquet":
                import pyarrow.parquet as pq
                self._writer = pq.ParquetWriter(
                    self._sink, table.schema,
                    use_dictionary=S.dictionary_columns(table.column_names))
            elif self.format == "ipc":
                self._writer = pa.ipc.new_file(self._sink, table.schema)
            else:
                import pyarrow.csv as pcsv
                self._writer = pcsv.CSVWriter(self._sink, table.schema)
        self._wait()
        if self._background:
            self._written = beside(lambda: self._write_beside(table))
        else:
            self._writer.write_table(table)

    def _write_beside(self, table) -> None:
        """A group's write on the thread beside: none once the file is abandoned."""
        with self._gate:
            if not self._abandoned:
                self._writer.write_table(table)

    def _wait(self) -> None:
        """Wait for the group being written, raising its error here. The handle on the
        write is dropped only once the write is over: an interrupt while waiting leaves it
        for ``abandon``, which must not close the file under a write still running."""
        if self._written is None:
            return
        try:
            self._written()
        except KeyboardInterrupt:           # or SIGTERM, SIGHUP (app.ended_by_signals)
            raise                           # still running: abandon() waits for it
        except BaseException:
            self._written = None            # the write's own error: it is over
            raise
        self._written = None

    def close(self) -> None:
        """Write what is gathered and finish the file (errors included: a full disk may
        show only here)."""
        self.flush()
        self._wait()
        if self._writer is not None:
            self._writer.close()
        self._sink.close()

    def abandon(self) -> None:
        """Close without finishing, ignoring errors (the output is removed after): once the
        group being written, if any, is done."""
        self._pending = []
        self._abandoned = True                  # a write not yet begun will not begin
        written, self._written = self._written, None
        while written is not None:              # a file is never closed while written
            try:
                written()
                break
            except KeyboardInterrupt:           # a signal while waiting: wait on
                continue
            except BaseException:               # the write's own error
                break
        while True:                             # a write whose handle an interrupt lost
            try:
                with self._gate:
                    break
            except KeyboardInterrupt:
                continue
        for closing in (self._writer, self._sink):
            if closing is not None:
                with contextlib.suppress(Exception):
                    closing.close()


def _csv_ready(table):
    """CSV holds text: binary values (keys, values, bodies) are written as text where they
    are UTF-8 without control characters, else as ``0x`` and hex; maps become JSON
    objects; dictionaries their values."""
    columns = []
    for column in table.columns:
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
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
    """``table`` (only the columns ``keep``) plus body, xattrs and is_json by frame, in
    slices of frames whose values inflate to a bounded size (``iter_values``), one at a
    time."""
    table = table.select(keep)
    pieces = iter_values(batch, threads=threads)
    found, at = next(pieces), 0
    while found is not None:
        after = next(pieces, None)
        index = np.asarray(found.column("index"), np.int64)
        stop = int(index[-1]) + 1 if after is not None and len(index) else len(batch)
        rows = np.full(stop - at, -1, np.int64)
        rows[index - at] = np.arange(found.num_rows)
        take = pa.array(rows, mask=rows < 0)
        part = table.slice(at, stop - at)
        for name in ("body", "xattrs", "is_json"):
            part = part.append_column(name, found.column(name).take(take))
        yield part
        found, at = after, stop


class _NoBar:
    """The progress bar when none is shown: no tqdm, so no monitor thread either."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def update(self, n) -> None:
        pass

    def set_postfix_str(self, s) -> None:
        pass


#: The column that names the FILE of each row, when convert reads several dumps.
FILE_COLUMN = "file"


def _file_names(files: list[Name]) -> tuple[pa.Array, list[int]]:
    """The dictionary of the ``file`` column (each name as given, once; bytes that are not
    UTF-8 written ``\\xNN``) and the place of each input's name in it."""
    texts = [_as_text(name) for name in files if isinstance(name, str)]
    distinct = list(dict.fromkeys(texts))
    return pa.array(distinct, pa.string()), [distinct.index(t) for t in texts]


def _as_text(name: str) -> str:
    """A file name as valid UTF-8: its bytes that are not UTF-8 written ``\\xNN``."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:                 # a surrogate that escapes no byte
        raw = name.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def _with_file(table, names: pa.Array, at: int):
    """``table`` with the ``file`` column last: every row the name ``names[at]``."""
    indices = pa.array(np.full(table.num_rows, at, np.int32))
    return table.append_column(FILE_COLUMN, pa.DictionaryArray.from_arrays(indices, names))


def _progress(name, source, quiet):
    """A progress bar over the DCP bytes of one input (on standard error, when a terminal)."""
    if quiet or not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm

    total = None
    if name != "-" and not source.compression and not source.capture:
        with contextlib.suppress(OSError):
            total = sum(os.path.getsize(path) for path in paths_of([name]))
    return tqdm(total=total, desc=shown(name), unit="B", unit_scale=True, unit_divisor=1000)


@main.command(epilog="Examples: dcpfast convert dump.dcp -o frames.parquet; dcpfast convert "
               "capture.pcap --values -o docs.parquet; dcpfast convert dump.dcp -o - "
               "--format csv --columns opcode,vbucket,by_seqno,key | head. More: "
               "docs/usage.md, the command line.")
@click.argument("files", nargs=-1, type=INPUT)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="OUT.parquet, OUT.arrow / .feather (Arrow IPC) or OUT.csv; - for standard "
              "output (with --format).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "ipc", "csv"]), default=None,
              help="The output's format (default: from its extension).")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--columns", "columns", multiple=True, callback=_column_list,
              metavar="NAME[,NAME...]", help="Only these columns (key and value stand for "
              "their offset/length pairs and add the bytes).")
@click.option("--values", "with_values", is_flag=True,
              help="Add the decoded document bodies, xattrs and is_json.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
@threads_option
@pieces_option
@sample_option
@scan_options
def convert(files, output, fmt, force, columns, with_values, quiet, threads, pieces, sample,
            collections, errors):
    """Write the frames of every FILE to one Parquet, Arrow IPC or CSV file.

    The format follows the extension of OUTPUT (or --format). An ``opcode_name`` column
    follows ``opcode``. Several FILES are separate dumps, read one after the other:
    offsets are positions in each FILE (decompressed), and a last column ``file`` names
    the FILE of each row, as given; a directory, or FILES with --pieces, is one dump cut
    into pieces, its files joined as one stream (offsets are positions in it), and with
    one FILE, a directory or --pieces there is no ``file`` column. CSV holds keys, values
    and bodies as text where they are UTF-8 (else 0x and hex) and xattrs as JSON text.
    Ends with a line saying what it wrote. An existing OUTPUT is replaced only with
    --force, and never when it is one of the inputs.
    """
    fmt = output_format(output, TABLE_FORMATS, fmt)
    files = inputs(files, sample, pieces=pieces)  # each one there before OUTPUT is touched
    check_output(output, files, force=force)
    threads = threads_of(threads)
    dictionary, at = _file_names(files) if len(files) > 1 else (None, [])

    keep = _named_opcodes(scan(b"", columns=columns).to_arrow()).column_names
    frame_columns = set(_named_opcodes(scan(b"").to_arrow()).column_names)
    scanned = None if with_values else columns
    written = 0
    with atomic_output(output) as [path], writing(output):
        writer = _Writer(path, fmt, background=threads > 1)
        try:
            for k, name in enumerate(files):
                with reported(name, errors), opened(name, errors) as source, \
                        _progress(name, source, quiet) as bar:
                    frames, started = 0, time.perf_counter()
                    for batch in source.batches(collections=collections, columns=scanned,
                                                errors=errors, threads=threads):
                        table = _named_opcodes(batch.to_arrow())  # captures add columns too
                        names = keep + [n for n in table.column_names
                                        if n not in frame_columns]
                        parts = _with_values(batch, table, names, threads) if with_values \
                            else [table.select(names)]
                        for part in parts:
                            if dictionary is not None:
                                part = _with_file(part, dictionary, at[k])
                            with writing(output):
                                writer.write(part)
                        frames += len(batch)
                        written += len(batch)
                        bar.update(batch.consumed - batch.start)
                        rate = frames / max(time.perf_counter() - started, 1e-9)
                        bar.set_postfix_str(f"{frames:,} frames, {rate:,.0f} frames/s")
            if writer.schema is None:             # no frames at all: an empty table
                empty = scan(b"", columns=scanned)
                table = _named_opcodes(empty.to_arrow())
                for part in (_with_values(empty, table, keep) if with_values
                             else [table.select(keep)]):
                    writer.write(part if dictionary is None
                                 else _with_file(part, dictionary, 0))
            writer.close()
        except BaseException:
            writer.abandon()
            raise
    if not quiet and output != "-":
        say(f"wrote {written:,} frames to {shown(output, output=True)} "
            f"({os.path.getsize(output):,} bytes)")


def _named_opcodes(table):
    """``table`` with ``opcode_name`` (the opcode's name, a dictionary column) after
    ``opcode``, where it has one."""
    if "opcode" not in table.column_names:
        return table
    at = table.column_names.index("opcode") + 1
    return table.add_column(at, S.OPCODE_NAME,
                            S.opcode_names(table.column("opcode").to_numpy()))
