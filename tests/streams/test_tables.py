"""Stream setup and responses as tables (``dcpfast.streams.tables``): the wire reference's
vectors, decoding details, malformed content in either errors mode, round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import streams as S
from dcpfast import testing as t
from dcpfast.protocol import Status, StreamEndStatus
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
def test_malformed_skip_lists_the_frame_in_the_table(build, table, reason):
    good = t.noop(opaque=1)
    bad = build()
    batch = scan(good, bad, errors="skip", collections=True)
    tables = [table(batch), table(batch.filter(np.ones(len(batch), bool))), table(batch)]
    assert [found.num_rows for found in tables] == [0, 0, 0]
    assert batch.errors == []
    for found in tables:
        (region,) = dcpfast.skipped_regions(found)
        assert (region.offset, region.length) == (len(good), len(bad)) and \
            reason in region.reason


def test_the_tables_and_the_tracker_leave_the_batch_errors_as_they_are():
    """The stream tables list the frames they skip in their metadata, the tracker's
    ``update`` and the summary return and list theirs: the batch's ``errors`` (the scan's,
    shared by its selections) stay the same list with the same regions, however often
    they are called."""
    request = t.stream_request(value=b"{nope", opaque=2)
    rollback = t.response(0x53, status=Status.ROLLBACK, value=b"\0" * 4, opaque=3)
    failover = t.response(0x53, value=b"\0" * 20, opaque=4)
    parts = [t.open(b"c", opaque=1), t.control(b"k", b"v", opaque=1),
             request, b"\x99" * 30, rollback, failover, t.stream_end(vbucket=1, opaque=2)]
    starts = [sum(map(len, parts[:i])) for i in range(len(parts))]
    batch = dcpfast.scan(b"".join(parts), errors="skip", final=True, collections=False)
    errors, scanned = batch.errors, list(batch.errors)
    assert [r.offset for r in scanned] == [starts[3]]
    tracker = S.StreamTracker()
    whole = batch.filter(np.ones(len(batch), bool))
    listed = {"opens": [S.opens(batch)], "controls": [S.controls(batch)],
              "stream_ends": [S.stream_ends(batch)],
              "stream_requests": [S.stream_requests(batch), S.stream_requests(whole)],
              "failover_logs": [S.failover_logs(batch), S.failover_logs(batch, tracker)],
              "rollbacks": [S.rollbacks(whole), S.rollbacks(batch, tracker)],
              "summary": [S.summarize(batch).to_arrow(), S.summarize(whole).to_arrow()]}
    assert [r.offset for r in tracker.update(batch)] == [starts[2]]
    assert [r.offset for r in tracker.update(whole)] == [starts[2]]
    assert batch.errors is errors and batch.errors == scanned
    skipped = {name: {tuple(r.offset for r in dcpfast.skipped_regions(table))
                      for table in tables} for name, tables in listed.items()}
    assert skipped == {"opens": {()}, "controls": {()}, "stream_ends": {()},
                       "stream_requests": {(starts[2],)},
                       "failover_logs": {(starts[2], starts[5])},
                       "rollbacks": {(starts[2], starts[4])},
                       "summary": {(starts[2], starts[4])}}
    assert S.summarize(batch).anomalies.column("offset").to_pylist() == [starts[3]]


def test_skip_keeps_good_rows_around_a_bad_one():
    batch = scan(t.failover_log_response([(1, 2)], opaque=1),
                 t.response(0x53, value=b"\0" * 17, opaque=2),
                 t.failover_log_response([(3, 4), (5, 6)], opaque=3), errors="skip")
    assert [(r["opaque"], r["entry"]) for r in rows(S.failover_logs(batch))] == \
        [(1, 0), (3, 0), (3, 1)]


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


def _all_vb_seqnos(pairs, **hdr) -> bytes:
    """A GetAllVbSeqnos (0x48) success response listing ``pairs`` (vbucket, seqno)."""
    return t.response(0x48, value=b"".join(vb.to_bytes(2, "big") + seqno.to_bytes(8, "big")
                                           for vb, seqno in pairs), **hdr)


@given(st.lists(st.tuples(st.integers(0, 1023), st.integers(0, 2**64 - 1)), max_size=40),
       st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_high_seqnos_round_trip(pairs, opaque):
    data = t.frame(0x48, extras=(1).to_bytes(4, "big"), opaque=opaque) + \
        _all_vb_seqnos(pairs, opaque=opaque) + t.response(0x48, status=Status.NOT_MY_VBUCKET)
    table = S.high_seqnos(dcpfast.scan(data))
    assert list(zip(table["vbucket"].to_pylist(), table["seqno"].to_pylist())) == pairs
    assert set(table["opaque"].to_pylist()) <= {opaque}
    assert set(table["index"].to_pylist()) <= {1}          # the request and the error: none


def test_high_seqnos_of_a_malformed_value():
    """A value that is not whole (vbucket, seqno) entries: strict raises, skip lists the
    frame in the table's metadata and keeps the other responses."""
    good = _all_vb_seqnos([(3, 70)])
    bad = t.response(0x48, value=bytes(15))
    data = good + bad + good
    with pytest.raises(dcpfast.DcpFormatError, match="GetAllVbSeqnos response value of 15"):
        S.high_seqnos(dcpfast.scan(data))
    table = S.high_seqnos(dcpfast.scan(data, errors="skip"))
    assert table["vbucket"].to_pylist() == [3, 3]
    (region,) = dcpfast.skipped_regions(table)
    assert (region.offset, region.length) == (len(good), len(bad))
