"""Stream setup and responses (dcpfast.streams tables) and the stream health summary."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import streams as S
from dcpfast import testing as t
from dcpfast.protocol import Opcode, SnapshotFlag, Status, StreamEndStatus
from dcpfast.streams import frames as stream_frames
from tests.spec_vectors import VECTORS

HEX = {v.id: v.data for v in VECTORS}
FAILOVER = [(0xfeeddeca, 0x5432), (0xdecafe, 0x1343214), (0xfeedface, 4), (0xdeadbeef, 0x6524)]
U64 = st.integers(0, 2**64 - 1)


def scan(*frames, errors="strict", collections=False):
    return dcpfast.scan(b"".join(frames), final=True, errors=errors, collections=collections)


def rows(table):
    return table.to_pylist()


# -- spec vectors ----------------------------------------------------------------------


def test_open_vector_d1():
    (row,) = rows(S.opens(scan(HEX["D1"], HEX["D2"])))
    assert row == {"index": 0, "offset": 0, "opaque": 1, "name": "bucketstream vb[100-105]",
                   "flags": 0, "flag_names": []}


def test_control_vector_c3():
    (row,) = rows(S.controls(scan(HEX["C3"], HEX["C4"])))
    assert row == {"index": 0, "offset": 0, "opaque": 1, "key": "enable_noop",
                   "value": "true"}


@pytest.mark.parametrize("vector, snap_start", [("E1", 0xffeedd), ("C13", 0)])
def test_stream_request_vectors(vector, snap_start):
    (row,) = rows(S.stream_requests(scan(HEX[vector])))
    start = 0xffeedd if vector == "E1" else 0
    assert row == {"index": 0, "offset": 0, "vbucket": 0, "opaque": 0x1000, "stream_id": None,
                   "flags": 0, "flag_names": [], "start_seqno": start,
                   "end_seqno": 2**64 - 1, "vbucket_uuid": 0xfeeddeca,
                   "snap_start_seqno": snap_start,
                   "snap_end_seqno": 0xffeeff if vector == "E1" else 0, "filter": None}


@pytest.mark.parametrize("vector, opcode, opaque", [("D7", 0x53, 0x1000),
                                                    ("D9", 0x54, 0xdeadbeef)])
def test_failover_vectors(vector, opcode, opaque):
    got = rows(S.failover_logs(scan(HEX[vector])))
    assert [(r["entry"], r["vbucket_uuid"], r["seqno"]) for r in got] == \
        [(i, u, s) for i, (u, s) in enumerate(FAILOVER)]
    assert {(r["index"], r["offset"], r["opcode"], r["opaque"], r["vbucket"]) for r in got} \
        == {(0, 0, opcode, opaque, None)}


def test_failover_vector_s11_alt_response():
    (row,) = rows(S.failover_logs(scan(HEX["S11"])))
    assert (row["vbucket_uuid"], row["seqno"], row["opaque"]) == (0xfeeddeca, 0x5432, 0x1000)


def test_rollback_vector_d6():
    assert rows(S.rollbacks(scan(HEX["D6"]))) == [
        {"index": 0, "offset": 0, "opaque": 0x1000, "vbucket": None, "stream_id": None,
         "rollback_seqno": 0}]
    assert S.failover_logs(scan(HEX["D6"])).num_rows == 0      # not a success


@pytest.mark.parametrize("vector, expect", [
    ("D10", (0, 0xdeadbeef, None, 0, "ok")),
    ("S4", (3, 9, 2, 7, "filter_empty")),
])
def test_stream_end_vectors(vector, expect):
    (row,) = rows(S.stream_ends(scan(HEX[vector])))
    assert (row["vbucket"], row["opaque"], row["stream_id"], row["end_status"],
            row["end_status_name"]) == expect


def test_error_response_is_neither_failover_nor_rollback():
    batch = scan(HEX["S14"])                      # Erange with a JSON body
    assert S.failover_logs(batch).num_rows == 0 and S.rollbacks(batch).num_rows == 0


# -- decoding details ------------------------------------------------------------------


def test_open_flag_names_and_unknown_bits():
    flags = 0x01 | 0x04 | 0x20 | 0x400
    (row,) = rows(S.opens(scan(t.open(b"n\xff", flags, opaque=7))))
    assert row["flag_names"] == ["producer", "include_xattrs", "include_delete_times", "0x400"]
    assert row["name"] == "n\\xff" and row["flags"] == flags


def test_stream_request_sid_from_value_and_frame_info():
    value = json.dumps({"sid": 12, "collections": ["8"]}).encode()
    batch = scan(t.stream_request(flags=0x24, start=5, vbucket=9, opaque=3, value=value),
                 t.stream_request(vbucket=9, opaque=4, stream_id=13), collections=True)
    first, second = rows(S.stream_requests(batch))
    assert (first["stream_id"], first["flag_names"], first["filter"]) == \
        (12, ["to_latest", "strict_vb_uuid"], value.decode())
    assert (first["start_seqno"], first["snap_start_seqno"], first["snap_end_seqno"]) == (5,) * 3
    assert second["stream_id"] == 13 and second["offset"] == len(batch.data) - 24 - 3 - 48


def test_matching_by_opcode_and_opaque_in_batch():
    batch = scan(t.stream_request(vbucket=5, opaque=1),
                 t.get_failover_log(vbucket=6, opaque=1),
                 t.failover_log_response([(1, 0)], opaque=1),
                 t.failover_log_response([(2, 0)], opcode=Opcode.GET_FAILOVER_LOG, opaque=1),
                 t.rollback_response(7, opaque=1),
                 t.stream_request(vbucket=8, opaque=1),
                 t.rollback_response(9, opaque=1),
                 t.rollback_response(3, opaque=2))
    got = rows(S.failover_logs(batch))
    assert [(r["opcode"], r["vbucket"], r["vbucket_uuid"]) for r in got] == \
        [(0x53, 5, 1), (0x54, 6, 2)]
    got = rows(S.rollbacks(batch))
    assert [(r["index"], r["vbucket"], r["rollback_seqno"]) for r in got] == \
        [(4, 5, 7), (6, 8, 9), (7, None, 3)]


def test_tracker_matches_across_batches_and_stream_opaques():
    requests = scan(t.stream_request(vbucket=5, opaque=10, stream_id=2),
                    t.get_failover_log(vbucket=6, opaque=11))
    answers = scan(t.failover_log_response([(1, 0)], opaque=10),
                   t.failover_log_response([(1, 0)], opcode=Opcode.GET_FAILOVER_LOG,
                                           opaque=11),
                   t.rollback_response(4, opaque=12),
                   t.snapshot_marker(1, 1, vbucket=7, opaque=12),
                   t.mutation(b"k", by_seqno=1, vbucket=7, opaque=12))
    assert [r["vbucket"] for r in rows(S.failover_logs(answers))] == [None, None]
    tracker = S.StreamTracker()
    tracker.update(requests)
    got = rows(S.failover_logs(answers, tracker))
    assert [(r["vbucket"], r["stream_id"]) for r in got] == [(5, 2), (6, None)]
    # no request for opaque 12, but the messages of vbucket 7 carry it
    assert [r["vbucket"] for r in rows(S.rollbacks(answers, tracker))] == [7]


def test_a_summary_of_responses_only_lists_their_streams():
    """A server direction holding nothing but answers to the client's requests."""
    summary = S.Summary()
    summary.tracker.update(scan(t.stream_request(vbucket=5, opaque=10),
                                t.stream_request(vbucket=6, opaque=11)))
    summary.update(scan(t.rollback_response(4, opaque=10)))
    summary.update(scan(t.failover_log_response([(1, 0)], opaque=11)))
    got = summary.to_arrow()
    assert sorted(got.column("vbucket").to_pylist()) == [5, 6]


