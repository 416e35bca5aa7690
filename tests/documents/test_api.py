"""dcpfast.state: documents rebuilt from a stream, held against the plain-Python model of
the semantics (state_model) on random conversations with every case, on hand-written
conversations for each rule, chunked against whole, and on bad input."""

from __future__ import annotations

import datetime as dt
import io
import os
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.documents import (
    StateBuilder,
    consistency,
    state_errors,
    state_schema,
)
from dcpfast.documents import versions as state_versions
from dcpfast.documents.output import metadata
from dcpfast.errors import DcpFormatError
from dcpfast.pcap import read_pcap
from dcpfast.protocol import OsoFlag, SnapshotFlag, Status
from tests.state_model import decoded, expected, model, rows_of
from tests.state_scenarios import CAS_EPOCH, scenario

VB = 5
HDR = dict(vbucket=VB, opaque=0x1005)
T0 = 1_700_000_000 * 10**9


def cas(n: int) -> int:
    """The CAS of the n-th change: one second apart on the hybrid logical clock."""
    return T0 + n * 10**9


def mutation(key, seqno, body=None, *, cid=None, **kw):
    body = b'{"v":%d}' % seqno if body is None else body
    return t.mutation(key, body, by_seqno=seqno, rev_seqno=seqno, cas=cas(seqno), datatype=1,
                      flags=2, collection_id=cid, **{**HDR, **kw})


