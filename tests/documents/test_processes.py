"""A state split by vbucket among processes (``state(path, processes=N)``) gives the table
and metadata of one process: on whole dumps, with restarts that need a second pass, with
frames lost or damaged (skip mode counts the whole stream's problems once; strict mode
raises the error one process raises), with every option; and a worker that dies says
so."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.documents.output import metadata
from dcpfast.documents.processes import first_error, vbucket_ranges
from dcpfast.protocol import Opcode
from tests.state_scenarios import scenario


def same(path, **options) -> pa.Table:
    """The state of ``path`` in one process and in three; they must agree."""
    one = dcpfast.state(path, **options, processes=1)
    split = dcpfast.state(path, **options, processes=3)
    assert metadata(split) == metadata(one)
    assert split.schema == one.schema
    assert split.combine_chunks().equals(one.combine_chunks())
    return split


def written(tmp_path, data: bytes, name: str = "d.dcp"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def synthetic(seed: int, **kw) -> list:
    return t.synthetic_frames(kw.pop("items", 3000), seed=seed, **kw)


def test_vbucket_ranges_are_contiguous_with_about_as_many_frames_each():
    weights = np.zeros(1 << 16, np.int64)
    weights[[3, 5, 9, 700]] = [100, 100, 100, 100]
    assert vbucket_ranges(weights, 2) == [(0, 9), (9, 1 << 16)]
    assert vbucket_ranges(weights, 4) == [(0, 5), (5, 9), (9, 700), (700, 1 << 16)]
    assert vbucket_ranges(weights, 9) == vbucket_ranges(weights, 4)   # a vbucket: one share
    one = np.zeros(1 << 16, np.int64)
    one[7] = 50
    assert vbucket_ranges(one, 4) == [(0, 1 << 16)]
    assert vbucket_ranges(np.zeros(1 << 16, np.int64), 3) == [(0, 1 << 16)]
    skewed = np.zeros(1 << 16, np.int64)
    skewed[[0, 1, 2]] = [1000, 1, 1]
    got = vbucket_ranges(skewed, 3)
    assert got[0][0] == 0 and got[-1][1] == 1 << 16
    assert all(a[1] == b[0] for a, b in zip(got, got[1:]))
    assert all(skewed[lo:hi].sum() for lo, hi in got)


@pytest.mark.parametrize("options", [
    {}, {"history": True}, {"include_deleted": True, "values": False},
    {"at_seqno": 40}, {"history": True, "values": False, "include_deleted": True},
])
def test_restarting_streams_give_one_process_s_state(tmp_path, options):
    """Streams that restart (rollbacks placed by their requests or opaques: the second
    pass, in each share) over six vbuckets."""
    path = written(tmp_path, scenario(7, vbuckets=6, restarts=0.3, requests=True))
    table = same(path, **options)
    assert table.num_rows > 0
    assert metadata(table)["unrestored"] == []


def test_stream_ids_and_options_that_pick(tmp_path):
    path = written(tmp_path, scenario(5, vbuckets=5, restarts=0.2, stream_ids=True))
    same(path)
    frames = synthetic(3, vbuckets=12, sync_writes=True)
    path = written(tmp_path, b"".join(f.data for f in frames), "s.dcp")
    whole = same(path)
    seqnos = {vb: 20 + vb for vb in range(0, 12, 2)}
    assert set(same(path, at_seqno=seqnos).column("vbucket").to_pylist()) <= set(seqnos)
    cas = sorted(whole.column("cas").to_pylist())
    same(path, at_time=int(cas[len(cas) // 2]))
    names = [n for n in whole.column("collection").to_pylist() if n][:1]
    assert names and same(path, only_collections=names).num_rows > 0
    with pytest.raises(ValueError, match="no_such"):
        dcpfast.state(path, only_collections=["no_such"], processes=3)


def test_frames_lost_are_counted_once_and_raised_as_one_process_raises(tmp_path):
    """Frames cut out of a 12-vbucket dump (markers among them) and a damaged header:
    skip mode's metadata (the first problems, their counts, the consistent seqnos) is
    one process's; strict mode raises the same error."""
    frames = [f.data for f in synthetic(11, vbuckets=12, sync_writes=True, items=4000)]
    kept = frames[:300] + frames[340:900] + frames[930:]
    damaged = bytearray(b"".join(kept))
    at = len(b"".join(kept[:1500]))
    damaged[at:at + 2] = b"\x42\x42"                 # no magic: skipped bytes
    for data in (b"".join(kept), bytes(damaged)):
        path = written(tmp_path, data)
        table = same(path, errors="skip")
        meta = metadata(table)
        assert meta["errors_total"] > 0 and meta["lost"]
        with pytest.raises(dcpfast.DcpFormatError) as one:
            dcpfast.state(path, processes=1)
        with pytest.raises(dcpfast.DcpFormatError) as split:
            dcpfast.state(path, processes=3)
        assert str(split.value) == str(one.value)
    counts = metadata(table)["error_counts"]
    assert counts.get("skipped_bytes") == 1          # found by every share, counted once


def test_the_loss_the_stream_meets_first_is_raised(tmp_path):
    """Markers cut out of the first share's vbucket late in the stream and of the last
    share's early: strict mode raises the early one, as one process does; skip mode lists
    both vbuckets as lost."""
    frames = synthetic(4, vbuckets=8, items=2000)
    vbuckets = sorted({f.fields["vbucket"] for f in frames if "vbucket" in f.fields})
    first, last = vbuckets[0], vbuckets[-1]

    def markers(vb):
        return [i for i, f in enumerate(frames) if f.fields.get("vbucket") == vb
                and f.fields.get("opcode") == Opcode.SNAPSHOT_MARKER]
    cut = {markers(first)[-len(markers(first)) // 4], markers(last)[len(markers(last)) // 4]}
    path = written(tmp_path, b"".join(f.data for i, f in enumerate(frames) if i not in cut))
    table = same(path, errors="skip", values=False)
    assert {first, last} <= set(metadata(table)["lost"])
    with pytest.raises(dcpfast.DcpFormatError, match=f"vbucket {last}") as one:
        dcpfast.state(path, processes=1)
    with pytest.raises(dcpfast.DcpFormatError) as split:
        dcpfast.state(path, processes=3)
    assert str(split.value) == str(one.value)


def test_the_error_raised_is_the_first_the_stream_meets():
    late, early, end = (dcpfast.DcpFormatError(900, "a"), dcpfast.DcpFormatError(100, "b"),
                        dcpfast.DcpFormatError(5, "c"))
    assert first_error([(0, late), (1, end), (0, early)]) is early    # reading before the end
    assert first_error([(1, end), (1, late)]) is end
    failed = OSError("gone")
    assert first_error([(0, early), (0, failed), (1, end)]) is failed


def test_what_is_not_a_dump_path_stays_in_this_process(tmp_path):
    data = scenario(2, vbuckets=4)
    assert dcpfast.state(data, processes=3, errors="skip").equals(
        dcpfast.state(data, errors="skip"))
    one_vbucket = written(tmp_path, scenario(2, vbuckets=1), "one.dcp")
    same(one_vbucket, errors="skip")
    for wrong in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="processes"):
            dcpfast.state(data, processes=wrong)


def test_a_worker_that_dies_says_so(tmp_path, monkeypatch):
    path = written(tmp_path, scenario(3, vbuckets=4))
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match="exit code 1"):
        dcpfast.state(path, processes=2)
