"""System events as rows (versions 0, 1 and FlatBuffers 2) and the names a Manifest learns."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t
from dcpfast.events import Manifest, event_schema, system_events
from tests.spec_vectors import VECTORS

REAL_SERVER = Path(__file__).parent / "data" / "real-server"
VECTOR = {v.id: v for v in VECTORS}
U32 = st.integers(0, 0xFFFFFFFF)
U64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
#: Names up to the server's 251 bytes, non-ASCII included.
NAMES = st.text(min_size=1, max_size=80).map(str.encode).filter(lambda b: len(b) <= 251)
NULL_V2 = dict(history=None, default_collection_mvs=None, metered=None, flush_uid=None,
               system=None)


def scan(data, **kwargs):
    return dcpfast.scan(data, collections=True, final=True, **kwargs)


def rows(data, **kwargs):
    return system_events(scan(data, **kwargs)).to_pylist()


def only_row(data, **kwargs):
    [row] = rows(data, **kwargs)
    return row


def subset(row, expect):
    return {k: row[k] for k in expect}


def _bad(event_id, version, key, value, **hdr):
    """A system event with any id, version, key and value (not necessarily well-formed)."""
    return t.system_event(event_id, by_seqno=9, version=version, key=key, value=value, **hdr)


# -- the wire reference's vectors and a real server's frame --------------------------------


def test_corrected_worked_example_reads_scope_before_collection():
    """C12: collection 8 in scope 0, manifest 2, max_ttl 72000; the encoder agrees."""
    row = only_row(VECTOR["C12"].data)
    assert row == dict(index=0, offset=0, vbucket=0x210, stream_id=None, by_seqno=4,
                       event="create_collection", event_id=0, version=1, manifest_uid=2,
                       scope_id=0, collection_id=8, name="mycollection", max_ttl=72000,
                       **NULL_V2)
    assert t.create_collection(b"mycollection", by_seqno=4, manifest_uid=2, scope_id=0,
                               collection_id=8, max_ttl=72000, vbucket=0x210,
                               opaque=0x1210) == VECTOR["C12"].data


def test_original_page_example_decodes_in_server_order():
    """D20 (the page's bytes): the u32 after the manifest is the scope, so scope 8, cid 0."""
    row = only_row(VECTOR["D20"].data)
    expect = dict(manifest_uid=2, scope_id=8, collection_id=0, name="mycollection",
                  max_ttl=72000)
    assert subset(row, expect) == expect


@pytest.mark.parametrize("vector, expect", [
    ("S5", dict(by_seqno=0x21, event="drop_collection", event_id=1, version=0,
                manifest_uid=0xC, scope_id=0, collection_id=8, name=None, max_ttl=None)),
    ("S6", dict(by_seqno=0x22, event="create_scope", event_id=3, version=0,
                manifest_uid=0xD, scope_id=9, collection_id=None, name="inventory")),
    ("S7", dict(by_seqno=0x23, event="drop_scope", event_id=4, version=0,
                manifest_uid=0xE, scope_id=9, collection_id=None, name=None)),
    ("S8", dict(by_seqno=0x24, event="create_collection", event_id=0, version=0,
                manifest_uid=0xF, scope_id=9, collection_id=0xA, name="c1", max_ttl=None)),
])
def test_synthesized_vectors(vector, expect):
    row = only_row(VECTOR[vector].data)
    assert subset(row, expect) == expect
    assert row["vbucket"] == 3 and row["offset"] == 0


def test_real_server_frame():
    data = b"".join((REAL_SERVER / f"frame_0x{op}.bin").read_bytes() for op in ("56", "57", "5f"))
    batch = scan(data)
    row = only_row(data)
    assert row == dict(index=2, offset=47 + 172, vbucket=874, stream_id=1, by_seqno=4,
                       event="create_collection", event_id=0, version=0, manifest_uid=0,
                       scope_id=8, collection_id=8, name="col1", max_ttl=None, **NULL_V2)
    # the mutation of collection 8 precedes its creation in this capture; scope 8 has no
    # create-scope event, so its name stays unknown
    table = batch.with_names(Manifest())
    assert table["collection"].to_pylist() == [None, "col1", None]
    assert table["scope"].to_pylist() == [None, None, None]


def test_empty_batch_and_no_events():
    table = system_events(scan(b""))
    assert table.num_rows == 0 and table.schema == event_schema()
    assert system_events(scan(t.noop())).num_rows == 0


#: Version-2 values written by flatc 25.12.19 (the C++ FlatBuffers compiler, whose layout
#: the server's buffers have) from the spec's ``events.fbs`` tables and a JSON object each:
#: (event id, value hex, expected fields). Independent of dcpfast's encoder.
FLATC = {
    "Collection": (0, "200000000000000018003400180008000c00050010001400060020000700280018"
                      "000000000101010800000009000000100e00002000000002010000000000000000"
                      "0000000100000700000000000000000000000600000068c3b474656c0000",
                   dict(manifest_uid=258, scope_id=8, collection_id=9, name="hôtel",
                        max_ttl=3600, history=True, default_collection_mvs=1 << 40,
                        metered=True, flush_uid=7, system=None)),
    "DroppedCollection": (1, "100000000c001800100008000c0007000c00000000000001080000000900"
                             "00000300000000000000",
                          dict(manifest_uid=3, scope_id=8, collection_id=9, name=None,
                               system=True, history=None)),
    "Scope": (3, "140000000000000000000a0014000c00040008000a000000080000000c000000040000"
                 "000000000009000000696e76656e746f7279000000",
              dict(manifest_uid=4, scope_id=8, collection_id=None, name="inventory",
                   system=None)),
    "DroppedScope": (4, "140000000000000000000a0014000c00080007000a000000000000010800000005"
                        "00000000000000",
                     dict(manifest_uid=5, scope_id=8, collection_id=None, system=True)),
}


#: The same objects through dcpfast's encoder.
ENCODED = {
    "Collection": lambda: t.create_collection(
        "hôtel".encode(), by_seqno=9, manifest_uid=258, scope_id=8, collection_id=9,
        max_ttl=3600, version=2, history=True, default_collection_mvs=1 << 40, metered=True,
        flush_uid=7),
    "DroppedCollection": lambda: t.drop_collection(by_seqno=9, manifest_uid=3, scope_id=8,
                                                   collection_id=9, version=2, system=True),
    "Scope": lambda: t.create_scope(b"inventory", by_seqno=9, manifest_uid=4, scope_id=8,
                                    version=2),
    "DroppedScope": lambda: t.drop_scope(by_seqno=9, manifest_uid=5, scope_id=8, version=2,
                                         system=True),
}


@pytest.mark.parametrize("table", sorted(FLATC))
def test_flatc_written_values(table):
    event_id, value, expect = FLATC[table]
    row = only_row(_bad(event_id, 2, b"", bytes.fromhex(value)))
    assert subset(row, expect) == expect
    assert only_row(ENCODED[table]()) == row
    if table == "Collection":                    # a modify event carries the same table
        row = only_row(_bad(5, 2, b"", bytes.fromhex(value)))
        assert subset(row, expect) == expect and row["event"] == "modify_collection"


# -- round trips through the encoder --------------------------------------------------------


@st.composite
def events(draw):
    """(frame, expected row) for a random system event of any kind and version."""
    kind = draw(st.sampled_from(["create_collection", "modify_collection", "drop_collection",
                                 "create_scope", "drop_scope"]))
    common = dict(by_seqno=draw(U64), manifest_uid=draw(U64), scope_id=draw(U32))
    hdr = dict(vbucket=draw(st.integers(0, 1023)), opaque=draw(U32))
    sid = draw(st.one_of(st.none(), st.integers(1, 0xFFFF)))
    if sid is not None:
        hdr["stream_id"] = sid
    expect = dict(common, event=kind, stream_id=sid, vbucket=hdr["vbucket"], name=None,
                  max_ttl=None, collection_id=None, **NULL_V2)
    expect["event_id"] = {"create_collection": 0, "drop_collection": 1, "create_scope": 3,
                          "drop_scope": 4, "modify_collection": 5}[kind]
    force = draw(st.booleans())
    if kind in ("create_collection", "modify_collection"):
        name, max_ttl = draw(NAMES), draw(st.one_of(st.none(), U32))
        version = 2 if kind == "modify_collection" else \
            draw(st.sampled_from([2, 0 if max_ttl is None else 1]))
        options = {}
        if version == 2:
            options = dict(history=draw(st.booleans()), default_collection_mvs=draw(U64),
                           metered=draw(st.booleans()), flush_uid=draw(U64),
                           force_defaults=force)
            expect.update({k: v for k, v in options.items() if k != "force_defaults"})
        cid = draw(st.integers(8, 0xFFFFFFFF))
        builder = t.create_collection if kind == "create_collection" else t.modify_collection
        extra = {"version": version} if kind == "create_collection" else {}
        data = builder(name, collection_id=cid, max_ttl=max_ttl, **extra, **options,
                       **common, **hdr)
        expect.update(name=name.decode(), max_ttl=max_ttl, collection_id=cid)
    elif kind == "drop_collection":
        version = draw(st.sampled_from([0, 2]))
        cid = draw(st.integers(8, 0xFFFFFFFF))
        options = {}
        if version == 2:
            options = dict(system=draw(st.booleans()), force_defaults=force)
            expect["system"] = options["system"]
        data = t.drop_collection(collection_id=cid, version=version, **options, **common,
                                 **hdr)
        expect["collection_id"] = cid
    elif kind == "create_scope":
        version, name = draw(st.sampled_from([0, 2])), draw(NAMES)
        data = t.create_scope(name, version=version, force_defaults=force and version == 2,
                              **common, **hdr)
        expect["name"] = name.decode()
    else:
        version = draw(st.sampled_from([0, 2]))
        options = {}
        if version == 2:
            options = dict(system=draw(st.booleans()), force_defaults=force)
            expect["system"] = options["system"]
        data = t.drop_scope(version=version, **options, **common, **hdr)
    expect["version"] = version
    return data, expect


@given(st.lists(events(), min_size=1, max_size=6), st.sampled_from(["strict", "skip"]))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip(items, mode):
    data = b"".join(d for d, _ in items)
    batch = scan(data, errors=mode)
    table = system_events(batch)
    got = table.to_pylist()
    assert len(got) == len(items) and batch.errors == []
    assert dcpfast.skipped_regions(table) == [] and table.schema.metadata is None
    offset = 0
    for i, (row, (frame, expect)) in enumerate(zip(got, items)):
        assert row == dict(expect, index=i, offset=offset)
        offset += len(frame)


def test_longest_name_and_non_ascii():
    name = ("é" * 125 + "x").encode()
    assert len(name) == 251
    for version in (0, 1, 2):
        data = t.create_collection(name, by_seqno=1, manifest_uid=1, scope_id=0,
                                   collection_id=8, max_ttl=None if version == 0 else 60,
                                   version=version, stream_id=7)
        assert only_row(data)["name"] == name.decode()
    assert only_row(t.create_scope(name, by_seqno=1, manifest_uid=1, scope_id=8,
                                   version=2))["name"] == name.decode()


def test_flatbuffers_defaults_absent_or_written_read_alike():
    kwargs = dict(by_seqno=5, manifest_uid=0, scope_id=0, collection_id=8, version=2)
    lean = t.create_collection(b"c", **kwargs)
    full = t.create_collection(b"c", force_defaults=True, **kwargs)
    assert len(full) > len(lean)
    assert only_row(lean) == only_row(full)
    expect = dict(manifest_uid=0, history=False, default_collection_mvs=0, metered=False,
                  flush_uid=0, max_ttl=None)
    assert subset(only_row(lean), expect) == expect


def test_flatbuffers_max_ttl_zero_is_a_ttl():
    row = only_row(t.create_collection(b"c", by_seqno=1, manifest_uid=1, scope_id=0,
                                       collection_id=8, max_ttl=0, version=2))
    assert row["max_ttl"] == 0


def _table(slots, *, vtable_fields=None) -> bytes:
    """A hand-built FlatBuffers root table: ``slots`` are (field id, struct format, value);
    ``vtable_fields`` caps the vtable (a writer from an older schema)."""
    count = max([s for s, _, _ in slots], default=-1) + 1
    count = count if vtable_fields is None else vtable_fields
    body, where = b"", {}
    for slot, fmt, value in slots:
        where[slot] = 4 + len(body)
        body += struct.pack("<" + fmt, value)
    vtable = struct.pack(f"<HH{count}H", 4 + 2 * count, 4 + len(body),
                         *[where.get(i, 0) for i in range(count)])
    root = 4 + len(vtable)
    return struct.pack("<I", root) + vtable + struct.pack("<i", root - 4) + body


def test_flatbuffers_from_an_older_writer_use_defaults_and_the_key():
    """A Collection table whose vtable stops before name: the name comes from the key."""
    value = _table([(0, "Q", 7), (1, "I", 8), (2, "I", 12)])
    data = t.system_event(0, by_seqno=3, version=2, key=b"named", value=value)
    expect = dict(manifest_uid=7, scope_id=8, collection_id=12, name="named", max_ttl=None,
                  history=False, flush_uid=0)
    assert subset(only_row(data), expect) == expect


# -- malformed payloads ------------------------------------------------------------------


def _fb_string_table(length: int, terminator: bytes = b"\0", jump: int = 0) -> bytes:
    """A Scope table whose name is a string of ``length`` declared bytes ('ab' and
    ``terminator`` present), its offset pointing ``jump`` bytes too far."""
    head = _table([(0, "Q", 1), (1, "I", 9), (2, "I", 0)])
    head = head[:-4] + struct.pack("<I", 4 + jump)
    return head + struct.pack("<I", length) + b"ab" + terminator


def _ok_collection() -> bytes:
    return t.create_collection(b"hotel", by_seqno=1, manifest_uid=1, scope_id=8,
                               collection_id=9, version=2)[24 + 13 + 5:]


MALFORMED = {
    "v0 value one byte short": (0, 0, b"n", bytes(15), "value of 15 bytes (must be 16)"),
    "v0 value one byte long": (0, 0, b"n", bytes(17), "value of 17 bytes (must be 16)"),
    "v1 without max_ttl": (0, 1, b"n", bytes(16), "value of 16 bytes (must be 20)"),
    "drop collection v1": (1, 1, b"", bytes(16), "drop_collection has no version 1"),
    "scope v0 long": (3, 0, b"s", bytes(16), "value of 16 bytes (must be 12)"),
    "drop scope v0 short": (4, 0, b"", bytes(8), "value of 8 bytes (must be 12)"),
    "modify v0": (5, 0, b"n", bytes(16), "modify_collection has no version 0"),
    "flush v2": (2, 2, b"", bytes(16), "flush_collection has no version 2"),
    "version 3": (0, 3, b"n", bytes(16), "create_collection has no version 3"),
    "unknown event": (6, 0, b"", bytes(16), "unknown system event id 6"),
    "name not UTF-8": (0, 0, b"\xff\xfe", bytes(16), "name is not UTF-8"),
    "fb empty": (0, 2, b"", b"", "too short for a table"),
    "fb root outside": (3, 2, b"", struct.pack("<II", 1000, 0), "root table at 1000"),
    "fb vtable before start": (3, 2, b"", struct.pack("<Ii", 4, 100), "vtable at -96"),
    "fb vtable after end": (3, 2, b"", struct.pack("<Ii", 4, -100), "vtable at 104"),
    "fb odd vtable": (3, 2, b"", struct.pack("<IHHi", 8, 5, 4, 4), "vtable of 5 bytes"),
    "fb vtable too long": (3, 2, b"", struct.pack("<IHHi", 8, 40, 4, 4), "vtable of 40"),
    "fb table too long": (3, 2, b"", struct.pack("<IHHi", 8, 4, 400, 4), "table of 400"),
    "fb table cut short": (3, 2, b"", _table([(0, "Q", 1)])[:-8], "table of 12 bytes"),
    "fb field past table end": (
        3, 2, b"", struct.pack("<IHHHi", 10, 6, 8, 6, 6) + bytes(4), "field uid at 6"),
    "fb string outside": (3, 2, b"", _fb_string_table(2, jump=10**6), "string name at"),
    "fb string too long": (3, 2, b"", _fb_string_table(0xFFFFFFFF), "overruns"),
    "fb string unterminated": (3, 2, b"", _fb_string_table(2, b"x"), "overruns"),
    "fb string past end": (3, 2, b"", _fb_string_table(3), "overruns"),
    "fb collection truncated": (0, 2, b"hotel", _ok_collection()[:-6], "FlatBuffers"),
    "fb name not UTF-8": (3, 2, b"", _fb_string_table(2)[:-3] + b"\xff\xfe\0",
                          "name is not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_strict(case):
    event_id, version, key, value, reason = MALFORMED[case]
    good = t.create_scope(b"s", by_seqno=1, manifest_uid=1, scope_id=8)
    batch = scan(good + _bad(event_id, version, key, value, vbucket=3))
    with pytest.raises(dcpfast.DcpFormatError) as info:
        system_events(batch)
    assert info.value.offset == len(good)
    assert reason in info.value.reason


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_skip(case):
    event_id, version, key, value, reason = MALFORMED[case]
    good = t.create_scope(b"s", by_seqno=1, manifest_uid=1, scope_id=8)
    bad = _bad(event_id, version, key, value)
    batch = scan(good + bad + good, errors="skip")
    assert batch.errors == []
    table = system_events(batch)
    assert table["index"].to_pylist() == [0, 2]
    [region] = dcpfast.skipped_regions(table)
    assert (region.offset, region.length) == (len(good), len(bad))
    assert reason in region.reason
    assert dcpfast.skipped_regions(system_events(batch)) == [region]   # each time
    assert dcpfast.skipped_regions(
        system_events(batch.filter(np.ones(len(batch), bool)))) == [region]
    assert batch.errors == []                             # the batch is left as it was


def test_event_regions_stay_apart_from_the_scan_regions():
    good = t.create_scope(b"s", by_seqno=1, manifest_uid=1, scope_id=8)
    bad = _bad(0, 0, b"n", bytes(3))
    batch = scan(good + bad + b"\xee" * 30 + good + bad, errors="skip")
    [damage] = batch.errors
    assert damage.offset == len(good + bad)
    table = system_events(batch)
    assert table["index"].to_pylist() == [0, 2]
    assert [r.offset for r in dcpfast.skipped_regions(table)] == [
        len(good), damage.offset + damage.length + len(good)]
    assert batch.errors == [damage]


def test_missing_columns_are_named():
    batch = dcpfast.scan(VECTOR["S6"].data, collections=True, columns=["offset", "opcode"])
    with pytest.raises(ValueError, match="by_seqno"):
        system_events(batch)


@given(st.sampled_from([0, 1, 3, 4, 5]), st.binary(max_size=96), st.sampled_from([0, 1, 2]))
@settings(max_examples=400)
def test_random_payloads_decode_or_fail_cleanly(event_id, value, version):
    data = _bad(event_id, version, b"", value)
    try:
        table = system_events(scan(data))
    except dcpfast.DcpFormatError as exc:
        assert exc.offset == 0
    else:
        assert table.num_rows == 1
    batch = scan(data, errors="skip")
    table = system_events(batch)
    assert table.num_rows + len(dcpfast.skipped_regions(table)) == 1
    assert batch.errors == []


@given(events().filter(lambda item: item[1]["version"] == 2), st.data())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.filter_too_much])
def test_damaged_flatbuffers_decode_or_fail_cleanly(item, data):
    """Bit flips and cuts in a version-2 value decode to a row or fail as DcpFormatError."""
    frame, expect = item
    batch = scan(frame)
    start = int(batch["value_offset"][0])
    value = bytearray(frame[start:])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(value) - 1))
        value[at] ^= 1 << data.draw(st.integers(0, 7))
    value = bytes(value[:data.draw(st.integers(0, len(value)))])
    damaged = _bad(expect["event_id"], 2, batch.key(0), value)
    skip = scan(damaged, errors="skip")
    table = system_events(skip)
    assert table.num_rows + len(dcpfast.skipped_regions(table)) == 1 and skip.errors == []
    try:
        system_events(scan(damaged))
    except dcpfast.DcpFormatError as exc:
        assert exc.offset == 0


