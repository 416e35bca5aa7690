"""The scan core's walk, both cores: ended at ``ScanRequest.stop`` and resumed there it is one
walk, into ``Columns`` the caller fills (grown, put, kept), from a given row, with offsets
up to 2**64; and the high completed and prepared seqnos of snapshot markers read only
where kv_engine reads them (tests/core/test_scan.py holds the two scan cores to each
other)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import _core, schema
from dcpfast import protocol as P
from dcpfast import testing as t
from dcpfast.protocol import SnapshotFlag
from tests.cores import every
from tests.strategies import streams


def request(data_len, **kw):
    args = dict(start=0, names=schema.resolve(None), collections=True, skip=False,
                max_frames=-1, max_frame_size=P.DEFAULT_MAX_FRAME_SIZE, base=0, final=False,
                unverified=False, view_bits=0)
    args.update(kw)
    return _core.ScanRequest(**args)


def assert_same_result(got, want):
    assert got.failure == want.failure
    if want.failure:
        return
    assert (got.frames, got.consumed, got.unverified) == (want.frames, want.consumed,
                                                         want.unverified)
    assert got.regions == want.regions
    np.testing.assert_array_equal(got.kinds, want.kinds)
    assert got.arrays.keys() == want.arrays.keys()
    for name in want.arrays:
        assert got.arrays[name].dtype == want.arrays[name].dtype
        np.testing.assert_array_equal(got.arrays[name], want.arrays[name], err_msg=name)
    assert (got.views is None) == (want.views is None)
    for name in want.views or ():
        np.testing.assert_array_equal(got.views[name], want.views[name], err_msg=name)


INNER = t.synthetic_stream(20, seed=2, handshake=False)


def damaged(data: bytes, rng: random.Random, edits: int) -> bytes:
    """``data`` with ``edits`` random edits: bytes overwritten or cut, zeros or junk
    inserted, and mutations whose values are themselves valid DCP streams."""
    out = bytearray(data)
    for _ in range(edits):
        at = rng.randint(0, len(out))
        kind = rng.randrange(4)
        if kind == 0:
            out[at:at + rng.randint(0, 8)] = rng.randbytes(rng.randint(0, 8))
        elif kind == 1:
            out[at:at] = t.mutation(b"outer", INNER * rng.randint(1, 3), by_seqno=5)
        elif kind == 2:
            out[at:at] = bytes(rng.randint(1, 300))
        else:
            del out[at:at + rng.randint(1, 50)]
    return bytes(out)


@settings(max_examples=60, deadline=None)
@given(streams(min_frames=1, max_frames=12), st.data())
def test_a_walk_ended_at_stop_and_resumed_there_is_the_whole_walk(stream, data):
    """Both cores: a walk ended at ``stop`` and a second one from where it ended give the
    frames, regions and state of one walk; the cores agree."""
    collections, raw, _ = stream
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    buf = damaged(raw, rng, data.draw(st.integers(0, 2)))
    skip, final = data.draw(st.booleans()), data.draw(st.booleans())
    stop = data.draw(st.integers(0, len(buf) + 5))
    for core in every("scan"):
        ask = request(len(buf), collections=collections, skip=skip, final=final)
        whole = core.scan_buffer(buf, ask)
        head = core.scan_buffer(buf, ask._replace(stop=stop))
        if head.failure:
            assert head.failure == whole.failure
            continue
        assert head.consumed >= min(stop, len(buf)) or head.consumed == whole.consumed \
            or head.unverified == whole.unverified
        if head.consumed < stop or head.unverified:   # the walk ended where one walk ends
            assert_same_result(head, whole)
            continue
        rest = core.scan_buffer(buf, ask._replace(start=head.consumed))
        assert rest.failure == whole.failure
        if whole.failure:
            continue
        assert head.frames + rest.frames == whole.frames
        assert head.regions + rest.regions == whole.regions
        assert (rest.consumed, rest.unverified) == (whole.consumed, whole.unverified)
        for name in whole.arrays:
            np.testing.assert_array_equal(
                np.concatenate([head.arrays[name], rest.arrays[name]]), whole.arrays[name])


@pytest.mark.parametrize("core", every("scan"), ids=lambda c: c.__name__.split(".")[-1])
def test_columns_filled_by_the_caller_grow_and_put(core):
    data = t.synthetic_stream(200, seed=9)
    names = schema.resolve(None)
    viewed = ("key", "value")
    ask = request(len(data), view_bits=31)
    want = core.scan_buffer(data, ask)
    out = core.Columns(names, 3, viewed)                   # far too few rows: it grows
    got = core.scan_buffer(data, ask, out)
    assert out.rows >= want.frames
    assert_same_result(got, want)
    twice = core.Columns(names, 2 * want.frames, viewed)
    twice.put(0, out, 0, want.frames)
    twice.put(want.frames, out, 0, want.frames)
    arrays, kinds, views = twice.finish(2 * want.frames)
    for name in names:
        np.testing.assert_array_equal(arrays[name], np.tile(want.arrays[name], 2))
    np.testing.assert_array_equal(kinds, np.tile(want.kinds, 2))
    np.testing.assert_array_equal(views["value"], np.tile(want.views["value"], (2, 1)))
    with pytest.raises(ValueError):
        twice.put(2 * want.frames - 1, out, 0, 2)         # past the end
    with pytest.raises(ValueError):
        twice.put(0, core.Columns(("offset",), 10), 0, 1)  # other columns
    with pytest.raises(ValueError):
        core.scan_buffer(data, ask, core.Columns(("offset",), 10))


@pytest.mark.parametrize("core", every("scan"), ids=lambda c: c.__name__.split(".")[-1])
def test_a_scan_from_a_given_row_keeps_the_rows_before_and_a_fitting_limit_never_grows(
        core):
    """``first``: rows before it are left as they are (grown or not); with a frame limit
    that fits, the Columns keeps its memory (another thread may be writing past it); rows
    of one Columns moved onto rows that overlap them arrive intact."""
    data = t.synthetic_stream(120, seed=10)
    names = schema.resolve(None)
    want = core.scan_buffer(data, request(len(data)))
    n = want.frames
    out = core.Columns(names, 2 * n + 5)
    head = core.scan_buffer(data, request(len(data), max_frames=7), out)
    rows = out.rows
    got = core.scan_buffer(data, request(len(data), start=head.consumed, max_frames=n - 7),
                           out, 12)
    assert out.rows == rows and got.frames == n - 7 and got.consumed == want.consumed
    for name in names:
        np.testing.assert_array_equal(got.arrays[name], want.arrays[name][7:], err_msg=name)
    out.put(7, out, 12, n - 7)                     # down by 5 rows: they overlap
    arrays, kinds, _ = out.finish(n)
    np.testing.assert_array_equal(kinds, want.kinds)
    for name in names:
        np.testing.assert_array_equal(arrays[name], want.arrays[name], err_msg=name)
    small = core.Columns(names, 3)
    grown = core.scan_buffer(data, request(len(data), start=head.consumed), small, 2)
    assert small.rows >= n - 7 + 2 and grown.frames == n - 7
    with pytest.raises(ValueError):
        core.scan_buffer(data, request(len(data)), None, 1)
    with pytest.raises(ValueError):
        core.scan_buffer(data, request(len(data)), core.Columns(names, 4), 5)


@pytest.mark.parametrize("core", every("scan"), ids=lambda c: c.__name__.split(".")[-1])
def test_offsets_past_2_to_the_64_are_refused(core):
    data = t.synthetic_stream(20, seed=5)
    with pytest.raises(ValueError, match="base"):
        core.scan_buffer(data, request(len(data), base=2**64 - 100))
    last = 2**64 - 1 - len(data)
    assert core.scan_buffer(data, request(len(data), base=last)).frames > 0


# -- what the scan reads of snapshot markers ----------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("flags", [SnapshotFlag.MEMORY, SnapshotFlag.DISK,
                                   SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT, 0])
def test_high_seqnos_only_with_the_disk_flag(version, flags):
    """kv_engine reads the high completed and prepared seqnos only from Disk markers
    (MB-65564): elsewhere both scan cores leave them null, and say so in the kind."""
    more = dict(purge_seqno=3, high_prepared_seqno=8) if version == 2 else {}
    frame = t.snapshot_marker(1, 9, flags, version=version, max_visible_seqno=9,
                              high_completed_seqno=7, vbucket=2, **more)
    disk = bool(flags & SnapshotFlag.DISK)
    batch = dcpfast.scan(frame)
    row = batch.to_arrow().to_pylist()[0]
    assert row["high_completed_seqno"] == (7 if disk else None)
    assert row["high_prepared_seqno"] == (8 if disk and version == 2 else None)
    assert (row["max_visible_seqno"], row["purge_seqno"]) == (9, 3 if version == 2 else None)
    assert batch[0].kind.endswith("_memory") != disk
    assert batch["high_completed_seqno"][0] == (7 if disk else 0)
