"""``mirror.tail``: a later run reads the stream on from where the last one stood and
builds the state of the new frames alone; after every such run the table is the model's
state at each vbucket's consistent seqno, as one run over everything makes it. New
frames that cannot be applied alone (a restart without its vbucket, stream ids, inputs
grown before their end) make the run read everything again."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t
from dcpfast.events import Manifest
from dcpfast.mirror import mirror
from dcpfast.mirror.inputs import whole_frames
from dcpfast.mirror.tail import Tail, above, frames_of, unfinished
from dcpfast.protocol import Opcode, Status, StreamEndStatus
from tests.mirror.test_api import grow, held, held_history, wanted, wanted_history
from tests.state_scenarios import scenario

pytest.importorskip("deltalake")

#: Streams whose new frames go on from where they stood: no restart but where it stood
#: (a consumer that reconnects), no stream ids.
GOING_ON = [dict(restarts=0.0, vbuckets=3), dict(restarts=0.0, collections=False),
            dict(restarts=0.0, vbuckets=1, sync=True),
            dict(restarts=0.3, resumes=1.0, collections=False, vbuckets=2)]


def test_a_tail_is_plain_json():
    manifest = Manifest()
    manifest.scopes[8], manifest.collections[9], manifest.collection_scopes[9] = \
        "s", "c", 8
    manifest.uid = 5
    tail = Tail(10, {3: 10, 700: 25}, [4], manifest, True, 40)
    again = Tail.from_json(tail.to_json())
    assert again == tail and again.manifest.collections[9] == "c"


def test_a_stream_that_ends_inside_a_snapshot_is_unfinished():
    def stream(items: int, vbucket: int = 5) -> bytes:
        return t.snapshot_marker(1, 3, vbucket=vbucket) + b"".join(
            t.mutation(b"k%d" % i, b"{}", by_seqno=i, vbucket=vbucket)
            for i in range(1, items + 1))
    done = stream(3, 6)
    assert not unfinished(frames_of(done, False))
    assert unfinished(frames_of(done + stream(2), False))
    assert not unfinished(frames_of(done + stream(3), False))
    assert above(frames_of(done, False), {6: 2}) and not above(frames_of(done, False), {6: 3})


@pytest.mark.parametrize("seed", range(4))
def test_later_runs_read_only_what_is_new(seed, tmp_path):
    rng = random.Random(seed)
    data = t.synthetic_stream(3000, seed=seed, vbuckets=3, sync_writes=seed % 2 == 0)
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    ends = sorted(rng.sample(range(1, len(data)), 9)) + [len(data)]
    read, before, rebuilt = [], 0, 0
    for end in ends:
        grow(dump, data, end)
        run = mirror(dump, uri)
        applied = end - run.waiting
        assert held(uri) == wanted(data[:applied])
        read.append((run.read, applied - before))
        before, rebuilt = applied, rebuilt + applied
    # each later run reads the new bytes and a little before them, not the whole stream
    assert all(got < new + len(data) // 4 for got, new in read[1:]), read
    assert sum(got for got, _ in read) < rebuilt / 2    # runs that read everything again


@given(st.lists(st.integers(1, 2**31), min_size=2, max_size=6), st.integers(0, 3),
       st.integers(0, 5))
@settings(max_examples=15, deadline=None)
def test_every_run_reading_on_is_the_model(tmp_path_factory, picks, which, seed):
    tmp = tmp_path_factory.mktemp("tail")
    data = scenario(930 + seed, **GOING_ON[which])
    dump, uri = tmp / "d.dcp", str(tmp / "t.delta")
    for end in sorted({p % len(data) for p in picks}) + [len(data)]:
        grow(dump, data, end)
        run = mirror(dump, uri)
        assert held(uri) == wanted(data[:end - run.waiting])


def reconnected(how: str) -> tuple[bytes, bytes]:
    """A vbucket's stream up to seqno 3 and the frames after it: its consumer reconnects
    where it stood (``resume``), lower (``lower``: seqno 2 sent again), or is told to
    roll back to 2 first (``rollback``); then the stream goes on to seqno 6."""
    def items(first: int, last: int) -> bytes:
        return b"".join(t.mutation(b"k%d" % (s % 3), b'{"v":%d}' % s, by_seqno=s, vbucket=5,
                                   opaque=7, datatype=1) for s in range(first, last + 1))
    before = t.snapshot_marker(1, 3, vbucket=5, opaque=7) + items(1, 3)
    start = {"resume": 3, "lower": 1, "rollback": 2}[how]
    after = t.stream_end(StreamEndStatus.CLOSED, vbucket=5, opaque=7)
    if how == "rollback":
        after += t.response(Opcode.STREAM_REQUEST, status=Status.ROLLBACK, opaque=7,
                            value=struct.pack(">Q", 2))
    after += t.stream_request(start=start, vbucket=5, opaque=8) + \
        t.failover_log_response([(99, 0)], opaque=8) + \
        t.snapshot_marker(start + 1, 6, vbucket=5, opaque=8) + items(start + 1, 6)
    return before, after


def two_runs(before: bytes, after: bytes, history: bool, tmp_path):
    """A run over ``before``, then one over ``before + after`` (with a history table
    where asked), whose tables are then the model's: the stream and the later run."""
    data = before + after
    dump, uri, versions = tmp_path / "d.dcp", str(tmp_path / "t.delta"), \
        str(tmp_path / "h.delta") if history else None
    grow(dump, data, len(before))
    mirror(dump, uri, history=versions)
    grow(dump, data, len(data))
    run = mirror(dump, uri, history=versions)
    assert held(uri) == wanted(data) and run.waiting == 0
    if history:
        assert held_history(versions) == wanted_history(data)
    return data, run


