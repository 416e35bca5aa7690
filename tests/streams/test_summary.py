"""Stream health (``dcpfast.streams.summary``): every vbucket stream's seqno range,
snapshots, counts, rollbacks and end, with no anomaly on clean streams and each anomaly
found where a stream built to hold it holds it, however the stream is cut; the
vectorised checks against a frame-by-frame reference."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import streams as S
from dcpfast import testing as t
from dcpfast.protocol import Opcode, SnapshotFlag, Status, StreamEndStatus
from dcpfast.streams import frames as stream_frames
from tests.streams.test_tables import rows, scan

# -- summary: clean synthetic streams --------------------------------------------------

CLEAN = [dict(seed=s, **kw) for s, kw in enumerate([
    {}, {"marker_version": 0, "sync_writes": True}, {"marker_version": 1},
    {"marker_version": 2, "sync_writes": True}, {"stream_ids": True},
    {"collections": False, "delete_times": False}, {"snapshot_size": 1},
    {"snapshot_size": 3, "vbuckets": 16, "sync_writes": True},
    {"stream_ids": True, "vbuckets": 9, "marker_version": 2},
    {"handshake": False, "vbuckets": 1},
])]


def truth(frames):
    """Per stream key: opcode counts, item seqnos and marker ranges from the generator."""
    out = defaultdict(lambda: {"counts": Counter(), "seqnos": [], "ranges": []})
    for f in frames:
        d = f.fields
        if d["magic"] not in (0x80, 0x08) or not stream_frames.IS_STREAM[d["opcode"]]:
            continue
        s = out[(d["vbucket"], d.get("stream_id"))]
        s["counts"][Opcode(d["opcode"]).name.lower()] += 1
        if stream_frames.IS_ITEM[d["opcode"]]:
            s["seqnos"].append(d["by_seqno"])
        if d["opcode"] == Opcode.SNAPSHOT_MARKER:
            s["ranges"].append({"start": d["snap_start"], "end": d["snap_end"],
                                "flags": d["snap_flags"]})
    return out


@pytest.mark.parametrize("kwargs", CLEAN, ids=lambda kw: ",".join(f"{k}={v}"
                                                                 for k, v in kw.items()))
def test_clean_streams_have_no_anomalies(kwargs):
    frames = t.synthetic_frames(600, **kwargs)
    data = b"".join(f.data for f in frames)
    summary = S.summarize(dcpfast.scan(data, final=True))
    assert summary.anomalies.num_rows == 0, summary.report()
    expect = truth(frames)
    got = rows(summary.to_arrow())
    assert {(r["vbucket"], r["stream_id"]) for r in got} == set(expect)
    for r in got:
        e = expect[(r["vbucket"], r["stream_id"])]
        assert dict(r["counts"]) == dict(e["counts"])
        assert (r["first_seqno"], r["last_seqno"]) == (e["seqnos"][0], e["seqnos"][-1])
        assert r["snapshot_ranges"] == e["ranges"] and r["snapshots"] == len(e["ranges"])
        assert (r["end_status"], r["streams"], r["rollbacks"], r["anomalies"]) == \
            ("ok", 1, [], 0)
        assert r["opaque"] == 0x10000 + r["vbucket"]
    assert summary.frames == len(frames)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32), marker_version=st.sampled_from([None, 0, 1, 2]),
       sync=st.booleans(), sids=st.booleans(), collections=st.booleans(),
       snapshot_size=st.integers(1, 60), cut=st.integers(200, 20_000))
def test_random_clean_streams(seed, marker_version, sync, sids, collections, snapshot_size,
                              cut):
    if sync and sids:
        sids = False                  # the server refuses sync writes with stream ids
    if marker_version == 2:
        collections = True
    data = t.synthetic_stream(150, seed=seed, marker_version=marker_version, sync_writes=sync,
                              stream_ids=sids, collections=collections,
                              snapshot_size=snapshot_size, vbuckets=3)
    whole = S.summarize(dcpfast.scan(data, final=True))
    assert whole.anomalies.num_rows == 0, whole.report()
    parts = S.summarize(dcpfast.iter_batches([data], batch_bytes=cut))
    assert parts.to_arrow().equals(whole.to_arrow())


def test_summary_is_the_same_however_the_stream_is_cut():
    data = t.synthetic_stream(400, seed=3, vbuckets=3, sync_writes=True, marker_version=2)
    whole = S.summarize(dcpfast.scan(data, final=True))
    for size in (24, 700, 4096, 50_000):
        parts = S.summarize(dcpfast.iter_batches([data], batch_bytes=size))
        assert parts.to_arrow().equals(whole.to_arrow()), size
        assert parts.frames == whole.frames


def test_incremental_form_and_outputs():
    data = t.synthetic_stream(100, seed=4, vbuckets=2)
    summary = S.Summary()
    for batch in dcpfast.iter_batches([data], batch_bytes=2000):
        assert summary.update(batch) is summary
    df = summary.to_pandas()
    assert list(df.columns) == summary.to_arrow().column_names and len(df) == 2
    text = str(summary)
    assert text.splitlines()[0].startswith(f"{summary.frames} frames, 2 vbucket streams, 0 ")
    assert "end ok" in text and "Summary" in repr(summary)


def test_sample_dump_is_clean():
    summary = S.summarize(dcpfast.read(dcpfast.testing.SAMPLE))
    assert summary.anomalies.num_rows == 0 and summary.to_arrow().num_rows == 4


# -- summary: streams built to contain anomalies ---------------------------------------

VB = {"vbucket": 3, "opaque": 0x77}


def marker(s, e, **kw):
    return t.snapshot_marker(s, e, **{**VB, **kw})


def mut(n, **kw):
    return t.mutation(b"k%d" % n, b"v", by_seqno=n, **{**VB, **kw})


def anomalies(*frames, cuts=(None,)):
    """(kind, offset, by_seqno) of the anomalies, checked to be the same for every cut."""
    data = b"".join(frames)
    found = None
    for cut in cuts:
        if cut is None:
            summary = S.summarize(dcpfast.scan(data, final=True, collections=False))
        else:
            summary = S.summarize(dcpfast.iter_batches([data], batch_bytes=cut,
                                                       collections=False))
        got = [(a["kind"], a["offset"], a["by_seqno"]) for a in rows(summary.anomalies)]
        assert found is None or got == found, cut
        found = got
    return found


CUTS = (None, 24, 40, 61, 100, 163)


def at(frames, i):
    return sum(len(f) for f in frames[:i])


def test_seqno_going_backwards():
    frames = [marker(1, 10), mut(1), mut(2), mut(5), mut(4), mut(6), mut(6), mut(10)]
    assert anomalies(*frames, cuts=CUTS) == [
        ("seqno_not_increasing", at(frames, 4), 4), ("seqno_not_increasing", at(frames, 6), 6)]


def test_item_outside_its_snapshot():
    frames = [marker(5, 8), mut(4), mut(5), mut(8), mut(9), marker(9, 12), mut(10),
              mut(13), mut(12)]
    assert anomalies(*frames, cuts=CUTS) == [
        ("outside_snapshot", at(frames, 1), 4), ("outside_snapshot", at(frames, 4), 9),
        ("outside_snapshot", at(frames, 7), 13), ("seqno_not_increasing", at(frames, 8), 12)]


def test_snapshot_ending_early_and_stream_ending_inside_one():
    frames = [marker(1, 10), mut(1), mut(7), marker(11, 20), mut(11), marker(21, 30),
              t.stream_end(StreamEndStatus.CLOSED, **VB)]
    assert anomalies(*frames, cuts=CUTS) == [
        ("snapshot_ended_early", at(frames, 3), 7),
        ("snapshot_ended_early", at(frames, 5), 11),
        ("ended_in_snapshot", at(frames, 6), None)]
    summary = S.summarize(scan(*frames))
    details = summary.anomalies.column("details").to_pylist()
    assert details == ["snapshot [1, 10] ended at seqno 7", "snapshot [11, 20] ended at seqno 11",
                       "stream end (closed) inside snapshot [21, 30], reached no item"]
    (row,) = rows(summary.to_arrow())
    assert (row["anomalies"], row["end_status"]) == (3, "closed")


def test_legitimate_sequences_are_not_anomalies():
    sa = t.seqno_advanced
    frames = [
        # a seqno advance closes a snapshot whose last items were not sent
        marker(1, 10, flags=SnapshotFlag.DISK), mut(1), mut(4), sa(10, **VB),
        # durable writes: prepare, then commit and abort at their own seqnos
        marker(11, 14), t.prepare(b"p", b"v", by_seqno=11, cas=1, **VB),
        t.commit(b"p", prepared_seqno=11, commit_seqno=12, **VB),
        t.prepare(b"q", b"v", by_seqno=13, cas=1, **VB),
        t.abort(b"q", prepared_seqno=13, abort_seqno=14, **VB),
        # system event with a seqno; gaps from deduplication
        marker(15, 40), t.create_scope(b"s", by_seqno=15, manifest_uid=1, scope_id=8, **VB),
        mut(20), mut(40),
        # an OSO backfill: key order, then a seqno advance past it
        t.oso_snapshot(1, **VB), mut(55), mut(42), mut(60), mut(41), t.oso_snapshot(2, **VB),
        sa(70, **VB), marker(71, 71), mut(71),
        t.stream_end(StreamEndStatus.OK, **VB),
        # a new stream after a Stream End may start lower
        marker(1, 3, opaque=0x78), mut(1, opaque=0x78), mut(3, opaque=0x78),
        # the client re-requested under a new opaque without a Stream End
        marker(2, 2, opaque=0x79), mut(2, opaque=0x79),
        # a stream request resets too, and so does its placed response
        t.stream_request(start=0, vbucket=3, opaque=0x79),
        t.failover_log_response([(1, 0)], opaque=0x79),
        marker(1, 1, opaque=0x79), mut(1, opaque=0x79),
        t.rollback_response(0, opaque=0x79),
        marker(1, 1, opaque=0x79), mut(1, opaque=0x79),
        # another vbucket and a stream id of the same vbucket are other streams
        marker(5, 5, vbucket=4), mut(5, vbucket=4),
        marker(1, 1, stream_id=2), mut(1, stream_id=2),
    ]
    assert anomalies(*frames, cuts=CUTS) == []
    table = rows(S.summarize(scan(*frames, collections=False)).to_arrow())
    main = table[0]
    assert (main["vbucket"], main["stream_id"], main["streams"], main["rollbacks"]) == \
        (3, None, 5, [0])
    assert [(r["vbucket"], r["stream_id"]) for r in table] == [(3, None), (3, 2), (4, None)]


def test_oso_without_end_and_items_after_it():
    frames = [t.oso_snapshot(1, **VB), mut(5), mut(2), marker(6, 8), mut(6), mut(4), mut(8)]
    assert anomalies(*frames, cuts=CUTS) == [
        ("oso_not_ended", at(frames, 3), None),
        ("seqno_not_increasing", at(frames, 5), 4), ("outside_snapshot", at(frames, 5), 4)]
    # after an OSO snapshot the next snapshot has a marker
    frames = [t.oso_snapshot(1, **VB), mut(5), mut(9), t.oso_snapshot(2, **VB), mut(7)]
    assert anomalies(*frames, cuts=CUTS) == [("seqno_not_increasing", at(frames, 4), 7),
                                             ("outside_snapshot", at(frames, 4), 7)]
    # an OSO end without its start, once the stream is known to be in a snapshot
    frames = [marker(1, 2), mut(1), mut(2), t.oso_snapshot(2, **VB), t.oso_snapshot(2, **VB)]
    assert anomalies(*frames, cuts=CUTS) == [("oso_not_started", at(frames, 3), None),
                                             ("oso_not_started", at(frames, 4), None)]
    assert anomalies(t.oso_snapshot(2, **VB), marker(1, 1), mut(1)) == []


def test_stream_request_start_and_missing_marker():
    frames = [t.stream_request(start=10, **VB), mut(11), marker(5, 20), mut(9), mut(12)]
    assert anomalies(*frames, cuts=CUTS) == [
        ("outside_snapshot", at(frames, 1), 11),
        ("seqno_not_increasing", at(frames, 3), 9)]
    # without the request the stream may have begun before the dump: no marker is no news
    assert anomalies(mut(11), marker(12, 12), mut(12)) == []


def test_rollbacks_placed_late_and_unmatched():
    frames = [t.rollback_response(5, opaque=0x77), t.rollback_response(6, opaque=0x99),
              marker(6, 6), mut(6)]
    summary = S.summarize(dcpfast.iter_batches([b"".join(frames)], batch_bytes=40,
                                               collections=False))
    assert rows(summary.to_arrow())[0]["rollbacks"] == [5]
    (a,) = rows(summary.anomalies)
    assert (a["kind"], a["offset"], a["vbucket"], a["by_seqno"]) == \
        ("unmatched_rollback", len(frames[0]), None, 6)


def test_a_summary_that_keeps_some_anomalies_lists_the_first_and_counts_all():
    """``Summary(keep=n)``: the first ``n`` anomalies by offset, as a summary keeping every
    one lists them, and every one counted by kind and by stream, however it is cut."""
    frames = [t.rollback_response(5, opaque=0x99)]
    for k in range(40):
        base = 10 * k + 1
        frames += [marker(base, base + 5), mut(base), mut(base + 3), mut(base + 2),
                   mut(base + 9), mut(base + 4, vbucket=4)]
        if k % 7 == 3:
            frames.append(b"\x42" * 30)                    # damage: bytes lost
    data = b"".join(frames)
    whole = S.summarize(dcpfast.scan(data, final=True, collections=False, errors="skip"))
    every = whole.anomalies
    kinds = Counter(every["kind"].to_pylist())
    assert len(kinds) == 4 and every.num_rows > 80
    for keep in (0, 1, 17, 60, every.num_rows, every.num_rows + 5):
        for cut in (None, 97, 1000):
            batches = [dcpfast.scan(data, final=True, collections=False, errors="skip")] \
                if cut is None else dcpfast.iter_batches([data], batch_bytes=cut,
                                                         collections=False, errors="skip")
            summary = S.Summary(keep=keep)
            for batch in batches:
                summary.update(batch)
            assert summary.anomalies.equals(every.slice(0, keep)), (keep, cut)
            assert summary.anomaly_counts == dict(kinds), (keep, cut)
            assert summary.to_arrow().equals(whole.to_arrow())
    assert whole.anomaly_counts == dict(kinds)


@settings(max_examples=40, deadline=None)
@given(seqnos=st.lists(st.integers(1, 40), min_size=1, max_size=25),
       snapshots=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 10)), min_size=1,
                          max_size=6),
       data=st.data())
def test_random_streams_match_a_reference(seqnos, snapshots, data):
    """The vectorised checks agree with a frame-by-frame reference on random streams."""
    items = [("m", s) for s in seqnos] + [("s", a, a + w) for a, w in snapshots]
    order = data.draw(st.permutations(items))
    frames, expect = [], []
    last = snap = None
    reached = None
    for entry in order:
        offset = sum(map(len, frames))
        if entry[0] == "s":
            if snap is not None and (reached is None or reached < snap[1]):
                expect.append(("snapshot_ended_early", offset, reached))
            snap, reached = entry[1:], None
            frames.append(marker(*entry[1:]))
            continue
        s = entry[1]
        if last is not None and s <= last:
            expect.append(("seqno_not_increasing", offset, s))
        if snap is not None and not snap[0] <= s <= snap[1]:
            expect.append(("outside_snapshot", offset, s))
        last = s
        reached = s if reached is None else max(reached, s)
        frames.append(mut(s))
    cut = data.draw(st.sampled_from([None, 24, 50, 97]))
    assert anomalies(*frames, cuts=(cut,)) == expect


def _reference(entries):
    """Frame-by-frame reference of the checks for streams without requests."""
    frames, expect, state = [], [], {}
    for vb, what, *args in entries:
        offset = sum(map(len, frames))
        s = state.setdefault(vb, {"last": None, "kind": None, "snap": None, "reached": None})
        hdr = {"vbucket": vb, "opaque": 0x77}
        if what in ("marker", "oso_start", "end"):
            # memory snapshots (these markers) are sent whole; an OSO snapshot ends with
            # its end marker (a Stream End may cut it short)
            kind = "ended_in_snapshot" if what == "end" else "snapshot_ended_early"
            if s["kind"] == "marker" and (s["reached"] is None or s["reached"] < s["snap"][1]):
                expect.append((kind, offset, s["reached"]))
            elif s["kind"] == "oso" and what != "end":
                expect.append(("oso_not_ended", offset, None))
        if what == "marker":
            frames.append(t.snapshot_marker(*args, **hdr))
            s.update(kind="marker", snap=args, reached=None)
        elif what == "oso_start":
            frames.append(t.oso_snapshot(1, **hdr))
            s.update(kind="oso", reached=None)
        elif what == "oso_end":
            frames.append(t.oso_snapshot(2, **hdr))
            if s["kind"] == "oso":
                if s["reached"] is not None:
                    s["last"] = s["reached"]
                s.update(kind="oso_closed", reached=None)
            elif s["kind"] is not None:
                expect.append(("oso_not_started", offset, None))
        elif what == "end":
            frames.append(t.stream_end(0, **hdr))
            state.pop(vb)
        else:
            (seqno,) = args
            frames.append(t.mutation(b"k", by_seqno=seqno, **hdr))
            s["reached"] = seqno if s["reached"] is None else max(s["reached"], seqno)
            if s["kind"] != "oso":
                if s["last"] is not None and seqno <= s["last"]:
                    expect.append(("seqno_not_increasing", offset, seqno))
                if s["kind"] == "marker" and not s["snap"][0] <= seqno <= s["snap"][1]:
                    expect.append(("outside_snapshot", offset, seqno))
                elif s["kind"] == "oso_closed":
                    expect.append(("outside_snapshot", offset, seqno))
                s["last"] = seqno
    return frames, expect


ENTRY = st.one_of(
    st.tuples(st.just("item"), st.integers(1, 40)),
    st.tuples(st.just("marker"), st.integers(1, 40), st.integers(0, 8)).map(
        lambda e: ("marker", e[1], e[1] + e[2])),
    st.just(("oso_start",)), st.just(("oso_end",)), st.just(("end",)))


@settings(max_examples=60, deadline=None)
@given(entries=st.lists(st.tuples(st.sampled_from([1, 2]), ENTRY), max_size=40),
       cut=st.sampled_from([None, 24, 50, 97, 400]))
def test_random_streams_with_oso_and_ends_match_a_reference(entries, cut):
    frames, expect = _reference([(vb, *e) for vb, e in entries])
    assert anomalies(*frames, cuts=(cut,)) == expect


# -- summary: answers alone, and the errors mode -----------------------------------------

def test_a_summary_of_responses_only_lists_their_streams():
    """A server direction holding nothing but answers to the client's requests."""
    summary = S.Summary()
    summary.tracker.update(scan(t.stream_request(vbucket=5, opaque=10),
                                t.stream_request(vbucket=6, opaque=11)))
    summary.update(scan(t.rollback_response(4, opaque=10)))
    summary.update(scan(t.failover_log_response([(1, 0)], opaque=11)))
    got = summary.to_arrow()
    assert sorted(got.column("vbucket").to_pylist()) == [5, 6]


def test_summary_follows_the_mode_too():
    data = t.noop()
    bad = t.response(0x53, status=Status.ROLLBACK, value=b"\0" * 3)
    with pytest.raises(dcpfast.DcpFormatError):
        S.summarize(scan(data, bad))
    batch = scan(data, bad, errors="skip")
    summary = S.summarize(batch)
    assert batch.errors == [] and summary.anomalies.num_rows == 0
    (region,) = dcpfast.skipped_regions(summary.to_arrow())
    assert (region.offset, region.length) == (len(data), len(bad))
