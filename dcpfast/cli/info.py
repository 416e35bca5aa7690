"""``dcpfast info``: frames, bytes, opcodes, vbuckets, collections, seqno ranges and damage."""

from __future__ import annotations

import json
import sys

import click
import numpy as np

from ..protocol import DOCUMENT_CHANGES, Opcode
from .app import (
    INPUT,
    inputs,
    main,
    opened,
    pieces_option,
    reported,
    sample_option,
    say,
    scan_options,
    shown,
    threads_option,
)
from .glance import Glance
from .inventory import LISTED_PER_REASON, Inventory

#: Bytes per batch: a batch lists every region it skipped, so that dense damage costs
#: memory in proportion to the batch; this keeps it a few times smaller than the default.
_BATCH_BYTES = 8 << 20
#: The columns scanned: what the counts and the glance read.
_COLUMNS = sorted(set(Inventory.COLUMNS) | set(Glance.COLUMNS))


@main.command(epilog="Examples: dcpfast info --sample; dcpfast info dumps/*.dcp --json. "
              "More: docs/usage.md, the command line.")
@click.argument("files", nargs=-1, type=INPUT)
@pieces_option
@sample_option
@scan_options
@threads_option
@click.option("--json", "as_json", is_flag=True, help="Print the summaries as JSON.")
def info(files, pieces, sample, collections, errors, threads, as_json):
    """Frames, bytes, opcodes, vbuckets, collections, seqno ranges and damage of each FILE.

    FILE is a raw, gzip, zstd or lz4 dump, or a capture; - reads standard input. Several
    FILES are separate dumps, each summed up on its own; a directory is one dump cut into
    pieces (a rotated dump), its files read in name order as one stream, and with --pieces
    the FILES are one dump, summed up once.
    """
    paths = inputs(files, sample, check=False,      # each input's failure is its own line
                   pieces=pieces)
    failed, summaries = False, []
    for path in paths:
        try:
            with reported(path, errors):
                summary = _summarise(path, collections, errors, threads)
        except click.ClickException as e:
            say(f"Error: {e.format_message()}", err=True)
            failed = True
            continue
        if as_json:
            summaries.append({**_as_json(path, summary), **summary["glance"].as_json()})
        else:
            say("\n".join([_report(path, summary), "",
                           *summary["glance"].lines(shown(path))]))
    if as_json:
        say(json.dumps(summaries, indent=2))
    if failed:
        sys.exit(1)


def _summarise(path, collections, errors, threads) -> dict:
    """Counts and seqno ranges over every batch of one input, in bounded memory."""
    found, glance = Inventory(), Glance()
    with opened(path, errors) as source:
        batches = source.batches(collections=collections, columns=_COLUMNS, errors=errors,
                                 batch_bytes=_BATCH_BYTES, threads=threads)
        for batch in batches:
            found.update(batch)
            glance.update(batch)
    # a capture's own damage (file offsets): the first of it listed, all of it counted
    damage = getattr(batches, "problems", [])
    return dict(inventory=found, glance=glance, compression=source.compression,
                capture=source.capture,
                capture_damage=damage[:LISTED_PER_REASON], capture_damage_count=len(damage)
                + getattr(batches, "problems_not_listed", 0))


#: The frames counted as documents, as the report names them.
_DOCUMENTS = ", ".join(f"{Opcode(op).name.lower()}s" for op in sorted(DOCUMENT_CHANGES)[:-1]) \
    + f" and {Opcode(sorted(DOCUMENT_CHANGES)[-1]).name.lower()}s"


