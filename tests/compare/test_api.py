"""dcpfast.diff: two buckets compared, held against the plain-Python model (diff_model) on
random conversations and targets derived from them with hidden changes (diff_scenarios);
chunked against whole, one thread against two; what a side cannot vouch for; bad input."""

from __future__ import annotations

import io

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t
from dcpfast.compare import (
    DEFAULT_FIELDS,
    FIELDS,
    diff_errors,
    diff_schema,
    summary,
    summary_schema,
)
from dcpfast.documents import consistency
from dcpfast.documents.output import metadata
from dcpfast.errors import DcpFormatError
from dcpfast.pcap import read_pcap
from dcpfast.protocol import FEATURE_COLLECTIONS, Opcode, SnapshotFlag, SystemEventId
from tests.diff_model import diff as model_diff
from tests.diff_scenarios import SOURCE_NAMES, derive, documents, source
from tests.state_scenarios import scenario


def pair(seed: int, **options):
    """(source bytes, its model side, target, its model side)."""
    data = source(seed, **options)
    docs, points = documents(data)
    target = derive(docs, seed)
    tdocs, tpoints = documents(target.data)
    return data, (docs, points, SOURCE_NAMES), target, (tdocs, tpoints, target.names)


@pytest.fixture(scope="module")
def pairs():
    return [pair(seed) for seed in range(3)] + [pair(3, collections=False, items=200)]


def check(table, want):
    rows, counts = want
    assert table.schema.equals(diff_schema())
    assert table.to_pylist() == rows
    assert summary(table).to_pylist() == counts


OPTIONS = [{}, {"include_deleted": True}, {"fields": FIELDS},
           {"fields": ("cas", "rev_seqno"), "include_deleted": True},
           {"fields": ("flags", "deleted")},
           {"only_collections": ["inventory.hotel", "route"]}]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_diff_is_the_model(pairs, options):
    for data, mine, target, theirs in pairs:
        check(dcpfast.diff(data, target.data, **options), model_diff(mine, theirs, **options))


def test_the_model_finds_what_was_planted(pairs):
    """The hidden changes come out as they were made: the model (and so the diff) is not
    vacuous."""
    expect = {"same": "equal", "compressed": "equal", "cas": "equal", "body": ["body"],
              "flags": ["flags"], "expiration": ["expiration"], "deleted": "missing",
              "dropped": "missing", "added": "missing_from_source"}
    seen = set()
    for data, mine, target, theirs in pairs[:3]:
        table = dcpfast.diff(data, target.data)
        rows = {(r["scope"], r["collection"], r["key"]): r for r in table.to_pylist()}
        live = {(*SOURCE_NAMES[cid], key) for (_, cid, key), v in mine[0].items()
                if not v["deleted"]}
        for ident, change in target.planted.items():
            row, want = rows.get(ident), expect.get(change)
            if want is None or (ident not in live and change != "added"):
                continue
            seen.add(change)
            if want == "equal":
                assert row is None, (change, row)
            elif want == "missing":
                assert row["kind"] == "missing_from_target", change
            elif want == "missing_from_source":
                assert row["kind"] == want
            else:
                assert row["kind"] == "mismatch" and row["fields"] == want, (change, row)
        with_cas = dcpfast.diff(data, target.data, fields=[*DEFAULT_FIELDS, "cas"])
        cas_rows = {(r["scope"], r["collection"], r["key"]) for r in with_cas.to_pylist()
                    if r["fields"] and "cas" in r["fields"]}
        assert cas_rows == {i for i, c in target.planted.items() if c == "cas" and i in live}
    assert seen == set(expect)


def test_chunked_and_threads_are_whole(pairs):
    data, _, target, _ = pairs[0]
    whole = dcpfast.diff(data, target.data, threads=1)
    assert whole.num_rows
    for threads in (1, 2):
        for src, tgt in ((dcpfast.iter_batches(data, 3000), dcpfast.iter_batches(target.data, 700)),
                         (list(dcpfast.iter_batches(data, 5000)), io.BytesIO(target.data))):
            got = dcpfast.diff(src, tgt, threads=threads, batch_bytes=4096)
            assert got.equals(whole, check_metadata=True)


