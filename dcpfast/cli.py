"""The ``dcpfast`` command."""

from __future__ import annotations

import sys
from collections import Counter

import click
import numpy as np

from . import io as dio
from .errors import DcpFormatError
from .protocol import COLLECTION_PREFIXED, Opcode

_DOCUMENTS = np.array(sorted(COLLECTION_PREFIXED), np.uint8)
_SEQNO_FLOOR = np.iinfo(np.uint64).max


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dcpfast")
def main():
    """Decode Couchbase DCP frame dumps."""


@main.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--sample", is_flag=True, help="Summarise the dump bundled with dcpfast.")
@click.option("--collections/--no-collections", default=None,
              help="Whether keys carry a collection id (default: infer from the stream).")
@click.option("--errors", type=click.Choice(["strict", "skip"]), default="strict",
              show_default=True, help="Stop at the first malformed frame, or skip damage.")
def info(files, sample, collections, errors):
    """Frames, opcodes, vbuckets, collections and seqno ranges of each FILE."""
    paths = list(files) + ([str(dio.SAMPLE)] if sample else [])
    if not paths:
        raise click.UsageError("give one or more FILEs, or --sample")
    for path in paths:
        try:
            summary = _summarise(path, collections, errors)
        except DcpFormatError as e:
            click.echo(f"error: {path}: {e}", err=True)
            sys.exit(1)
        click.echo(_report(path, summary))


def _summarise(path, collections, errors) -> dict:
    """Counts and seqno ranges over every batch of one dump, in bounded memory."""
    opcodes = np.zeros(256, np.int64)
    vbuckets: dict[int, list[int]] = {}    # vbucket -> [frames, documents, low, high]
    by_collection: Counter = Counter()
    frames = size = 0
    skipped = []
    uses_collections = None
    columns = ["opcode", "vbucket", "by_seqno", "collection_id", "magic", "body_len"]
    for batch in dio.iter_batches(path, collections=collections, columns=columns,
                                  errors=errors):
        uses_collections = batch.collections
        frames += len(batch)
        size += int(batch["body_len"].sum()) + 24 * len(batch)
        skipped += batch.errors
        opcodes += np.bincount(batch["opcode"], minlength=256)
        requests = batch.validity("vbucket")
        docs = np.isin(batch["opcode"], _DOCUMENTS) & requests
        for vb in np.unique(batch["vbucket"][requests]):
            mine = requests & (batch["vbucket"] == vb)
            seqnos = batch["by_seqno"][mine & docs]
            entry = vbuckets.setdefault(int(vb), [0, 0, int(_SEQNO_FLOOR), 0])
            entry[0] += int(mine.sum())
            entry[1] += len(seqnos)
            if len(seqnos):
                entry[2] = min(entry[2], int(seqnos.min()))
                entry[3] = max(entry[3], int(seqnos.max()))
        if batch.collections:
            ids, counts = np.unique(batch["collection_id"][docs], return_counts=True)
            by_collection.update(dict(zip(ids.tolist(), counts.tolist())))
    return dict(frames=frames, size=size, skipped=skipped, opcodes=opcodes,
                vbuckets=vbuckets, collections=by_collection, uses_collections=uses_collections)


def _report(path, s) -> str:
    lines = [f"{path}: {s['frames']:,} frames, {s['size']:,} bytes of frames, collections "
             f"{'on' if s['uses_collections'] else 'off'}, {len(s['skipped'])} skipped regions"]
    lines.append("\n  opcode                    frames")
    for op in np.flatnonzero(s["opcodes"]):
        try:
            name = Opcode(op).name
        except ValueError:
            name = f"0x{op:02x}"
        lines.append(f"  {name:<22} {int(s['opcodes'][op]):>9,}")
    lines.append("\n  vbucket    frames  documents   first seqno    last seqno")
    for vb, (n, docs, low, high) in sorted(s["vbuckets"].items()):
        span = f"{low:>13,} {high:>13,}" if docs else f"{'-':>13} {'-':>13}"
        lines.append(f"  {vb:>7} {n:>9,} {docs:>10,} {span}")
    if s["collections"]:
        lines.append("\n  collection   documents")
        for cid, n in sorted(s["collections"].items()):
            lines.append(f"  {f'0x{cid:x}':>10} {n:>11,}")
    for region in s["skipped"]:
        lines.append(f"  skipped {region.length} bytes at {region.offset}: {region.reason}")
    return "\n".join(lines)
