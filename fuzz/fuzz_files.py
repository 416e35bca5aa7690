"""Coverage-guided fuzzing of reading under hostile conditions (atheris): files that change
while they are read, and file objects that report bytes they never wrote.

The stream is written to a file and read with ``iter_batches`` (small batches, skip mode);
after the first batch the file is shortened to a cut, or grown by the input's last bytes.
Every batch must hold exactly bytes the file held when they were read (a prefix of the
first content, or the grown file), and every batch must stay readable (``to_arrow``,
``values``) after the file changed: a signal ends the fuzzer, and any exception but
``DcpFormatError`` is a finding. Then the stream is read through a file object that, read
after read, writes fewer bytes than it reports, or reports more than its buffer holds: the
bytes it did not write must read as zeros (never memory an earlier read left), and an
impossible count must raise ``OSError``.

    python fuzz/fuzz_files.py CORPUS_DIR -max_total_time=60

Input: a mode byte (bit 0: collections; bit 1: grow rather than shorten; bits 2-7: ``n``,
batches of ``24 + 7 * n`` bytes), a cut byte pair (big-endian, the file's new length, or
how many of the last bytes are appended), then the stream; the file object's lies are
drawn from the stream's bytes.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["dcpfast.io", "dcpfast.batch"]):
    from dcpfast.errors import DcpFormatError
    from dcpfast.io import compression, dumps

_DIRECTORY = tempfile.mkdtemp(prefix="dcpfast-fuzz-files-")
_PATH = os.path.join(_DIRECTORY, "stream.dcp")


def _changing_file(data: bytes, collections: bool, grow: bool, cut: int, size: int) -> None:
    with open(_PATH, "wb") as f:
        f.write(data)
    held, content = [], data
    try:
        for i, b in enumerate(dumps.iter_batches(_PATH, size, collections=collections,
                                               errors="skip", threads=1)):
            held.append(b)
            if i == 0:
                if grow:
                    content = data + data[len(data) - min(cut, len(data)):]
                    with open(_PATH, "ab") as f:
                        f.write(content[len(data):])
                else:
                    content = data[:min(cut, len(data))]
                    os.truncate(_PATH, len(content))
    except DcpFormatError:
        pass
    for b in held:
        got = bytes(b.data)
        at = b.base_offset
        assert got in (content[at:at + len(got)], data[at:at + len(got)]), at
        b.to_arrow()
        b.values()


class _Liar(io.RawIOBase):
    """Hands out ``data``; each read writes fewer bytes than it reports, as drawn from
    the data itself, or reports an impossible count. ``truth`` is what a reader may see:
    the bytes written, and zeros for the ones only reported."""

    def __init__(self, data: bytes):
        self.data, self.at, self.truth, self.draws = data, 0, bytearray(), iter(data)

    def readable(self):
        return True

    def readinto(self, b):
        if self.at >= len(self.data):
            return 0
        draw = next(self.draws, 0)
        if draw == 0xFF:
            return len(b) + 1                      # impossible
        n = min(len(b), len(self.data) - self.at, 1 + draw * 3)
        written = max(n - (draw % 4 if draw % 8 == 7 else 0), 0)
        b[:written] = self.data[self.at:self.at + written]
        self.truth += self.data[self.at:self.at + written] + bytes(n - written)
        self.at += n
        return n


def _lying_object(data: bytes, collections: bool, size: int) -> None:
    liar = _Liar(data)
    try:
        batches = list(dumps.iter_batches(liar, size, collections=collections, errors="skip",
                                        threads=1))
    except OSError as e:
        assert "readinto" in str(e), e
        return
    except DcpFormatError:
        return
    if compression.codec_of(bytes(liar.truth[:compression.HEAD_BYTES])) is not None:
        return                                     # read through a decompressor
    for b in batches:
        got = bytes(b.data)
        assert got == bytes(liar.truth[b.base_offset:b.base_offset + len(got)])


def test_one_input(raw: bytes) -> None:
    if len(raw) < 3:
        return
    mode, cut, data = raw[0], int.from_bytes(raw[1:3], "big"), raw[3:]
    collections, grow, size = bool(mode & 1), bool(mode & 2), 24 + (mode >> 2) * 7
    _changing_file(data, collections, grow, cut, size)
    _lying_object(data, collections, size)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