# -- synthetic conversations and the manifest ----------------------------------------------


def _truth(frames):
    """(scope, collection) names of each frame from the generator's manifest."""
    manifest = t.synthetic_manifest()
    out = []
    for f in frames:
        cid = f.fields.get("collection_id")
        if cid is None:
            out.append((None, None))
            continue
        scope_id, name, _ = manifest["collections"][cid]
        out.append((manifest["scopes"][scope_id].decode(), name.decode()))
    return out


@pytest.mark.parametrize("stream_ids", [False, True])
def test_synthetic_events_decode_to_their_rows(stream_ids):
    frames = t.synthetic_frames(300, seed=3, stream_ids=stream_ids)
    manifest = t.synthetic_manifest()
    batch = dcpfast.scan(b"".join(f.data for f in frames), final=True)
    table = batch.system_events()
    events = [i for i, f in enumerate(frames) if f.fields["opcode"] == 0x5F]
    assert table["index"].to_pylist() == events and len(events) == 4 * 4
    for row in table.to_pylist():
        f = frames[row["index"]].fields
        assert (row["vbucket"], row["by_seqno"], row["stream_id"]) == \
            (f["vbucket"], f["by_seqno"], f.get("stream_id"))
        assert row["name"] == f["key"].decode()
        if row["event"] == "create_scope":
            assert manifest["scopes"][row["scope_id"]] == f["key"]
            assert row["collection_id"] is None
        else:
            assert row["event"] == "create_collection"
            scope_id, name, max_ttl = manifest["collections"][row["collection_id"]]
            assert (row["scope_id"], row["name"].encode(), row["max_ttl"]) == \
                (scope_id, name, max_ttl)
    assert max(table["manifest_uid"].to_pylist()) == manifest["uid"]


