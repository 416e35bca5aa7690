"""The inputs of a mirror: dumps (a directory: its dumps in name order), read as one
stream up to their last whole frame, and where each stands (``io.positions.Position``),
checked on the next run against where it stood.

A dump still being written may end inside a frame: those bytes wait for the next run.
A capture or a compressed dump is read whole, alone. A run refuses inputs that do not
continue the ones applied: a file applied before that is missing, shorter, replaced or
rewritten, or inputs that no longer begin with the files applied, in their order.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from dataclasses import dataclass

import numpy as np

from ..io.compression import HEAD_BYTES, codec_of
from ..io.kinds import is_capture
from ..io.positions import FileChanged, Position, Stat
from ..io.resume import Resume
from ..options import ScanOptions


class InputsChanged(ValueError):
    """The inputs do not continue the ones a mirror applied."""


@dataclass(frozen=True)
class Read:
    """What a run read: the stream's bytes (whole frames, or a capture or compressed
    dump's own bytes), each input's position (JSON, with ``crc``: the CRC-32 of the
    bytes read), the bytes waiting at the end (the start of a frame still being
    written), whether a capture or compressed dump was read whole, and the stream offset
    of ``data``'s first byte (``base``: 0 unless read on from where a run stood)."""

    data: bytes | memoryview
    positions: list[dict]
    waiting: int
    whole: bool
    base: int = 0


def files_of(inputs) -> list[str]:
    """The files of ``inputs`` (paths; a directory: its files in name order, hidden ones
    left out)."""
    paths = [os.fspath(i) for i in ([inputs] if isinstance(inputs, (str, os.PathLike))
                                    else inputs)]
    if not paths:
        raise ValueError("a mirror needs at least one input")
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            files += [os.path.join(path, name) for name in sorted(os.listdir(path))
                      if not name.startswith(".") and
                      os.path.isfile(os.path.join(path, name))]
        elif os.path.exists(path):
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return [os.path.abspath(f) for f in files]


def check(files: list[str], applied: list[dict]) -> None:
    """Refuse ``files`` where they do not continue the positions ``applied`` (their JSON):
    the files applied first, in their order, each the file it was, grown or not."""
    before = [Position.from_json(p) for p in applied]
    named = [p.path for p in before]
    if files[:len(named)] != named:
        missing = [p for p in named if p not in files]
        raise InputsChanged(
            f"{missing[0]}: applied by an earlier run, missing from the inputs now"
            if missing else "the inputs no longer begin with the files applied, in their "
            f"order ({', '.join(os.path.basename(p) for p in named)})")
    for position in before:
        try:
            stat = os.stat(position.path)
        except FileNotFoundError:
            raise InputsChanged(f"{position.path}: applied by an earlier run, now "
                                "missing") from None
        with open(position.path, "rb") as f:
            try:
                position.check(Stat.of(stat), _reader(f))
            except FileChanged as changed:
                raise InputsChanged(str(changed)) from None


def read(files: list[str], applied: list[dict] | tuple = (),
         until: dict[str, int] | None = None) -> Read:
    """The stream of ``files``: dumps concatenated up to the end of their last whole
    frame, or one capture or compressed dump whole. The bytes of ``applied`` (the
    positions an earlier run read to) must be those it read, else ``InputsChanged``.
    ``until``: each file's bytes to read at most (path -> bytes; a file it does not
    name: those applied, none of a new one), where a stream delivered frames up to
    there."""
    sums = {p["path"]: (p["offset"], p.get("crc")) for p in applied}
    if any(_special(f) for f in files):
        if len(files) > 1:
            raise ValueError("a capture or a compressed dump is mirrored alone (it is read "
                             f"whole each run): {', '.join(files)}")
        with open(files[0], "rb") as f:
            whole = f.read()
            stat = os.fstat(f.fileno())
            return Read(whole, [_position(files[0], whole, stat, f, sums)], 0, True)
    with contextlib.ExitStack() as stack:
        opened = [stack.enter_context(open(path, "rb")) for path in files]
        stats = [os.fstat(f.fileno()) for f in opened]
        sizes = [_size(path, stat.st_size, sums.get(path, (0,))[0], until)
                 for path, stat in zip(files, stats, strict=True)]
        stream = _buffer(sum(sizes))
        positions, at = [], 0
        for path, f, stat, size in zip(files, opened, stats, sizes, strict=True):
            data = _filled(f, stream[at:at + size], path)
            positions.append(_position(path, data, stat, f, sums))
            at += size
    end = whole_frames(stream)
    return Read(stream[:end], positions, len(stream) - end, False)


