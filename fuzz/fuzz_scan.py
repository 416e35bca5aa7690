"""Coverage-guided fuzzing of the scanner (atheris).

Coverage comes from the pure-Python twin, which atheris instruments; the compiled core
scans the same input and must agree with it exactly, so a divergence, a crash of the core,
a hang or any exception other than ``DcpFormatError`` is a finding. Each input also goes
through ``iter_batches`` in small chunks, which must return what one whole scan returns.

    python fuzz/fuzz_scan.py fuzz/corpus -max_total_time=60

The first byte of an input selects the mode; the rest is the stream.
"""

from __future__ import annotations

import sys

import atheris
import numpy as np

with atheris.instrument_imports():
    from dcpfast import _scan_py, batch, io, protocol, schema
    from dcpfast.errors import DcpFormatError

from dcpfast import _scan as core     # compiled: not instrumented, checked against the twin

_MAX_FRAME = 1 << 20


def _run(impl, data, collections, skip, final):
    return impl.scan_buffer(memoryview(data), 0, schema.NAMES, collections, skip, -1,
                            _MAX_FRAME, 0, final, False)


def _same(fast, slow):
    assert (fast[0] is None) == (slow[0] is None), (fast[1], slow[1])
    assert fast[1] == slow[1], (fast[1], slow[1])
    if fast[0] is None:
        return
    n, consumed, arrays, kinds, regions, unverified = fast[0]
    n2, consumed2, arrays2, kinds2, regions2, unverified2 = slow[0]
    assert (n, consumed, regions, unverified) == (n2, consumed2, regions2, unverified2)
    assert np.array_equal(kinds, kinds2)
    for name in arrays:
        assert np.array_equal(arrays[name], arrays2[name]), name


def _covered(regions):
    """The skipped bytes as merged (start, end) intervals (a region cut by a batch boundary
    is reported by both batches)."""
    out = []
    for start, end in sorted(regions):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def _chunked(data, collections, chunk):
    """Frame offsets and skipped regions of a skip-mode read in ``chunk``-byte pieces."""
    pieces = (data[i:i + chunk] for i in range(0, len(data), chunk))
    offsets, regions = [], []
    for b in io.iter_batches(pieces, batch_bytes=chunk, collections=collections,
                             errors="skip", columns=["offset"], max_frame_size=_MAX_FRAME):
        offsets += b["offset"].tolist()
        regions += [(r.offset, r.offset + r.length) for r in b.errors]
    return offsets, _covered(regions)


def test_one_input(raw: bytes) -> None:
    if not raw:
        return
    mode, data = raw[0], raw[1:]
    collections, final = bool(mode & 1), bool(mode & 2)
    for skip in (False, True):
        _same(_run(core, data, collections, skip, final),
              _run(_scan_py, data, collections, skip, final))
    assert core.sniff_collections(memoryview(data), 0) == \
        _scan_py.sniff_collections(memoryview(data), 0)
    try:
        batch.scan(data, collections=collections, final=True, max_frame_size=_MAX_FRAME)
    except DcpFormatError as e:
        assert 0 <= e.offset <= len(data), e
    whole = batch.scan(data, collections=collections, errors="skip", final=True,
                       columns=["offset"], max_frame_size=_MAX_FRAME)
    chunk = 1 + (mode >> 2) * 7
    assert _chunked(data, collections, chunk) == (
        whole["offset"].tolist(), _covered((r.offset, r.offset + r.length) for r in whole.errors))


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