def test_ambiguous_stream_opaque_places_nothing():
    batch = scan(t.rollback_response(4, opaque=1),
                 t.snapshot_marker(1, 1, vbucket=7, opaque=1),
                 t.snapshot_marker(1, 1, vbucket=8, opaque=1))
    assert rows(S.rollbacks(batch))[0]["vbucket"] is None


def test_projection_without_needed_column_is_a_clear_error():
    batch = dcpfast.scan(HEX["D7"], columns=["offset", "opcode"])
    with pytest.raises(KeyError, match="magic"):
        S.failover_logs(batch)


# -- malformed content -----------------------------------------------------------------

BAD = [
    pytest.param(lambda: t.response(0x53, value=b"\0" * 20, opaque=1), S.failover_logs,
                 "not a multiple of 16", id="failover-length"),
    pytest.param(lambda: t.response(0x54, value=b"\0" * 8, opaque=1), S.failover_logs,
                 "not a multiple of 16", id="failover-0x54-length"),
    pytest.param(lambda: t.response(0x53, status=Status.ROLLBACK, value=b"\0" * 4),
                 S.rollbacks, "must be 8", id="rollback-short"),
    pytest.param(lambda: t.response(0x53, status=Status.ROLLBACK, value=b""),
                 S.rollbacks, "must be 8", id="rollback-empty"),
    pytest.param(lambda: t.stream_request(value=b"{nope"), S.stream_requests,
                 "not a JSON object", id="request-json"),
    pytest.param(lambda: t.stream_request(value=b"[1]"), S.stream_requests,
                 "not a JSON object", id="request-json-array"),
    pytest.param(lambda: t.stream_request(value=b'{"sid": 0}'), S.stream_requests,
                 "not in 1..65535", id="request-sid-zero"),
    pytest.param(lambda: t.stream_request(value=b'{"sid": "7"}'), S.stream_requests,
                 "not in 1..65535", id="request-sid-string"),
]