def deletion(key, seqno, *, cid=None, **kw):
    return t.deletion(key, by_seqno=seqno, rev_seqno=seqno, cas=cas(seqno),
                      delete_time=cas(seqno) // 10**9, collection_id=cid, **{**HDR, **kw})


def marker(start, end, **kw):
    return t.snapshot_marker(start, end, SnapshotFlag.MEMORY, **{**HDR, **kw})


def docs(table) -> dict:
    """key -> row, for one vbucket's documents."""
    return {r["key"]: r for r in table.to_pylist()}


# -- the model, on random conversations ----------------------------------------------------


def check_model(data, **options):
    frames, bodies = decoded(data)
    semantics = {k: v for k, v in options.items() if k in ("at_seqno", "at_time", "history")}
    want, points, problems = model(frames, bodies, **semantics)
    table = dcpfast.state(data, include_deleted=True, errors="skip", **options)
    history = options.get("history", False)
    assert rows_of(table, history=history) == expected(want, history=history)
    got = consistency(table)
    assert dict(zip(got["vbucket"].to_pylist(), got["consistent_seqno"].to_pylist())) == points
    assert sorted(e.offset for e in state_errors(table)) == sorted(problems)
    return table


OPTIONS = [{}, {"history": True}, {"at_seqno": 20},
           {"at_seqno": {0: 5, 5: 30, 9: 12, 30: 40, 45: 17}},
           {"at_time": CAS_EPOCH + 3 * 10**11}, {"at_time": CAS_EPOCH + 6 * 10**11,
                                                 "history": True}]
CONVERSATIONS = [{}, {"requests": True}, {"restarts": 0.3, "vbuckets": 2},
                 {"stream_ids": True}, {"collections": False}]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", range(len(CONVERSATIONS)))
def test_state_is_the_model(seed, kind):
    data = scenario(seed * 10 + kind, **CONVERSATIONS[kind])
    for options in OPTIONS:
        check_model(data, **options)


@pytest.mark.parametrize("seed", range(4))
def test_merged_often_and_read_in_pieces_is_the_model(seed, monkeypatch):
    """Merges that drop tombstones and superseded versions between small batches, then a
    restart below them: the second pass brings back what they dropped."""
    monkeypatch.setattr(state_versions, "MERGE_FLOOR", 4)
    monkeypatch.setattr(state_versions, "MERGE_FLOOR_BYTES", 1 << 10)
    data = scenario(seed + 100, restarts=0.3, vbuckets=2, requests=seed % 2 == 1)
    frames, bodies = decoded(data)
    for options in ({}, {"at_time": CAS_EPOCH + 4 * 10**11}, {"at_seqno": 25}):
        want, _, _ = model(frames, bodies, **options)
        for deleted in (False, True):
            table = dcpfast.state(chunks(data, 300, errors="skip"), errors="skip",
                                  include_deleted=deleted, **options)
            assert rows_of(table) == expected(want, include_deleted=deleted), options


@pytest.mark.parametrize("seed", range(4))
def test_ids_worked_out_on_another_thread_are_the_model(seed, monkeypatch):
    """With threads to spare, each batch's document ids are worked out on another thread
    while the batch is placed and walked: the same state, batch by batch, under every
    option (changes past ``at_seqno`` get ids that no version uses)."""
    import threading

    from dcpfast.documents.engine import Engine

    monkeypatch.setattr("dcpfast.threads.default_threads", lambda: 4)
    keys, where = Engine.keys, set()

    def spied(self, rows):
        where.add(threading.current_thread() is threading.main_thread())
        return keys(self, rows)
    monkeypatch.setattr(Engine, "keys", spied)
    data = scenario(seed + 40, restarts=0.3, vbuckets=2, requests=seed % 2 == 1)
    for options in OPTIONS:
        check_model(data, threads=2, batch_bytes=1500, **options)
    assert where == {False}
    frames, bodies = decoded(data)
    want, _, _ = model(frames, bodies)
    assert rows_of(dcpfast.state(chunks(data, 700, errors="skip"), errors="skip", threads=2,
                                 include_deleted=True)) == expected(want)


@pytest.mark.parametrize("options", [{}, {"history": True}, {"at_seqno": 150},
                                     {"at_time": 1_700_000_300 * 10**9}])
def test_synthetic_conversations_are_the_model(options):
    data = t.synthetic_stream(3000, seed=4, sync_writes=True, snapshot_size=30)
    check_model(data, **options)
    check_model(dcpfast.testing.SAMPLE.read_bytes(), **options)


def test_synthetic_state_is_what_the_generator_left():
    """Without deletions in the way, each key's last mutation is its document."""
    frames = t.synthetic_frames(2000, seed=7, deletion_ratio=0, expiration_ratio=0)
    last = {}
    for f in frames:
        if f.fields["opcode"] == dcpfast.Opcode.MUTATION:
            last[f.fields["vbucket"], f.fields["collection_id"], f.fields["key"]] = f
    table = dcpfast.state(b"".join(f.data for f in frames))
    assert table.num_rows == len(last)
    for row in table.to_pylist():
        f = last[row["vbucket"], row["collection_id"], row["key"]]
        assert (row["by_seqno"], row["cas"], row["body"]) == \
            (f.fields["by_seqno"], f.fields["cas"], f.body)
        assert (None if row["xattrs"] is None else dict(row["xattrs"])) == f.xattrs
    names = t.synthetic_manifest()["collections"]
    for row in table.to_pylist():
        assert row["collection"] == names[row["collection_id"]][1].decode()


# -- each rule, by hand --------------------------------------------------------------------


def test_updates_deletes_and_expirations():
    data = b"".join([
        marker(1, 6), mutation(b"a", 1), mutation(b"b", 2), mutation(b"a", 3),
        deletion(b"b", 4), mutation(b"c", 5),
        t.expiration(b"c", by_seqno=6, rev_seqno=1, cas=cas(6), delete_time=9, **HDR)])
    live = docs(dcpfast.state(data))
    assert set(live) == {b"a"} and live[b"a"]["body"] == b'{"v":3}'
    assert live[b"a"]["by_seqno"] == 3 and live[b"a"]["flags"] == 2
    every = docs(dcpfast.state(data, include_deleted=True))
    assert every[b"b"]["deleted"] and every[b"b"]["delete_time"] == cas(4) // 10**9
    assert every[b"b"]["flags"] is None and every[b"c"]["delete_time"] == 9


def test_durable_writes():
    prepare = dict(rev_seqno=1, durability_level=1, **HDR)
    data = b"".join([
        marker(1, 9), mutation(b"a", 1), mutation(b"d", 2),
        t.prepare(b"a", b'{"p":1}', by_seqno=3, cas=cas(3), datatype=1, flags=7, **prepare),
        t.prepare(b"b", b'{"p":2}', by_seqno=4, cas=cas(4), datatype=1, **prepare),
        t.prepare(b"d", b"", by_seqno=5, cas=cas(5), deleted=True, **prepare),
        t.commit(b"a", prepared_seqno=3, commit_seqno=6, **HDR),
        t.abort(b"b", prepared_seqno=4, abort_seqno=7, **HDR),
        t.commit(b"d", prepared_seqno=5, commit_seqno=8, **HDR),
        t.prepare(b"e", b"{}", by_seqno=9, cas=cas(9), **prepare)])    # still pending
    live = docs(dcpfast.state(data, include_deleted=True))
    assert set(live) == {b"a", b"d"}
    a = live[b"a"]
    assert (a["by_seqno"], a["cas"], a["body"], a["flags"], a["deleted"]) == \
        (6, cas(3), b'{"p":1}', 7, False)
    assert live[b"d"]["deleted"] and live[b"d"]["by_seqno"] == 8
    assert set(docs(dcpfast.state(data))) == {b"a"}


def test_collection_drop_and_flush():
    hdr = dict(scope_id=0, **HDR)
    data = b"".join([
        marker(1, 12),
        t.create_collection(b"fleet", by_seqno=1, manifest_uid=1, collection_id=8, **hdr),
        t.create_collection(b"crew", by_seqno=2, manifest_uid=2, collection_id=9, **hdr),
        mutation(b"a", 3, cid=8), mutation(b"b", 4, cid=9), mutation(b"c", 5, cid=0),
        t.drop_collection(by_seqno=6, manifest_uid=3, collection_id=8, **hdr),
        mutation(b"x", 7, cid=9),
        t.create_collection(b"crew", by_seqno=8, manifest_uid=4, collection_id=9,  # a flush
                            version=2, **hdr),
        mutation(b"y", 9, cid=9)])
    table = dcpfast.state(data)
    assert [(r["collection"], r["key"]) for r in table.to_pylist()] == \
        [("_default", b"c"), ("crew", b"y")]
    assert table.column("scope").to_pylist() == ["_default", "_default"]
    before = dcpfast.state(data, at_seqno=5)            # what the collection held
    assert [r["key"] for r in before.to_pylist()] == [b"c", b"a", b"b"]
    assert dcpfast.state(data, only_collections=["fleet"], at_seqno=5).column("key").to_pylist() \
        == [b"a"]
    assert dcpfast.state(data, only_collections=[9, "_default._default"]).num_rows == 2
    # with history: a version the flush ended lasts until the flush's seqno (whose time
    # the stream does not give), even where a later version of its document follows
    again = data + mutation(b"b", 10, cid=9)
    crew = [(r["key"], r["valid_from_seqno"], r["valid_to_seqno"], r["valid_to_time"])
            for r in dcpfast.state(again, history=True, only_collections=["crew"]).to_pylist()]
    assert crew == [(b"b", 4, 8, None), (b"b", 10, None, None), (b"x", 7, 8, None),
                    (b"y", 9, None, None)]


def test_history_versions_replaced_before_a_clear_end_at_their_successor():
    """Of a document's versions before its collection is flushed, only the one standing
    at the flush ends there; each earlier one ends where the next one begins."""
    hdr = dict(scope_id=0, **HDR)
    data = b"".join([
        marker(1, 6),
        t.create_collection(b"crew", by_seqno=1, manifest_uid=1, collection_id=9, **hdr),
        mutation(b"a", 2, cid=9), mutation(b"a", 3, cid=9), mutation(b"a", 4, cid=9),
        t.create_collection(b"crew", by_seqno=5, manifest_uid=2, collection_id=9,  # a flush
                            version=2, **hdr),
        mutation(b"a", 6, cid=9)])
    rows = dcpfast.state(data, history=True).to_pylist()
    assert [(r["by_seqno"], r["valid_to_seqno"]) for r in rows] == \
        [(2, 3), (3, 4), (4, 5), (6, None)]
    assert [r["valid_to_time"] for r in rows] == \
        [rows[1]["valid_from_time"], rows[2]["valid_from_time"], None, None]


def rollback(seqno, opaque=HDR["opaque"]):
    return t.response(dcpfast.Opcode.STREAM_REQUEST, status=Status.ROLLBACK,
                      value=struct.pack(">Q", seqno), opaque=opaque)


def success(opaque=HDR["opaque"]):
    return t.failover_log_response([(1, 0)], opaque=opaque)


def test_rollback_discards_above_its_seqno():
    data = b"".join([
        success(), marker(1, 3), mutation(b"a", 1), mutation(b"b", 2), mutation(b"a", 3),
        marker(4, 5), mutation(b"c", 4), mutation(b"d", 5),
        t.stream_end(**HDR), rollback(2), success(opaque=0x7777),
        marker(3, 4, opaque=0x7777), mutation(b"d", 3, opaque=0x7777, body=b"new"),
        mutation(b"e", 4, opaque=0x7777)])
    live = docs(dcpfast.state(data))
    # a@3 and c@4 are gone with the rollback, and a's version at 1 is current again
    assert {k: r["by_seqno"] for k, r in live.items()} == {b"a": 1, b"b": 2, b"d": 3, b"e": 4}
    assert live[b"d"]["body"] == b"new"
    assert live[b"a"]["body"] == dcpfast.state(data, at_seqno=1).column("body")[0].as_py()
    every = dcpfast.state(data, history=True).to_pylist()
    assert [(r["key"], r["by_seqno"], r["valid_to_seqno"]) for r in every] == \
        [(b"a", 1, None), (b"b", 2, None), (b"d", 3, None), (b"e", 4, None)]
    points = consistency(dcpfast.state(data))
    assert points.select(["vbucket", "consistent_seqno", "restored"]).to_pylist() == \
        [{"vbucket": VB, "consistent_seqno": 4, "restored": True}]
    # read once (an iterator of batches), the state cannot bring a@1 back and says so
    once = dcpfast.state(iter(list(dcpfast.iter_batches(data, 200))))
    assert set(docs(once)) == {b"b", b"d", b"e"}
    assert consistency(once).select(["vbucket", "consistent_seqno", "restored"]).to_pylist() \
        == [{"vbucket": VB, "consistent_seqno": 4, "restored": False}]
    # a list of batches can be read twice
    assert docs(dcpfast.state(list(dcpfast.iter_batches(data, 200)))) == live


def test_restart_brings_back_versions_cleared_and_cut():
    """A restart below a collection drop brings its documents back; a tombstone the
    restart discards brings back the version it deleted."""
    data = b"".join([
        success(), marker(1, 4), mutation(b"a", 1, cid=8), mutation(b"b", 2, cid=8),
        t.deletion(b"b", by_seqno=3, cas=cas(3), collection_id=8, **HDR),
        t.drop_collection(by_seqno=4, manifest_uid=2, scope_id=0, collection_id=8, **HDR),
        t.stream_end(**HDR), rollback(2), success(opaque=0x7777),
        marker(3, 3, opaque=0x7777), mutation(b"c", 3, cid=8, opaque=0x7777)])
    live = docs(dcpfast.state(data))
    assert {k: r["by_seqno"] for k, r in live.items()} == {b"a": 1, b"b": 2, b"c": 3}
    assert docs(dcpfast.state(data, history=True, include_deleted=True)).keys() == live.keys()


def test_restart_without_its_request():
    """The new stream starts above its first item less one: what the old one had above
    that is discarded, what it had below stays."""
    data = b"".join([
        marker(1, 4), mutation(b"a", 1), mutation(b"b", 2), mutation(b"c", 3),
        mutation(b"d", 4), t.stream_end(**HDR), success(opaque=0x42),
        marker(3, 5, opaque=0x42), mutation(b"c", 3, opaque=0x42, body=b"again"),
        mutation(b"e", 5, opaque=0x42)])
    live = docs(dcpfast.state(data))
    assert {k: r["by_seqno"] for k, r in live.items()} == {b"a": 1, b"b": 2, b"c": 3, b"e": 5}
    assert live[b"c"]["body"] == b"again"


def test_a_response_is_placed_by_its_opaques_first_message_however_far():
    """A response without its request waits for the first stream message with its opaque
    after it: here behind hundreds of another vbucket's messages, in one batch and in
    many."""
    other = dict(vbucket=9, opaque=0x1009)
    data = b"".join([
        marker(1, 4), mutation(b"a", 1), mutation(b"b", 2), mutation(b"c", 3),
        mutation(b"d", 4), t.stream_end(**HDR), marker(1, 700, **other),
        success(opaque=0x42),
        *(mutation(b"z%d" % i, i + 2, **other) for i in range(699)),
        marker(3, 5, opaque=0x42), mutation(b"c", 3, opaque=0x42, body=b"again"),
        mutation(b"e", 5, opaque=0x42)])
    for size in (len(data), 2048, 1 << 16):
        source = dcpfast.iter_batches(data, size)
        live = docs(dcpfast.state(source).filter(pa.compute.equal(
            pa.compute.field("vbucket"), VB)))
        assert {k: r["by_seqno"] for k, r in live.items()} == \
            {b"a": 1, b"b": 2, b"c": 3, b"e": 5}
        assert live[b"c"]["body"] == b"again"


def test_restart_with_its_request_and_several_vbuckets():
    other = dict(vbucket=9, opaque=0x1009)
    data = b"".join([
        marker(1, 2), marker(1, 1, **other), mutation(b"a", 1), mutation(b"z", 1, **other),
        mutation(b"b", 2), t.stream_end(**HDR),
        t.stream_request(start=1, vbucket=VB, opaque=0x99), success(opaque=0x99),
        marker(2, 2, opaque=0x99), mutation(b"c", 2, opaque=0x99)])
    table = dcpfast.state(data)
    assert [(r["vbucket"], r["key"]) for r in table.to_pylist()] == \
        [(VB, b"a"), (VB, b"c"), (9, b"z")]
    # a batch given to state is read, not written to (its rows are its own columns)
    batch = dcpfast.scan(data)
    before = {name: batch[name].copy() for name in batch.columns}
    assert dcpfast.state(batch).equals(table)
    assert all((batch[name] == column).all() for name, column in before.items())


def test_cut_points_inside_snapshots():
    data = b"".join([
        marker(1, 3), mutation(b"a", 1), mutation(b"b", 2), mutation(b"a", 3),
        marker(4, 6), mutation(b"c", 4), mutation(b"a", 5), mutation(b"b", 6)])
    at5 = dcpfast.state(data, at_seqno=5)
    assert {k: r["by_seqno"] for k, r in docs(at5).items()} == {b"a": 5, b"b": 2, b"c": 4}
    assert consistency(at5).to_pylist() == [{"vbucket": VB, "consistent_seqno": 3,
                                           "restored": True, "frames_lost": False,
                                           "starts_after": 0}]
    assert consistency(dcpfast.state(data)).column("consistent_seqno").to_pylist() == [6]
    at_time = dcpfast.state(data, at_time=cas(5) + 10**8)     # the clock's tick of seqno 5
    assert docs(at_time).keys() == docs(at5).keys()
    assert consistency(at_time).column("consistent_seqno").to_pylist() == [3]
    when = dt.datetime.fromtimestamp(cas(4) / 1e9, dt.timezone.utc)
    assert docs(dcpfast.state(data, at_time=when))[b"a"]["by_seqno"] == 3
    assert docs(dcpfast.state(data, at_time=when.isoformat()))[b"a"]["by_seqno"] == 3
    assert dcpfast.state(data, at_seqno={VB + 1: 100}).num_rows == 0


def test_history_versions():
    data = b"".join([marker(1, 4), mutation(b"a", 1), mutation(b"a", 2), deletion(b"a", 3),
                     mutation(b"a", 4)])
    rows = dcpfast.state(data, history=True, include_deleted=True).to_pylist()
    assert [(r["valid_from_seqno"], r["valid_to_seqno"], r["deleted"]) for r in rows] == \
        [(1, 2, False), (2, 3, False), (3, 4, True), (4, None, False)]
    times = dcpfast.state(data, history=True, include_deleted=True).column("valid_from_time")
    assert times.cast("int64").to_pylist()[0] == cas(1) & ~0xFFFF
    assert rows[0]["valid_to_time"] == rows[1]["valid_from_time"]
    assert rows[3]["valid_to_time"] is None
    live = dcpfast.state(data, history=True).column("valid_from_seqno").to_pylist()
    assert live == [1, 2, 4]


def test_oso_snapshots_are_not_in_seqno_order():
    data = b"".join([
        t.oso_snapshot(OsoFlag.START, **HDR), mutation(b"b", 5), mutation(b"a", 7),
        mutation(b"c", 6), t.oso_snapshot(OsoFlag.END, **HDR), marker(8, 8),
        mutation(b"a", 8)])
    table = dcpfast.state(data)
    assert {k: r["by_seqno"] for k, r in docs(table).items()} == {b"a": 8, b"b": 5, b"c": 6}
    assert not state_errors(table)


def test_a_snapshot_is_complete_only_when_its_oso_snapshot_ends():
    """Items of an OSO snapshot come in key order: the one with the marker's end seqno
    may come first, before the others."""
    start = [t.snapshot_marker(1, 6, SnapshotFlag.DISK, **HDR), mutation(b"x", 1),
             t.oso_snapshot(OsoFlag.START, **HDR), mutation(b"b", 6), mutation(b"a", 3)]
    cut = dcpfast.state(b"".join(start))
    assert consistency(cut).column("consistent_seqno").to_pylist() == [0]
    ended = dcpfast.state(b"".join([*start, t.oso_snapshot(OsoFlag.END, **HDR)]))
    assert consistency(ended).column("consistent_seqno").to_pylist() == [6]
    short = dcpfast.state(b"".join([*start[:-2], mutation(b"a", 3),
                                    t.oso_snapshot(OsoFlag.END, **HDR)]))
    assert consistency(short).column("consistent_seqno").to_pylist() == [0]


def test_schema_names_and_values_off():
    data = b"".join([marker(1, 2), mutation(b"\xff\xfe", 1), mutation(b"ok", 2)])
    table = dcpfast.state(data)
    assert table.schema.remove_metadata() == state_schema()
    assert set(table.column("key_str").to_pylist()) == {"ok", None}
    bare = dcpfast.state(data, values=False, history=True)
    assert bare.schema.remove_metadata() == state_schema(values=False, history=True)


def test_metadata_survives_parquet(tmp_path):
    table = dcpfast.state(dcpfast.testing.SAMPLE)
    pq.write_table(table, tmp_path / "s.parquet")
    back = pq.read_table(tmp_path / "s.parquet")
    assert consistency(back).equals(consistency(table)) and state_errors(back) == []
    assert len(consistency(table)) == 4


def test_sources():
    data = dcpfast.testing.SAMPLE.read_bytes()
    whole = dcpfast.state(data)
    for source in (dcpfast.testing.SAMPLE, str(dcpfast.testing.SAMPLE), memoryview(data),
                   dcpfast.scan(data), dcpfast.iter_batches(data, 5000, collections=True),
                   list(dcpfast.iter_batches(dcpfast.testing.SAMPLE, 20000, collections=True))):
        assert dcpfast.state(source).equals(whole, check_metadata=True)


def test_a_capture_gives_the_state_of_its_dump():
    frames = t.synthetic_frames(600, seed=3, sync_writes=True)
    dump = b"".join(f.data for f in frames)
    capture = t.pcap_file(t.tcp_packets(t.tcp_conversation(b"", dump, sizes=(700, 1448))))
    batches = [b for b in read_pcap(io.BytesIO(capture), batch_bytes=4000)
               if b.connection.direction == "server->client"]
    assert dcpfast.state(batches).equals(dcpfast.state(dump), check_metadata=True)


# -- chunks -----------------------------------------------------------------------------


def chunks(data: bytes, size: int, **options) -> list:
    """The batches of ``iter_batches`` of ``size`` bytes, as a list (read twice where a
    restart needs it; the collections setting given, or the first batch would take a
    whole MiB to decide it)."""
    collections = dcpfast.scan(data, errors="skip").collections
    return list(dcpfast.iter_batches(data, size, collections=collections, **options))


def rows_outside(table, vbuckets) -> list:
    """The rows of ``table`` outside ``vbuckets``."""
    return [r for r in table.to_pylist() if r["vbucket"] not in vbuckets]


@pytest.mark.parametrize("seed", range(4))
def test_history_read_in_pieces_is_the_model(seed):
    """Every version over small batches, values included (prepares waiting across
    batches, restarts in some): the bodies and xattrs are the model's, as over the whole
    stream."""
    data = scenario(seed + 60, restarts=0.2 * (seed % 2), vbuckets=2)
    frames, bodies = decoded(data)
    for options in ({}, {"at_time": CAS_EPOCH + 6 * 10**11}):
        want, _, _ = model(frames, bodies, history=True, **options)
        for size in (300, 2000):
            table = dcpfast.state(chunks(data, size, errors="skip"), errors="skip",
                                  history=True, include_deleted=True, **options)
            assert rows_of(table, history=True) == expected(want, history=True), (size,
                                                                                  options)


@pytest.mark.parametrize("seed", range(6))
def test_chunked_equals_whole(seed, monkeypatch):
    monkeypatch.setattr(state_versions, "MERGE_FLOOR", 4)       # merge runs often
    data = scenario(seed, restarts=0.2, requests=seed % 2 == 1, stream_ids=seed == 5)
    unrestored = 0
    for options in ({}, {"history": True}, {"include_deleted": True, "at_seqno": 30},
                    {"at_time": CAS_EPOCH + 4 * 10**11}):
        whole = dcpfast.state(data, errors="skip", **options)
        # 24 bytes: a frame at a time (for one set of options: it is slow)
        for size in (24, 150, 900, 4000) if not options else (150, 900, 4000):
            batches = chunks(data, size, errors="skip")
            part = dcpfast.state(batches, errors="skip", **options)
            assert part.equals(whole, check_metadata=True), (size, options)
            once = dcpfast.state(iter(batches), errors="skip", **options)   # read once
            lost = {p["vbucket"] for p in consistency(once).to_pylist() if not p["restored"]}
            assert rows_outside(once, lost) == rows_outside(whole, lost), (size, options)
            unrestored += bool(lost)
    assert unrestored or seed == 5, "no restart lost a version: the once-read is untested"


# -- bad input ---------------------------------------------------------------------------


def test_commit_without_its_prepare():
    commit = t.commit(b"a", prepared_seqno=2, commit_seqno=3, **HDR)
    data = b"".join([marker(1, 3), mutation(b"a", 1), commit, marker(4, 4),
                     mutation(b"b", 4)])
    at = data.index(commit)
    with pytest.raises(DcpFormatError) as e:
        dcpfast.state(data)
    assert e.value.offset == at and "no such prepare" in e.value.reason
    table = dcpfast.state(data, errors="skip")
    assert [r.offset for r in state_errors(table)] == [at]
    assert docs(table)[b"a"]["by_seqno"] == 1          # the version before stays


def test_a_commit_pairs_with_the_prepare_at_its_prepared_seqno():
    """A commit makes its prepare the document's version only when the prepare pending
    has the commit's prepared seqno: another is not the one it commits."""
    prepare = dict(rev_seqno=1, durability_level=1, **HDR)
    wrong = t.commit(b"a", prepared_seqno=1, commit_seqno=3, **HDR)
    data = b"".join([marker(1, 5), mutation(b"a", 1),
                     t.prepare(b"a", b'{"p":2}', by_seqno=2, cas=cas(2), datatype=1, **prepare),
                     wrong,
                     t.prepare(b"b", b'{"p":4}', by_seqno=4, cas=cas(4), datatype=1, **prepare),
                     t.commit(b"b", prepared_seqno=4, commit_seqno=5, **HDR)])
    with pytest.raises(DcpFormatError) as e:
        dcpfast.state(data)
    assert e.value.offset == data.index(wrong) and "seqno 1" in e.value.reason
    table = dcpfast.state(data, errors="skip")
    assert [r.offset for r in state_errors(table)] == [data.index(wrong)]
    live = docs(table)
    assert live[b"a"]["by_seqno"] == 1 and live[b"a"]["body"] == b'{"v":1}'
    assert live[b"b"]["by_seqno"] == 5 and live[b"b"]["body"] == b'{"p":4}'


def test_a_time_cut_leaves_out_the_change_at_its_own_seqno():
    """Inside an OSO snapshot the cut is the lowest seqno of a change past the time; a
    change kept earlier at that very seqno is past the cut too (changes from the cut's
    seqno on are out)."""
    data = b"".join([
        t.oso_snapshot(OsoFlag.START, **HDR), mutation(b"a", 6), mutation(b"b", 4),
        t.mutation(b"c", b"{}", by_seqno=6, cas=cas(9), **HDR), mutation(b"d", 7),
        t.oso_snapshot(OsoFlag.END, **HDR)])
    table = dcpfast.state(data, at_time=cas(8))
    assert {k: r["by_seqno"] for k, r in docs(table).items()} == {b"b": 4}
    every = dcpfast.state(data, at_time=cas(8), history=True)
    assert every.column("by_seqno").to_pylist() == [4]


def test_seqno_going_backwards():
    late = mutation(b"a", 2, body=b"late")
    data = b"".join([marker(1, 5), mutation(b"a", 1), mutation(b"b", 3), late,
                     mutation(b"c", 5)])
    with pytest.raises(DcpFormatError) as e:
        dcpfast.state(data)
    assert e.value.offset == data.index(late) and "does not exceed" in e.value.reason
    table = dcpfast.state(data, errors="skip")
    assert docs(table)[b"a"]["body"] == b'{"v":1}'     # the change is left out


def test_event_that_does_not_decode():
    bad = t.system_event(1, by_seqno=2, version=0, value=b"\x00" * 5, **HDR)
    data = b"".join([marker(1, 3), mutation(b"a", 1, cid=8), bad, mutation(b"b", 3, cid=8)])
    with pytest.raises(DcpFormatError) as e:
        dcpfast.state(data)
    assert e.value.offset == data.index(bad)
    table = dcpfast.state(data, errors="skip")
    assert [r.offset for r in state_errors(table)] == [data.index(bad)]
    assert set(docs(table)) == {b"a", b"b"}            # nothing was dropped


def test_rollback_that_nothing_places():
    data = b"".join([marker(1, 1), mutation(b"a", 1), rollback(0, opaque=0x5151)])
    with pytest.raises(DcpFormatError) as e:
        dcpfast.state(data)
    assert e.value.offset == len(data) - 32
    assert len(state_errors(dcpfast.state(data, errors="skip"))) == 1


def test_damaged_values_and_frames():
    broken = t.mutation(b"z", b"\xff\xff\xff\xff\x0f", by_seqno=2, cas=cas(2), datatype=2, **HDR)
    data = b"".join([marker(1, 3), mutation(b"a", 1), broken, mutation(b"b", 3)])
    with pytest.raises(DcpFormatError):
        dcpfast.state(data)
    table = dcpfast.state(data, errors="skip")
    assert docs(table)[b"z"]["body"] is None and len(state_errors(table)) == 1
    every = dcpfast.state(data, errors="skip", history=True).to_pylist()
    assert [(r["key"], r["body"]) for r in every] == [(b"a", b'{"v":1}'), (b"b", b'{"v":3}'),
                                                      (b"z", None)]
    cut = data + b"\x80\x57garbage"
    with pytest.raises(DcpFormatError):
        dcpfast.state(cut)
    assert docs(dcpfast.state(cut, errors="skip")).keys() == {b"a", b"z", b"b"}


def test_each_kind_of_damage_is_reported_once_and_the_batch_left_alone():
    """A damaged value, a system event that does not decode, a Rollback response whose
    value is not a seqno and bytes the scan skipped, in one batch: the state lists each
    once under its kind, in stream order (strict mode raises the first), and the batch
    keeps only what the scan skipped."""
    broken = t.mutation(b"z", b"\xff\xff\xff\xff\x0f", by_seqno=3, cas=cas(3), datatype=2,
                        **HDR)
    event = t.system_event(0, by_seqno=2, key=b"c", value=bytes(3), **HDR)
    answer = t.response(dcpfast.Opcode.STREAM_REQUEST, status=Status.ROLLBACK,
                        value=b"\x00" * 3, opaque=HDR["opaque"])
    parts = [marker(1, 5), mutation(b"a", 1), event, broken, answer, b"\x99" * 30,
             mutation(b"b", 4)]
    data = b"".join(parts)
    starts = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    batch = dcpfast.scan(data, collections=False, errors="skip", final=True)
    scanned = list(batch.errors)
    assert [r.offset for r in scanned] == [starts[5]]
    builder = StateBuilder(errors="skip").update(batch)
    assert batch.errors == scanned
    table = builder.table()
    assert [r.offset for r in state_errors(table)] == starts[2:6]
    assert metadata(table)["error_counts"] == {
        "damaged_event": 1, "damaged_value": 1, "malformed_response": 1, "skipped_bytes": 1}
    assert batch.errors == scanned
    for first in (2, 3, 4):           # strict: the first in stream order, whatever its kind
        kept = [parts[0], parts[1], *parts[first:5], parts[6]]
        with pytest.raises(DcpFormatError) as e:
            StateBuilder().update(dcpfast.scan(b"".join(kept), collections=False))
        assert e.value.offset == starts[2]


def test_strict_state_of_a_skip_scan_raises():
    batch = dcpfast.scan(dcpfast.testing.SAMPLE.read_bytes() + b"\x00" * 30, errors="skip",
                         final=True)
    assert batch.errors
    with pytest.raises(DcpFormatError):
        dcpfast.state(batch)
    assert state_errors(dcpfast.state(batch, errors="skip")) == batch.errors


def test_empty_and_frameless_input():
    table = dcpfast.state(t.noop())
    assert table.num_rows == 0 and consistency(table).num_rows == 0
    assert isinstance(table, pa.Table)


# -- memory: the live documents and one batch ------------------------------------------------


def churn(changes: int, *, keys: int = 100, size: int = 1000, hostile: bool = False) -> bytes:
    """``changes`` mutations of ``keys`` documents of ``size`` bytes, in snapshots of 10;
    ``hostile``: each snapshot also holds a prepare never committed and a collection
    flush, and a Rollback response follows it."""
    out, body = [], b"x" * size
    for s in range(0, changes, 10):
        out.append(marker(s + 1, s + 10))
        for seqno in range(s + 1, s + 11):
            if hostile and seqno % 10 == 8:
                out.append(t.prepare(b"p%d" % (s % keys), body, by_seqno=seqno, cas=cas(s),
                                     **HDR))
            elif hostile and seqno % 10 == 9:
                out.append(t.create_collection(b"c", by_seqno=seqno, manifest_uid=1,
                                               scope_id=0, collection_id=8, **HDR))
            else:
                out.append(mutation(b"k%d" % (seqno % keys), seqno, body))
        if hostile:                 # the stream rolls back to where it is, and goes on
            out.append(rollback(s + 10))
    return b"".join(out)


@pytest.mark.parametrize("options", [{}, {"hostile": True}])
def test_memory_is_the_live_documents_and_a_batch(options, monkeypatch):
    from tests.memory import peak_allocation

    monkeypatch.setattr(state_versions, "MERGE_FLOOR", 64)          # the floors are
    monkeypatch.setattr(state_versions, "MERGE_FLOOR_BYTES", 64 << 10)   # constants
    peaks = []
    dcpfast.state(churn(100))                                       # imports done
    for changes in (2_000, 16_000):
        data = churn(changes, **options)
        table, peak = peak_allocation(lambda: dcpfast.state(dcpfast.iter_batches(
            data, 64 << 10, collections=bool(options)), errors="skip"))
        assert table.num_rows in (100, 80) and not state_errors(table)
        peaks.append(peak)
    # eight times the changes, the same documents: the peak stays (not 8x)
    assert peaks[1] < 1.5 * peaks[0] + (1 << 20), peaks


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer's quarantine keeps freed memory resident")
def test_rss_of_a_large_dump_is_its_live_documents(tmp_path):
    """In a child process: 16x the versions of the same documents read from a file cost
    about the same resident memory."""
    import subprocess
    import sys

    code = ("import re, sys, dcpfast\n"
            "t = dcpfast.state(sys.argv[1], batch_bytes=1 << 20)\n"
            "assert t.num_rows == 100\n"
            "status = open('/proc/self/status').read()\n"
            "print(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1))\n")
    rss = []
    for changes in (5_000, 80_000):
        path = tmp_path / f"{changes}.dcp"
        path.write_bytes(churn(changes, size=2000))
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                             text=True, check=True)
        rss.append(int(out.stdout) * 1024)
    assert rss[1] - rss[0] < 48 << 20, rss       # the big dump is 160 MB