def test_self_diff_is_empty_and_swapping_swaps(pairs):
    data, _, target, _ = pairs[1]
    same = dcpfast.diff(data, data)
    assert same.num_rows == 0
    counts = summary(same).to_pylist()
    assert all(c["equal"] == c["source"] == c["target"] > 0 for c in counts)
    forward = dcpfast.diff(data, target.data, include_deleted=True).to_pylist()
    backward = dcpfast.diff(target.data, data, include_deleted=True).to_pylist()
    kinds = {"mismatch": "mismatch", "missing_from_source": "missing_from_target",
             "missing_from_target": "missing_from_source"}
    swapped = []
    for r in backward:
        s = {k.replace("source_", "@").replace("target_", "source_").replace("@", "target_"): v
             for k, v in r.items()}
        swapped.append({**s, "kind": kinds[r["kind"]]})
    assert {r["kind"] for r in forward} == {"mismatch", "missing_from_source",
                                            "missing_from_target"}
    assert swapped == forward


# -- random small buckets (hypothesis) ------------------------------------------------------

#: A side's collections: id -> name (None: never named), all in scope _default but the
#: last naming's, which lie in a scope (id 7) that no event names.
NAMINGS = [{8: "a", 9: "b"}, {30: "a", 31: "b"}, {8: None, 9: "b"}, {8: "a", 30: "b"}]
UNSCOPED = 3
version = st.fixed_dictionaries({
    "key": st.sampled_from([b"k0", b"k1", b"k2", b"\xffk"]),
    "collection": st.sampled_from([0, 1, 2]),             # _default, then the side's two
    "vbucket": st.sampled_from([3, 5]),
    "body": st.sampled_from([b'{"a":1}', b'{"a":2}', b"\x00\x01"]),
    "flags": st.sampled_from([0, 1]),
    "xattrs": st.sampled_from([None, {"u": "1"}, {"_s": "1"}, {"u": "2", "_s": "1"}]),
    "deleted": st.booleans(), "compressed": st.booleans(), "cas": st.integers(1, 3)})
bucket = st.tuples(st.lists(version, max_size=8), st.sampled_from(range(len(NAMINGS))),
                   st.sampled_from([0, 0, 2]))          # snapshot ends past its changes


def written(changes: list, naming: dict, past: int, scope_id: int = 0) -> bytes:
    """One snapshot per vbucket holding ``changes`` in order (each one a new seqno), its
    end ``past`` seqnos beyond the last: a snapshot cut before its end. The collections of
    ``naming`` are created in scope ``scope_id`` (an event names only scope 0)."""
    import cramjam

    cids = [0, *naming]
    out = []
    for vb in (3, 5):
        mine = [c for c in changes if c["vbucket"] == vb]
        events = [t.create_collection(name.encode(), by_seqno=i, manifest_uid=i,
                                      scope_id=scope_id, collection_id=cid, vbucket=vb)
                  for i, (cid, name) in enumerate(
                      [(cid, name or "x") for cid, name in naming.items() if name], start=1)]
        events.append(t.create_collection(b"z", by_seqno=len(events) + 1, manifest_uid=9,
                                          scope_id=0, collection_id=99, vbucket=vb))
        frames = []
        for seqno, c in enumerate(mine, start=len(events) + 1):
            value = b"" if c["deleted"] else c["body"]
            datatype = 0 if c["deleted"] or c["body"].startswith(b"\x00") else 1
            if c["xattrs"]:
                value = t.xattr_blob(c["xattrs"]) if c["deleted"] else \
                    t.xattr_value(c["xattrs"], value)
                datatype |= 4
            if c["compressed"] and value:
                value, datatype = bytes(cramjam.snappy.compress_raw(value)), datatype | 2
            common = dict(by_seqno=seqno, cas=c["cas"] << 16, datatype=datatype, vbucket=vb,
                          collection_id=cids[c["collection"]])
            frames.append(t.deletion(c["key"], value, **common) if c["deleted"] else
                          t.mutation(c["key"], value, flags=c["flags"], **common))
        end = len(events) + len(frames)
        out += [t.snapshot_marker(1, end + (past if frames else 0), vbucket=vb), *events,
                *frames]
    return b"".join(out)


