"""Scan every file of a corpus with the compiled core in both error modes (for sanitizer
and valgrind runs, where the fuzzer itself is not loaded). Exits non-zero on any exception
other than ``DcpFormatError``."""

from __future__ import annotations

import sys
from pathlib import Path

import dcpfast
from dcpfast.errors import DcpFormatError


def replay(directory: str) -> int:
    count = 0
    for path in sorted(Path(directory).iterdir()):
        raw = path.read_bytes()
        if not raw:
            continue
        collections, data = bool(raw[0] & 1), raw[1:]
        try:
            dcpfast.scan(data, collections=collections, final=True)
        except DcpFormatError:
            pass
        dcpfast.scan(data, collections=collections, errors="skip", final=True)
        count += 1
    return count


if __name__ == "__main__":
    assert dcpfast.IMPLEMENTATION == "cython", "replay checks the compiled core"
    print(f"replayed {replay(sys.argv[1])} inputs")
