"""Byte ranges of a file that decode independently (``dcpfast.io.ranges``): a file cut
anywhere, planned into many pieces, damaged or holding values that are streams themselves,
gives each frame in exactly one range, or the whole file's error; small files packed and
large ones split by ``plan``."""

from __future__ import annotations

import random

import pyarrow.fs as pafs
import pytest

import dcpfast
from dcpfast import testing as T
from dcpfast.errors import DcpFormatError
from dcpfast.io.ranges import Piece, plan, range_batches
from dcpfast.options import ScanOptions


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _split_read(path, size, cuts, *, collections, errors="strict", lead_in=0,
                batch_bytes=1 << 12):
    """Offsets of the frames each range between ``cuts`` yields, in order."""
    bounds = [0, *cuts, size]
    with pafs.LocalFileSystem().open_input_file(path) as f:
        out = []
        for lo, hi in zip(bounds, bounds[1:]):
            piece = Piece(path, lo, hi, size)
            options = ScanOptions(collections, ("offset",), errors)
            for batch in range_batches(f, piece, options, batch_bytes=batch_bytes,
                                       lead_in=lead_in):
                out += batch["offset"].tolist()
    return out


def _whole(data, errors="strict", collections=None):
    return dcpfast.scan(data, final=True, errors=errors, collections=collections)


@pytest.fixture(scope="module")
def stream():
    return T.synthetic_stream(80, seed=7, value_size=60)


def test_one_cut_anywhere_yields_every_frame_once(tmp_path, stream):
    path = _write(tmp_path, "a.dcp", stream)
    ref = _whole(stream)
    want = ref["offset"].tolist()
    ends = [int(o) + 24 + int(b) for o, b in zip(ref["offset"], ref["body_len"])]
    rng = random.Random(1)
    cuts = set(rng.sample(range(1, len(stream)), 150))
    for boundary in (ends[3], ends[len(ends) // 2], ends[-2]):    # and every byte near frame ends
        cuts.update(range(boundary - 26, boundary + 26))
    for cut in sorted(cuts):
        for lead_in in (0, 40):
            got = _split_read(path, len(stream), [cut], collections=ref.collections,
                              lead_in=lead_in)
            assert got == want, (cut, lead_in)


@pytest.mark.parametrize("partition_bytes", [61, 500, 4096])
def test_many_partitions_of_a_planned_file(tmp_path, stream, partition_bytes):
    path = _write(tmp_path, "a.dcp", stream)
    parts = plan([(path, len(stream))], partition_bytes, parallelism=2)
    assert len(parts) >= len(stream) // partition_bytes
    cuts = sorted(piece.lo for part in parts for piece in part if piece.lo)
    ref = _whole(stream)
    assert _split_read(path, len(stream), cuts, collections=ref.collections) == \
        ref["offset"].tolist()


def _damaged(stream):
    """Garbage between frames (one run holds a header-like pattern), a broken magic
    inside a frame and a truncated tail."""
    ref = _whole(stream)
    offsets = ref["offset"].tolist()
    data = bytearray(stream)
    fake = bytes([0x80, 0x57]) + b"\x00" * 22                      # a header with no body
    for at, junk in sorted([(offsets[60], b"\xee" * 300), (offsets[30], fake + b"\x81" * 50),
                            (offsets[10], bytes(range(256)))], reverse=True):
        data[at:at] = junk
    data[offsets[45] + 1000 + 24] ^= 0xFF      # somewhere inside a later frame
    return bytes(data[:-7])


def test_cuts_in_a_damaged_file_skip_mode(tmp_path, stream):
    data = _damaged(stream)
    path = _write(tmp_path, "bad.dcp", data)
    ref = _whole(data, errors="skip")
    assert len(ref.errors) >= 4
    want = ref["offset"].tolist()
    regions = [(e.offset, e.offset + e.length) for e in ref.errors]
    cuts = set(random.Random(2).sample(range(1, len(data)), 120))
    for lo, hi in regions:                                   # inside and around the garbage
        cuts.update(range(max(1, lo - 3), min(len(data), hi + 3), 5))
    for cut in sorted(cuts):
        got = _split_read(path, len(data), [cut], collections=ref.collections,
                          errors="skip", lead_in=0)
        assert got == want, cut
    many = [c for c in sorted(cuts) if c % 3 == 0]
    assert _split_read(path, len(data), many, collections=ref.collections,
                       errors="skip", lead_in=64) == want


def test_cuts_in_a_damaged_file_strict_mode(tmp_path, stream):
    data = _damaged(stream)
    path = _write(tmp_path, "bad.dcp", data)
    with pytest.raises(DcpFormatError) as whole:
        _whole(data)
    collections = _whole(data, errors="skip").collections
    for cut in range(1, len(data), 97):
        with pytest.raises(DcpFormatError) as split:
            _split_read(path, len(data), [cut], collections=collections)
        assert split.value.offset == whole.value.offset, cut


def test_values_holding_frames_never_give_wrong_rows(tmp_path):
    """A document whose value is itself a DCP stream: a cut inside it either yields the
    whole-file frames or raises; with a lead-in reaching the document, always the former."""
    inner = T.synthetic_stream(30, seed=3, handshake=False, value_size=40)
    prefix = T.synthetic_stream(10, seed=4)
    outer = prefix + T.mutation(b"dump", inner, by_seqno=999, collection_id=0) + \
        T.synthetic_stream(10, seed=5, handshake=False)
    path = _write(tmp_path, "nested.dcp", outer)
    ref = _whole(outer, collections=True)
    want = ref["offset"].tolist()
    start = len(prefix)
    value_at = start + 24 + 31 + 5
    failures = 0
    for cut in range(value_at, value_at + len(inner), 11):
        try:
            got = _split_read(path, len(outer), [cut], collections=True, lead_in=0)
        except DcpFormatError as e:
            assert "do not end there" in str(e) or "starts before" in str(e)
            failures += 1
        else:
            assert got == want, cut
        assert _split_read(path, len(outer), [cut], collections=True,
                           lead_in=cut - start + 10) == want, cut
    assert failures, "no cut inside the nested stream exercised the check"


@pytest.mark.parametrize("partition_bytes, parallelism", [(100, 1), (100, 2), (1000, 4)])
def test_plan_packs_small_files_and_splits_large_ones(partition_bytes, parallelism):
    files = [("a", 10), ("b", 70), ("c", 30), ("d", 250), ("e", 55), ("f", 0)]
    parts = plan(files, partition_bytes, parallelism)
    pieces = sorted((p for part in parts for p in part), key=lambda p: (p.uri, p.lo))
    for uri, size in files:                          # each file tiled exactly once
        mine = [(p.lo, p.hi) for p in pieces if p.uri == uri]
        assert mine[0][0] == 0 and mine[-1][1] == size
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))
    total = sum(size for _, size in files)
    count = -(-total // partition_bytes)
    count = -(-count // parallelism) * parallelism
    assert len(parts) == count
    target = -(-total // count)
    assert [p.uri for p in pieces if not p.whole] == ["d"] * -(-250 // target)
    largest = max(p.hi - p.lo for p in pieces)
    assert all(sum(p.hi - p.lo for p in part) <= target + largest for part in parts)
    assert not plan(files, 100, splittable=lambda uri: False)[0][0].lo
