"""``dcpfast head``: one line per frame."""

from __future__ import annotations

import datetime as dt
import difflib
import json

import click
import numpy as np

from ..errors import DcpFormatError, text
from ..formats import other_format
from ..protocol import Datatype, Opcode, Status
from .app import (
    INPUT,
    inputs,
    main,
    opened,
    pieces_option,
    printable,
    reported,
    sample_option,
    say,
    scan_options,
    threads_option,
)
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
        names = [o.name.lower() for o in Opcode]
        close = difflib.get_close_matches(value.lower(), names, n=1)
        hint = text("did_you_mean", name=close[0]) if close else ""
        raise click.BadParameter(f"{value!r} is neither an opcode name nor a number{hint}",
                                 param_hint="'--opcode'") from None
    if not 0 <= number <= 0xFF:
        raise click.BadParameter(f"{value} is outside 0..255", param_hint="'--opcode'")
    return number


def _cut(text: str, width: int) -> str:
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
    key = "-" if key is None else _cut(printable(key), 32)
    if "collection_id" in f:
        key = f"[0x{f['collection_id']:x}] {key}"
    value = f.get("value")
    size = "-" if value is None else f"{len(value):,}"
    return (f"{f['offset']:>12}  {name:<24} {vb:>5}  {seqno:<26} {key:<34} {size:>8}  "
            f"{_datatype(int(f['datatype']))}")


def _seqnos(ctx, param, value):
    """``LO..HI``, ``LO..`` or ``..HI`` (inclusive), or one seqno."""
    if value is None:
        return None
    lo, sep, hi = value.partition("..")
    try:
        if not sep:
            return int(lo), int(lo)
        return int(lo) if lo else 0, int(hi) if hi else 2**64 - 1
    except ValueError:
        raise click.BadParameter("expected N, LO..HI, LO.. or ..HI") from None