TWEAKS = {"same": {}, "body": {"body": b'{"a":3}'}, "compressed": {"compressed": True},
          "vbucket": {"vbucket": 5}, "cas": {"cas": 3}, "xattrs": {"xattrs": {"u": "9"}},
          "deleted": {"deleted": True}, "flags": {"flags": 7}}


@st.composite
def two_buckets(draw):
    """Two unrelated buckets, or a bucket and a copy of it with some changes tweaked or
    left out."""
    mine = draw(bucket)
    if draw(st.booleans()):
        return mine, draw(bucket)
    copied = []
    for change in mine[0]:
        tweak = draw(st.sampled_from([*TWEAKS, "same", "same", "left out"]))
        if tweak != "left out":
            copied.append({**change, **TWEAKS[tweak]})
    return mine, (copied, draw(st.sampled_from(range(len(NAMINGS)))),
                  draw(st.sampled_from([0, 0, 2])))


@settings(max_examples=80, deadline=None)
@given(two_buckets(), st.sampled_from([{}, {"include_deleted": True}, {"fields": FIELDS}]))
def test_random_buckets_are_the_model(buckets, options):
    """Keys in several vbuckets, collections renamed, unnamed, numbered alike or in a scope
    no event names, values compressed or not, snapshots cut: the diff is the model's."""
    sides = []
    for changes, naming, past in buckets:
        unscoped = naming == UNSCOPED
        data = written(changes, NAMINGS[naming], past, scope_id=7 if unscoped else 0)
        scope = None if unscoped else "_default"
        names = {0: ("_default", "_default"), 99: ("_default", "z"),
                 **{cid: (scope, name) for cid, name in NAMINGS[naming].items() if name}}
        sides.append((data, (*documents(data), names)))
    check(dcpfast.diff(sides[0][0], sides[1][0], **options),
          model_diff(sides[0][1], sides[1][1], **options))


# -- what a side cannot vouch for ---------------------------------------------------------


def cut_inside_a_snapshot(data: bytes) -> bytes:
    """``data`` cut after the second change of the last snapshot that holds three or
    more."""
    batch = dcpfast.scan(data)
    markers = np.flatnonzero(batch["opcode"] == dcpfast.Opcode.SNAPSHOT_MARKER)
    for m in markers[::-1].tolist():
        size = int(batch["snap_end"][m] - batch["snap_start"][m]) + 1
        mine = np.flatnonzero((batch["vbucket"] == batch["vbucket"][m])
                              & (np.arange(len(batch)) > m))[:size]
        if size >= 3 and len(mine) >= 3:
            return data[:int(batch["offset"][mine[2]])]
    raise AssertionError("no snapshot of three changes")