@pytest.mark.parametrize("build, table, reason", BAD)
def test_malformed_strict(build, table, reason):
    good = t.noop(opaque=1)
    batch = scan(good, build(), collections=True)
    with pytest.raises(dcpfast.DcpFormatError, match=reason) as info:
        table(batch)
    assert info.value.offset == len(good)


@pytest.mark.parametrize("build, table, reason", BAD)
def test_malformed_skip_records_once(build, table, reason):
    good = t.noop(opaque=1)
    bad = build()
    batch = scan(good, bad, errors="skip", collections=True)
    assert table(batch).num_rows == 0
    assert table(batch.filter(np.ones(len(batch), bool))).num_rows == 0
    table(batch)
    assert len(batch.errors) == 1
    (region,) = batch.errors
    assert (region.offset, region.length) == (len(good), len(bad)) and reason in region.reason


def test_skip_keeps_good_rows_around_a_bad_one():
    batch = scan(t.failover_log_response([(1, 2)], opaque=1),
                 t.response(0x53, value=b"\0" * 17, opaque=2),
                 t.failover_log_response([(3, 4), (5, 6)], opaque=3), errors="skip")
    assert [(r["opaque"], r["entry"]) for r in rows(S.failover_logs(batch))] == \
        [(1, 0), (3, 0), (3, 1)]


def test_summary_follows_the_mode_too():
    data = t.noop()
    bad = t.response(0x53, status=Status.ROLLBACK, value=b"\0" * 3)
    with pytest.raises(dcpfast.DcpFormatError):
        S.summarize(scan(data, bad))
    batch = scan(data, bad, errors="skip")
    summary = S.summarize(batch)
    assert len(batch.errors) == 1 and summary.anomalies.num_rows == 0


