"""``dcpfast state``: the documents of dumps as of their end, a seqno or a time, to Parquet."""

from __future__ import annotations

import contextlib
import json
import os
import time

import click

from ..documents import StateBuilder, consistency
from ..pcap import CLIENT_TO_SERVER
from .app import INPUT, inputs, main, opened, reported, sample_option, scan_options, shown

#: With --spark: the file in the output directory that holds ``state_report``'s JSON
#: (Parquet readers pass over names that start with "_").
REPORT_FILE = "_dcpfast_state.json"


def _at_seqno(ctx, param, value):
    """``N`` (every vbucket) or ``VB:N[,VB:N...]``."""
    if value is None:
        return None
    try:
        if ":" not in value:
            return int(value)
        pairs = (part.split(":") for part in value.split(",") if part.strip())
        return {int(vb): int(seqno) for vb, seqno in pairs}
    except ValueError:
        raise click.BadParameter("expected N or VB:N[,VB:N...]") from None


def _write(table, output: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if output.lower().endswith((".arrow", ".feather", ".ipc")):
        with pa.OSFile(output, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    else:
        pq.write_table(table, output)


@main.command("state")
@click.argument("files", nargs=-1, type=INPUT)
@click.option("-o", "--output", required=True,
              help="OUT.parquet (or .arrow); with --spark a Parquet directory.")
@click.option("--at-seqno", callback=_at_seqno, metavar="N|VB:N,...",
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
@sample_option
@scan_options
def state(files, output, at_seqno, at_time, include_deleted, history, no_values, only, spark,
          master, sample, collections, errors):
    """Rebuild the documents of the DCP dumps FILES (read in order, as one stream): one row
    per document as it stood at the end, at --at-seqno or at --at-time.

    Captures contribute their server-to-client frames (their client-to-server frames
    place the Stream Request responses). The table's schema metadata holds each
    vbucket's consistent seqno and, with --errors skip, what was skipped.
    """
    if at_seqno is not None and at_time is not None:
        raise click.UsageError("give --at-seqno or --at-time, not both")
    files = inputs(files, sample)                # each one there before OUTPUT is touched
    chosen = [int(c) if c.isdigit() else c for c in only] or None
    options = dict(at_seqno=at_seqno, at_time=at_time, include_deleted=include_deleted,
                   values=not no_values, only_collections=chosen, errors=errors,
                   history=history)
    try:
        builder = StateBuilder(**options)
    except (TypeError, ValueError) as e:
        raise click.BadParameter(str(e)) from None
    if spark:
        _on_spark(files, output, master, options, collections)
        return
    began = time.perf_counter()

    def feed(builder: StateBuilder) -> None:
        for name in files:
            with reported(name), opened(name, errors) as source:
                for batch in source.batches(collections=collections, columns=None,
                                            errors=errors):
                    if source.capture and batch.connection.direction == CLIENT_TO_SERVER:
                        builder.client(batch)
                    else:
                        builder.update(batch)

    feed(builder)
    with reported(shown(files[-1])):
        try:
            table = builder.table(None if "-" in files else feed)   # standard input: once
        except ValueError as e:                  # collection names the stream never gave
            raise click.BadParameter(str(e), param_hint="--collection") from None
    try:
        _write(table, output)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(output)
        raise click.ClickException(f"{output}: {e.strerror or e}") from None
    _summary(table, output, time.perf_counter() - began)


def _summary(table, output: str, seconds: float) -> None:
    import pyarrow.compute as pc

    from ..documents.output import metadata

    points = consistency(table)
    meta = metadata(table)
    what = "versions" if "valid_to_seqno" in table.column_names else "documents"
    click.echo(f"{table.num_rows:,} {what} from {points.num_rows} vbuckets in "
               f"{seconds:.1f} s -> {output}")
    if points.num_rows:
        seqnos = points.column("consistent_seqno").to_pylist()
        click.echo(f"consistent up to seqno {min(seqnos):,}..{max(seqnos):,} per vbucket "
                   "(see the schema metadata)")
    lost = points.filter(pc.invert(points.column("restored"))).column("vbucket").to_pylist()
    if lost:
        click.echo(f"{len(lost)} vbucket(s) ({_few(lost)}) may lack versions a restart made "
                   "current again: give the input as files, not standard input")
    for line in _warnings(meta):
        click.echo(line)


def _few(vbuckets: list[int]) -> str:
    return ", ".join(map(str, vbuckets[:8])) + (", ..." if len(vbuckets) > 8 else "")


def _warnings(meta: dict) -> list[str]:
    """The lines that say what the state's metadata ``meta`` cannot claim: frames lost,
    what the streams did not send, and what skip mode passed over."""
    out = []
    if meta.get("lost"):
        out.append(f"warning: frames were lost on {len(meta['lost'])} vbucket(s) "
                   f"({_few(meta['lost'])}): their consistent seqno stops before the loss")
    lacks = meta.get("lacks", {})
    began = [vb for vb, _ in lacks.get("history", ())]
    missing = [text for flag, text in (("values", "values (opened with NO_VALUE)"),
                                       ("backfill_tombstones", "the tombstones of the "
                                        "initial backfill (SkipDeletesInInitialBackfill)"))
               if lacks.get(flag)]
    if began:
        missing.append(f"changes before the stream began on {len(began)} vbucket(s) "
                       f"({_few(began)}; see starts_after in the consistency)")
    if missing:
        out.append("note: the table lacks " + "; ".join(missing))
    errors = meta.get("errors", ())
    if errors:
        total = meta.get("errors_total", len(errors))
        counts = ", ".join(f"{n:,} {kind.replace('_', ' ')}"
                           for kind, n in meta.get("error_counts", {}).items())
        offset, _, reason = errors[0][-3:]
        out.append(f"skipped {total:,} damaged or inconsistent frame(s) ({counts}), the "
                   f"first at byte {offset}: {reason}")
    return out


def _on_spark(files, output, master, options, collections) -> None:
    """The state on Spark, written as a Parquet dataset at ``output``."""
    try:
        import pyspark  # noqa: F401

        from ..spark import read_dcp, state_report
        from ..spark import state as spark_state
        from ..spark.job import running_session, session, spark_error
    except ImportError:
        raise click.ClickException("--spark needs PySpark: pip install 'dcpfast[spark]'")
    if "-" in files:
        raise click.UsageError("--spark reads files, not standard input")

    began = time.perf_counter()
    running = running_session()                        # reused, and left running
    spark = running or session(master, "dcpfast state")
    try:
        frames = read_dcp(spark, list(files), columns="all", values=options["values"],
                          errors=options["errors"], collections=collections)
        result = spark_state(frames, **options)
        result.write.mode("errorifexists").parquet(output)
        rows = spark.read.parquet(output).count()
        report = state_report(frames, **options)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    except Exception as e:
        raise click.ClickException(spark_error(e)) from None
    finally:
        if running is None:
            spark.stop()
    click.echo(f"{rows:,} rows in {time.perf_counter() - began:.1f} s -> {output} (Spark)")
    if os.path.isdir(output):                  # a local directory: the report beside the rows
        with open(os.path.join(output, REPORT_FILE), "w") as f:
            json.dump(report, f)
    seqnos = [seqno for _, seqno in report["consistency"]]
    if seqnos:
        click.echo(f"consistent up to seqno {min(seqnos):,}..{max(seqnos):,} per vbucket "
                   f"(see {REPORT_FILE})")
    for line in _warnings(report):
        click.echo(line)
