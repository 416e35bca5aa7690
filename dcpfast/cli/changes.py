"""``dcpfast changes``: the change feed of dumps, in the shape its consumers read, to JSON
lines or Parquet."""

from __future__ import annotations

import contextlib
import sys
import time
from collections import Counter
from collections.abc import Iterable

import click
import numpy as np
import pyarrow as pa

from ..changes import FORMATS, ChangesBuilder, feed_metadata, formatted, json_lines
from ..changes.api import FEED_BATCH_BYTES
from ..documents.feeding import feed_batches
from .app import (
    INPUT,
    atomic_output,
    check_output,
    inputs,
    main,
    opened,
    output_format,
    pieces_option,
    reported,
    sample_option,
    say,
    scan_options,
    shown,
    threads_option,
    writing,
)

#: What ``changes`` writes, by the output's extension.
_OUTPUTS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet",
            ".pq": "parquet"}


@main.command("changes", epilog="Examples: dcpfast changes dump.dcp -o feed.jsonl --format "
              "debezium; dcpfast changes dumps/ -o feed.parquet --format auto-cdc. More: "
              "docs/changes.md.")
@click.argument("files", nargs=-1, type=INPUT)
@click.option("-o", "--output", required=True,
              help="FEED.jsonl (JSON lines), FEED.parquet, or - (JSON lines on standard "
                   "output).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="changes",
              show_default=True, help="The records: dcpfast's own rows, Debezium change "
                                      "events, the Couchbase Kafka connector's records, or a "
                                      "table for Spark's Auto CDC.")
@click.option("--bucket", help="The bucket's name, for the formats that carry it.")
@click.option("--no-values", is_flag=True, help="Leave out the documents' bodies and xattrs.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@threads_option
@pieces_option
@sample_option
@scan_options
def changes(files, output, fmt, bucket, no_values, force, threads, pieces, sample,
            collections, errors):
    """The change feed of the DCP dumps FILES (read in order, as one stream of frames,
    each FILE whole: a frame cut across two FILES is an error; a directory, or FILES with
    --pieces, is one dump cut into pieces, its files joined byte for byte): every change
    of every document in stream order, with the changes that undo what a rollback or a
    collection drop took back, so that a consumer that applies the feed in order ends
    with the documents `dcpfast state` gives.

    A vbucket whose stream lost frames stops at its consistent seqno, and is named on
    standard error; the Parquet file's schema metadata holds each vbucket's consistent
    seqno.
    """
    kind = "jsonl" if output == "-" else output_format(output, _OUTPUTS)
    files = inputs(files, sample, pieces=pieces)
    check_output(output, files, force=force)
    began = time.perf_counter()
    builder = ChangesBuilder(values=not no_values, before=fmt == "debezium", errors=errors,
                             threads=threads)
    with contextlib.ExitStack() as held:
        for name in files:
            with reported(name, errors):
                source = held.enter_context(opened(name, errors))
                feed_batches(builder, source.batches(
                    collections=collections, columns=None, errors=errors, threads=threads,
                    batch_bytes=FEED_BATCH_BYTES), located=True)
                source.done()
        with reported(shown(files[-1]), errors):
            feed = builder.batches()
    meta = feed_metadata(feed.schema)
    counts: Counter[str] = Counter()
    vbuckets: set[int] = set()

    def shaped(batch: pa.RecordBatch) -> pa.Table:
        """``batch`` in the format asked for, its changes counted."""
        counts.update(dict(zip(*np.unique(batch["change"].to_numpy(zero_copy_only=False),
                                          return_counts=True))))
        vbuckets.update(np.unique(batch["vbucket"].to_numpy()).tolist())
        return formatted(pa.Table.from_batches([batch]), fmt, bucket=bucket)

    with atomic_output(output) as [path], writing(output):
        shapes = map(shaped, feed)
        if kind == "parquet":
            _write_parquet(shapes, formatted(feed.schema.empty_table(), fmt, bucket=bucket),
                           path)
        else:
            _write_lines(shapes, path)
    if output != "-":
        _summary(counts, len(vbuckets), output, time.perf_counter() - began)
    for line in _warnings(meta):
        say(line, err=True)


def _write_parquet(feed: Iterable[pa.Table], empty: pa.Table, path: str) -> None:
    """The tables of ``feed`` to one Parquet file at ``path``, with ``empty``'s schema
    (and its metadata)."""
    import pyarrow.parquet as pq

    with pq.ParquetWriter(path, empty.schema) as writer:
        for table in feed:
            writer.write_table(table)


def _write_lines(feed: Iterable[pa.Table], path: str) -> None:
    """The tables of ``feed`` as JSON lines to ``path`` (``-``: standard output)."""
    with contextlib.nullcontext(sys.stdout.buffer) if path == "-" \
            else open(path, "wb") as sink:
        for table in feed:
            for piece in json_lines(table):
                sink.write(piece)
        sink.flush()


def _summary(counts: Counter[str], vbuckets: int, output: str, seconds: float) -> None:
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in counts.most_common())
    say(f"{counts.total():,} changes ({kinds or 'none'}) of {vbuckets:,} vbuckets in "
        f"{seconds:.1f} s -> {shown(output, output=True)}")


def _warnings(meta: dict) -> list[str]:
    """What the feed cannot claim: vbuckets that lost frames, damage skip mode passed."""
    lines = []
    if meta["lost"]:
        few = ", ".join(map(str, meta["lost"][:8])) + (", ..." if len(meta["lost"]) > 8
                                                       else "")
        lines.append(f"warning: frames were lost on {len(meta['lost'])} vbucket(s) ({few}): "
                     "each one's feed stops at its consistent seqno (in the metadata)")
    skipped = meta.get("errors_total") or 0
    if skipped:
        lines.append(f"warning: skipped {skipped:,} problem(s) in the input "
                     "(--errors skip)")
    return lines