@pytest.mark.parametrize("seed", [0, 1])
def test_with_names_matches_the_generator(seed):
    frames = t.synthetic_frames(400, seed=seed, vbuckets=3)
    batch = dcpfast.scan(b"".join(f.data for f in frames), final=True)
    manifest = Manifest()
    table = batch.with_names(manifest)
    assert table.column_names == batch.to_arrow().column_names + ["scope", "collection"]
    got = list(zip(table["scope"].to_pylist(), table["collection"].to_pylist()))
    assert got == _truth(frames)
    truth = t.synthetic_manifest()
    assert manifest.collections == {c: n.decode() for c, (_, n, _) in
                                    truth["collections"].items()}
    assert manifest.scopes == {s: n.decode() for s, n in truth["scopes"].items()}
    assert manifest.uid == truth["uid"]


@pytest.mark.parametrize("batch_bytes", [97, 1000, 4096])
def test_manifest_across_batches_equals_one_batch(batch_bytes):
    data = t.synthetic_stream(300, seed=5, vbuckets=4)
    whole = dcpfast.scan(data, final=True).with_names(Manifest())
    manifest = Manifest()
    parts = [b.with_names(manifest)
             for b in dcpfast.iter_batches([data], batch_bytes, collections=True)]
    assert len(parts) > 3
    joined = pa.concat_tables(parts)
    assert joined.column("collection").to_pylist() == whole.column("collection").to_pylist()
    assert joined.column("scope").to_pylist() == whole.column("scope").to_pylist()
    restored = pickle.loads(pickle.dumps(manifest))
    assert restored == manifest and restored.collections == manifest.collections


