"""Frames lost: a state built on a stream that lost frames says so (strict:
``DcpFormatError`` naming the vbucket, the seqno expected and the one found; skip: the
vbucket's consistent seqno stops before the loss, the loss is listed), on dumps cut at
random, on captures with gaps and from the command line. What the stream checks count as
lost is tested in tests/streams/test_checks.py, the same losses on Spark in
tests/spark/test_documents.py."""

from __future__ import annotations

import io
import struct

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import streams
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.cli.app import SKIP_HINT
from dcpfast.documents import consistency, state_errors
from dcpfast.documents.output import metadata
from dcpfast.pcap import read_pcap
from dcpfast.protocol import Opcode, Status
from tests.streams.test_checks import MEMORY, at, found, marker, mut


def test_strict_names_the_loss_and_skip_stops_the_consistent_seqno():
    frames = [marker(1, 2), mut(1), mut(2), marker(3, 4), mut(3), mut(4), mut(6), mut(7)]
    data = b"".join(frames)                          # marker [5, 7] lost
    with pytest.raises(dcpfast.DcpFormatError) as e:
        dcpfast.state(data)
    assert e.value.offset == at(frames, 6)
    for words in ("vbucket 3", "expected a seqno in [3, 4]", "found 6", 'errors="skip"'):
        assert words in str(e.value)
    table = dcpfast.state(data, errors="skip")
    assert consistency(table).to_pylist() == [{"vbucket": 3, "consistent_seqno": 4,
                                               "restored": True, "frames_lost": True,
                                               "starts_after": 0}]
    assert [r.offset for r in state_errors(table)] == [at(frames, 6), at(frames, 7)]
    assert table.num_rows == 6                      # the documents are all there
    # it never rises again, though a later snapshot completes
    later = dcpfast.state(data + marker(8, 8) + mut(8), errors="skip")
    assert consistency(later).column("consistent_seqno").to_pylist() == [4]


def dump(seed: int, *, collections=True, vbuckets=4, items=3000):
    """A synthetic server dump with a response opening every stream: frames and fields."""
    frames = t.synthetic_frames(items, seed=seed, vbuckets=vbuckets, collections=collections,
                                sync_writes=True)
    return [f.data for f in frames], [f.fields for f in frames]


def truth(fields, cut: set[int]):
    """Per vbucket, the start of the first snapshot a cut removed the marker of while
    leaving one of its items (an upper bound on what a state may claim consistent)."""
    out: dict[int, int] = {}
    for i in sorted(cut):
        f = fields[i]
        if f["opcode"] == Opcode.SNAPSHOT_MARKER and detectable(fields, cut, i):
            out.setdefault(f["vbucket"], f["snap_start"])
    return out


def detectable(fields, cut: set[int], i: int) -> bool:
    """Whether removing the marker at ``i`` (with ``cut``) leaves an item of its snapshot
    that is not a seqno advance (else the loss looks like deduplication)."""
    vb = fields[i]["vbucket"]
    for j in range(i + 1, len(fields)):
        f = fields[j]
        if f.get("vbucket") != vb or f.get("magic") not in (0x80, 0x08):
            continue
        if f["opcode"] in (Opcode.SNAPSHOT_MARKER, Opcode.STREAM_END):
            return False
        if j not in cut and f["opcode"] in (Opcode.MUTATION, Opcode.DELETION,
                                            Opcode.EXPIRATION, Opcode.PREPARE, Opcode.COMMIT,
                                            Opcode.ABORT, Opcode.SYSTEM_EVENT):
            return True
    return False


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), where=st.floats(0.05, 0.9), width=st.integers(1, 40))
def test_any_cut_that_removes_a_marker_is_detected(seed, where, width):
    """Frames cut out of a dump anywhere: when a removed marker's snapshot keeps an item
    (not a seqno advance), strict fails and skip claims that vbucket consistent below that
    snapshot's start."""
    frames, fields = dump(seed % 7)
    lo = int(where * len(frames))
    cut = set(range(lo, min(lo + width, len(frames))))
    kept = b"".join(f for i, f in enumerate(frames) if i not in cut)
    table = dcpfast.state(kept, errors="skip", values=False)
    points = {r["vbucket"]: r for r in consistency(table).to_pylist()}
    lost = truth(fields, cut)
    for vb, start in lost.items():
        assert points[vb]["consistent_seqno"] < start, (vb, start, points[vb])
        assert points[vb]["frames_lost"]
    if lost:
        with pytest.raises(dcpfast.DcpFormatError):
            dcpfast.state(kept, values=False)


