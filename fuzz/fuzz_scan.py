"""Coverage-guided fuzzing of the scanner (atheris).

Coverage comes from the pure-Python twin, which atheris instruments; the compiled core
scans the same input and must agree with it exactly (columns, binary views and the Arrow
validity bitmaps of the kinds found, on each of the core's paths), so a
divergence, a crash of the core, a hang or any exception other than ``DcpFormatError`` is a
finding. The threaded scan (``io.parallel``, here cutting the input into ranges of a few
bytes, anchored and walked by three threads) must give the compiled core's result exactly.
Each input also goes through ``iter_batches`` in small chunks, which must return
what one whole scan returns. An input that starts with a gzip, zstd or lz4 magic number is
decompressed by ``iter_batches``; when it decompresses whole, the whole scan is of its
decompressed bytes (``io.open_stream``); when it is damaged, the chunked read must equal the
read of the input as one chunk (how much decompresses before the damage does not depend on
how the bytes arrive). An input that inflates past ``_MAX_DECODED`` only has to be read.

    python fuzz/fuzz_scan.py CORPUS_DIR -max_total_time=60

Input: a mode byte (bit 0: collections; bit 1: ``final`` for the core and twin; bits 2-7:
``n``, the chunks are ``24 + 7 * n`` bytes and the threads' ranges ``1 + 5 * n``), then
the stream.
"""

from __future__ import annotations

import sys
from io import BytesIO

import atheris
import numpy as np

with atheris.instrument_imports(include=["dcpfast._core.pyscan", "dcpfast.batch",
                                          "dcpfast.io"]):
    from dcpfast import _core, io, schema
    from dcpfast.errors import DcpFormatError
    from dcpfast.io import compression, dumps, threaded

    _scan_py = _core.twins()["scan"]
core = _core.compiled()["scan"]     # compiled: not instrumented, checked against the twin

_MAX_FRAME = 1 << 20
_MAX_DECODED = 16 * 1024     # longer decompressed inputs are not read in small chunks
# the groups of frame kinds whose validity bitmaps to_arrow asks for
_TABLES = (schema.validity_table(name, True) for name in schema.NAMES)
_CARRIED = np.array(list({t.tobytes(): t for t in _TABLES if t is not None}.values()), np.uint8)


def _request(collections, skip, final):
    return _core.ScanRequest(0, schema.NAMES, collections, skip, -1, _MAX_FRAME, 0, final,
                             False, 31)


def _run(impl, data, collections, skip, final):
    return impl.scan_buffer(memoryview(data), _request(collections, skip, final))


def _same(fast, slow):
    assert fast.failure == slow.failure, (fast.failure, slow.failure)
    if fast.failure is not None:
        return
    n, consumed, arrays, kinds, regions, unverified, views, _ = fast
    n2, consumed2, arrays2, kinds2, regions2, unverified2, views2, _ = slow
    assert (n, consumed, regions, unverified) == (n2, consumed2, regions2, unverified2)
    assert np.array_equal(kinds, kinds2)
    for name in arrays:
        assert np.array_equal(arrays[name], arrays2[name]), name
    for name in views:
        assert np.array_equal(views[name], views2[name]), name
    found = [impl.validity_bitmaps(kinds, _CARRIED, **kw)
             for impl, kw in ((core, {}), (core, {"wide": False}), (_scan_py, {}))]
    for state, bits in found[1:]:
        assert np.array_equal(state, found[0][0]) and np.array_equal(bits, found[0][1])


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
    """Frame offsets and skipped regions of a skip-mode read in ``chunk``-byte pieces, or
    None when the stream (decompressed) runs past ``_MAX_DECODED`` bytes."""
    pieces = (data[i:i + chunk] for i in range(0, len(data), chunk))
    offsets, regions = [], []
    for b in dumps.iter_batches(pieces, batch_bytes=chunk, collections=collections,
                             errors="skip", columns=["offset"], max_frame_size=_MAX_FRAME):
        if b.base_offset > _MAX_DECODED:
            return None
        offsets += b["offset"].tolist()
        regions += [(r.offset, r.offset + r.length) for r in b.errors]
    return offsets, _covered(regions)


def _decoded(data):
    """The bytes ``iter_batches`` reads from ``data``: ``data`` itself, or its content
    when it starts with a codec's magic number; None when that content is damaged or
    longer than ``_MAX_DECODED``."""
    if compression.codec_of(data[:compression.HEAD_BYTES]) is None:
        return data
    parts, size = [], 0
    with io.open_stream(BytesIO(data), errors="skip") as stream:
        while size <= _MAX_DECODED and (part := stream.read(_MAX_DECODED)):
            parts.append(part)
            size += len(part)
        whole = stream.codec is not None and stream.damage is None
    return b"".join(parts) if whole and size <= _MAX_DECODED else None


def _whole(data, collections):
    """Frame offsets and skipped regions of ``iter_batches`` as one whole scan gives them,
    or None when there is no such answer to compare with (see ``_decoded``)."""
    data = _decoded(data)
    if data is None:
        return None
    whole = dumps.scan(data, collections=collections, errors="skip", final=True,
                       columns=["offset"], max_frame_size=_MAX_FRAME)
    return whole["offset"].tolist(), _covered((r.offset, r.offset + r.length)
                                              for r in whole.errors)


def test_one_input(raw: bytes) -> None:
    if not raw:
        return
    mode, data = raw[0], raw[1:]
    collections, final = bool(mode & 1), bool(mode & 2)
    for skip in (False, True):
        fast = _run(core, data, collections, skip, final)
        _same(fast, _run(_scan_py, data, collections, skip, final))
        if len(data) <= _MAX_DECODED:
            _same(threaded.scan_result(memoryview(data), _request(collections, skip, final),
                                       3, range_bytes=1 + (mode >> 2) * 5, range_frames=1,
                                       lead_in=16, piece_bytes=1 + (mode >> 2)), fast)
    assert core.sniff_collections(memoryview(data), 0) == \
        _scan_py.sniff_collections(memoryview(data), 0)
    try:
        dumps.scan(data, collections=collections, final=True, max_frame_size=_MAX_FRAME)
    except DcpFormatError as e:
        assert 0 <= e.offset <= len(data), e
    chunked = _chunked(data, collections, 24 + (mode >> 2) * 7)
    whole = _whole(data, collections)
    if whole is not None:
        assert chunked == whole, (chunked, whole)
    elif chunked is not None:       # damaged compressed data: alike however it arrives
        at_once = _chunked(data, collections, max(len(data), 24))      # at least a header
        assert chunked == at_once, (chunked, at_once)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
