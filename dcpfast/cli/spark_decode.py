"""``dcpfast spark-decode``: dumps to a Parquet dataset or a Delta table with Spark,
decoded and written in Spark's tasks (``dcpfast.spark.write_parquet``, ``write_delta``).

SIGINT, SIGTERM and SIGHUP end it cleanly at any moment: the Spark job cancelled, nothing
of it left at ``--out`` (or, where the signal came as the job finished, its whole output),
one line on standard error that says which, and the process ends by the signal (status
130, 143 or 129 in a shell)."""

from __future__ import annotations

import os
import signal
import tempfile

import click

from ..testing import SAMPLE
from .app import inputs as named_inputs
from .app import main, paths_of, pieces_option, scan_options


@main.command("spark-decode")
@click.argument("inputs", nargs=-1)
@click.option("--sample", is_flag=True, help="Decode the dump bundled with dcpfast.")
@click.option("--out", required=True,
              help="Directory (or URI) of the Parquet dataset or Delta table to write.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "delta"]), default="parquet",
              show_default=True, help="A Parquet dataset, or a Delta table committed in "
              "one transaction (dcpfast[delta]).")
@click.option("--app-id", help="With --format delta: a name for this load; a table that "
              "has committed it already gets nothing new (a re-run commits once).")
@click.option("--master", help="Spark master URL (default: an embedded local[*] Spark).")
@click.option("--partition-by", default="vbucket", show_default=True,
              help="Comma-separated columns to partition the dataset by ('' for none).")
@click.option("--columns", help="Comma-separated output columns, or 'all' (default: the "
                                "columns of document changes).")
@click.option("--values", "with_values", is_flag=True,
              help="Add content (decompressed body) and xattrs columns.")
@click.option("--overwrite", is_flag=True, help="Replace an existing dataset at --out.")
@click.option("--append", is_flag=True, help="Add to an existing dataset at --out.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@pieces_option
@scan_options
def spark_decode(inputs, sample, out, fmt, app_id, master, partition_by, columns, with_values,
                 overwrite, append, quiet, pieces, collections, errors):
    """Decode DCP dumps (files, directories, URIs) into Parquet or Delta with Spark.

    Each INPUT file is a dump of its own; a directory is one dump cut into pieces, its
    files joined in name order as one stream (offsets are positions in it, source the
    file a frame starts in), and with --pieces every INPUT is a piece of one dump,
    joined in the order given. A joined stream that holds a compressed piece is decoded
    whole, by one task.
    """
    try:
        import pyspark  # noqa: F401

        from ..spark import decode_to_parquet
        from ..spark.job import Ended, spark_error
    except ImportError:
        raise click.ClickException("spark-decode needs PySpark: pip install 'dcpfast[spark]'")
    paths = list(inputs) + ([str(SAMPLE)] if sample else [])
    if not paths:
        raise click.UsageError("give one or more INPUTS, or --sample")
    paths = paths_of(named_inputs(paths, False, check=False, pieces=pieces))
    if overwrite and append:
        raise click.UsageError("--overwrite and --append exclude each other")
    if app_id is not None and fmt != "delta":
        raise click.UsageError("--app-id goes with --format delta")
    delta = {"app_id": app_id} if fmt == "delta" else {}
    fd, log = tempfile.mkstemp(prefix="dcpfast-spark-", suffix=".log")
    os.close(fd)
    try:
        summary = decode_to_parquet(
            paths, out, master=master, log=log, progress=not quiet,
            partition_by=[c.strip() for c in partition_by.split(",") if c.strip()],
            columns=columns, values=with_values, errors=errors, collections=collections,
            mode="overwrite" if overwrite else "append" if append else "error",
            format=fmt, signals=True, joined="all" if pieces else "directories", **delta)
    except Ended as e:
        os.unlink(log)
        _ended(e.signum, out, e.written)
    except ImportError as e:
        os.unlink(log)
        raise click.ClickException(str(e)) from None
    except (ValueError, OSError) as e:                # found before Spark ran
        os.unlink(log)
        named = isinstance(e, OSError) and e.filename and e.strerror
        raise click.ClickException(f"{e.filename}: {e.strerror}" if named else str(e)) \
            from None
    except Exception as e:
        raise click.ClickException(f"{spark_error(e)} (Spark's log: {log})") from None
    os.unlink(log)
    for line in report(summary, out):
        click.echo(line)


def _ended(signum: int, out: str, written: bool) -> None:
    """One line, then the end by the signal that asked for it."""
    name = signal.Signals(signum).name
    said = f"the job had written all of {out} when it could stop" if written \
        else f"nothing written to {out}"
    click.echo(f"Error: ended by {name}: {said}", err=True)
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
    raise SystemExit(128 + signum)                      # where the signal did not end it


def report(summary: dict, out: str) -> list[str]:
    """What the job did, in the terms a user acts on: frames and files, partitions with
    their frame counts, damage skipped, and where the time went."""
    files = "file" if summary["files"] == 1 else "files"
    if summary.get("committed") is False:
        return [f"{out}: this load was committed already (version {summary['version']}): "
                "nothing new"]
    table = f", Delta table version {summary['version']}" if "version" in summary else ""
    lines = [f"{summary['frames']:,} frames from {summary['input_bytes'] / 1e6:,.1f} MB of "
             f"dumps -> {out}: {summary['files']:,} Parquet {files}, "
             f"{summary['output_bytes'] / 1e6:,.1f} MB{table}"]
    rows = summary["rows"]
    if rows and list(rows) != [""]:
        counts = sorted(rows.values())
        shown = ", ".join(f"{k} {n:,}" for k, n in list(rows.items())[:8])
        more = f", ... ({len(rows):,} partitions, {counts[0]:,} to {counts[-1]:,} frames " \
               f"each)" if len(rows) > 8 else ""
        lines.append(f"  frames per partition: {shown}{more}")
        if any(k.endswith("=-1") or "=-1/" in k for k in rows):
            lines.append("  (=-1: frames that carry no value there; responses have no vbucket)")
        if any(k.endswith("=null") or "=null/" in k for k in rows):
            lines.append("  (=null: frames that carry no value there; responses have no "
                         "vbucket)")
    skipped = summary["skipped"]
    if skipped:
        lines.append(f"  skipped {sum(s['regions'] for s in skipped):,} damaged region(s), "
                     f"{sum(s['bytes'] for s in skipped):,} bytes, in {len(skipped):,} "
                     f"piece(s) (each logged above)")
    lines.append(f"  {summary['startup_seconds']:.1f} s starting Spark, "
                 f"{summary['seconds']:.1f} s running the job: {summary['tasks']:,} task(s) "
                 f"decoding and writing for {summary['task_seconds']:.1f} s in all")
    return lines