def test_names_before_the_creation_in_an_earlier_batch_are_unknown():
    create = t.create_collection(b"late", by_seqno=2, manifest_uid=1, scope_id=0,
                                 collection_id=12)
    doc = t.mutation(b"k", b"v", by_seqno=1, collection_id=12)
    manifest = Manifest()
    first = dcpfast.scan(doc, collections=True).with_names(manifest)
    second = dcpfast.scan(create + doc, collections=True).with_names(manifest)
    assert first["collection"].to_pylist() == [None]
    assert second["collection"].to_pylist() == [None, "late"]
    assert second["scope"].to_pylist() == [None, "_default"]


def test_drops_keep_names_and_update_accepts_tables():
    data = b"".join([
        t.create_scope(b"s", by_seqno=1, manifest_uid=1, scope_id=8, version=2),
        t.create_collection(b"c", by_seqno=2, manifest_uid=2, scope_id=8, collection_id=9,
                            version=2),
        t.drop_collection(by_seqno=3, manifest_uid=3, scope_id=8, collection_id=9),
        t.drop_scope(by_seqno=4, manifest_uid=4, scope_id=8),
        t.deletion(b"k", by_seqno=5, collection_id=9, vbucket=7),
    ])
    batch = scan(data)
    from_table = Manifest().update(system_events(batch))
    assert from_table == Manifest().update(batch)
    assert from_table.collections == {0: "_default", 9: "c"}
    assert from_table.scopes == {0: "_default", 8: "s"}
    assert from_table.collection_scopes == {0: 0, 9: 8}
    assert from_table.uid == 4
    table = batch.with_names(from_table)
    assert table["collection"].to_pylist() == [None] * 4 + ["c"]
    assert table["scope"].to_pylist() == [None] * 4 + ["s"]


