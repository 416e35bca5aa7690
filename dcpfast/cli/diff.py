"""``dcpfast diff``: two buckets' dumps compared; the summary on the terminal, the rows to a
file. Exit status 0 when they hold the same documents, 1 when they differ, 2 on any
error (as ``diff`` has it)."""

from __future__ import annotations

import click

from ..compare import DEFAULT_FIELDS, FIELDS, diff_errors, summary
from ..compare.api import diff as compare
from ..compare.rules import UnknownCollections
from ..compare.sides import both, given, table_file
from ..documents import StateBuilder
from ..documents.feeding import feed_batches
from ..errors import DcpFormatError
from ..io.kinds import is_parquet_path
from ..threads import threads_of
from .app import (
    FILE_TABLES,
    INPUT,
    Failed,
    at_seqno,
    atomic_output,
    check_inputs,
    check_output,
    failing_with_status_2,
    main,
    opened,
    output_format,
    printable,
    say,
    scan_options,
    shown,
    write_table,
    writing,
)

#: The exit statuses.
SAME, DIFFERENT = 0, 1              # 2: an error (``Failed``)
#: Differences listed on the terminal when no output file is given.
SHOWN = 10


def _fields(ctx, param, value):
    """``F,...`` (exactly these) or ``+F,...`` (the defaults and these)."""
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    chosen = [*DEFAULT_FIELDS, *(n[1:] for n in names)] if all(
        n.startswith("+") for n in names) and names else names
    unknown = [n for n in chosen if n not in FIELDS]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown field(s) {', '.join(unknown) or '(none)'}; the "
                                 f"fields: {', '.join(FIELDS)}")
    return chosen


@main.command("diff", epilog="Examples: dcpfast diff source.dcp target.dcp; dcpfast diff "
              "source.dcp target.pcap -o diff.parquet --fields +cas. More: docs/diff.md.")
@click.argument("source", type=INPUT)
@click.argument("target", type=INPUT)
@click.option("-o", "--output", help="Write the differences to OUT.parquet (or .arrow).")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--at-seqno", callback=at_seqno, metavar="N|VB:N,...",
              help="Compare both sides as of this seqno (per vbucket: VB:N,...).")
@click.option("--at-time", metavar="ISO", help="Compare both sides as of this time "
              "(ISO 8601; no zone means UTC).")
@click.option("--fields", callback=_fields, metavar="F,...|+F,...",
              help=f"The fields compared, comma-separated (default: {', '.join(DEFAULT_FIELDS)}"
              f"); +cas,+rev_seqno adds to the defaults. All: {', '.join(FIELDS)}.")
@click.option("--include-deleted", is_flag=True,
              help="A tombstone is a document (by default it counts as none).")
@click.option("--collection", "only", multiple=True, metavar="NAME",
              help="Only this collection (name or scope.name); repeatable.")
@click.option("--threads", type=click.IntRange(min=1),
              help="2 or more: build the two sides at the same time (default: the cores "
              "idle now).")
@scan_options
def diff(source, target, output, force, at_seqno, at_time, fields, include_deleted, only,
         threads, collections, errors):
    """Compare the buckets whose dumps are SOURCE and TARGET (raw, compressed or packet
    captures; - for standard input; a directory: a dump cut into pieces, its files read in
    name order as one stream; a state file dcpfast state wrote with --include-deleted):
    documents matched by scope, collection and key;
    exit status 0 when they are the same, 1 when they differ, 2 on error.

    Each side is compared up to its consistent seqno: what could not be compared is
    counted, never reported as a difference.
    """
    with failing_with_status_2():               # an exit status of 1 would read "differ"
        status = _run(source, target, output, force, dict(
            at_seqno=at_seqno, at_time=at_time, fields=fields, include_deleted=include_deleted,
            only_collections=list(only) or None, threads=threads, errors=errors,
            scan=collections))
    click.get_current_context().exit(status)