@pytest.mark.parametrize("how", ["resume", "lower", "rollback"])
@pytest.mark.parametrize("history", [False, True])
def test_a_consumer_that_reconnects_where_it_stood_reads_on(how, history, tmp_path):
    """A stream restarted where it stood goes on from there; one that sends again what
    was applied, or a Rollback, makes the run read the stream from its start and build
    that vbucket anew (with a history table, everything again): each is the model."""
    before, after = reconnected(how)
    data, run = two_runs(before, after, history, tmp_path)
    assert {r["key"]: r["by_seqno"] for r in
            dcpfast.state(data).select(["key", "by_seqno"]).to_pylist()} == \
        {b"k0": 6, b"k1": 4, b"k2": 5}
    assert run.read == (len(after) if how == "resume" else len(data))
    assert run.rebuilt == ([5] if how != "resume" and not history else [])


@pytest.mark.parametrize("seed", range(5))
def test_a_rollback_builds_its_vbuckets_anew_and_the_others_read_on(seed, tmp_path):
    """Streams that roll back and restart lower, read in steps: every run is the model;
    the runs that meet a rollback build only the vbuckets it rolled back anew."""
    data = scenario(7000 + seed, restarts=0.2, vbuckets=3, collections=False,
                    requests=seed % 2 == 1)
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    rebuilt = []
    for end in sorted(random.Random(seed).sample(range(1, len(data)), 6)) + [len(data)]:
        grow(dump, data, end)
        run = mirror(dump, uri)
        assert held(uri) == wanted(data[:end - run.waiting])
        rebuilt += [run.rebuilt]
    assert any(0 < len(vbuckets) < 3 for vbuckets in rebuilt), rebuilt


@pytest.mark.parametrize("seed", range(6))
def test_reconnects_read_again_behind_their_start_go_on(seed, tmp_path):
    """Streams that reconnect where they stood, read in steps: every run is the model,
    and most later runs read on, Stream Requests among the bytes they read."""
    data = scenario(970 + seed, restarts=0.3, resumes=1.0, collections=False, vbuckets=2)
    batch = dcpfast.scan(data)
    asked = batch["offset"][batch["opcode"] == Opcode.STREAM_REQUEST].astype(np.int64)
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    ends = sorted(random.Random(seed).sample(range(1, len(data)), 6)) + [len(data)]
    on = 0
    for i, end in enumerate(ends):
        grow(dump, data, end)
        run = mirror(dump, uri)
        assert held(uri) == wanted(data[:end - run.waiting])
        on += i > 0 and run.read < end and bool(((asked >= end - run.read) & (asked < end)).any())
    assert on >= 3