# -- round trips -----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(flags=st.integers(0, 0x1FF), start=U64, end=U64, uuid=U64, snap_start=U64,
       snap_end=U64, vbucket=st.integers(0, 1023), opaque=st.integers(0, 2**32 - 1),
       sid=st.none() | st.integers(1, 0xFFFF), frame_info=st.booleans())
def test_stream_request_round_trip(flags, start, end, uuid, snap_start, snap_end, vbucket,
                                   opaque, sid, frame_info):
    hdr = {"vbucket": vbucket, "opaque": opaque}
    value = b""
    if sid is not None and frame_info:
        hdr["stream_id"] = sid
    elif sid is not None:
        value = json.dumps({"sid": sid}).encode()
    data = t.stream_request(flags=flags, start=start, end=end, vbucket_uuid=uuid,
                            snap_start=snap_start, snap_end=snap_end, value=value, **hdr)
    (row,) = rows(S.stream_requests(scan(t.noop(), data, collections=True)))
    assert row == {"index": 1, "offset": 24, "vbucket": vbucket, "opaque": opaque,
                   "stream_id": sid, "flags": flags,
                   "flag_names": stream_frames.flag_names(dcpfast.protocol.StreamRequestFlag,
                                                          flags),
                   "start_seqno": start, "end_seqno": end, "vbucket_uuid": uuid,
                   "snap_start_seqno": snap_start, "snap_end_seqno": snap_end,
                   "filter": value.decode() or None}


@settings(max_examples=60, deadline=None)
@given(entries=st.lists(st.tuples(U64, U64), max_size=30), opaque=st.integers(0, 2**32 - 1),
       opcode=st.sampled_from([0x53, 0x54, 0x96]), alt=st.booleans())
def test_failover_round_trip(entries, opaque, opcode, alt):
    framing = t.frame_info(2, b"\x00\x0a") if alt else b""
    value = b"".join(u.to_bytes(8, "big") + s.to_bytes(8, "big") for u, s in entries)
    data = t.response(opcode, value=value, opaque=opaque, framing=framing)
    got = rows(S.failover_logs(scan(data)))
    assert [(r["entry"], r["vbucket_uuid"], r["seqno"]) for r in got] == \
        [(i, u, s) for i, (u, s) in enumerate(entries)]
    assert all(r["opaque"] == opaque and r["opcode"] == opcode for r in got)


@settings(max_examples=60, deadline=None)
@given(seqno=U64, name=st.text(min_size=1, max_size=60).filter(lambda s: len(s.encode()) < 250),
       flags=st.integers(0, 2**32 - 1), status=st.integers(0, 20), sid=st.integers(1, 0xFFFF))
def test_rollback_open_end_round_trip(seqno, name, flags, status, sid):
    batch = scan(t.open(name.encode(), flags, opaque=3), t.rollback_response(seqno, opaque=4),
                 t.stream_end(status, vbucket=2, opaque=5, stream_id=sid))
    (o,) = rows(S.opens(batch))
    assert (o["name"], o["flags"]) == (name, flags)
    assert sum(int(f, 16) if f.startswith("0x") else
               dcpfast.protocol.OpenFlag[f.upper()] for f in o["flag_names"]) == flags
    assert rows(S.rollbacks(batch))[0]["rollback_seqno"] == seqno
    (e,) = rows(S.stream_ends(batch))
    assert (e["end_status"], e["stream_id"], e["vbucket"]) == (status, sid, 2)
    assert e["end_status_name"] == (StreamEndStatus(status).name.lower() if status <= 8
                                    else None)


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


@settings(max_examples=40, deadline=None)
@given(seqnos=st.lists(st.integers(1, 40), min_size=1, max_size=25),
       spans=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 10)), min_size=1,
                      max_size=6),
       data=st.data())
def test_random_streams_match_a_reference(seqnos, spans, data):
    """The vectorised checks agree with a frame-by-frame reference on random streams."""
    items = [("m", s) for s in seqnos] + [("s", a, a + w) for a, w in spans]
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
