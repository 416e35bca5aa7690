"""``dcpfast mirror``: a Delta table of the documents of growing dumps, one commit per
run."""

from __future__ import annotations

import click

from ..errors import MODES, DcpFormatError
from ..mirror import mirror
from .app import INPUT, inputs, main, native_panics_hidden, sample_option, say


@main.command("mirror", epilog="Examples: dcpfast mirror dumps/ --to bucket.delta; "
              "dcpfast mirror --sample --to /tmp/sample.delta. More: docs/mirror.md.")
@click.argument("files", nargs=-1, type=INPUT)
@click.option("--to", "table", required=True, help="The Delta table of the documents.")
@click.option("--history", help="A second Delta table: every version, with when it was "
              "current (__START_AT, __END_AT).")
@click.option("--no-values", is_flag=True, help="Leave the bodies and xattrs out.")
@click.option("--errors", type=click.Choice(MODES), default="skip", show_default=True,
              help="Skip damage and stop a vbucket that lost frames at its consistent "
                   "seqno, or refuse them.")
@click.option("--collections/--no-collections", default=None,
              help="Whether keys carry a collection id (default: infer from the stream).")
@sample_option
def mirror_command(files, table, history, no_values, errors, collections, sample):
    """Apply what FILES hold (dumps, directories of rotated dumps read in name order as
    one stream, or one capture or compressed dump) to the Delta table TABLE of their
    documents, and commit it: after each commit the table is the state of everything
    read, each vbucket at its consistent seqno. Run it again as the dumps grow: a later
    run reads on from where the last one stood. A run stopped at any moment and run
    again commits what it would have, never twice.
    """
    names = inputs(files, sample)
    try:
        with native_panics_hidden():
            run = mirror(names, table, history=history, values=not no_values,
                         errors=errors, collections=collections)
    except (DcpFormatError, OSError, ValueError, RuntimeError) as e:
        raise click.ClickException(f"{table}: {e}" if table not in str(e) else str(e)) \
            from None
    if run.version is None:
        say(f"{table}: nothing new since run {run.run} ({run.documents:,} documents)")
    else:
        say(f"{table}: version {run.version} (run {run.run}): {run.written:,} documents "
            f"written, {run.deleted:,} deleted, {run.documents:,} in the table "
            f"({run.read:,} bytes of the stream read)")
    if run.rebuilt:
        say(f"rolled back: vbuckets {', '.join(map(str, run.rebuilt))} built anew from the "
            "stream's start")
    if run.history_version is not None:
        say(f"{history}: version {run.history_version} (run {run.run})")
    if run.waiting:
        say(f"incomplete at the end, waiting: {run.waiting:,} bytes of a frame still being "
            "written", err=True)
    if run.lost:
        say(f"warning: vbuckets {', '.join(map(str, run.lost))} lost frames: each stops at "
            "its consistent seqno, nothing past the loss applied", err=True)