def test_streams_without_collections_are_all_default():
    data = t.mutation(b"a", b"v", by_seqno=1) + t.snapshot_marker(1, 2) + \
        t.deletion(b"a", by_seqno=2)
    batch = dcpfast.scan(data, collections=False)
    table = batch.with_names(Manifest())
    assert table["collection"].to_pylist() == ["_default", None, "_default"]
    assert table["scope"].to_pylist() == ["_default", None, "_default"]


def test_label_of_a_strict_batch_with_a_bad_event_raises():
    data = _bad(0, 0, b"n", bytes(3))
    with pytest.raises(dcpfast.DcpFormatError):
        scan(data).with_names(Manifest())
    batch = scan(data, errors="skip")
    table = batch.with_names(Manifest())
    assert table["collection"].to_pylist() == [None]
    assert len(dcpfast.skipped_regions(table)) == 1 and batch.errors == []


def test_encoder_rejects_version_mismatches():
    common = dict(by_seqno=1, manifest_uid=1, scope_id=0, collection_id=8)
    with pytest.raises(ValueError):
        t.create_collection(b"c", version=0, max_ttl=5, **common)
    with pytest.raises(ValueError):
        t.create_collection(b"c", version=1, **common)
    with pytest.raises(ValueError):
        t.create_collection(b"c", history=True, **common)
    with pytest.raises(ValueError):
        t.drop_collection(system=True, **common)
    with pytest.raises(ValueError):
        t.drop_scope(by_seqno=1, manifest_uid=1, scope_id=8, version=1)


def test_hand_built_scope_table_is_valid():
    """The base of the malformed string cases decodes when left intact."""
    expect = dict(manifest_uid=1, scope_id=9, name="ab")
    assert subset(only_row(_bad(3, 2, b"", _fb_string_table(2))), expect) == expect