def read_on(files: list[str], applied: list[dict], offset: int,
            until: dict[str, int] | None = None) -> Read | None:
    """The stream of ``files`` (each read no further than ``until`` says, as ``read``)
    from its ``offset`` on, where the files ``applied`` (their positions, ``check``ed)
    are still its start: each but the last as it was, the last grown or not; None where
    they are not (a file before the last grew) or the inputs hold a capture or a
    compressed dump (read whole)."""
    if not applied or any(_special(f) for f in files[len(applied) - 1:]):
        return None
    was = [*applied, *[None] * len(files)][:len(files)]
    sizes = [_size(f, os.path.getsize(f), p["offset"] if p else 0, until)
             for f, p in zip(files, was, strict=True)]
    if any(s != p["offset"] for s, p in zip(sizes, applied[:-1], strict=False)):
        return None
    positions, views, at = list[dict](), [], 0
    with contextlib.ExitStack() as stack:
        for path, size, position in zip(files, sizes, was, strict=True):
            if at + size <= offset and position is not None:   # wholly applied, unchanged
                positions.append(position)
                at += size
                continue
            start = max(offset - at, 0)
            done = position["offset"] if position is not None else 0
            if start > done:
                return None
            f = stack.enter_context(open(path, "rb"))
            stat = os.fstat(f.fileno())
            size = _size(path, stat.st_size, done, until)
            views.append((path, f, stat, size, start, position))
            at += size
        stream = _buffer(sum(size - start for _, _, _, size, start, _ in views))
        at = 0
        for path, f, stat, size, start, position in views:
            f.seek(start)
            data = _filled(f, stream[at:at + size - start], path)
            done, before = (position["offset"], position["crc"]) if position else (0, 0)
            positions.append(dict(Position.taken(path, size, Stat.of(stat),
                                                 _reader(f)).to_json(),
                                  crc=zlib.crc32(data[done - start:], before)))
            at += size - start
    end = whole_frames(stream)
    return Read(stream[:end], positions, len(stream) - end, False, offset)


def _size(path: str, size: int, done: int, until: dict[str, int] | None) -> int:
    """The bytes of ``path`` (``size`` of them there, ``done`` applied) a run reads."""
    if until is None:
        return size
    return min(size, max(until.get(path, 0), done))


def _buffer(size: int) -> memoryview:
    """A writable buffer of ``size`` bytes, not cleared (each byte is read into it)."""
    return np.empty(size, np.uint8).data


def _filled(f, view: memoryview, path: str) -> memoryview:
    """``view`` filled from ``f``; ``InputsChanged`` where the file ends before."""
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise InputsChanged(f"{path}: shrank while it was read")
        got += n
    return view


def _position(path: str, data: bytes | memoryview, stat: os.stat_result, f, sums: dict) -> dict:
    """The position of ``data`` read from ``path``, its bytes checked against what an
    earlier run read of it (``sums``: path -> (offset, CRC-32))."""
    offset, crc = sums.get(path, (0, None))
    if crc is not None and zlib.crc32(memoryview(data)[:offset]) != crc:
        raise InputsChanged(f"{path}: the bytes an earlier run applied changed (rewritten "
                            "in place): mirror into another table")
    position = Position.taken(path, len(data), Stat.of(stat), _reader(f)).to_json()
    return dict(position, crc=zlib.crc32(data))


def whole_frames(data: bytes | memoryview) -> int:
    """The end of the last whole frame of ``data`` (frames from its start; damage passed
    over): the bytes after it are a frame still being written."""
    resume = Resume(ScanOptions.of(columns=("offset",), errors="skip"))
    resume.scan(data, final=False)
    return resume.base


def _special(path: str) -> bool:
    """Whether ``path`` is a capture or a compressed dump (told by its first bytes)."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    return is_capture(head[:4]) or codec_of(head) is not None


def _reader(f):
    def read_at(offset: int, n: int) -> bytes:
        f.seek(offset)
        return f.read(n)
    return read_at
