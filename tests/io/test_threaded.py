"""The threaded scan (``dcpfast.io.threaded``): a buffer decoded by several threads over byte
ranges equals one single-threaded scan, for every cut, damage and value that holds frames;
scans sharing the workers all end; the entry points take threads. The core pieces it rests on
(``ScanRequest.stop``, ``Columns``) are tested in tests/core/test_scan_walk.py."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import _core, schema
from dcpfast import testing as t
from dcpfast.batch import kinds_of
from dcpfast.io import threaded
from tests.core.test_scan_walk import INNER, assert_same_result, damaged, request
from tests.strategies import streams

NAMES = (None, ("offset", "opcode"), ("key", "value", "by_seqno"))


def assert_same_batch(got, want):
    assert (len(got), got.consumed, got.collections) == (len(want), want.consumed,
                                                         want.collections)
    assert got.errors == want.errors
    assert got.columns == want.columns
    np.testing.assert_array_equal(kinds_of(got), kinds_of(want))
    for name in want.columns:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


# -- damage of every sort, and values that hold frames -----------------------------------

BASE = t.synthetic_stream(1500, seed=1)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_threads_equal_one_scan_for_every_cut(data):
    """The threaded scan (here with tiny ranges, pieces and lead-ins, so that inputs of a
    few KiB are cut in many places, and rows reserved from none to far too many, so that
    ranges outgrow their slots or leave gaps) gives what one scan gives: columns, kinds,
    views, skipped regions, a strict scan's failure and the resume state."""
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    size = data.draw(st.sampled_from([0, 1, 23, 24, 500, 5000, len(BASE)]))
    buf = damaged(BASE[:size], rng, data.draw(st.integers(0, 4)))
    ask = request(len(buf), skip=data.draw(st.booleans()), final=data.draw(st.booleans()),
                  names=schema.resolve(data.draw(st.sampled_from(NAMES))),
                  start=data.draw(st.sampled_from([0, min(7, len(buf))])),
                  base=data.draw(st.sampled_from([0, 1 << 40])),
                  unverified=data.draw(st.booleans()),
                  view_bits=data.draw(st.sampled_from([0, 31])))
    view = memoryview(buf)
    want = _core.scan.scan_buffer(view, ask)
    for threads in (2, 3, 7):
        got = threaded.scan_result(
            view, ask, threads, range_bytes=data.draw(st.integers(1, 3000)), range_frames=1,
            lead_in=data.draw(st.sampled_from([1, 100, 5000])),
            piece_bytes=data.draw(st.integers(1, 2000)),
            rows=data.draw(st.sampled_from([None, None, 0, 1, 9, 200, 4000])))
        assert_same_result(got, want)


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("threads", [2, 3, 7])
def test_fewer_bytes_than_threads(threads, skip):
    """Cuts that would fall on the start (a 3-byte buffer of junk in 1-byte ranges) make
    fewer ranges, and the strict scan still fails at byte 0."""
    buf = memoryview(bytes.fromhex("89eb2f"))
    ask = request(len(buf), skip=skip, unverified=True)
    want = _core.scan.scan_buffer(buf, ask)
    assert (want.failure is None) == skip
    got = threaded.scan_result(buf, ask, threads, range_bytes=1, range_frames=1, lead_in=1,
                                piece_bytes=1)
    assert_same_result(got, want)


@settings(max_examples=40, deadline=None)
@given(streams(min_frames=1, max_frames=30), st.data())
def test_threads_equal_one_scan_on_random_frames(stream, data):
    collections, raw, _ = stream
    buf = raw * data.draw(st.integers(1, 4))
    ask = request(len(buf), collections=collections, skip=data.draw(st.booleans()),
                  final=True)
    want = _core.scan.scan_buffer(buf, ask)
    got = threaded.scan_result(memoryview(buf), ask, data.draw(st.integers(2, 6)),
                               range_bytes=data.draw(st.integers(1, 400)), range_frames=1,
                               lead_in=64,
                               piece_bytes=data.draw(st.integers(1, 400)),
                               rows=data.draw(st.sampled_from([None, 0, 3, 50])))
    assert_same_result(got, want)


