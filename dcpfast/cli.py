"""The ``dcpfast`` command: summarise, list and convert DCP dumps and captures; time the scan.

Every command reads raw dumps, gzip/zstd/lz4-compressed dumps and packet captures (told
apart by their magic numbers), or ``-`` for standard input. User errors (missing or
unreadable files, malformed input in strict mode, bad options) end with a message and a
non-zero exit status, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

import click
import numpy as np

from . import io as dio
from . import schema as S
from .content.inventory import Inventory
from .errors import DcpFormatError
from .protocol import Datatype, Opcode, Status

_INPUT = click.Path(exists=True, dir_okay=False, allow_dash=True)
_HEAD_BATCH = 1024 * 1024


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dcpfast")
def main():
    """Decode Couchbase DCP frame dumps and captures."""


# -- inputs --------------------------------------------------------------------------------


def _scan_options(command):
    """The --collections and --errors options every reading command takes."""
    command = click.option(
        "--errors", type=click.Choice(["strict", "skip"]), default="strict",
        show_default=True, help="Stop at the first malformed frame, or skip damage.")(command)
    return click.option(
        "--collections/--no-collections", default=None,
        help="Whether keys carry a collection id (default: infer from the stream).")(command)


def _shown(name: str) -> str:
    return "<stdin>" if name == "-" else name


def _capture_reader():
    """``(is_capture, read_pcap)`` from ``dcpfast.capture``, or None where it is missing."""
    try:
        from .capture import is_capture, read_pcap
    except ImportError:
        return None
    return is_capture, read_pcap


class _Input:
    """One input opened for reading: its (decompressed) stream and what it holds."""

    def __init__(self, stream):
        self.stream = stream
        self._capture = _capture_reader()
        #: Whether the input is a packet capture (else DCP frames).
        self.capture = self._capture is not None and bool(self._capture[0](stream.head))
        #: The codec the input was compressed with, or None.
        self.compression = stream.codec

    def batches(self, *, collections, columns, errors, batch_bytes=dio.DEFAULT_BATCH_BYTES):
        if self.capture:
            return self._capture[1](self.stream, collections=collections, columns=columns,
                                    errors=errors, batch_bytes=batch_bytes)
        return dio.iter_batches(self.stream, batch_bytes, collections=collections,
                                columns=columns, errors=errors)


@contextlib.contextmanager
def _opened(name: str, errors: str):
    """The input ``name`` (``-``: standard input) as an ``_Input``."""
    raw = sys.stdin.buffer if name == "-" else name
    with dio.open_stream(raw, errors=errors) as stream:
        yield _Input(stream)


@contextlib.contextmanager
def _reported(name: str):
    """Turn malformed input and I/O failures into a clean message and exit status 1."""
    try:
        yield
    except DcpFormatError as e:
        raise click.ClickException(f"{_shown(name)}: {e}") from None
    except BrokenPipeError:
        raise
    except OSError as e:
        raise click.ClickException(f"{_shown(name)}: {e.strerror or e}") from None


# -- info ----------------------------------------------------------------------------------


@main.command()
@click.argument("files", nargs=-1, type=_INPUT)
@click.option("--sample", is_flag=True, help="Summarise the dump bundled with dcpfast.")
@_scan_options
@click.option("--json", "as_json", is_flag=True, help="Print the summaries as JSON.")
def info(files, sample, collections, errors, as_json):
    """Frames, bytes, opcodes, vbuckets, collections, seqno ranges and damage of each FILE.

    FILE is a raw, gzip, zstd or lz4 dump, or a capture; - reads standard input.
    """
    paths = list(files) + ([str(dio.SAMPLE)] if sample else [])
    if not paths:
        raise click.UsageError("give one or more FILEs, or --sample")
    failed, summaries = False, []
    for path in paths:
        try:
            with _reported(path):
                summary = _summarise(path, collections, errors)
        except click.ClickException as e:
            e.show()
            failed = True
            continue
        if as_json:
            summaries.append(_as_json(path, summary))
        else:
            click.echo(_report(path, summary))
    if as_json:
        click.echo(json.dumps(summaries, indent=2))
    if failed:
        sys.exit(1)


def _summarise(path, collections, errors) -> dict:
    """Counts and seqno ranges over every batch of one input, in bounded memory."""
    found = Inventory()
    with _opened(path, errors) as source:
        for batch in source.batches(collections=collections, columns=list(Inventory.COLUMNS),
                                    errors=errors):
            found.update(batch)
    return dict(inventory=found, compression=source.compression, capture=source.capture)


def _opcode_name(op: int) -> str:
    try:
        return Opcode(op).name
    except ValueError:
        return f"0x{op:02x}"


def _origin(s) -> str:
    parts = (["capture"] if s["capture"] else []) + \
        ([f"{s['compression']}-compressed"] if s["compression"] else [])
    return f" ({', '.join(parts)})" if parts else ""


def _report(path, s) -> str:
    i = s["inventory"]
    lines = [f"{_shown(path)}{_origin(s)}: {i.frames:,} frames, {i.bytes:,} bytes of "
             f"frames, collections {'on' if i.collections_on else 'off'}, "
             f"{len(i.skipped)} skipped regions"]
    lines.append("\n  opcode                    frames")
    for op in np.flatnonzero(i.opcodes):
        lines.append(f"  {_opcode_name(op):<22} {int(i.opcodes[op]):>9,}")
    lines.append("\n  vbucket    frames  documents   first seqno    last seqno")
    for vb, v in sorted(i.vbuckets.items()):
        span = f"{v.first_seqno:>13,} {v.last_seqno:>13,}" if v.documents \
            else f"{'-':>13} {'-':>13}"
        lines.append(f"  {vb:>7} {v.frames:>9,} {v.documents:>10,} {span}")
    if i.collections:
        lines.append("\n  collection   documents")
        for cid, n in sorted(i.collections.items()):
            lines.append(f"  {f'0x{cid:x}':>10} {n:>11,}")
    if i.connections:
        lines.append("\n  connection                                              frames")
        for c, n in sorted(i.connections.items()):
            flow = f"{c.src}:{c.src_port} -> {c.dst}:{c.dst_port}"
            lines.append(f"  {flow:<46} {c.direction:<15} {n:>9,}")
    if i.skipped:
        lines.append("\n  errors")
    for region in i.skipped:
        lines.append(f"  skipped {region.length} bytes at {region.offset}: {region.reason}")
    return "\n".join(lines)


def _as_json(path, s) -> dict:
    i = s["inventory"]
    return {
        "file": _shown(path), "compression": s["compression"], "capture": s["capture"],
        "frames": i.frames, "bytes": i.bytes, "collections": i.collections_on,
        "opcodes": {_opcode_name(op): int(i.opcodes[op]) for op in np.flatnonzero(i.opcodes)},
        "vbuckets": {str(vb): {"frames": v.frames, "documents": v.documents,
                               "first_seqno": v.first_seqno, "last_seqno": v.last_seqno}
                     for vb, v in sorted(i.vbuckets.items())},
        "documents_by_collection": {f"0x{cid:x}": n
                                    for cid, n in sorted(i.collections.items())},
        "connections": [{**c._asdict(), "frames": n}
                        for c, n in sorted(i.connections.items())],
        "errors": [r._asdict() for r in i.skipped],
    }


# -- head ----------------------------------------------------------------------------------


def _opcode(value: str) -> int:
    """An opcode given by name (any case) or number (decimal or 0x hex)."""
    try:
        return int(Opcode[value.upper()])
    except KeyError:
        pass
    try:
        number = int(value, 0)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither an opcode name nor a number",
                                 param_hint="'--opcode'") from None
    if not 0 <= number <= 0xFF:
        raise click.BadParameter(f"{value} is outside 0..255", param_hint="'--opcode'")
    return number


def _escaped(key: bytes, width: int) -> str:
    text = repr(key)[2:-1]
    return text if len(text) <= width else text[:width - 3] + "..."


def _datatype(value: int) -> str:
    if value == 0:
        return "raw"
    names = [d.name.lower() for d in (Datatype.JSON, Datatype.SNAPPY, Datatype.XATTR)
             if value & d]
    rest = value & ~0x07
    return ",".join(names + ([f"0x{rest:02x}"] if rest else []))


def _status(value: int) -> str:
    try:
        return Status(value).name
    except ValueError:
        return f"0x{value:04x}"


_HEAD_TITLE = (f"{'offset':>12}  {'opcode':<24} {'vb':>5}  {'seqno':<26} {'key':<34} "
               f"{'value':>8}  datatype")


def _head_line(batch, i: int) -> str:
    f = batch.frame(i)
    response = "status" in f                    # only responses carry a status
    name = _opcode_name(int(f["opcode"])) + (" resp" if response else "")
    vb = f"{f['vbucket']}" if "vbucket" in f else "-"
    if response:
        seqno = f"status {_status(int(f['status']))}"
    elif "snap_start" in f:
        seqno = f"{f['snap_start']}..{f['snap_end']}"
    elif "prepared_seqno" in f:
        seqno = f"{f['by_seqno']} prepared {f['prepared_seqno']}"
    elif "rev_seqno" in f:
        seqno = f"{f['by_seqno']} rev {f['rev_seqno']}"
    elif "by_seqno" in f:
        seqno = f"{f['by_seqno']}"
    else:
        seqno = "-"
    key = f.get("key")
    key = "-" if key is None else _escaped(key, 32)
    if "collection_id" in f:
        key = f"[0x{f['collection_id']:x}] {key}"
    value = f.get("value")
    size = "-" if value is None else f"{len(value):,}"
    return (f"{f['offset']:>12}  {name:<24} {vb:>5}  {seqno:<26} {key:<34} {size:>8}  "
            f"{_datatype(int(f['datatype']))}")


@main.command()
@click.argument("file", type=_INPUT)
@click.option("-n", "--frames", "count", type=click.IntRange(min=0), default=20,
              show_default=True, help="How many frames to list.")
@click.option("--opcode", "opcodes", multiple=True, metavar="NAME|NUMBER",
              help="Only frames with this opcode (repeatable), e.g. mutation or 0x57.")
@click.option("--vbucket", "vbuckets", multiple=True, type=click.IntRange(0, 0xFFFF),
              help="Only requests for this vbucket (repeatable).")
@_scan_options
def head(file, count, opcodes, vbuckets, collections, errors):
    """One line per frame of FILE: offset, opcode, vbucket, seqnos, key, value size, datatype.

    FILE is a raw, gzip, zstd or lz4 dump, or a capture; - reads standard input.
    """
    wanted = np.array(sorted({_opcode(op) for op in opcodes}), np.uint8)
    vbs = np.array(sorted(set(vbuckets)), np.uint16)
    if count == 0:
        return
    shown, connection = 0, None
    with _reported(file), _opened(file, errors) as source:
        for batch in source.batches(collections=collections, columns=None, errors=errors,
                                    batch_bytes=_HEAD_BATCH):
            keep = np.ones(len(batch), bool)
            if len(wanted):
                keep &= np.isin(batch["opcode"], wanted)
            if len(vbs):
                keep &= np.isin(batch["vbucket"], vbs) & batch.validity("vbucket")
            rows = np.flatnonzero(keep)[:count - shown]
            if len(rows) and not shown:
                click.echo(_HEAD_TITLE)
            if len(rows) and getattr(batch, "connection", connection) != connection:
                connection = batch.connection
                click.echo(f"# {connection.src}:{connection.src_port} -> {connection.dst}:"
                           f"{connection.dst_port} ({connection.direction})")
            for i in rows:
                click.echo(_head_line(batch, int(i)))
            shown += len(rows)
            if shown >= count:
                return


# -- convert -------------------------------------------------------------------------------

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
        self._writer = None
        self.schema = None

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
    """CSV holds text: binary columns become hex, maps become JSON objects."""
    import pyarrow as pa

    columns = []
    for column in table.columns:
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            column = _hex(column)
        elif pa.types.is_map(column.type):
            column = pa.array([None if m is None else json.dumps(dict(m))
                               for m in column.to_pylist()], pa.string())
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


_HEX = np.frombuffer(b"".join(f"{i:02x}".encode() for i in range(256)), np.uint8).reshape(256, 2)


def _hex(column):
    """A binary Arrow array as lower-case hex strings, nulls kept."""
    import pyarrow as pa

    column = column.cast(pa.large_binary())
    _, offsets, data = column.buffers()
    offsets = np.frombuffer(offsets, np.int64)[column.offset:column.offset + len(column) + 1]
    data = np.empty(0, np.uint8) if data is None else np.frombuffer(data, np.uint8)
    text = _HEX[data[offsets[0]:offsets[-1]]].reshape(-1)
    validity = None
    if column.null_count:
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.large_string(), len(column),
                                 [validity, pa.py_buffer((offsets - offsets[0]) * 2),
                                  pa.py_buffer(text)])


def _with_values(batch, table, keep):
    """``table`` (only the columns ``keep``) plus body, xattrs and is_json by frame."""
    import pyarrow as pa

    found = batch.values()
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
    return tqdm(total=total, desc=_shown(name), unit="B", unit_scale=True, unit_divisor=1000,
                disable=quiet or not sys.stderr.isatty())


@main.command()
@click.argument("files", nargs=-1, required=True, type=_INPUT)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, writable=True),
              help="OUT.parquet, OUT.arrow / .feather (Arrow IPC) or OUT.csv.")
@click.option("--columns", "columns", multiple=True, callback=_column_list,
              metavar="NAME[,NAME...]", help="Only these columns (key and value stand for "
              "their offset/length pairs and add the bytes).")
@click.option("--values", "with_values", is_flag=True,
              help="Add the decoded document bodies, xattrs and is_json.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@_scan_options
def convert(files, output, columns, with_values, quiet, collections, errors):
    """Write the frames of every FILE to one Parquet, Arrow IPC or CSV file.

    The format follows the extension of OUTPUT. Offsets are positions in each FILE
    (decompressed). CSV holds binary columns as hex and xattrs as JSON text.
    """
    fmt = _FORMATS.get(os.path.splitext(output)[1].lower())
    if fmt is None:
        raise click.BadParameter(f"unknown extension; use one of {', '.join(_FORMATS)}",
                                 param_hint="'-o' / '--output'")
    from .batch import scan

    keep = scan(b"", columns=columns).to_arrow().column_names
    frame_columns = set(scan(b"").to_arrow().column_names)
    scanned = None if with_values else columns
    try:
        writer = _Writer(output, fmt)
    except OSError as e:
        raise click.ClickException(f"{output}: {e.strerror or e}") from None
    done = False
    try:
        for name in files:
            with _reported(name), _opened(name, errors) as source, \
                    _progress(name, source, quiet) as bar:
                frames, started = 0, time.perf_counter()
                for batch in source.batches(collections=collections, columns=scanned,
                                            errors=errors):
                    table = batch.to_arrow()          # captures add their own columns
                    names = keep + [n for n in table.column_names if n not in frame_columns]
                    table = _with_values(batch, table, names) if with_values \
                        else table.select(names)
                    writer.write(table)
                    frames += len(batch)
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


# -- spark-decode --------------------------------------------------------------------------


@main.command("spark-decode")
@click.argument("inputs", nargs=-1)
@click.option("--sample", is_flag=True, help="Decode the dump bundled with dcpfast.")
@click.option("--out", required=True, help="Directory (or URI) of the Parquet dataset to write.")
@click.option("--master", help="Spark master URL (default: an embedded local[*] Spark).")
@click.option("--method", type=click.Choice(["datasource", "arrow", "pandas"]),
              default="datasource", show_default=True,
              help="The dcp data source, or binaryFile with mapInArrow / mapInPandas.")
@click.option("--partition-by", default="vbucket", show_default=True,
              help="Comma-separated columns to partition the dataset by ('' for none).")
@click.option("--columns", help="Comma-separated output columns (default: all).")
@click.option("--values", "with_values", is_flag=True,
              help="Add content (decompressed body) and xattrs columns.")
@click.option("--overwrite", is_flag=True, help="Replace an existing dataset at --out.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@_scan_options
def spark_decode(inputs, sample, out, master, method, partition_by, columns, with_values,
                 overwrite, quiet, collections, errors):
    """Decode DCP dumps (files, directories, URIs) into Parquet with Spark."""
    try:
        from . import spark as dspark
        import pyspark  # noqa: F401
    except ImportError:
        raise click.ClickException("spark-decode needs PySpark: pip install 'dcpfast[spark]'")
    paths = list(inputs) + ([str(dio.SAMPLE)] if sample else [])
    if not paths:
        raise click.UsageError("give one or more INPUTS, or --sample")
    try:
        summary = dspark.decode_to_parquet(
            paths, out, master=master, method=method,
            partition_by=[c.strip() for c in partition_by.split(",") if c.strip()],
            columns=columns, values=with_values, errors=errors, collections=collections,
            mode="overwrite" if overwrite else "errorifexists", progress=not quiet)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e))
    except Exception as e:
        raise click.ClickException(dspark.spark_error(e)) from None
    rate = ""
    if summary["bytes"]:
        rate = (f" from {summary['bytes'] / 1e6:,.2f} MB "
                f"({summary['bytes'] / 1e6 / summary['seconds']:,.2f} MB/s)")
    parts = ", partitioned by " + ", ".join(summary["partitions"]) if summary["partitions"] \
        else ""
    click.echo(f"{summary['frames']:,} frames{rate} in {summary['seconds']:.1f} s "
               f"-> {out}{parts}")


# -- bench ---------------------------------------------------------------------------------

#: The benchmark suite's runner in the source checkout this package sits in; an installed
#: dcpfast has none (the suite compiles a C probe and writes files, so it is not shipped).
BENCH_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                            "benchmarks", "bench_scan.py")


@main.command()
@click.option("--quick", is_flag=True, help="A smoke run (about 100,000 mixed frames, no "
              "memory probe).")
@click.option("--items", type=click.IntRange(min=1), help="Document changes of the mixed "
              "corpus, the others in proportion (default 880,000: about 1,000,000 frames).")
@click.option("--repeat", type=click.IntRange(min=1), help="Timed runs after the warm-up.")
@click.option("--python-items", type=click.IntRange(min=1),
              help="Frames for the pure-Python twin and the struct baseline.")
@click.option("--corpus", "corpora", multiple=True,
              type=click.Choice(["mixed", "small", "large", "stream_ids"]),
              help="Run only this corpus (repeatable; default all).")
@click.option("--rss/--no-rss", default=None, help="Measure the peak RSS of iter_batches "
              "over a 2 GiB dump (default: on, off with --quick).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Also write the figures as JSON to this file.")
@click.option("--cache", type=click.Path(file_okay=False),
              help="Keep the generated corpora in this directory for later runs.")
@click.option("--readme", type=click.Path(dir_okay=False, exists=True),
              help="Rewrite the performance table between the benchmark markers of this "
              "file (docs/benchmarks.md in the source tree).")
def bench(quick, items, repeat, python_items, corpora, rss, json_path, cache, readme):
    """Check and time the scanner on synthetic corpora against baselines and a C probe,
    and print the table and the targets.

    Runs benchmarks/bench_scan.py of the source checkout dcpfast is used from.
    """
    if not os.path.isfile(BENCH_SCRIPT):
        raise click.ClickException(
            "the benchmark suite lives in the source tree's benchmarks/ (python "
            "benchmarks/bench_scan.py in a checkout of dcpfast); this dcpfast has none")
    args = ["--quick"] if quick else []
    for flag, value in (("--items", items), ("--repeat", repeat),
                        ("--python-items", python_items), ("--json", json_path),
                        ("--cache", cache), ("--readme", readme)):
        if value is not None:
            args.append(f"{flag}={value}")
    if cache is None:
        args.append("--no-cache")
    if rss is not None:
        args.append("--rss" if rss else "--no-rss")
    args += [f"--corpus={name}" for name in corpora]
    import runpy

    argv, sys.argv = sys.argv, [BENCH_SCRIPT, *args]
    try:                          # the script exits with its status
        runpy.run_path(BENCH_SCRIPT, run_name="__main__")
    finally:
        sys.argv = argv
