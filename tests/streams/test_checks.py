"""The stream checks (``dcpfast.streams.checks``, one implementation that ``summarize`` and the
state share): what DCP cannot send is flagged as frames lost, what it can is left alone,
at the same offsets in both."""

from __future__ import annotations

import dcpfast
from dcpfast import streams
from dcpfast import testing as t
from dcpfast.documents import state_errors
from dcpfast.protocol import OsoFlag, SnapshotFlag, StreamEndStatus

VB = dict(vbucket=3, opaque=0x77)
MEMORY, DISK = SnapshotFlag.MEMORY, SnapshotFlag.DISK


def marker(start, end, flags=MEMORY, **kw):
    return t.snapshot_marker(start, end, flags, **{**VB, **kw})


def mut(seqno, cid=None, **kw):
    return t.mutation(b"k%d" % seqno, b'{"v":1}', by_seqno=seqno, cas=seqno << 16, datatype=1,
                      collection_id=cid, **{**VB, **kw})


def sa(seqno, **kw):
    return t.seqno_advanced(seqno, **{**VB, **kw})


def end(status=StreamEndStatus.OK, **kw):
    return t.stream_end(status, **{**VB, **kw})


def found(*frames, collections=False):
    """(kind, offset) of what summarize finds, and of the losses the state lists (the
    same offsets: one implementation)."""
    data = b"".join(frames)
    batch = dcpfast.scan(data, collections=collections, final=True)
    anomalies = [(a["kind"], a["offset"]) for a in streams.summarize(batch).anomalies.to_pylist()
                 if a["kind"] != "unmatched_rollback"]
    table = dcpfast.state(batch, errors="skip", values=False)
    lost = [e.offset for e in state_errors(table) if "lost before" in e.reason]
    assert lost == sorted({offset for _, offset in anomalies})
    return anomalies


def at(frames, i):
    return sum(len(f) for f in frames[:i])


def test_an_item_above_its_snapshot_lost_the_next_marker():
    frames = [marker(1, 2), mut(1), mut(2), mut(4), mut(5)]       # marker [3, 5] lost
    assert found(*frames) == [("outside_snapshot", at(frames, 3)),
                              ("outside_snapshot", at(frames, 4))]


def test_an_item_before_any_marker_after_the_response():
    frames = [t.failover_log_response([(1, 0)], opaque=0x77), mut(1), marker(2, 2), mut(2)]
    assert found(*frames) == [("outside_snapshot", at(frames, 1))]
    # a dump that begins inside a snapshot cannot tell
    assert found(mut(7), marker(8, 8), mut(8)) == []


def test_seqno_advances_are_not_items_of_a_snapshot_and_may_repeat():
    frames = [marker(1, 5, DISK), mut(1), sa(5), sa(5), marker(6, 6), mut(6)]
    assert found(*frames, collections=True) == []


def test_a_memory_snapshot_is_sent_whole():
    """Memory snapshots are queued whole (kv_engine ActiveStream::snapshot): one closed
    before its end lost its tail; a disk snapshot of a stream without seqno advances may
    end short (MB-56084)."""
    frames = [marker(1, 4), mut(1), mut(2), marker(5, 6), mut(5), mut(6)]
    assert found(*frames) == [("snapshot_ended_early", at(frames, 3))]
    frames = [marker(1, 4), mut(1), end(StreamEndStatus.CLOSED)]
    assert found(*frames) == [("ended_in_snapshot", at(frames, 2))]
    assert found(marker(1, 4, DISK), mut(1), marker(5, 5), mut(5)) == []


def test_filtered_collection_streams_may_leave_a_memory_snapshot_short():
    """MB-73354: on a filtered stream a memory snapshot's end may never come. A stream
    known to be unfiltered (its request names no collections) is judged."""
    frames = [marker(1, 4), mut(1, cid=8), marker(5, 5), mut(5, cid=8)]
    assert found(*frames, collections=True) == []
    request = t.stream_request(start=0, vbucket=3, opaque=0x77)
    unfiltered = [request, *frames]
    assert found(*unfiltered, collections=True) == [
        ("snapshot_ended_early", at(unfiltered, 3))]
    filtered = t.stream_request(start=0, vbucket=3, opaque=0x77,
                                value=b'{"collections":["8"]}')
    assert found(filtered, *frames, collections=True) == []


def test_disk_snapshots_with_seqno_advances_end_at_their_end():
    """A stream that sends seqno advances closes a disk snapshot with its last item or
    one; the change-stream pair (no-history, then history with the same end) is not a
    loss, nor is a Stream End other than Ok during a backfill."""
    frames = [marker(1, 9, DISK), mut(1, cid=8), sa(3), mut(4, cid=8), marker(10, 10),
              mut(10, cid=8)]
    assert found(*frames, collections=True) == [("snapshot_ended_early", at(frames, 4))]
    pair = [marker(1, 9, DISK | SnapshotFlag.CHECKPOINT), mut(1, cid=8), sa(3),
            marker(4, 9, DISK | SnapshotFlag.CHECKPOINT | SnapshotFlag.HISTORY),
            mut(4, cid=8), mut(9, cid=8)]
    assert found(*pair, collections=True) == []
    ended = [marker(1, 9, DISK), mut(1, cid=8), sa(3)]
    assert found(*ended, end(StreamEndStatus.CLOSED), collections=True) == []
    assert found(*ended, end(), collections=True) == [("ended_in_snapshot", at(ended, 3))]


def test_oso_snapshots_begin_and_end():
    oso = [t.oso_snapshot(OsoFlag.START, **VB), mut(5), mut(2)]
    frames = [*oso, marker(6, 6), mut(6)]
    assert found(*frames) == [("oso_not_ended", at(frames, 3))]
    frames = [marker(1, 1), mut(1), t.oso_snapshot(OsoFlag.END, **VB)]
    assert found(*frames) == [("oso_not_started", at(frames, 2))]
    done = [*oso, t.oso_snapshot(OsoFlag.END, **VB), marker(6, 6), mut(6)]
    assert found(*done) == []
    assert found(*oso, end(StreamEndStatus.BACKFILL_FAIL)) == []   # a backfill cut short


def test_seqnos_go_up_and_a_request_from_latest_seeds_nothing():
    frames = [marker(1, 9), mut(3), mut(2)]
    assert found(*frames) == [("seqno_not_increasing", at(frames, 2))]
    frames = [t.stream_request(start=50, vbucket=3, opaque=0x77), marker(1, 9), mut(3)]
    assert found(*frames) == [("seqno_not_increasing", at(frames, 2))]
    latest = t.stream_request(start=50, flags=0x40, vbucket=3, opaque=0x77)
    assert found(latest, marker(1, 9), mut(3)) == []
