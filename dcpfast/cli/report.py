"""``dcpfast report``: what happened on the wire, as one self-contained HTML page and a
JSON file of the same figures (docs/report.md)."""

from __future__ import annotations

import importlib.util
import os

import click

from ..errors import DcpFormatError, text
from ..packets import DCP_PORT
from ..reporting import DEFAULT_STALL_SECONDS
from ..reporting.api import Report, report
from ..reporting.inputs import MAX_STALL_SECONDS
from ..testing import SAMPLE_PCAP
from .app import (
    INPUT,
    SKIP_HINT,
    Name,
    atomic_output,
    check_inputs,
    check_output,
    inputs,
    main,
    opened,
    output_format,
    paths_of,
    pieces_option,
    reported,
    say,
    scan_options,
    shown,
    threads_option,
    writing,
)


def _stall_seconds(_ctx, _param, value: float) -> float:
    """A stall threshold: a number of seconds above 0 and at most ``MAX_STALL_SECONDS``
    (not infinite, not nan)."""
    if not 0 < value <= MAX_STALL_SECONDS:
        raise click.BadParameter(f"{value:g} is not a number of seconds above 0 and at most "
                                 f"{MAX_STALL_SECONDS:g}")
    return value


@main.command("report", epilog="Examples: dcpfast report --sample -o report.html; dcpfast "
              "report capture.pcap -o report.html --json report.json. More: docs/report.md.")
@click.argument("files", nargs=-1, type=INPUT)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="The page to write (REPORT.html; needs dcpfast[report]).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True),
              help="The JSON file of the figures to write.")
@click.option("--stall-seconds", type=float, callback=_stall_seconds,
              default=DEFAULT_STALL_SECONDS, show_default=True,
              help="Silence on an open stream longer than this is a stall.")
@click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True,
              help=f"DCP port of captures (repeatable; default {DCP_PORT}).")
@click.option("--force", is_flag=True, help="Replace outputs that exist.")
@click.option("--sample", is_flag=True,
              help="Report on the capture bundled with dcpfast (both sides of a small DCP "
                   "conversation).")
@pieces_option
@scan_options
@threads_option
def report_command(files, output, json_path, stall_seconds, ports, force, pieces, sample,
                   collections, errors, threads):
    """Report on the DCP conversations of every FILE: streams over time, stalls, flow
    control, NOOP round trips, lag, documents and anomalies.

    FILE is a pcap/pcapng capture (every connection, both directions) or a raw or
    compressed dump. Several FILES are separate inputs (a client's dump next to its
    server's is read with it); a directory is one dump cut into pieces, its files read in
    name order as one stream, and so are the FILES with --pieces (one server's dump).
    Captures and dumps are reported apart. Writes the page (-o) and/or the JSON (--json),
    then one line saying what it found.
    """
    names = inputs(list(files) + ([str(SAMPLE_PCAP)] if sample else []), False,
                   check=False, pieces=pieces)
    if not output and not json_path:
        raise click.UsageError("give -o REPORT.html, --json REPORT.json, or both")
    if "-" in (output, json_path):
        raise click.UsageError("the report is written to files: -o REPORT.html, --json "
                               "REPORT.json")
    if output:                                  # what is written is told by the extension
        output_format(output, {".html": "html", ".htm": "html"})
    if json_path:
        output_format(json_path, {".json": "json"}, option="'--json'")
    if output and importlib.util.find_spec("bokeh") is None:
        raise click.ClickException(text("needs_extra", what="the report page (-o)",
                                        module="bokeh", extra="report"))
    check_inputs(names)
    check_output([path for path in (output, json_path) if path], names, force=force)
    outputs = [(path, write) for path, write in ((json_path, Report.to_json),
                                                 (output, Report.to_html)) if path]
    with atomic_output(*(path for path, _ in outputs)) as temporaries:  # all or none
        found = _reported(names, stall_seconds=stall_seconds, errors=errors,
                          collections=collections, ports=ports or (DCP_PORT,),
                          threads=threads)
        for (path, write), temporary in zip(outputs, temporaries):
            with writing(path):
                write(found, temporary)
    written = [f"{shown(path, output=True)} ({os.path.getsize(path):,} bytes)"
               for path, _ in outputs]
    f = found.figures
    say(f"wrote {' and '.join(written)}: {f['frames']:,} frames, "
        f"{len(f['connections'])} connections, {len(f['streams'])} streams, "
        f"{len(f['stalls'])} stalls, {sum(f['anomaly_counts'].values())} anomalies")


def _reported(names: list[Name], *, errors: str, **options):
    """The report on ``names``, its errors one line each; pieces (--pieces) are read as
    one stream, a dump of its own named by them."""
    if isinstance(names[0], tuple):
        with reported(names[0], errors), opened(names[0], errors) as source:
            setattr(source.stream, "name", shown(names[0]))   # noqa: B010  # the report's
            return _report_of([source.stream], errors=errors, **options)  # name of it
    with reported(", ".join(paths_of(names)), errors):
        return _report_of(names, errors=errors, **options)


def _report_of(sources: list, *, errors: str, **options):
    """``report`` of ``sources``; an error that names its input, one line naming it."""
    try:
        return report(sources, errors=errors, **options)
    except DcpFormatError as e:
        where = getattr(e, "source", None)
        if not isinstance(where, (str, os.PathLike)):
            raise
        hint = SKIP_HINT if errors == "strict" else ""
        raise click.ClickException(f"{shown(os.fspath(where))}: {e}{hint}") from None
    except ValueError as e:
        if type(e) is not ValueError:
            raise
        raise click.ClickException(str(e)) from None
