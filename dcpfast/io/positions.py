"""A position in a file kept between runs: how far a reader has read a file that may only
grow, and what tells, when it reads on, that the file is still the one it read.

A reader that goes on from where it stopped (the ``dcp`` stream source, each trigger and
after a restart from its checkpoint) keeps one ``Position`` per file: the path, the
offset read to, the file as it was then (its size, modification time, device, inode and
status change time, where the filesystem has them) and checksums of its first bytes
(``head``) and of the bytes just before the offset (``window``). ``check`` refuses, in
one line naming the file, a file that is shorter than the offset (truncated), another
file under the name (another device or inode: an atomic rename; or other first bytes),
one changed without growing (its size as it was, its modification time not) and one
whose bytes before the offset are no longer those read (rewritten in place): reading on
from the offset would read another file's frames from the middle. A file whose metadata
did not change is not read. A position is plain JSON (``to_json``, ``from_json``), as
offsets and state files keep it.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

from ..errors import text

#: Bytes of a file's start that ``head`` covers.
HEAD_BYTES = 64
#: Bytes before the offset that ``window`` covers.
WINDOW_BYTES = 4096

#: How a position reads its file: ``read(offset, n)``, up to ``n`` bytes from ``offset``.
Reader = Callable[[int, int], bytes]


class FileChanged(ValueError):
    """A file a position was kept in is no longer the file that was read."""


@dataclass(frozen=True)
class Stat:
    """What a file's metadata says of it: its size, and where the filesystem has them its
    modification time, device, inode and status change time (nanoseconds; None where it
    has not: an object store has a modification time only)."""

    size: int
    mtime_ns: int | None = None
    device: int | None = None
    inode: int | None = None
    ctime_ns: int | None = None

    @classmethod
    def of(cls, result: os.stat_result) -> Stat:
        """The ``Stat`` of a local file's ``os.stat`` result."""
        return cls(result.st_size, result.st_mtime_ns, result.st_dev, result.st_ino,
                   result.st_ctime_ns)


@dataclass(frozen=True)
class Position:
    """How far ``path`` has been read (``offset``), and the file as it was then."""

    path: str
    offset: int
    stat: Stat
    head: int
    window: int

    @classmethod
    def taken(cls, path: str, offset: int, stat: Stat, read: Reader) -> Position:
        """The position ``offset`` in the file ``path``, whose metadata is ``stat`` (taken
        after ``offset`` was read up to) and whose bytes ``read`` reads."""
        if not 0 <= offset <= stat.size:
            raise ValueError(f"{path}: offset {offset} outside its {stat.size} bytes")
        return cls(path, offset, stat, *_sums(read, offset))

    def check(self, stat: Stat, read: Reader) -> None:
        """Raise ``FileChanged`` unless the file (``stat``, its bytes through ``read``) is
        the file read to ``offset``, grown or not."""
        was = self.stat
        if (was.device, was.inode) != (stat.device, stat.inode) and None not in (
                was.device, was.inode, stat.device, stat.inode):
            raise FileChanged(text("position_replaced", path=self.path,
                                   how="another file has its name"))
        if stat.size < self.offset:
            raise FileChanged(text("position_truncated", path=self.path, size=stat.size,
                                   offset=self.offset))
        if stat == was:          # untouched since (a write changes ctime): nothing to read
            return
        if stat.size == was.size and stat.mtime_ns != was.mtime_ns:
            raise FileChanged(text("position_rewritten", path=self.path,
                                   how="it changed without growing"))
        head, window = _sums(read, self.offset)
        if head != self.head:
            raise FileChanged(text("position_replaced", path=self.path,
                                   how="its first bytes changed"))
        if window != self.window:
            raise FileChanged(text("position_rewritten", path=self.path,
                                   how=f"the bytes before {self.offset}, read already, "
                                       "changed"))

    def to_json(self) -> dict:
        """The position as JSON values (``from_json`` takes them back)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Position:
        """The position ``to_json`` gave."""
        stat = Stat(**{f.name: data["stat"][f.name] for f in fields(Stat)})
        return cls(str(data["path"]), int(data["offset"]), stat, int(data["head"]),
                   int(data["window"]))


def _sums(read: Reader, offset: int) -> tuple[int, int]:
    """The checksums of the first bytes before ``offset`` and of the window before it."""
    lo = max(offset - WINDOW_BYTES, 0)
    window = bytes(read(lo, offset - lo)) if offset else b""
    head = window[:HEAD_BYTES] if lo == 0 else bytes(read(0, HEAD_BYTES))
    return zlib.crc32(head[:min(offset, HEAD_BYTES)]), zlib.crc32(window)
