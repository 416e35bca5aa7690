"""``dcpfast head``: one line per frame."""

from __future__ import annotations

import click
import numpy as np

from ..errors import DcpFormatError
from ..protocol import Datatype, Opcode, Status
from .app import INPUT, inputs, main, opened, reported, sample_option, scan_options
from .info import opcode_name

#: Input bytes read per batch: head stops early, so small batches.
_HEAD_BATCH = 1024 * 1024


def _opcode(value: str) -> int:
    """An opcode given by name (any case) or number (decimal or 0x hex)."""
    try:
        return int(Opcode[value.upper()])
    except KeyError:
        pass
    try:
        number = int(value, 0)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither an opcode name nor a number",
                                 param_hint="'--opcode'") from None
    if not 0 <= number <= 0xFF:
        raise click.BadParameter(f"{value} is outside 0..255", param_hint="'--opcode'")
    return number


def _escaped(key: bytes, width: int) -> str:
    text = repr(key)[2:-1]
    return text if len(text) <= width else text[:width - 3] + "..."


def _datatype(value: int) -> str:
    if value == 0:
        return "raw"
    names = [str(d.name).lower() for d in (Datatype.JSON, Datatype.SNAPPY, Datatype.XATTR)
             if value & d]
    rest = value & ~0x07
    return ",".join(names + ([f"0x{rest:02x}"] if rest else []))


def _status(value: int) -> str:
    try:
        return Status(value).name
    except ValueError:
        return f"0x{value:04x}"


_HEAD_TITLE = (f"{'offset':>12}  {'opcode':<24} {'vb':>5}  {'seqno':<26} {'key':<34} "
               f"{'value':>8}  datatype")


def _head_line(batch, i: int) -> str:
    f = batch.frame(i)
    response = "status" in f                    # only responses carry a status
    name = opcode_name(int(f["opcode"])) + (" resp" if response else "")
    vb = f"{f['vbucket']}" if "vbucket" in f else "-"
    if response:
        seqno = f"status {_status(int(f['status']))}"
    elif "snap_start" in f:
        seqno = f"{f['snap_start']}..{f['snap_end']}"
    elif "prepared_seqno" in f:
        seqno = f"{f['by_seqno']} prepared {f['prepared_seqno']}"
    elif "rev_seqno" in f:
        seqno = f"{f['by_seqno']} rev {f['rev_seqno']}"
    elif "by_seqno" in f:
        seqno = f"{f['by_seqno']}"
    else:
        seqno = "-"
    key = f.get("key")
    key = "-" if key is None else _escaped(key, 32)
    if "collection_id" in f:
        key = f"[0x{f['collection_id']:x}] {key}"
    value = f.get("value")
    size = "-" if value is None else f"{len(value):,}"
    return (f"{f['offset']:>12}  {name:<24} {vb:>5}  {seqno:<26} {key:<34} {size:>8}  "
            f"{_datatype(int(f['datatype']))}")


@main.command()
@click.argument("file", required=False, type=INPUT)
@click.option("-n", "--frames", "count", type=click.IntRange(min=0), default=20,
              show_default=True, help="How many frames to list.")
@click.option("--opcode", "opcodes", multiple=True, metavar="NAME|NUMBER",
              help="Only frames with this opcode (repeatable), e.g. mutation or 0x57.")
@click.option("--vbucket", "vbuckets", multiple=True, type=click.IntRange(0, 0xFFFF),
              help="Only requests for this vbucket (repeatable).")
@sample_option
@scan_options
def head(file, count, opcodes, vbuckets, sample, collections, errors):
    """One line per frame of FILE: offset, opcode, vbucket, seqnos, key, value size, datatype.

    FILE is a raw, gzip, zstd or lz4 dump, or a capture; - reads standard input. In strict
    mode the frames before the first damage are listed, then the error.
    """
    names = inputs([file] if file else [], sample)
    if len(names) > 1:
        raise click.UsageError("give one FILE or --sample")
    file = names[0]
    wanted = np.array(sorted({_opcode(op) for op in opcodes}), np.uint8)
    vbs = np.array(sorted(set(vbuckets)), np.uint16)
    if count == 0:
        return
    shown, connection = 0, None
    with reported(file), opened(file, errors) as source:
        # a dump is scanned in skip mode, so that strict mode can list the frames before
        # the first damage (a capture's gaps are no error: it keeps its mode)
        stop_at_damage = errors == "strict" and not source.capture
        for batch in source.batches(collections=collections, columns=None,
                                    errors="skip" if stop_at_damage else errors,
                                    batch_bytes=_HEAD_BATCH):
            damage = batch.errors[0] if stop_at_damage and batch.errors else None
            keep = np.ones(len(batch), bool)
            if damage is not None:
                keep &= batch["offset"] < damage.offset
            if len(wanted):
                keep &= np.isin(batch["opcode"], wanted)
            if len(vbs):
                keep &= np.isin(batch["vbucket"], vbs) & batch.validity("vbucket")
            rows = np.flatnonzero(keep)[:count - shown]
            if len(rows) and not shown:
                click.echo(_HEAD_TITLE)
            if len(rows) and getattr(batch, "connection", connection) != connection:
                connection = batch.connection
                click.echo(f"# {connection.src}:{connection.src_port} -> {connection.dst}:"
                           f"{connection.dst_port} ({connection.direction})")
            for i in rows:
                click.echo(_head_line(batch, int(i)))
            shown += len(rows)
            if shown >= count:
                return
            if damage is not None:
                raise DcpFormatError(damage.offset, damage.reason)