def _split(data: bytes, opcode: int, magic: int) -> int:
    """The offset of the first frame of ``opcode`` and ``magic`` after a tenth of
    ``data``."""
    batch = dcpfast.scan(data)
    at = np.flatnonzero((batch["opcode"] == opcode) & (batch["magic"] == magic) &
                        (batch["offset"] > len(data) // 10))
    assert len(at)
    return int(batch["offset"][at[0]])


@pytest.mark.parametrize("what", ["restart", "stream ids"])
def test_new_frames_that_cannot_go_on_make_the_run_read_everything(what, tmp_path):
    options = {"restart": dict(restarts=0.3),
               "stream ids": dict(restarts=0.0, stream_ids=True)}[what]
    data = scenario(940, **options)
    cut = _split(data, 0x53, 0x81) if what == "restart" else len(data) // 2
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    grow(dump, data, cut)
    mirror(dump, uri)
    grow(dump, data, len(data))
    run = mirror(dump, uri)
    assert held(uri) == wanted(data)
    assert run.read == len(data)


def emptied(how: str) -> tuple[bytes, bytes]:
    """Vbucket 5's stream: collection 8 created, k0..k2 written in it and d0 in the
    default collection; then the frames after it: collection 8 dropped (``drop``), or
    flushed and k9 written in it (``flush``), or dropped and the stream restarted below
    the drop (``restart``: the drop discarded, k1 written again)."""
    hdr = dict(vbucket=5, opaque=7)

    def put(key: bytes, seqno: int, cid: int = 8) -> bytes:
        return t.mutation(key, b'{"v":%d}' % seqno, by_seqno=seqno, collection_id=cid,
                          datatype=1, **hdr)
    before = t.snapshot_marker(1, 5, **hdr) + t.create_collection(
        b"c8", by_seqno=1, manifest_uid=1, scope_id=0, collection_id=8, **hdr) + \
        b"".join(put(b"k%d" % i, 2 + i) for i in range(3)) + put(b"d0", 5, 0)
    clear = t.drop_collection(by_seqno=7, manifest_uid=2, scope_id=0, collection_id=8,
                              **hdr) if how != "flush" else t.create_collection(
        b"c8", by_seqno=7, manifest_uid=2, scope_id=0, collection_id=8, version=2, **hdr)
    after = t.snapshot_marker(6, 8, **hdr) + put(b"d1", 6, 0) + clear + \
        (put(b"k9", 8) if how == "flush" else put(b"d2", 8, 0))
    if how == "restart":
        after += t.stream_end(StreamEndStatus.CLOSED, **hdr) + \
            t.stream_request(start=6, vbucket=5, opaque=9) + \
            t.failover_log_response([(99, 0)], opaque=9) + \
            t.snapshot_marker(7, 7, vbucket=5, opaque=9) + \
            t.mutation(b"k1", b"{}", by_seqno=7, collection_id=8, vbucket=5, opaque=9)
    return before, after


@pytest.mark.parametrize("how", ["drop", "flush", "restart"])
@pytest.mark.parametrize("history", [False, True])
def test_a_collection_emptied_in_the_new_frames_reads_on(how, history, tmp_path):
    """A drop or flush in the new frames: the run reads them alone and deletes what the
    table held of the collection (its documents written after a flush stay), and ends
    their versions in the history at the clear; a restart below the drop, which discards
    it, builds the vbucket anew (with a history table, everything again)."""
    before, after = emptied(how)
    data, run = two_runs(before, after, history, tmp_path)
    keys = sorted(r["key"] for r in dcpfast.state(data).select(["key"]).to_pylist())
    assert keys == {"drop": [b"d0", b"d1", b"d2"], "flush": [b"d0", b"d1", b"k9"],
                    "restart": [b"d0", b"d1", b"k0", b"k1", b"k2"]}[how]
    assert run.read == (len(after) if how != "restart" else len(data))
    assert run.rebuilt == ([5] if how == "restart" and not history else [])
    assert run.deleted == (3 if how != "restart" else 0)


@pytest.mark.parametrize("seed", range(6))
def test_collections_dropped_and_flushed_read_on(seed, tmp_path):
    """Streams that create, drop and flush collections as they go (restarts among them
    in half), read in steps, the last two with a history table: every run is the model,
    and later runs read on (without restarts, most of them)."""
    data = scenario(990 + seed, vbuckets=2, restarts=0.2 if seed % 2 else 0.0,
                    resumes=0.5)
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    versions = str(tmp_path / "h.delta") if seed >= 4 else None
    ends = sorted(random.Random(seed).sample(range(1, len(data)), 7)) + [len(data)]
    on = 0
    for i, end in enumerate(ends):
        grow(dump, data, end)
        run = mirror(dump, uri, history=versions)
        assert held(uri) == wanted(data[:end - run.waiting])
        if versions is not None:
            assert held_history(versions) == wanted_history(data[:end - run.waiting])
        on += i > 0 and run.read < end - run.waiting
    assert on >= (1 if seed % 2 else 4)


def test_new_dumps_in_a_directory_are_read_alone(tmp_path):
    data = t.synthetic_stream(4000, seed=7, vbuckets=2)
    folder = tmp_path / "dumps"
    folder.mkdir()
    uri = str(tmp_path / "t.delta")
    bounds = [0, *sorted(random.Random(7).sample(range(1, len(data)), 5)), len(data)]
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        (folder / f"dump-{i:03d}.dcp").write_bytes(data[lo:hi])   # cut mid-frame: one stream
        run = mirror(folder, uri)
        assert held(uri) == wanted(data[:whole_frames(data[:hi])])
        if i:
            assert run.read < hi - lo + len(data) // 10


def test_a_dump_before_the_last_that_grew_is_read_again_whole(tmp_path):
    data = t.synthetic_stream(2000, seed=8, vbuckets=2)
    folder = tmp_path / "dumps"
    folder.mkdir()
    uri = str(tmp_path / "t.delta")
    a = whole_frames(data[:len(data) // 3])
    (folder / "a.dcp").write_bytes(data[:a // 2])
    (folder / "b.dcp").write_bytes(b"")
    mirror(folder, uri)
    with open(folder / "a.dcp", "ab") as f:      # the earlier dump grows: not a tail
        f.write(data[a // 2:a])
    (folder / "b.dcp").write_bytes(data[a:])
    run = mirror(folder, uri)
    assert run.read == whole_frames(data)
    assert held(uri) == wanted(data[:run.read])


@pytest.mark.parametrize("seed", range(4))
def test_the_history_read_on_is_every_version(seed, tmp_path):
    rng = random.Random(seed)
    data = t.synthetic_stream(2000, seed=20 + seed, vbuckets=2, sync_writes=seed != 1) \
        if seed < 3 else scenario(975, restarts=0.3, resumes=1.0, collections=False,
                                  vbuckets=2, snapshots=60)       # reconnects
    dump, uri, versions = tmp_path / "d.dcp", str(tmp_path / "t.delta"), \
        str(tmp_path / "h.delta")
    read, ends = [], sorted(rng.sample(range(1, len(data)), 5)) + [len(data)]
    for end in ends:
        grow(dump, data, end)
        run = mirror(dump, uri, history=versions)
        applied = end - run.waiting
        assert held_history(versions) == wanted_history(data[:applied])
        assert held(uri) == wanted(data[:applied])
        read.append(run.read)
    # the runs after the first read on (a prepare waiting for its commit keeps its
    # snapshot to be read again: across reconnects, long waits)
    assert sum(read) < (1.5 * len(data) if seed < 3 else 0.8 * sum(ends)), read
