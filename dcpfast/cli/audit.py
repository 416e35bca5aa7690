"""``dcpfast audit``: what a connector delivered, judged against the captured DCP stream;
exit status 0 clean, 1 problems, 2 error."""

from __future__ import annotations

import os

import click

from ..changes import audit, audit_summary
from ..changes.delivery import PROBLEMS
from ..changes.sinks import SINK_FORMATS
from .app import (
    FILE_TABLES,
    INPUT,
    atomic_output,
    check_output,
    failing_with_status_2,
    main,
    output_format,
    say,
    scan_options,
    write_table,
    writing,
)

#: The exit statuses.
CLEAN, PROBLEMS_FOUND = 0, 1         # 2: an error (``Failed``)


@main.command("audit", epilog="Examples: dcpfast audit capture.pcap topic.jsonl; dcpfast "
              "audit dump.dcp sink.parquet -o problems.parquet. More: docs/changes.md.")
@click.argument("capture", type=INPUT)
@click.argument("sink")
@click.option("--format", "fmt", type=click.Choice(SINK_FORMATS),
              help="The sink's records (default: told from their fields).")
@click.option("--bucket", help="The bucket captured: messages of another are unknown.")
@click.option("-o", "--output", help="Write the problems to OUT.parquet (or .arrow).")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@scan_options
def audit_command(capture, sink, fmt, bucket, output, force, collections, errors):
    """Judge what a connector delivered (SINK: JSON lines, Parquet, a folder of Parquet
    files or a Delta table of the Couchbase Kafka connector's records or of Debezium
    change events, in delivery order) against
    the DCP stream it came from (CAPTURE: a dump, a compressed dump, a capture, a
    directory of a rotated dump): each message delivered once, a duplicate, out of order,
    a phantom (a version a rollback discarded) or unknown; each current version never
    delivered is missing. Exit status 0 when clean, 1 when there are problems, 2 on error.

    What cannot be judged (vbuckets that lost frames or that the capture never streamed,
    a sink that starts later, lines that do not parse) is counted, never a problem.
    """
    with failing_with_status_2():               # an exit status of 1 would read "problems"
        fmt_out = None if output is None else output_format(output, FILE_TABLES)
        if not os.path.exists(sink):
            raise click.ClickException(f"{sink}: no such file")
        if output is not None:
            check_output(output, [capture, sink], force=force)
        found = audit(capture, sink, format=fmt, bucket=bucket, errors=errors,
                      collections=collections)
        if output is not None:
            with atomic_output(output) as [path], writing(output):
                write_table(found, path, fmt_out)
    summary = audit_summary(found)
    counts = summary["counts"]
    say(f"{summary['messages']:,} messages: {counts['once']:,} delivered once, "
        + ", ".join(f"{counts[k]:,} {k.replace('_', ' ')}" for k in PROBLEMS))
    for reason, n in summary["not_judged"].items():
        say(f"not judged: {n:,} ({reason})")
    if output is None:
        for row in found.slice(0, 10).to_pylist():
            at = "" if row["sink_position"] is None else f" (message {row['sink_position']:,})"
            say(f"  {row['kind']}: vbucket {row['vbucket']} {row['key']!r} seqno "
                f"{row['seqno']} cas {row['cas']}{at}")
        if found.num_rows > 10:
            say(f"  ... and {found.num_rows - 10:,} more (-o to write them all)")
    click.get_current_context().exit(PROBLEMS_FOUND if found.num_rows else CLEAN)
