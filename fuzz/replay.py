"""Replay a fuzz target's corpus through the compiled cores, in both error modes, for the
sanitizer and valgrind runs (where the fuzzers themselves are not loaded). Exits non-zero
on any exception other than ``DcpFormatError``.

    python fuzz/replay.py CORPUS [TARGET]

TARGET is the harness whose input format the corpus directory is in: ``scan`` (each
skip-mode batch's values are decoded too), ``values``, ``pcap`` or ``reassembly``.
Without it, CORPUS holds one directory per target, as ``fuzz/run.py --corpus`` lays them
out, and each present is replayed. Each input is copied into a buffer of exactly its
size, so that a read past its end touches memory the sanitizers watch.
"""

from __future__ import annotations

import sys
import warnings
from io import BytesIO
from pathlib import Path

import numpy as np
import orders

import dcpfast
from dcpfast import pcap, testing, values
from dcpfast.errors import DcpFormatError

_XATTRS = ("split", "drop", "keep", "split")
_FRAMES = (testing.mutation, testing.deletion, testing.expiration, testing.prepare)


def _exact(data: bytes) -> np.ndarray:
    """``data`` in a fresh allocation of exactly its size (bytes objects carry a NUL more)."""
    return np.frombuffer(data, np.uint8).copy()


def _scan(mode: int, data: bytes) -> None:
    buf = _exact(data)
    collections = bool(mode & 1)
    try:
        dcpfast.scan(buf, collections=collections, final=True)
    except DcpFormatError:
        pass
    dcpfast.scan(buf, collections=collections, errors="skip", final=bool(mode & 2))
    batch = dcpfast.scan(buf, collections=collections, errors="skip", final=True)
    dcpfast.scan(buf, collections=None, errors="skip", final=True)
    for xattrs in ("split", "keep"):
        values.values(batch, xattrs=xattrs)
    values.values(batch, decompress=False)


def _values(options: int, raw: bytes) -> None:
    """The values harness's input: records of kind byte, length byte and value."""
    frames, at = [], 0
    while at + 2 <= len(raw):
        kind, size = raw[at], raw[at + 1]
        frames.append(_FRAMES[kind >> 3 & 3](b"k%d" % len(frames), raw[at + 2:at + 2 + size],
                                             by_seqno=len(frames) + 1, datatype=kind & 7))
        at += 2 + size
    buf = _exact(b"".join(frames))
    kw = dict(xattrs=_XATTRS[options & 3], decompress=not options & 4)
    try:
        values.values(dcpfast.scan(buf, collections=False, final=True), **kw)
    except DcpFormatError:
        pass
    values.values(dcpfast.scan(buf, collections=False, errors="skip", final=True), **kw)


def _pcap(mode: int, data: bytes) -> None:
    options = dict(collections=None if mode & 2 else False, batch_bytes=64 + (mode >> 2) * 61)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # TLS traffic seen in the capture
        for errors in ("strict", "skip"):
            try:
                for b in pcap.read_pcap(BytesIO(data), errors=errors, **options):
                    values.values(b)
            except DcpFormatError:
                pass


def _reassembly(mode: int, data: bytes) -> None:
    """The reassembly harness's input, checked as the harness checks it."""
    orders.check(bytes([mode]) + data)


TARGETS = {"scan": _scan, "values": _values, "pcap": _pcap, "reassembly": _reassembly}


def replay(directory, target: str = "scan") -> int:
    """Run every input of ``directory`` through ``target``'s decoders; their number."""
    run, count = TARGETS[target], 0
    for path in sorted(Path(directory).iterdir()):
        raw = path.read_bytes()
        if raw:
            run(raw[0], raw[1:])
            count += 1
    return count


def main(corpus: str, target: str | None = None) -> None:
    assert dcpfast.IMPLEMENTATION == "cython", "replay checks the compiled cores"
    chosen = [(Path(corpus), target)] if target else \
        [(Path(corpus) / name, name) for name in TARGETS if (Path(corpus) / name).is_dir()]
    if not chosen:
        sys.exit(f"no corpus of {', '.join(TARGETS)} in {corpus}")
    for directory, name in chosen:
        print(f"replayed {replay(directory, name)} {name} inputs", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