def test_a_value_holding_frames_across_every_cut():
    """A mutation whose value is a long valid stream: anchors inside the value find a
    chain that is not the stream's, and the range after them is walked again."""
    outer = t.mutation(b"outer", INNER * 40, by_seqno=5)
    buf = t.synthetic_stream(50, seed=3) + outer + t.synthetic_stream(50, seed=4,
                                                                      handshake=False)
    for skip in (False, True):
        ask = request(len(buf), skip=skip, final=True)
        want = _core.scan.scan_buffer(buf, ask)
        assert want.frames == 50 + 1 + 50 + 1 or want.frames > 0
        for range_bytes in (200, 997, 5000):
            got = threaded.scan_result(memoryview(buf), ask, 5, range_bytes=range_bytes,
                                       range_frames=1, lead_in=16, piece_bytes=300)
            assert_same_result(got, want)


def test_scans_sharing_the_workers_at_once_all_end():
    """Several callers scanning with many threads at once share the workers: a thread
    never waits for a range whose task is still queued (behind the waiting tasks of
    another scan), so every scan ends, each with the frames of one thread."""
    import threading

    buf = t.synthetic_stream(400, seed=11)
    ask = request(len(buf), final=True)
    want = _core.scan.scan_buffer(buf, ask)
    got: list = []

    def caller():
        for _ in range(5):
            got.append(threaded.scan_result(memoryview(buf), ask, 6, range_bytes=256,
                                            range_frames=1, lead_in=64, piece_bytes=64))

    callers = [threading.Thread(target=caller, daemon=True) for _ in range(4)]
    for c in callers:
        c.start()
    for c in callers:
        c.join(120)
    assert not any(c.is_alive() for c in callers), "a scan sharing the workers never ended"
    assert len(got) == 20
    for result in got:
        assert_same_result(result, want)


def test_public_entry_points_take_threads(tmp_path):
    """scan, read and iter_batches with threads give the batches of one thread (inputs
    large enough to be cut: at least twice threaded.RANGE_BYTES)."""
    unit = t.synthetic_stream(3000, seed=8)
    data = unit * (5 * threaded.RANGE_BYTES // len(unit))
    bad = bytearray(data)
    for at in range(1000, len(bad), len(bad) // 7):
        bad[at:at + 3] = b"\xff\x00\xff"
    for buf, errors in ((data, "strict"), (bytes(bad), "skip")):
        one = dcpfast.scan(buf, errors=errors, final=True, threads=1)
        for threads in (2, 4):
            assert_same_batch(dcpfast.scan(buf, errors=errors, final=True, threads=threads),
                              one)
        path = tmp_path / "dump.dcp"
        path.write_bytes(buf)
        assert_same_batch(dcpfast.read(path, errors=errors, threads=3), one)
        size = 2 * threaded.RANGE_BYTES + 1000       # batches large enough to be cut
        split = list(dcpfast.iter_batches(path, size, errors=errors, threads=2))
        alone = list(dcpfast.iter_batches(path, size, errors=errors, threads=1))
        assert len(split) == len(alone) > 1
        for a, b in zip(split, alone):
            assert_same_batch(a, b)
    with pytest.raises(dcpfast.DcpFormatError) as strict:
        dcpfast.scan(bytes(bad), threads=1)
    with pytest.raises(dcpfast.DcpFormatError) as spread:
        dcpfast.scan(bytes(bad), threads=4)
    assert str(spread.value) == str(strict.value)


def test_a_buffer_of_few_large_frames_is_walked_by_one_thread(monkeypatch):
    """The walk reads headers, so threads follow the frames: 12 MiB in 24 frames of
    512 KiB is one range (no anchor is looked for), the same bytes in small frames are
    cut, and both give the frames of one scan."""
    cuts: list[int] = []
    real = threaded.anchor

    def counted(view, cut, *args, **kwargs):
        cuts.append(cut)
        return real(view, cut, *args, **kwargs)
    monkeypatch.setattr(threaded, "anchor", counted)
    large = b"".join(t.mutation(b"k%d" % i, bytes(512 << 10), by_seqno=i + 1)
                     for i in range(24))
    ask = request(len(large), final=True)
    assert_same_result(threaded.scan_result(memoryview(large), ask, 4),
                       _core.scan.scan_buffer(large, ask))
    assert cuts == []
    unit = t.synthetic_stream(3000, seed=8)
    small = unit * (len(large) // len(unit))
    ask = request(len(small), final=True)
    assert_same_result(threaded.scan_result(memoryview(small), ask, 4),
                       _core.scan.scan_buffer(small, ask))
    assert cuts                                    # ranges of at least RANGE_BYTES