def test_a_side_is_compared_up_to_its_consistent_seqno(pairs):
    data, mine, target, theirs = pairs[2]
    cut = cut_inside_a_snapshot(target.data)
    docs, points = documents(cut)
    table = dcpfast.diff(data, cut, fields=FIELDS)
    check(table, model_diff(mine, (docs, points, target.names), fields=FIELDS))
    unsure = [v for (vb, _, _), v in docs.items() if v["by_seqno"] > points[vb]]
    assert unsure and sum(c["not_compared"] for c in summary(table).to_pylist()) \
        == len(unsure)
    points_ = consistency(dcpfast.state(cut))
    limit = dict(zip(points_["vbucket"].to_pylist(), points_["consistent_seqno"].to_pylist()))
    assert all(r["target_by_seqno"] is None or r["target_by_seqno"] <= limit[r["target_vbucket"]]
               for r in table.to_pylist())
    clock = sorted(v["cas"] for v in mine[0].values())[len(mine[0]) // 2]
    for cut in ({"at_seqno": 40}, {"at_seqno": 63}, {"at_time": clock}):
        want = model_diff((*documents(data, **cut), SOURCE_NAMES),     # cuts inside
                          (*documents(target.data, **cut), target.names))  # snapshots
        check(dcpfast.diff(data, target.data, **cut), want)
        assert sum(c["not_compared"] for c in want[1]) and want[0], cut


HDR = dict(vbucket=3, opaque=0x1003)


def changes(body_at_5: bytes, *, end: int) -> bytes:
    """Two snapshots of one vbucket, the second (4..``end``) cut after seqno 5."""
    return b"".join([
        t.snapshot_marker(1, 3, SnapshotFlag.DISK, **HDR),
        *(t.mutation(b"k%d" % s, b'{"v":%d}' % s, by_seqno=s, datatype=1, **HDR)
          for s in (1, 2, 3)),
        t.snapshot_marker(4, end, **HDR),
        t.mutation(b"k4", b'{"v":4}', by_seqno=4, datatype=1, **HDR),
        t.mutation(b"k1", body_at_5, by_seqno=5, datatype=1, **HDR),
        t.deletion(b"k2", by_seqno=6, **HDR)])


def test_what_a_cut_snapshot_holds_is_counted_not_reported():
    """Two dumps that differ only inside a snapshot neither received whole: no difference,
    every document past seqno 3 counted as not compared; received whole, they differ."""
    a, b = changes(b'{"v":5}', end=9), changes(b'{"v":"five"}', end=9)
    table = dcpfast.diff(a, b)
    assert table.num_rows == 0
    counts = summary(table).to_pylist()
    assert counts == [{"scope": "_default", "collection": "_default", "source": 3, "target": 3,
                       "equal": 1, "missing_from_source": 0, "missing_from_target": 0,
                       "mismatch": 0, "not_compared": 3}]
    whole = dcpfast.diff(changes(b'{"v":5}', end=6), changes(b'{"v":"five"}', end=6))
    assert [(r["key"], r["kind"], r["fields"]) for r in whole.to_pylist()] == \
        [(b"k1", "mismatch", ["body"])]
    # a deletion past the consistent seqno is not a document missing from that side
    gone = dcpfast.diff(changes(b'{"v":5}', end=9)[:-len(t.deletion(b"k2", by_seqno=6, **HDR))],
                        a)
    assert gone.num_rows == 0


def test_a_vbucket_a_side_could_not_restore_is_not_compared():
    """A source read once that restarts: its vbuckets whose versions the state could not
    restore vouch for nothing (on either side's vbucket of that number)."""
    data = scenario(11, restarts=0.4, vbuckets=2)
    read_once = dcpfast.state(dcpfast.iter_batches(data, 2000, errors="skip"),
                              errors="skip", include_deleted=True)
    lost = [r["vbucket"] for r in consistency(read_once).to_pylist() if not r["restored"]]
    assert lost
    once = dcpfast.diff(dcpfast.iter_batches(data, 2000, errors="skip"), data, errors="skip")
    twice = dcpfast.diff(list(dcpfast.iter_batches(data, 2000, errors="skip")), data,
                         errors="skip")
    assert once.num_rows == twice.num_rows == 0
    in_lost = sum(1 for r in read_once.to_pylist() if r["vbucket"] in lost)
    assert sum(c["not_compared"] for c in summary(once).to_pylist()) >= in_lost > \
        sum(c["not_compared"] for c in summary(twice).to_pylist())


# -- naming and matching --------------------------------------------------------------------


def test_collections_match_by_name_never_by_id():
    """The same collection under other ids on each side matches; a collection a stream
    never named is known by its id and matches only that unnamed id."""
    def dump(cid, named, key=b"k"):
        name, known = (b"orders", cid) if named else (b"other", 99)   # a collection stream
        events = [t.create_collection(name, by_seqno=1, manifest_uid=1, scope_id=0,
                                      collection_id=known, vbucket=1)]
        return b"".join([t.snapshot_marker(1, 2, vbucket=1), *events,
                         t.mutation(key, b"{}", by_seqno=2, collection_id=cid, datatype=1,
                                    vbucket=1)])
    assert dcpfast.diff(dump(8, True), dump(77, True)).num_rows == 0
    rows = dcpfast.diff(dump(8, False), dump(9, False)).to_pylist()
    assert [(r["scope"], r["collection"], r["kind"]) for r in rows] == [
        (None, "0x8", "missing_from_target"), (None, "0x9", "missing_from_source")]
    assert dcpfast.diff(dump(8, False), dump(8, False)).num_rows == 0
    named_one_side = dcpfast.diff(dump(8, True), dump(8, False)).to_pylist()
    assert [(r["collection"], r["kind"]) for r in named_one_side] == [
        ("orders", "missing_from_target"), ("0x8", "missing_from_source")]
    assert dcpfast.diff(dump(8, True), dump(8, True, b"other"),
                        only_collections=["_default.orders"]).num_rows == 2
    with pytest.raises(ValueError, match="hotel, which neither side holds"):
        dcpfast.diff(dump(8, True), dump(8, True, b"other"), only_collections=["hotel"])
    assert dcpfast.diff(dump(8, False), dump(9, False), only_collections=["0x8"]).num_rows == 1


def test_a_name_neither_side_holds_is_refused():
    """A typo in only_collections is an error naming what the sides hold, never an empty
    diff (as state refuses a name its stream never gave)."""
    data = source(5, items=120)
    with pytest.raises(ValueError, match=r"names hotle, which neither side holds \(they "
                       r"hold: _default\._default, _default\.route, inventory\.airline, "
                       r"inventory\.hotel\)") as e:
        dcpfast.diff(data, data, only_collections=["hotel", "hotle"])
    assert "\n" not in str(e.value)
    for typo in (["inventory.hotle"], ["_default.hotel"], ["None.hotel"]):
        with pytest.raises(ValueError, match="neither side holds"):
            dcpfast.diff(data, data, only_collections=typo)
    kept = summary(dcpfast.diff(data, data, only_collections=["hotel", "_default.route"]))
    assert kept["collection"].to_pylist() == ["route", "hotel"]


def without_scope_events(frames, *, every: int = 0) -> bytes:
    """The bytes of ``frames`` less the events that create a scope (a dump that names its
    collections, not their scope), and with ``every`` each ``every``-th mutation."""
    mutations = iter(range(1, len(frames) + 1))
    return b"".join(f.data for f in frames
                    if not (f.fields.get("opcode") == Opcode.SYSTEM_EVENT
                            and f.fields.get("event_id") == SystemEventId.CREATE_SCOPE)
                    and not (every and f.fields.get("opcode") == Opcode.MUTATION
                             and next(mutations) % every == 0))


def test_a_collection_whose_scope_a_side_never_named_matches_by_id_and_name():
    """A side whose dump created a collection but not its scope: the collection matches the
    other side's of the same id and name (and takes its scope's name), so identical
    buckets do not differ; under another id it stays apart; both as the model has it."""
    _, server = t.synthetic_conversation(300, seed=5, sync_writes=True, vbuckets=4,
                                         snapshot_size=12)
    data, unscoped = b"".join(f.data for f in server), without_scope_events(server)
    assert None in dcpfast.state(unscoped)["scope"].to_pylist()   # never named
    same = summary(dcpfast.diff(data, data, include_deleted=True))
    for a, b in ((data, unscoped), (unscoped, data)):
        table = dcpfast.diff(a, b, include_deleted=True)
        assert table.num_rows == 0 and summary(table).equals(same)
    assert dcpfast.diff(unscoped, unscoped).num_rows == 0
    hotel = summary(dcpfast.diff(unscoped, data, only_collections=["inventory.hotel"]))
    assert hotel.select(["scope", "collection"]).to_pylist() == [
        {"scope": "inventory", "collection": "hotel"}] and hotel["equal"][0].as_py() > 0
    unnamed = {cid: (None if scope == "inventory" else scope, name)
               for cid, (scope, name) in SOURCE_NAMES.items()}
    mine = (*documents(data), SOURCE_NAMES)
    lacking = without_scope_events(server, every=7)          # documents left behind
    theirs = (*documents(lacking), unnamed)
    renumbered = derive(theirs[0], 9)                        # other ids, and changes
    other = (*documents(renumbered.data), renumbered.names)
    for options in ({}, {"include_deleted": True}, {"only_collections": ["hotel"]}):
        check(dcpfast.diff(data, lacking, **options), model_diff(mine, theirs, **options))
        check(dcpfast.diff(lacking, data, **options), model_diff(theirs, mine, **options))
        check(dcpfast.diff(lacking, renumbered.data, **options),
              model_diff(theirs, other, **options))
    assert dcpfast.diff(data, lacking).num_rows


def test_a_state_without_its_tombstones_is_refused():
    """A state table built without include_deleted cannot tell a deletion from a document
    it never held: refused, as docs/diff.md requires."""
    data = source(6, items=120)
    whole = dcpfast.state(data, include_deleted=True)
    for side, pair_ in (("source", (dcpfast.state(data), whole)),
                        ("target", (whole, dcpfast.state(data)))):
        with pytest.raises(ValueError, match=f"the {side} state was built without "
                           "include_deleted=True: build it with include_deleted=True") as e:
            dcpfast.diff(*pair_)
        assert "\n" not in str(e.value)
    assert metadata(whole)["include_deleted"] is True
    assert dcpfast.diff(whole, data).num_rows == 0


def default_collection(*, hello: int | None) -> bytes:
    """A dump of documents of the default collection whose keys carry its collection id:
    with a HELLO response granting collections (``hello``: FEATURE_COLLECTIONS), granting
    none (0), or with nothing that says (None)."""
    frames = [] if hello is None else [t.hello_response([hello] if hello else [])]
    frames.append(t.snapshot_marker(1, 20, vbucket=4))
    frames += [t.mutation(b"k%d" % i, b'{"n":%d}' % i, by_seqno=i, datatype=1, vbucket=4,
                          collection_id=0) for i in range(1, 21)]
    return b"".join(frames)


def test_keys_whose_stream_does_not_say_they_carry_collection_ids_are_not_compared_wrongly():
    """A side whose keys carry a collection id but whose stream says nothing about it (no
    HELLO, no collection event) beside one whose stream says they do: the diff says so
    rather than compare the keys with their id's byte; with collections=True they match."""
    said, unsaid = default_collection(hello=FEATURE_COLLECTIONS), default_collection(hello=None)
    assert metadata(dcpfast.state(said))["collections"] is True
    assert metadata(dcpfast.state(unsaid))["collections"] is None
    assert metadata(dcpfast.state(default_collection(hello=0)))["collections"] is False
    assert metadata(dcpfast.state(unsaid, collections=True))["collections"] is True
    for a, b, side in ((said, unsaid, "target"), (unsaid, said, "source")):
        with pytest.raises(ValueError, match=f"the {side}'s keys were read without collection "
                           "ids.*collections=True") as e:
            dcpfast.diff(a, b)
        assert "\n" not in str(e.value)
        with pytest.raises(ValueError, match=f"the {side}'s keys"):
            dcpfast.diff(dcpfast.state(a, include_deleted=True),
                         dcpfast.state(b, include_deleted=True))
        assert dcpfast.diff(a, b, collections=True).num_rows == 0
    assert dcpfast.diff(unsaid, unsaid).num_rows == 0     # both read alike
    assert dcpfast.diff(said, b"").num_rows == 20         # nothing held, nothing misread


def test_a_key_held_in_two_vbuckets_stands_by_its_highest_seqno():
    def on(vb, seqno, body, end=None):
        return t.snapshot_marker(1, end or seqno, vbucket=vb) + t.mutation(
            b"k", body, by_seqno=seqno, datatype=1, vbucket=vb)
    a = on(1, 5, b'{"v":1}') + on(2, 9, b'{"v":2}')
    assert dcpfast.diff(a, on(7, 1, b'{"v":2}')).num_rows == 0
    assert [r["fields"] for r in dcpfast.diff(a, on(7, 1, b'{"v":1}')).to_pylist()] == [["body"]]
    unsure = on(1, 5, b'{"v":1}') + on(2, 9, b'{"v":2}', end=10)
    table = dcpfast.diff(unsure, on(7, 1, b'{"v":1}'))
    assert table.num_rows == 0 and summary(table)["not_compared"].to_pylist() == [1]


def test_compressed_and_plain_copies_are_equal():
    import cramjam

    body = b'{"name":"a compressed copy of the same bytes"}'
    value = t.xattr_value({"u": "1", "_sys": "2"}, body)
    plain = t.snapshot_marker(1, 1, vbucket=2) + t.mutation(
        b"k", value, by_seqno=1, datatype=5, flags=3, vbucket=2)
    packed = t.snapshot_marker(1, 1, vbucket=9) + t.mutation(
        b"k", bytes(cramjam.snappy.compress_raw(value)), by_seqno=1, datatype=7,
        flags=3, vbucket=9, cas=12345 << 16)
    assert dcpfast.diff(plain, packed, fields=[f for f in FIELDS if f != "cas"]).num_rows == 0
    assert dcpfast.diff(plain, packed, fields=["cas"]).to_pylist()[0]["fields"] == ["cas"]
    reordered = t.snapshot_marker(1, 1, vbucket=2) + t.mutation(
        b"k", t.xattr_value({"_sys": "other", "u": "1"}, body), by_seqno=1, datatype=5,
        flags=3, vbucket=2)
    assert dcpfast.diff(plain, reordered).num_rows == 0            # user xattrs alike
    assert dcpfast.diff(plain, reordered, fields=["system_xattrs"]).num_rows == 1


# -- sources ---------------------------------------------------------------------------------


def test_states_and_captures_as_sides(pairs):
    data, _, target, _ = pairs[0]
    whole = dcpfast.diff(data, target.data)
    a = dcpfast.state(data, include_deleted=True)
    b = dcpfast.state(target.data, include_deleted=True)
    assert dcpfast.diff(a, b).equals(whole, check_metadata=True)
    capture = t.pcap_file(t.tcp_packets(t.tcp_conversation(b"", target.data, sizes=(900,))))
    batches = [b for b in read_pcap(io.BytesIO(capture), batch_bytes=5000)
               if b.connection.direction == "server->client"]
    assert dcpfast.diff(data, batches).equals(whole, check_metadata=True)
    with pytest.raises(ValueError, match="history"):
        dcpfast.diff(dcpfast.state(data, history=True), b)
    with pytest.raises(ValueError, match="no values"):
        dcpfast.diff(a, dcpfast.state(target.data, values=False))
    assert dcpfast.diff(a, dcpfast.state(target.data, values=False, include_deleted=True),
                        fields=["flags", "deleted"]).num_rows
    with pytest.raises(ValueError, match="at_seqno"):
        dcpfast.diff(a, b, at_seqno=5)


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown field"):
        dcpfast.diff(b"", b"", fields=["body", "size"])
    with pytest.raises(TypeError):
        dcpfast.diff(b"", b"", fields="body")
    with pytest.raises(ValueError):
        dcpfast.diff(b"", b"", fields=[])
    with pytest.raises(TypeError, match="ids differ"):
        dcpfast.diff(b"", b"", only_collections=[8])
    with pytest.raises(ValueError):
        dcpfast.diff(b"", b"", errors="ignore")
    with pytest.raises(ValueError):
        dcpfast.diff(b"", b"", threads=0)
    empty = dcpfast.diff(b"", b"")
    assert empty.num_rows == 0 and summary(empty).schema.equals(summary_schema())


# -- bad input --------------------------------------------------------------------------------


def test_a_damaged_side_is_named(pairs):
    data, _, target, _ = pairs[0]
    offsets = dcpfast.scan(target.data)["offset"].tolist()
    at = offsets[len(offsets) // 2]
    broken = target.data[:at] + b"\x00" + target.data[at + 1:]     # a bad magic byte
    with pytest.raises(DcpFormatError, match=r"at byte %d: .*\(in the target\)" % at) as e:
        dcpfast.diff(data, broken)
    assert e.value.offset == at
    with pytest.raises(DcpFormatError, match=r"\(in the source\)"):
        dcpfast.diff(broken, data, threads=1)
    table = dcpfast.diff(data, broken, errors="skip")
    errors = diff_errors(table)
    assert errors["source"] == [] and [e.offset for e in errors["target"]] == [at]


@pytest.mark.parametrize("seed", range(8))
def test_mutated_sides_raise_or_skip(seed):
    """Frames dropped, repeated, swapped, flipped or cut on either side: strict mode raises
    DcpFormatError naming the side, skip mode answers with a valid table."""
    from tests.documents.test_api import mutated

    whole = scenario(seed, snapshots=10, restarts=0.2)
    broken = mutated(whole, seed)
    def fails(data):
        try:
            dcpfast.state(data)
        except DcpFormatError as e:
            return e
        return None
    for a, b in ((whole, broken), (broken, whole)):
        first = fails(a) or fails(b)
        try:
            dcpfast.diff(a, b, threads=1)
        except DcpFormatError as e:
            side = "source" if fails(a) else "target"
            assert str(e) == f"at byte {first.offset}: {first.reason} (in the {side})"
        else:
            assert first is None
        table = dcpfast.diff(a, b, errors="skip", include_deleted=True)
        table.validate(full=True)
        assert summary(table).num_rows and set(diff_errors(table)) == {"source", "target"}


def diff_job(items: str):
    """Diffing the states of one stream of ``items`` changes written twice (the second with
    Snappy values): the differences, the documents and the states' bytes."""
    a = dcpfast.state(t.synthetic_stream(int(items), seed=3), include_deleted=True)
    b = dcpfast.state(t.synthetic_stream(int(items), seed=3, snappy_ratio=0.6),
                      include_deleted=True)
    dcpfast.diff(a, b)                                          # imports and caches warmed
    return lambda: [dcpfast.diff(a, b).num_rows, a.num_rows, a.nbytes + b.nbytes]


def test_memory_is_in_proportion_to_the_documents():
    """Eight times the documents: the diff's peak over the two states it compares grows
    no faster than they do (bodies are compared a block at a time)."""
    from tests.memory import peak_in_child

    ratios = []
    for items in (2_000, 16_000):
        (differences, documents, nbytes), held = peak_in_child("tests.compare.test_api",
                                                               "diff_job", items)
        assert differences == 0 and documents > items // 3
        ratios.append(held / nbytes)
    assert ratios[1] < 1.25 * ratios[0] and ratios[1] < 3, ratios


def test_a_state_written_to_parquet_is_a_side(pairs, tmp_path):
    """A state table written to a Parquet file (as ``dcpfast state -o`` writes it) is a
    side as the table itself is, its metadata read with it; a Parquet file that is not a
    state is refused in one line."""
    data, _, target, _ = pairs[0]
    a = dcpfast.state(data, include_deleted=True)
    pq.write_table(a, tmp_path / "a.parquet")
    assert dcpfast.diff(tmp_path / "a.parquet", target.data).equals(
        dcpfast.diff(a, target.data), check_metadata=True)
    assert dcpfast.diff(str(tmp_path / "a.parquet"), data).num_rows == 0
    pq.write_table(dcpfast.scan(data).to_arrow(), tmp_path / "frames.parquet")
    with pytest.raises(ValueError, match="no dcpfast state metadata"):
        dcpfast.diff(tmp_path / "frames.parquet", data)
