"""A position kept in a file between runs (``dcpfast.io.positions``): a file that grew is
read on; one truncated, replaced (an atomic rename of a dump with the same first bytes)
or rewritten in place is refused in one line naming it, on filesystems with inodes and
without."""

from __future__ import annotations

import json
import os

import pytest

from dcpfast import testing as T
from dcpfast.io.positions import HEAD_BYTES, WINDOW_BYTES, FileChanged, Position, Stat

FIRST = T.synthetic_stream(300, seed=1)
OTHER = T.synthetic_stream(300, seed=2)


def _reader(path):
    def read(offset: int, n: int) -> bytes:
        with open(path, "rb") as f:
            return os.pread(f.fileno(), n, offset)
    return read


def _now(path, *, inodes: bool = True) -> Stat:
    """The file's ``Stat``, as a local filesystem gives it or (``inodes=False``) as an
    object store does: no device or inode."""
    stat = Stat.of(os.stat(path))
    return stat if inodes else Stat(stat.size, stat.mtime_ns)


def _taken(path, offset: int, *, inodes: bool = True) -> Position:
    position = Position.taken(str(path), offset, _now(path, inodes=inodes), _reader(path))
    again = Position.from_json(json.loads(json.dumps(position.to_json())))
    assert again == position                       # kept as JSON, taken back the same
    return again


def _refused(position: Position, path, said: str, *, inodes: bool = True) -> None:
    with pytest.raises(FileChanged) as refused:
        position.check(_now(path, inodes=inodes), _reader(path))
    line = str(refused.value)
    assert line.startswith(f"{path} ") and said in line and "\n" not in line


@pytest.mark.parametrize("inodes", [True, False], ids=["local", "no-inodes"])
def test_a_file_that_grew_is_read_on(tmp_path, inodes):
    path = tmp_path / "a.dcp"
    path.write_bytes(FIRST[:5000])
    position = _taken(path, 4000, inodes=inodes)

    def unread(offset, n):
        raise AssertionError("an untouched file is not read")
    position.check(_now(path, inodes=inodes), unread)
    with open(path, "ab") as f:
        f.write(FIRST[5000:])
    position.check(_now(path, inodes=inodes), _reader(path))
    small = tmp_path / "b.dcp"                     # shorter than the head and the window
    small.write_bytes(FIRST[:10])
    at_start = _taken(small, 10, inodes=inodes)
    with open(small, "ab") as f:
        f.write(FIRST[10:100])
    at_start.check(_now(small, inodes=inodes), _reader(small))


def test_a_dump_replaced_by_a_rename_is_refused(tmp_path):
    """Another dump of the same handshake (the same first bytes), renamed over the one read:
    another inode; where the filesystem has none, the bytes before the offset differ."""
    assert FIRST[:HEAD_BYTES] == OTHER[:HEAD_BYTES] and len(FIRST) > 2 * WINDOW_BYTES
    path = tmp_path / "a.dcp"
    path.write_bytes(FIRST)
    kept = _taken(path, len(FIRST) - 100)
    no_inodes = _taken(path, len(FIRST) - 100, inodes=False)
    with open(path, "rb"):                 # the file read keeps its inode: none reuses it
        (tmp_path / "new.dcp").write_bytes(OTHER + OTHER)
        os.rename(tmp_path / "new.dcp", path)
        _refused(kept, path, "was replaced (another file has its name)")
        (tmp_path / "new.dcp").write_bytes(OTHER[:100])        # shorter: replaced still
        os.rename(tmp_path / "new.dcp", path)
        _refused(kept, path, "was replaced (another file has its name)")
        (tmp_path / "new.dcp").write_bytes(OTHER + OTHER)
        os.rename(tmp_path / "new.dcp", path)
    _refused(no_inodes, path, f"was rewritten (the bytes before {len(FIRST) - 100}, read "
             "already, changed)", inodes=False)


def test_a_truncated_file_is_refused(tmp_path):
    path = tmp_path / "a.dcp"
    path.write_bytes(FIRST)
    kept = _taken(path, 3000)
    os.truncate(path, 2999)
    _refused(kept, path, "shrank to 2999 bytes below the 3000 already read")


def test_a_file_rewritten_in_place_is_refused(tmp_path):
    """Same inode: rewritten with the same size (another modification time), with the
    same size and time set back (the window's bytes), or grown with other first bytes."""
    path = tmp_path / "a.dcp"
    path.write_bytes(FIRST)
    kept = _taken(path, len(FIRST))
    before = os.stat(path)
    middle = bytearray(FIRST)
    middle[len(FIRST) // 2] ^= 0xFF                 # outside the head and the window
    path.write_bytes(middle)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    _refused(kept, path, "was rewritten (it changed without growing)")
    path.write_bytes((OTHER * 2)[:len(FIRST)])
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    _refused(kept, path, f"was rewritten (the bytes before {len(FIRST)}, read already, "
             "changed)")
    grown = bytearray(FIRST + OTHER)
    grown[3] ^= 0xFF
    path.write_bytes(grown)
    _refused(kept, path, "was replaced (its first bytes changed)")


def test_a_position_outside_the_file_is_not_taken(tmp_path):
    path = tmp_path / "a.dcp"
    path.write_bytes(FIRST[:100])
    with pytest.raises(ValueError, match="offset 101 outside its 100 bytes"):
        Position.taken(str(path), 101, _now(path), _reader(path))