def opcode_name(op: int) -> str:
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
    lines = [f"{shown(path)}{_origin(s)}: {i.frames:,} frames, {i.bytes:,} bytes of "
             f"frames, collections {'on' if i.collections_on else 'off'}, "
             f"{i.skipped_count:,} skipped regions"]
    lines.append("\n  opcode                    frames")
    for op in np.flatnonzero(i.opcodes):
        requests, responses = int(i.opcodes[op] - i.responses[op]), int(i.responses[op])
        if requests:
            lines.append(f"  {opcode_name(int(op)):<22} {requests:>9,}")
        if responses:
            lines.append(f"  {opcode_name(int(op)) + ' resp':<22} {responses:>9,}")
    lines.append("\n  vbucket    frames  documents   first seqno    last seqno")
    for vb, v in sorted(i.vbuckets.items()):
        seqnos = f"{v.first_seqno:>13,} {v.last_seqno:>13,}" if v.documents \
            else f"{'-':>13} {'-':>13}"
        lines.append(f"  {vb:>7} {v.frames:>9,} {v.documents:>10,} {seqnos}")
    if i.vbuckets:
        lines.append(f"  frames: the vbucket's requests\n  documents: its {_DOCUMENTS}\n"
                     "  first/last seqno: the lowest and highest by_seqno of its documents")
    if i.server_seqnos:
        lines += _behind(i)
    if i.collections:
        lines.append("\n  collection   documents")
        for cid, n in sorted(i.collections.items()):
            lines.append(f"  {f'0x{cid:x}':>10} {n:>11,}")
    if i.connections:
        lines.append("\n  connection                                              frames")
        for c, n in sorted(i.connections.items()):
            flow = f"{c.src}:{c.src_port} -> {c.dst}:{c.dst_port}"
            lines.append(f"  {flow:<46} {c.direction:<15} {n:>9,}")
    if i.skipped_count:
        lines.append("\n  errors")
    for region in i.skipped:
        lines.append(f"  skipped {region.length} bytes at {region.offset}: {region.reason}")
    if i.unlisted:
        lines.append(f"  ... {i.unlisted:,} more skipped regions not listed "
                     f"({i.skipped_bytes:,} bytes skipped in all); by reason:")
        for kind, n in i.skipped_by_reason.most_common():
            lines.append(f"  {n:>11,}  {kind}")
    if s["capture_damage_count"]:
        lines.append("\n  capture file damage (offsets in the file)")
        for region in s["capture_damage"]:
            lines.append(f"  skipped {region.length} bytes at {region.offset}: {region.reason}")
        more = s["capture_damage_count"] - len(s["capture_damage"])
        if more:
            lines.append(f"  ... {more:,} more not listed")
    return "\n".join(lines)


#: Vbuckets named in the line of those behind the server.
_BEHIND_NAMED = 10


def _behind(i) -> list[str]:
    """How far the input got against the server's high seqnos (GetAllVbSeqnos)."""
    behind = i.behind()
    if not behind:
        return [f"  server's high seqnos (GetAllVbSeqnos, {len(i.server_seqnos):,} vbuckets): "
                "every vbucket here reached them"]
    named = ", ".join(f"vb {vb} captured to {last:,} of {seqno:,}" if last is not None
                      else f"vb {vb} none of its {seqno:,}"
                      for vb, last, seqno in behind[:_BEHIND_NAMED])
    more = f", and {len(behind) - _BEHIND_NAMED:,} more" if len(behind) > _BEHIND_NAMED else ""
    return [f"  server's high seqnos (GetAllVbSeqnos, {len(i.server_seqnos):,} vbuckets): "
            f"{len(behind):,} not reached here: {named}{more}"]


def _as_json(path, s) -> dict:
    i = s["inventory"]
    return {
        "file": shown(path), "compression": s["compression"], "capture": s["capture"],
        "frames": i.frames, "bytes": i.bytes, "collections": i.collections_on,
        "opcodes": {opcode_name(int(op)): int(i.opcodes[op]) for op in np.flatnonzero(i.opcodes)},
        "responses": {opcode_name(int(op)): int(i.responses[op])
                      for op in np.flatnonzero(i.responses)},
        "vbuckets": {str(vb): {"frames": v.frames, "documents": v.documents,
                               "first_seqno": v.first_seqno, "last_seqno": v.last_seqno,
                               "server_seqno": i.server_seqnos.get(vb)}
                     for vb, v in sorted(i.vbuckets.items())},
        "server_seqnos": {str(vb): seqno for vb, seqno in sorted(i.server_seqnos.items())},
        "behind_server": [{"vbucket": vb, "last_seqno": last, "server_seqno": seqno}
                          for vb, last, seqno in i.behind()],
        "documents_by_collection": {f"0x{cid:x}": n
                                    for cid, n in sorted(i.collections.items())},
        "connections": [{**c._asdict(), "frames": n}
                        for c, n in sorted(i.connections.items())],
        "errors": [r._asdict() for r in i.skipped],
        "errors_total": i.skipped_count,
        "errors_not_listed": i.unlisted,
        "errors_by_reason": dict(i.skipped_by_reason.most_common()),
        "skipped_bytes": i.skipped_bytes,
        "capture_errors": [r._asdict() for r in s["capture_damage"]],
        "capture_errors_total": s["capture_damage_count"],
    }