# -- mutated streams: only DcpFormatError, and skip mode always answers -------------------


def mutated(data: bytes, seed: int) -> bytes:
    """``data`` with frames dropped, repeated and swapped, and bytes flipped or cut."""
    import random

    rng = random.Random(seed)
    offsets = dcpfast.scan(data)["offset"].tolist() + [len(data)]
    frames = [data[a:b] for a, b in zip(offsets, offsets[1:])]
    for _ in range(rng.randint(1, 6)):
        i, j = rng.randrange(len(frames)), rng.randrange(len(frames))
        action = rng.choice(("drop", "repeat", "swap", "flip"))
        if action == "drop":
            del frames[i]
        elif action == "repeat":
            frames.insert(j, frames[i])
        elif action == "swap":
            frames[i], frames[j] = frames[j], frames[i]
        else:
            frame = bytearray(frames[i])
            frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)
            frames[i] = bytes(frame)
    out = b"".join(frames)
    return out[:rng.randrange(len(out))] if rng.random() < 0.2 else out


@pytest.mark.parametrize("seed", range(40))
def test_mutated_streams(seed):
    data = mutated(scenario(seed, snapshots=12, restarts=0.2), seed)
    for options in ({}, {"history": True, "at_time": CAS_EPOCH + 2 * 10**11}):
        try:
            dcpfast.state(data, **options)
        except DcpFormatError:
            pass
        table = dcpfast.state(data, errors="skip", **options)
        table.validate(full=True)
        chunked = dcpfast.state(chunks(data, 700, errors="skip"), errors="skip", **options)
        assert chunked.num_rows == table.num_rows