def _time(ctx, param, value):
    """An ISO 8601 time (no zone: UTC) as nanoseconds since the epoch."""
    if value is None:
        return None
    try:
        at = dt.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.timezone.utc)
    return (at - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(
        microseconds=1) * 1000


def _selected(batch, damage, wanted, vbs, keys, seqnos, sids, since, until) -> np.ndarray:
    """Which frames of ``batch`` pass the filters (all of them, combined)."""
    keep = np.ones(len(batch), bool)
    if damage is not None:
        keep &= batch["offset"] < damage.offset
    if len(wanted):
        keep &= np.isin(batch["opcode"], wanted)
    if len(vbs):
        keep &= np.isin(batch["vbucket"], vbs) & _carried(batch, "vbucket")
    if seqnos is not None:
        seq = batch["by_seqno"]
        keep &= _carried(batch, "by_seqno") & (seq >= seqnos[0]) & (seq <= seqnos[1])
    if len(sids):
        keep &= np.isin(batch["stream_id"], sids)
    if since is not None or until is not None:
        times = _times(batch)
        keep &= times > 0
        if since is not None:
            keep &= times >= since
        if until is not None:
            keep &= times <= until
    if keys:
        maybe = np.flatnonzero(keep & np.isin(batch["key_len"], [len(k) for k in keys]))
        keep[:] = False
        keep[maybe] = [batch.key(int(i)) in keys for i in maybe]
    return np.flatnonzero(keep)


def _carried(batch, name: str) -> np.ndarray:
    valid = batch.validity(name)
    return np.ones(len(batch), bool) if valid is None else valid


def _times(batch) -> np.ndarray:
    """A frame's time in ns: its capture time in a capture, else its CAS's hybrid logical
    clock (0 where the frame carries no CAS time)."""
    stamps = getattr(batch, "timestamps", None)
    if stamps is not None:
        return stamps.astype(np.int64)
    return (batch["cas"] & ~np.uint64(0xFFFF)).astype(np.int64)


def _json_line(batch, i: int) -> str:
    """Frame ``i`` as one JSON object: every carried field, names for the enums, keys and
    values as text where they are UTF-8 (else ``0x`` and hex)."""
    frame = batch.frame(i)
    out = {}
    for name, value in frame.items():
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                value = "0x" + value.hex()
        elif hasattr(value, "name") and value.name is not None:
            value = value.name.lower()
        out[name] = value
    stamps = getattr(batch, "timestamps", None)
    if stamps is not None:
        out["timestamp"] = int(stamps[i])
    return json.dumps(out)


@main.command(epilog="Examples: dcpfast head --sample -n 5; dcpfast head dump.dcp --opcode "
              "mutation --vbucket 12 --seqno 100..200; dcpfast head capture.pcap --since "
              "2026-11-27T10:00 --json. More: docs/usage.md, the command line.")
@click.argument("files", nargs=-1, type=INPUT, metavar="[FILE]...")
@click.option("-n", "--frames", "count", type=click.IntRange(min=0), default=20,
              show_default=True, help="How many frames to list.")
@click.option("--opcode", "opcodes", multiple=True, metavar="NAME|NUMBER",
              help="Only frames with this opcode (repeatable), e.g. mutation or 0x57.")
@click.option("--vbucket", "vbuckets", multiple=True, type=click.IntRange(0, 0xFFFF),
              help="Only requests for this vbucket (repeatable).")
@click.option("--key", "keys", multiple=True, help="Only frames with this key (repeatable).")
@click.option("--seqno", "seqnos", callback=_seqnos, metavar="N|LO..HI",
              help="Only frames whose by_seqno is in this range (inclusive).")
@click.option("--stream-id", "sids", multiple=True, type=click.IntRange(1, 0xFFFF),
              help="Only frames of this stream id (repeatable).")
@click.option("--since", callback=_time, metavar="ISO",
              help="Only frames at or after this time (a capture's time; in a dump the CAS "
              "clock of the frames that carry one).")
@click.option("--until", callback=_time, metavar="ISO", help="Only frames at or before this "
              "time (as --since).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame.")
@threads_option
@pieces_option
@sample_option
@scan_options
def head(files, count, opcodes, vbuckets, keys, seqnos, sids, since, until, as_json, threads,
         pieces, sample, collections, errors):
    """One line per frame of FILE: offset, opcode, vbucket, seqnos, key, value size, datatype.

    FILE is a raw, gzip, zstd or lz4 dump, or a capture; - reads standard input; a
    directory is one dump cut into pieces, its files read in name order as one stream, and
    so are several FILES with --pieces (without it, give one FILE). The filters combine.
    In strict mode the frames before the first damage are listed, then the error.
    """
    file = inputs(files, sample, one=True, pieces=pieces)[0]
    wanted = np.array(sorted({_opcode(op) for op in opcodes}), np.uint8)
    vbs = np.array(sorted(set(vbuckets)), np.uint16)
    ids = np.array(sorted(set(sids)), np.uint16)
    wanted_keys = {k.encode("utf-8", "surrogateescape") for k in keys}
    if count == 0:
        return
    if not as_json:
        say(_HEAD_TITLE)
    shown, connection = 0, None
    with reported(file, errors), opened(file, errors) as source:
        # a dump is scanned in skip mode, so that strict mode can list the frames before
        # the first damage (a capture's gaps are no error: it keeps its mode)
        stop_at_damage = errors == "strict" and not source.capture
        for batch in source.batches(collections=collections, columns=None,
                                    errors="skip" if stop_at_damage else errors,
                                    batch_bytes=_HEAD_BATCH, threads=threads):
            damage = batch.errors[0] if stop_at_damage and batch.errors else None
            rows = _selected(batch, damage, wanted, vbs, wanted_keys, seqnos, ids, since,
                             until)[:count - shown]
            if len(rows) and not as_json and \
                    getattr(batch, "connection", connection) != connection:
                connection = batch.connection
                say(f"# {connection.src}:{connection.src_port} -> {connection.dst}:"
                    f"{connection.dst_port} ({connection.direction})")
            for i in rows:
                say(_json_line(batch, int(i)) if as_json else _head_line(batch, int(i)))
            shown += len(rows)
            if shown >= count:
                return
            if damage is not None:              # at the input's start: what it is instead
                what = other_format(source.stream.head) if damage.offset == 0 else None
                raise DcpFormatError(damage.offset, damage.reason + (
                    text("other_format", what=what) if what else ""))
    if not shown:
        say("no frame matches" + (" the filters" if len(wanted) or len(vbs) or keys or
                                  seqnos or len(ids) or since or until else ""), err=True)