def _run(source: str, target: str, output: str | None, force: bool, options: dict) -> int:
    if options["at_seqno"] is not None and options["at_time"] is not None:
        raise click.UsageError("give --at-seqno or --at-time, not both")
    if source == target == "-":
        raise click.UsageError("standard input can be one side only")
    fmt = None if output is None else output_format(output, FILE_TABLES)
    check_inputs([source, target])
    if output is not None:
        check_output(output, [source, target], force=force)
    fields = tuple(options["fields"] or DEFAULT_FIELDS)
    values = any(f in ("body", "xattrs", "system_xattrs") for f in fields)
    build = dict(at_seqno=options["at_seqno"], at_time=options["at_time"],
                 include_deleted=True, values=values, errors=options["errors"])
    StateBuilder(**build)                                      # checks the options
    with atomic_output(*([] if output is None else [output])) as paths:
        a, b = both(lambda: _state(source, "source", build, options["scan"]),
                    lambda: _state(target, "target", build, options["scan"]),
                    together=threads_of(options["threads"]) > 1)
        try:
            table = compare(a.table, b.table, fields=fields,
                            include_deleted=options["include_deleted"],
                            only_collections=options["only_collections"])
        except UnknownCollections as e:                # a typo: a usage error, as state's
            raise click.BadParameter(str(e), param_hint="--collection") from None
        if output is not None and fmt is not None:
            with writing(output):
                write_table(table, paths[0], fmt)
    _report(table, (source, target), output)
    return SAME if table.num_rows == 0 else DIFFERENT


def _state(name: str, side: str, options: dict, collections):
    """The state of one side (a dump, a compressed dump, a capture or standard input),
    opened once and read a second time where a restart needs it (a pipe, a FIFO or
    standard input from what the first read kept)."""
    def feed(builder: StateBuilder, source, stream=None) -> None:
        feed_batches(builder, source.batches(collections=collections, columns=None,
                                             errors=options["errors"], stream=stream),
                     located=True)

    def again(builder: StateBuilder) -> None:
        with source.again() as stream:
            feed(builder, source, stream)
    if is_parquet_path(name):                   # a state table (dcpfast state -o)
        try:
            return given(table_file(name), side, options)
        except (OSError, ValueError) as e:
            raise Failed(f"{side} {shown(name)}: {e}") from None
    try:
        builder = StateBuilder(**options)
        with opened(name, options["errors"], again=True) as source:
            feed(builder, source)
            source.done()
            return builder.table(again)
    except DcpFormatError as e:
        raise Failed(f"{side} {shown(name)}: {e}") from None
    except OSError as e:
        raise Failed(f"{side} {shown(name)}: {e.strerror or e}") from None


def _report(table, names: tuple[str, str], output: str | None) -> None:
    """The summary per collection, what a side could not vouch for or skipped, and the
    verdict."""
    counts = summary(table).to_pylist()
    header = ("collection", "source", "target", "equal", "missing_from_source",
              "missing_from_target", "mismatch", "not_compared")
    lines = [[_name(c), *(f"{c[h]:,}" for h in header[1:])] for c in counts]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
              for i, h in enumerate(header)]
    say("  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                         for i, (h, w) in enumerate(zip(header, widths))))
    for line in lines:
        say("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                             for i, (v, w) in enumerate(zip(line, widths))))
    uncompared = sum(c["not_compared"] for c in counts)
    if uncompared:
        say(f"{uncompared:,} document(s) not compared: past a side's consistent seqno "
                   "(a snapshot that did not arrive whole) or a value that did not decode")
    for (side, skipped), name in zip(diff_errors(table).items(), names):
        if skipped:
            say(f"{side} {shown(name)}: skipped {len(skipped)} damaged or inconsistent "
                       f"frame(s), the first at byte {skipped[0].offset}: {skipped[0].reason}")
    if table.num_rows == 0:
        say("no differences")
        return
    say(f"{table.num_rows:,} difference(s)" +
        (f" -> {shown(output, output=True)}" if output else ":"))
    if output is None:
        for row in table.slice(0, SHOWN).to_pylist():
            key = printable(row["key_str"]) if row["key_str"] is not None \
                else row["key"].hex()
            what = f" ({','.join(row['fields'])})" if row["fields"] else ""
            say(f"  {row['kind']:<20} {_name(row)} {key}{what}")
        if table.num_rows > SHOWN:
            say(f"  ... {table.num_rows - SHOWN:,} more (-o FILE writes them all)")


def _name(row: dict) -> str:
    """A row's collection as printed: ``scope.collection``, escaped."""
    name = printable(row["collection"])
    return name if row["scope"] is None else f"{printable(row['scope'])}.{name}"
