"""``dcpfast state``: the documents of dumps as of their end, a seqno or a time, to Parquet."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
import time

import click
import pyarrow as pa
import pyarrow.compute as pc

from ..documents import StateBuilder, consistency
from ..documents.api import state as state_of
from ..documents.feeding import feed_batches
from ..documents.processes import WorkerDied
from ..errors import DcpFormatError, is_capture_gap
from ..io.kinds import Kind, classify
from .app import (
    FILE_TABLES,
    INPUT,
    Name,
    at_seqno,
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
    write_table,
    writing,
)

#: With --spark: the file beside the output directory (``OUT`` + this) that holds
#: ``state_report``'s JSON; inside, it would stop polars, which reads every non-empty file
#: of a directory as Parquet.
REPORT_SUFFIX = ".report.json"


@main.command("state", epilog="Examples: dcpfast state dump.dcp -o docs.parquet; dcpfast "
              "state capture.pcap --at-time 2026-11-27T10:00:00 -o then.parquet. More: "
              "docs/state.md.")
@click.argument("files", nargs=-1, type=INPUT)
@click.option("-o", "--output", required=True,
              help="OUT.parquet (or .arrow); with --spark a Parquet directory.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--at-seqno", callback=at_seqno, metavar="N|VB:N,...",
              help="Leave out every change above this seqno (per vbucket: VB:N,...; the "
              "vbuckets not named are left out).")
@click.option("--at-time", metavar="ISO",
              help="Leave out every change after this time (ISO 8601; no zone means UTC).")
@click.option("--include-deleted", is_flag=True, help="Keep tombstones (deleted=true).")
@click.option("--history", is_flag=True,
              help="Every version of every document, with valid_from/valid_to.")
@click.option("--no-values", is_flag=True, help="Leave out body and xattrs.")
@click.option("--collection", "only", multiple=True, metavar="NAME|ID",
              help="Only this collection (name, scope.name or id); repeatable.")
@click.option("--spark", is_flag=True, help="Run on Spark (dcpfast[spark]).")
@click.option("--master", help="With --spark: the Spark master (default: local[*]).")
@threads_option
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes that share the vbuckets of one dump (each reads it whole; "
              "pays on many cores and big dumps: docs/state.md).")
@pieces_option
@sample_option
@scan_options
def state(files, output, force, at_seqno, at_time, include_deleted, history, no_values, only,
          spark, master, threads, processes, pieces, sample, collections, errors):
    """Rebuild the documents of the DCP dumps FILES (read in order, as one stream of
    frames, each FILE whole: a frame cut across two FILES is an error; a directory, or
    FILES with --pieces, is one dump cut into pieces, its files joined byte for byte):
    one row per document as it stood at the end, at --at-seqno or at --at-time.

    Captures contribute their server-to-client frames (their client-to-server frames
    place the Stream Request responses). The table's schema metadata holds each
    vbucket's consistent seqno and, with --errors skip, what was skipped.
    """
    if at_seqno is not None and at_time is not None:
        raise click.UsageError("give --at-seqno or --at-time, not both")
    fmt = None if spark else output_format(output, FILE_TABLES)
    chosen = [int(c) if c.isdigit() else c for c in only] or None
    options = dict(at_seqno=at_seqno, at_time=at_time, include_deleted=include_deleted,
                   values=not no_values, only_collections=chosen, errors=errors,
                   history=history)
    try:
        builder = StateBuilder(**options)
    except (TypeError, ValueError) as e:
        raise click.BadParameter(str(e)) from None
    files = inputs(files, sample,                # each one there before OUTPUT is touched
                   pieces=pieces)
    check_output(output, files, force=force and not spark, replaceable=not spark)
    if spark:
        _on_spark(files, output, master, options, collections)
        return
    began = time.perf_counter()
    with atomic_output(output) as [path]:
        found = classify(files[0])          # a pipe's path is not opened: not repeated
        if processes > 1 and len(files) == 1 and isinstance(files[0], str) \
                and found.repeated and found.kind is not Kind.CAPTURE_PATH:
            with reported(shown(files[0]), errors), _collections_named(), _workers():
                table = state_of(files[0], **options, collections=collections,
                                 threads=threads, processes=processes)
        else:
            table = _built(builder, files, collections=collections, errors=errors,
                           threads=threads)
        with writing(output):
            write_table(table, path, fmt)
    _summary(table, output, time.perf_counter() - began)


def _built(builder: StateBuilder, files: list[Name], *, collections, errors: str,
           threads) -> pa.Table:
    """The state of ``files`` (read in order, as one stream) built here by ``builder``;
    each input opened once, and read a second time where a restart needs it (a pipe, a
    FIFO or standard input from what the first read kept)."""
    def batches(source, stream=None):
        return source.batches(collections=collections, columns=None, errors=errors,
                              threads=threads, stream=stream)

    with contextlib.ExitStack() as held:
        sources = []
        for name in files:
            with reported(name, errors):
                source = held.enter_context(opened(name, errors, again=True))
                feed_batches(builder, batches(source), located=True)
                source.done()
            sources.append((name, source))

        def again(builder: StateBuilder) -> None:
            for name, source in sources:
                with reported(name, errors), source.again() as stream:
                    feed_batches(builder, batches(source, stream), located=True)

        with reported(shown(files[-1]), errors), _collections_named():
            return builder.table(again)


@contextlib.contextmanager
def _collections_named():
    """Collection names the stream never gave: a usage error of --collection."""
    try:
        yield
    except DcpFormatError:
        raise
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--collection") from None


class _WorkerFailed(click.ClickException):
    """A worker process of ``--processes`` died: one line, exit status 2 (the input is not
    at fault)."""

    exit_code = 2


@contextlib.contextmanager
def _workers():
    """A worker process that died (killed, crashed): which one and how, in one line."""
    try:
        yield
    except WorkerDied as e:
        raise _WorkerFailed(str(e)) from None


def _summary(table, output: str, seconds: float) -> None:
    from ..documents.output import metadata

    points = consistency(table)
    meta = metadata(table)
    what = "versions" if "valid_to_seqno" in table.column_names else "documents"
    say(f"{table.num_rows:,} {what} from {points.num_rows} vbuckets in "
        f"{seconds:.1f} s -> {shown(output, output=True)}")
    if points.num_rows:
        seqnos = points.column("consistent_seqno").to_pylist()
        say(f"consistent up to seqno {min(seqnos):,}..{max(seqnos):,} per vbucket "
            "(see the schema metadata)")
    lost = points.filter(pc.invert(points.column("restored"))).column("vbucket").to_pylist()
    if lost:
        say(f"{len(lost)} vbucket(s) ({_few(lost)}) may lack versions a restart made "
            "current again: the input could not be read a second time")
    for line in _warnings(meta):
        say(line)


def _few(vbuckets: list[int]) -> str:
    return ", ".join(map(str, vbuckets[:8])) + (", ..." if len(vbuckets) > 8 else "")


def _warnings(meta: dict) -> list[str]:
    """The lines that say what the state's metadata ``meta`` cannot claim: frames lost,
    what the streams did not send, capture gaps and what else skip mode passed over."""
    out = []
    if meta.get("lost"):
        out.append(f"warning: frames were lost on {len(meta['lost'])} vbucket(s) "
                   f"({_few(meta['lost'])}): their consistent seqno stops before the loss")
    lacks = meta.get("lacks", {})
    began = [vb for vb, _ in lacks.get("history", ())]
    missing = [what for flag, what in (("values", "values (opened with NO_VALUE)"),
                                       ("backfill_tombstones", "the tombstones of the "
                                        "initial backfill (SkipDeletesInInitialBackfill)"))
               if lacks.get(flag)]
    if began:
        missing.append(f"changes before the stream began on {len(began)} vbucket(s) "
                       f"({_few(began)}; see starts_after in the consistency)")
    if missing:
        out.append("note: the table lacks " + "; ".join(missing))
    return out + _skipped(meta)


def _skipped(meta: dict) -> list[str]:
    """The lines for what skip mode passed over: capture gaps, then how many other
    problems, by kind, and the first. Counts come from ``error_counts`` (every problem),
    the bytes of the gaps and the first other problem from the problems listed."""
    listed = [e[-3:] for e in meta.get("errors", ())]          # (offset, length, reason)
    gaps = [e for e in listed if is_capture_gap(e[2])]
    damage = [e for e in listed if not is_capture_gap(e[2])]
    counts = dict(meta.get("error_counts", {}))
    gap_count = counts.pop("capture_gap", 0)
    out = []
    if gap_count:
        size = sum(g[1] for g in gaps)
        size_text = f"{size:,} bytes" if len(gaps) == gap_count else \
            f"at least {size:,} bytes (in the {len(gaps):,} listed)"
        out.append(f"{gap_count:,} capture gap(s): {size_text} of the TCP streams are not "
                   "in the capture; the documents they held are missing")
    total = meta.get("errors_total", len(listed)) - gap_count
    if total > 0:
        kinds = ", ".join(f"{n:,} {kind.replace('_', ' ')}" for kind, n in counts.items()
                          if n)
        first = f", the first at byte {damage[0][0]}: {damage[0][2]}" if damage else ""
        out.append(f"skipped {total:,} damaged or inconsistent frame(s) ({kinds}){first}")
    return out


def _on_spark(files: list[Name], output, master, options, collections) -> None:
    """The state on Spark, written as a Parquet dataset at ``output``."""
    try:
        import pyspark  # noqa: F401

        from ..spark import read_dcp, state_report
        from ..spark import state as spark_state
        from ..spark.job import running_session, session, spark_error
    except ImportError:
        raise click.ClickException("--spark needs PySpark: pip install 'dcpfast[spark]'")
    if "-" in paths_of(files):
        raise click.UsageError("--spark reads files, not standard input")

    began = time.perf_counter()
    running = running_session()                        # reused, and left running
    fd, log = tempfile.mkstemp(prefix="dcpfast-spark-", suffix=".log")
    os.close(fd)
    spark = running or session(master, "dcpfast state", log=log)
    try:
        joined = "all" if isinstance(files[0], tuple) else "directories"
        frames = read_dcp(spark, paths_of(files), columns="all", values=options["values"],
                          errors=options["errors"], collections=collections, joined=joined)
        result = spark_state(frames, **options)
        result.write.mode("errorifexists").parquet(output)
        rows = spark.read.parquet(output).count()
        report = state_report(frames, **options)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    except Exception as e:
        raise click.ClickException(f"{spark_error(e)} (Spark's log: {log})") from None
    finally:
        if running is None:
            spark.stop()
    os.unlink(log)
    click.echo(f"{rows:,} rows in {time.perf_counter() - began:.1f} s -> {output} (Spark)")
    where = output.rstrip("/") + REPORT_SUFFIX
    if os.path.isdir(output):                  # a local directory: the report beside it
        for crc in glob.glob(os.path.join(glob.escape(output), "**", ".*.crc"),
                             recursive=True):
            os.unlink(crc)                     # Spark's checksums: polars reads them too
        with atomic_output(where) as [path], writing(where), open(path, "w") as f:
            json.dump(report, f)
    seqnos = [seqno for _, seqno in report["consistency"]]
    if seqnos:
        click.echo(f"consistent up to seqno {min(seqnos):,}..{max(seqnos):,} per vbucket "
                   f"(see {where})")
    for line in _warnings(report):
        click.echo(line)