def test_the_issue_dump_with_45_frames_cut_out(tmp_path):
    """The report: 45 whole frames (a marker among them) cut out of the middle of a
    16-vbucket dump with durable writes gave the same consistency as the whole dump."""
    _, server = t.synthetic_conversation(12_000, seed=3, vbuckets=16, sync_writes=True)
    frames = [f.data for f in server]
    mid = next(i for i in range(len(frames) // 2, len(frames))
               if server[i].fields["opcode"] == Opcode.SNAPSHOT_MARKER)
    lost = server[mid].fields
    holed = tmp_path / "holed.dcp"
    holed.write_bytes(b"".join(frames[:mid - 20] + frames[mid + 25:]))
    whole = consistency(dcpfast.state(b"".join(frames)))
    out = tmp_path / "holed.parquet"
    strict = CliRunner().invoke(main, ["state", str(holed), "-o", str(out)])
    assert strict.exit_code == 1 and "; --errors skip keeps going" in strict.output
    assert 'errors="skip"' not in strict.output and SKIP_HINT not in strict.output
    assert len(strict.output.strip().splitlines()) == 1
    result = CliRunner().invoke(main, ["state", str(holed), "-o", str(out), "--errors", "skip"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "frames were lost" in line]
    assert len(lines) == 1 and str(lost["vbucket"]) in lines[0]
    import pyarrow.parquet as pq
    points = {r["vbucket"]: r for r in consistency(pq.read_table(out)).to_pylist()}
    assert points[lost["vbucket"]]["consistent_seqno"] < lost["snap_start"]
    assert points[lost["vbucket"]]["frames_lost"]
    assert consistency(pq.read_table(out)).column("consistent_seqno") != \
        whole.column("consistent_seqno")


def test_a_lost_end_of_memory_snapshot_on_a_stream_without_collections():
    frames, fields = dump(2, collections=False, vbuckets=2, items=600)
    ends = [i for i, f in enumerate(fields) if f["opcode"] == Opcode.MUTATION
            and any(g["opcode"] == Opcode.SNAPSHOT_MARKER and g["vbucket"] == f["vbucket"]
                    and g["snap_end"] == f["by_seqno"] and g["snap_flags"] & MEMORY
                    for g in fields[:i])]
    i = ends[len(ends) // 2]
    kept = b"".join(frames[:i] + frames[i + 1:])
    with pytest.raises(dcpfast.DcpFormatError, match="ended at"):
        dcpfast.state(kept)
    table = dcpfast.state(kept, errors="skip")
    point = {r["vbucket"]: r["consistent_seqno"] for r in consistency(table).to_pylist()}
    assert point[fields[i]["vbucket"]] < fields[i]["by_seqno"]


def test_a_whole_snapshot_lost_cannot_be_seen():
    """Seqno gaps are legitimate (deduplication): a snapshot lost whole, marker and items,
    leaves a stream DCP could have sent. What the state cannot know, it does not claim
    either way."""
    frames = [marker(1, 2), mut(1), mut(2), marker(5, 6), mut(5), mut(6)]
    assert found(*frames) == []
    assert not state_errors(dcpfast.state(b"".join(frames), errors="skip"))


def test_a_capture_gap_stops_every_vbucket():
    """Bytes a capture lacks may have held frames of any stream: strict fails at the gap,
    skip stops every vbucket's consistent seqno where it was."""
    data = t.synthetic_stream(800, seed=5, vbuckets=3)
    segments = len(data) // 1448
    capture = t.pcap_file(t.tcp_packets(t.tcp_conversation(
        b"", data, sizes=(1448,), drop=[(False, segments // 2)])))
    batches = [b for b in read_pcap(io.BytesIO(capture))
               if b.connection.direction == "server->client"]
    assert any("capture gap" in e.reason for b in batches for e in b.errors)
    with pytest.raises(dcpfast.DcpFormatError, match='errors="skip" keeps going'):
        dcpfast.state(batches)
    table = dcpfast.state(batches, errors="skip")
    meta = metadata(table)
    assert meta["error_counts"].get("capture_gap", 0) >= 1
    gap = min(e.offset for b in batches for e in b.errors if "capture gap" in e.reason)
    before = dcpfast.state(data[:gap], errors="skip")
    limits = dict(zip(*consistency(before).select(["vbucket", "consistent_seqno"])
                      .to_pydict().values()))
    for r in consistency(table).to_pylist():
        assert r["frames_lost"] and r["consistent_seqno"] <= limits.get(r["vbucket"], 0)


def test_state_of_a_capture_path_reads_its_server_side(tmp_path):
    client, server = t.synthetic_conversation(500, seed=6, vbuckets=2)
    capture = tmp_path / "c.pcap"
    capture.write_bytes(t.pcap_file(t.tcp_packets(t.tcp_conversation(
        b"".join(f.data for f in client), b"".join(f.data for f in server)))))
    want = dcpfast.state(b"".join(f.data for f in server))
    assert dcpfast.state(capture).equals(want)
    with pytest.raises(ValueError, match="packet capture"):
        dcpfast.state(capture.read_bytes())


def test_a_rollback_of_a_lost_stream_does_not_lift_the_stop():
    frames = [marker(1, 2), mut(1), mut(2), mut(4),
              t.response(Opcode.STREAM_REQUEST, status=Status.ROLLBACK,
                         value=struct.pack(">Q", 0), opaque=0x77),
              t.failover_log_response([(1, 0)], opaque=0x78),
              marker(1, 4, opaque=0x78), *(mut(s, opaque=0x78) for s in range(1, 5))]
    table = dcpfast.state(b"".join(frames), errors="skip")
    assert consistency(table).column("consistent_seqno").to_pylist() == [0]


@pytest.mark.parametrize("seed", range(3))
def test_clean_dumps_have_no_losses(seed):
    frames, _ = dump(seed, collections=seed != 1, vbuckets=3, items=1500)
    table = dcpfast.state(b"".join(frames))
    assert not any(consistency(table).column("frames_lost").to_pylist())
    assert streams.summarize(dcpfast.scan(b"".join(frames))).anomalies.num_rows == 0
