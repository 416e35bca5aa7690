"""Document values in bulk: bodies, xattrs and JSON flags against the encoder's ground truth,
the reference's vectors, hypothesis round trips and damaged Snappy blocks and xattr sections."""

from __future__ import annotations

import struct

import cramjam
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import buffers
from dcpfast import testing as t
from dcpfast import values as V
from dcpfast.errors import describe
from dcpfast.protocol import Datatype, ValueProblem
from tests.spec_vectors import VECTORS

VP = ValueProblem
JSON, SNAPPY, XATTR = int(Datatype.JSON), int(Datatype.SNAPPY), int(Datatype.XATTR)
SPEC = {v.id: v for v in VECTORS}
D22 = bytes.fromhex(
    "00000072000000215f73796e63007b22636173223a2264656164626565666361666566656564227d0000000049"
    "6d657461007b22617574686f72223a2254726f6e64204e6f72627965222c22636f6e74656e742d74797065223a"
    "226170706c69636174696f6e2f6f637465742d73747265616d227d00")


def snappy(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def mutation(value: bytes, datatype: int = 0, seqno: int = 1, **kw) -> bytes:
    return t.mutation(b"doc-%d" % seqno, value, by_seqno=seqno, datatype=datatype, **kw)


def rows(table) -> list[tuple]:
    """(body, xattrs as a dict or None, is_json) per row."""
    out = []
    for body, xattrs, is_json in zip(table["body"].to_pylist(), table["xattrs"].to_pylist(),
                                     table["is_json"].to_pylist()):
        out.append((body, None if xattrs is None else dict(xattrs), is_json))
    return out


def one(value: bytes, datatype: int = 0, **kw) -> tuple:
    """(body, xattrs, is_json) of a single mutation carrying ``value``."""
    table = dcpfast.scan(mutation(value, datatype)).values(**kw)
    assert table.num_rows == 1
    return rows(table)[0]


def pair(key: bytes, value: bytes) -> bytes:
    return struct.pack(">I", len(key) + len(value) + 2) + key + b"\0" + value + b"\0"


def section(*pairs: bytes, total: int | None = None) -> bytes:
    body = b"".join(pairs)
    return struct.pack(">I", len(body) if total is None else total) + body


# -- the encoder's ground truth --------------------------------------------------------------

CONFIGS = [dict(), dict(sync_writes=True), dict(collections=False, delete_times=False),
           dict(stream_ids=True, snappy_ratio=0.5, xattr_ratio=0.5),
           dict(json_ratio=0.0, snappy_ratio=1.0, xattr_ratio=1.0, sync_writes=True)]


@pytest.mark.parametrize("config", CONFIGS)
def test_synthetic_documents(config):
    frames = t.synthetic_frames(600, seed=5, **config)
    batch = dcpfast.scan(b"".join(f.data for f in frames))
    table = batch.values()
    assert table.schema == V.values_schema()
    docs = [(i, f) for i, f in enumerate(frames) if f.body is not None]
    assert table["index"].to_pylist() == [i for i, _ in docs]
    assert table["offset"].to_pylist() == batch["offset"][[i for i, _ in docs]].tolist()
    assert rows(table) == [(f.body, f.xattrs, bool(f.fields["datatype"] & JSON))
                           for _, f in docs]
    assert not batch.errors


def test_synthetic_modes():
    frames = t.synthetic_frames(800, seed=9, sync_writes=True, snappy_ratio=0.4,
                                xattr_ratio=0.4)
    batch = dcpfast.scan(b"".join(f.data for f in frames))
    docs = [f for f in frames if f.body is not None]
    split = batch.values()
    drop = batch.values(xattrs="drop")
    assert drop["body"].equals(split["body"])
    assert drop["xattrs"].null_count == len(docs)
    keep = batch.values(xattrs="keep")
    raw = [f.fields["value"] for f in docs]
    inflated = [bytes(cramjam.snappy.decompress_raw(v))
                if f.fields["datatype"] & SNAPPY and v else v for f, v in zip(docs, raw)]
    assert keep["body"].to_pylist() == inflated
    assert keep["xattrs"].null_count == len(docs)
    sent = batch.values(decompress=False)
    for f, body, xattrs in zip(docs, sent["body"].to_pylist(), sent["xattrs"].to_pylist()):
        if f.fields["datatype"] & SNAPPY:
            assert (body, xattrs) == (f.fields["value"], None)
        else:
            assert (body, None if xattrs is None else dict(xattrs)) == (f.body, f.xattrs)
    assert batch.values(decompress=False, xattrs="keep")["body"].to_pylist() == raw


def test_offsets_are_stream_positions():
    frames = t.synthetic_frames(500, seed=2, snappy_ratio=0.5, xattr_ratio=0.5)
    data = b"".join(f.data for f in frames)
    whole = dcpfast.scan(data).values()
    cut = sum(len(f.data) for f in frames[:len(frames) // 2])
    first = dcpfast.scan(data[:cut], collections=True).values()
    second = dcpfast.scan(data[cut:], collections=True, base_offset=cut).values()
    joined = pa.concat_tables([first, second])
    for name in ("offset", "body", "xattrs", "is_json"):
        assert joined[name].equals(whole[name]), name


# -- vectors ---------------------------------------------------------------------------------


def test_spec_mutation_vectors():
    table = dcpfast.scan(SPEC["D11"].data).values()
    assert rows(table) == [(b"world", None, False)]
    assert table["offset"].to_pylist() == [0]
    table = dcpfast.scan(SPEC["S1"].data, collections=True).values()
    assert rows(table) == [(b'{"a":1}', None, True)]


def test_spec_deletion_with_xattrs():
    batch = dcpfast.scan(SPEC["S2"].data, collections=True)
    assert rows(batch.values()) == [(b"", {"_sync": '{"a":1}'}, False)]


def test_spec_xattr_blob():
    expect = {"_sync": '{"cas":"deadbeefcafefeed"}',
              "meta": '{"author":"Trond Norbye","content-type":"application/octet-stream"}'}
    assert one(D22, XATTR) == (b"", expect, False)
    assert one(D22 + b'{"x":1}', XATTR | JSON) == (b'{"x":1}', expect, True)
    assert one(snappy(D22 + b"body"), XATTR | SNAPPY) == (b"body", expect, False)
    assert one(D22, XATTR, xattrs="drop") == (b"", None, False)
    assert one(D22, XATTR, xattrs="keep") == (D22, None, False)


def test_only_document_frames():
    data = b"".join([
        t.snapshot_marker(1, 9), mutation(b"a", seqno=1),
        t.system_event(0, by_seqno=2, key=b"c", value=bytes(16)),
        t.deletion(b"d", by_seqno=3), t.expiration(b"e", b"", by_seqno=4),
        t.prepare(b"p", b"pv", by_seqno=5), t.commit(b"p", prepared_seqno=5, commit_seqno=6),
        t.response(0x57, value=b"not a doc"), t.deletion(b"d1", b"", by_seqno=7, delete_time=1),
        t.control(b"k", b"v"), t.noop()])
    batch = dcpfast.scan(data, collections=False)
    table = batch.values()
    assert table["index"].to_pylist() == [1, 3, 4, 5, 8]
    assert table["body"].to_pylist() == [b"a", b"", b"", b"pv", b""]
    assert table["offset"].to_pylist() == batch["offset"][[1, 3, 4, 5, 8]].tolist()


def test_no_documents_and_empty_batch():
    for data in (b"", t.noop() + t.snapshot_marker(1, 2)):
        table = dcpfast.scan(data).values()
        assert table.num_rows == 0 and table.schema == V.values_schema()


def test_filtered_batch_indexes_its_own_rows():
    frames = t.synthetic_frames(200, seed=4)
    batch = dcpfast.scan(b"".join(f.data for f in frames))
    deletions = batch.only("deletion")
    table = deletions.values()
    assert table["index"].to_pylist() == list(range(len(deletions)))
    assert table["offset"].to_pylist() == deletions["offset"].tolist()


# -- empty values and datatype bits on them (MB-40493) ---------------------------------------


@pytest.mark.parametrize("datatype", range(8))
def test_empty_value_any_datatype(datatype):
    assert one(b"", datatype) == (b"", None, bool(datatype & JSON))
    data = t.deletion(b"gone", b"", by_seqno=3, datatype=datatype, delete_time=0)
    assert rows(dcpfast.scan(data).values()) == [(b"", None, bool(datatype & JSON))]


def test_snappy_of_nothing_is_an_empty_body():
    block = snappy(b"")
    assert one(block, SNAPPY) == (b"", None, False)
    assert one(block, SNAPPY | XATTR) == (b"", None, False)   # nothing to split


# -- damage ----------------------------------------------------------------------------------

BAD_SNAPPY = [
    (b"\xff\xff\xff\xff\xff\xff", VP.SNAPPY_PREAMBLE),
    (b"\x80\x80\x80\x80\x10", VP.SNAPPY_PREAMBLE),            # 5th byte beyond 32 bits
    (b"\x80", VP.SNAPPY_PREAMBLE),                            # no stop byte before the end
    (b"\xe8\x07\x00a", VP.SNAPPY_LENGTH),                     # 1000 bytes out of 2
    (snappy(b"hello world" * 5)[:-3], VP.SNAPPY),             # cut short
    (b"\x05\xff\xff\xff\xff\xff", VP.SNAPPY),                 # garbage elements
    (b"\x0a\x01\x00", VP.SNAPPY),                             # copy before any output
]
BAD_SECTIONS = [
    (b"\x00\x00", VP.XATTR_SHORT),
    (section(pair(b"a", b"1"), total=50), VP.XATTR_SECTION),
    (section(pair(b"a", b"1") + b"\x00\x00", total=len(pair(b"a", b"1")) + 2),
     VP.XATTR_PAIR_HEADER),
    (section(struct.pack(">I", 2) + b"a\0"), VP.XATTR_PAIR_LENGTH),
    (section(struct.pack(">I", 40) + b"a\0b\0"), VP.XATTR_PAIR_LENGTH),
    (section(struct.pack(">I", 4) + b"abcd"), VP.XATTR_KEY),           # no NUL
    (section(struct.pack(">I", 4) + b"\0ab\0"), VP.XATTR_KEY),         # empty key
    (section(struct.pack(">I", 4) + b"abc\0"), VP.XATTR_KEY),          # no value after it
    (section(struct.pack(">I", 5) + b"ab\0cd"), VP.XATTR_VALUE),       # no closing NUL
    (section(struct.pack(">I", 6) + b"a\0b\0c\0"), VP.XATTR_VALUE),    # NUL inside
    (section(pair(b"k\xff", b"1")), VP.XATTR_UTF8),
    (section(pair(b"k", b"\xc0\xaf")), VP.XATTR_UTF8),                 # overlong
    (section(pair(b"k", b"\xed\xa0\x80")), VP.XATTR_UTF8),             # surrogate
    (section(pair(b"k", b"\xf4\x90\x80\x80")), VP.XATTR_UTF8),         # beyond U+10FFFF
    (section(pair(b"k", b"\xe2\x82")), VP.XATTR_UTF8),                 # cut short
    (section(pair(b"a", b"1"), pair(b"b", b"2"), pair(b"a", b"3")), VP.XATTR_DUPLICATE),
    (section(*[pair(b"k%d" % i, b"1") for i in range(40)], pair(b"k7", b"2")),
     VP.XATTR_DUPLICATE),
    # past the pairs compared pairwise: keys hashed, the table grown several times
    (section(*[pair(b"k%d" % i, b"1") for i in range(1000)], pair(b"k999", b"2")),
     VP.XATTR_DUPLICATE),
    (section(*[pair(b"k%d" % i, b"1") for i in range(300)], pair(b"k250", b"2"),
             pair(b"k\xff", b"1")), VP.XATTR_DUPLICATE),          # the first problem
    (section(*[pair(b"k%d" % i, b"1") for i in range(300)], pair(b"k\xff", b"1"),
             pair(b"k250", b"2")), VP.XATTR_UTF8),
]
LONG_SECTION = section(*[pair(b"key%d" % i, b"v%d" % i) for i in range(1000)])
DAMAGED = [(v, SNAPPY, code) for v, code in BAD_SNAPPY] + \
          [(v, XATTR, code) for v, code in BAD_SECTIONS] + \
          [(snappy(v), XATTR | SNAPPY, code) for v, code in BAD_SECTIONS]


def reason_of(code):
    """The start of the reason the decoder gives for ``code`` (details vary)."""
    return describe(code, "\0", "\0").split("\0")[0]


@pytest.mark.parametrize("value, datatype, code", DAMAGED)
def test_damaged_value_strict(value, datatype, code):
    good = mutation(b"fine", seqno=1)
    data = good + mutation(value, datatype, seqno=2) + mutation(b"x", seqno=3)
    batch = dcpfast.scan(data)
    with pytest.raises(dcpfast.DcpFormatError) as info:
        batch.values()
    assert info.value.offset == len(good)
    assert info.value.reason.startswith(reason_of(code)), info.value.reason


@pytest.mark.parametrize("value, datatype, code", DAMAGED)
def test_damaged_value_skip(value, datatype, code):
    good = mutation(b"fine", seqno=1)
    bad = mutation(value, datatype | JSON, seqno=2)
    batch = dcpfast.scan(good + bad + mutation(b"x", seqno=3), errors="skip")
    table = batch.values()
    assert table["body"].to_pylist() == [b"fine", None, b"x"]
    assert table["xattrs"].to_pylist() == [None, None, None]
    assert table["is_json"].to_pylist() == [False, True, False]
    [region] = dcpfast.skipped_regions(table)
    assert (region.offset, region.length) == (len(good), len(bad))
    assert region.reason.startswith(reason_of(code)), region.reason
    assert batch.errors == []                       # the batch is left as it was


def test_errors_argument_overrides_the_batch_mode():
    data = mutation(b"ok") + mutation(b"\xff" * 6, SNAPPY, seqno=2)
    strict = dcpfast.scan(data)
    table = strict.values(errors="skip")
    assert table["body"].null_count == 1 and len(dcpfast.skipped_regions(table)) == 1
    assert strict.errors == []
    with pytest.raises(dcpfast.DcpFormatError):
        dcpfast.scan(data, errors="skip").values(errors="strict")


def test_skip_errors_are_listed_in_each_table_and_never_in_the_batch():
    data = (mutation(b"\xff" * 6, SNAPPY, seqno=1) + mutation(b"ok", seqno=2)
            + mutation(b"\x00\x00", XATTR, seqno=3))
    batch = dcpfast.scan(data, errors="skip")
    first = batch.values()
    listed = dcpfast.skipped_regions(first)
    assert [r.offset for r in listed] == [0, len(mutation(b"\xff" * 6, SNAPPY, seqno=1))
                                          + len(mutation(b"ok", seqno=2))]
    again = batch.values(xattrs="drop")
    assert dcpfast.skipped_regions(again) == listed
    assert dcpfast.skipped_regions(batch.only("mutation").values()) == listed
    assert dcpfast.skipped_regions(batch.filter(np.array([2])).values()) == listed[1:]
    assert batch.errors == []
    assert again["body"].equals(first["body"])
    clean = batch.filter(np.array([1])).values()
    assert dcpfast.skipped_regions(clean) == [] and clean.schema.metadata is None


def test_scan_damage_stays_in_the_batch_and_value_damage_in_the_table():
    bad = mutation(b"\xff" * 6, SNAPPY, seqno=2)
    data = t.noop() + b"\x99" * 30 + mutation(b"ok") + bad
    batch = dcpfast.scan(data, errors="skip", final=True)
    scanned = list(batch.errors)
    assert len(scanned) == 1
    table = batch.values()
    assert batch.errors == scanned
    assert [r.offset for r in dcpfast.skipped_regions(table)] == [len(data) - len(bad)]


def test_value_damage_is_listed_in_stream_order():
    bad = mutation(b"\xff" * 6, SNAPPY, seqno=1)
    data = (bad + mutation(b"ok", seqno=2) + b"\x99" * 30 + t.noop()
            + mutation(b"\x00\x00", XATTR, seqno=3))
    batch = dcpfast.scan(data, errors="skip", final=True)
    assert len(batch.errors) == 1
    listed = dcpfast.skipped_regions(batch.values(threads=1))
    assert [r.offset for r in listed] == [0, len(data) - len(mutation(b"\x00\x00", XATTR,
                                                                     seqno=3))]
    assert len(batch.errors) == 1


def test_each_piece_lists_its_own_damage():
    """``iter_values``: a piece lists the damaged values among its rows, and a strict
    batch raises before the piece that holds the first."""
    bad = mutation(b"\xff" * 6, SNAPPY, seqno=2)
    data = mutation(b"a" * 100) + bad + mutation(b"b" * 100, seqno=3) + bad
    batch = dcpfast.scan(data, errors="skip")
    pieces = list(V.iter_values(batch, piece_bytes=64))
    for piece in pieces:
        assert [r.offset for r in dcpfast.skipped_regions(piece)] == [
            int(batch["offset"][i]) for i in piece["index"].to_pylist() if i in (1, 3)]
    assert len(pieces) > 2 and batch.errors == []
    strict = V.iter_values(dcpfast.scan(data), piece_bytes=64)
    assert next(strict)["index"].to_pylist() == [0]
    with pytest.raises(dcpfast.DcpFormatError) as info:
        list(strict)
    assert info.value.offset == int(batch["offset"][1])


def test_base_offset_in_errors():
    bad = mutation(b"\x00\x00", XATTR)
    batch = dcpfast.scan(bad, base_offset=1000)
    with pytest.raises(dcpfast.DcpFormatError) as info:
        batch.values()
    assert info.value.offset == 1000
    batch = dcpfast.scan(bad, base_offset=1000, errors="skip")
    [region] = dcpfast.skipped_regions(batch.values())
    assert region == dcpfast.SkippedRegion(1000, len(bad), region.reason)


def test_arguments_are_checked():
    batch = dcpfast.scan(mutation(b"v"))
    with pytest.raises(ValueError, match="xattrs"):
        batch.values(xattrs="merge")
    with pytest.raises(ValueError, match="errors"):
        batch.values(errors="ignore")
    projected = dcpfast.scan(mutation(b"v"), columns=["offset", "opcode"])
    with pytest.raises(ValueError, match="datatype, value_offset, value_len"):
        projected.values()
    assert dcpfast.scan(mutation(b"v"), columns=["offset", "datatype", "value"]) \
        .values()["body"].to_pylist() == [b"v"]


def test_many_pairs_and_multibyte_text():
    pairs = {f"k{i}": f'"{"é" * i}€𝄞"' for i in range(30)}
    assert one(t.xattr_value(pairs, b"b"), XATTR) == (b"b", pairs, False)
    assert one(section(), XATTR) == (b"", {}, False)                  # an empty section
    many = {f"key{i}": f"v{i}" for i in range(1000)}                   # keys hashed
    assert one(LONG_SECTION + b"b", XATTR) == (b"b", many, False)


# -- round trips -----------------------------------------------------------------------------

keys = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
               min_size=1, max_size=12)
texts = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                max_size=40)
documents = st.tuples(st.binary(max_size=300), st.none() | st.dictionaries(keys, texts,
                                                                            max_size=5),
                      st.booleans(), st.booleans(), st.sampled_from(
                          ["mutation", "prepare", "deletion", "expiration"]))


def encode(seqno, body, xattrs, compress, is_json, kind):
    value, datatype = body, JSON if is_json else 0
    if xattrs is not None:
        value, datatype = t.xattr_value(xattrs, body), datatype | XATTR
    if compress and value:
        value, datatype = snappy(value), datatype | SNAPPY
    key = b"k%d" % seqno
    if kind == "mutation":
        return t.mutation(key, value, by_seqno=seqno, datatype=datatype)
    if kind == "prepare":
        return t.prepare(key, value, by_seqno=seqno, datatype=datatype)
    if kind == "deletion":
        return t.deletion(key, value, by_seqno=seqno, datatype=datatype, delete_time=7)
    return t.expiration(key, value, by_seqno=seqno, datatype=datatype)


@settings(max_examples=150, deadline=None)
@given(st.lists(documents, max_size=8))
def test_round_trip(docs):
    data = b"".join(encode(i + 1, *doc) for i, doc in enumerate(docs))
    batch = dcpfast.scan(data, collections=False)
    assert rows(batch.values()) == [(body, xattrs, is_json)
                                    for body, xattrs, _, is_json, _ in docs]
    kept = batch.values(xattrs="keep")["body"].to_pylist()
    assert kept == [t.xattr_value(x, b) if x is not None else b for b, x, *_ in docs]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.integers(0, 7), st.sampled_from(["split", "drop", "keep"]),
       st.booleans())
def test_arbitrary_values_never_crash(value, datatype, xattrs, decompress):
    data = mutation(b"before") + mutation(value, datatype, seqno=2)
    try:
        strict = dcpfast.scan(data).values(xattrs=xattrs, decompress=decompress)
    except dcpfast.DcpFormatError as error:
        assert error.offset == len(mutation(b"before"))
        strict = None
    batch = dcpfast.scan(data, errors="skip")
    table = batch.values(xattrs=xattrs, decompress=decompress)
    table.validate(full=True)
    assert table["body"][0].as_py() == b"before"
    assert (strict is None) == (table["body"].null_count == 1) \
        == (len(dcpfast.skipped_regions(table)) == 1)
    assert batch.errors == []
    if strict is not None:
        assert strict.equals(table)


# -- large columns and keys as text ---------------------------------------------------------


@pytest.mark.parametrize("body, pairs", [(b"b" * 100, {"k": "1"}), (b"b", {"k": "v" * 100})])
def test_large_columns_past_the_int32_limit(monkeypatch, body, pairs):
    """Past 2 GiB of bodies or of xattr text both turn large (tried at a 50-byte limit)."""
    monkeypatch.setattr(buffers, "INT32_MAX", 50)
    data = mutation(t.xattr_value(pairs, body), XATTR) + mutation(b"plain", seqno=2)
    table = dcpfast.scan(data).values()
    assert table.schema == V.values_schema(large=True)
    table.validate(full=True)
    assert rows(table) == [(body, pairs, False), (b"plain", None, False)]


def test_text_or_null_keeps_valid_text_and_nulls_the_rest():
    """Keys as strings: all ASCII (taken as they are), other valid UTF-8, bytes that are
    not UTF-8 (null), nulls, a slice whose buffer holds other bytes, chunks."""
    from dcpfast.values import text_or_null

    assert text_or_null(pa.array([b"doc-1", b"", None, b"k"])).to_pylist() == \
        ["doc-1", "", None, "k"]
    assert text_or_null(pa.array(["k\u00e9".encode(), b"a"])).to_pylist() == ["k\u00e9", "a"]
    assert text_or_null(pa.array([b"k\xff", b"ok", b"\xc3"])).to_pylist() == [None, "ok", None]
    sliced = pa.array([b"\xff\xfe", b"ok", b"fine", b"\xc3"]).slice(1, 2)
    assert text_or_null(sliced).to_pylist() == ["ok", "fine"]
    chunked = pa.chunked_array([pa.array([b"a"]), pa.array([b"b\xff", b"c"])])
    assert text_or_null(chunked).to_pylist() == ["a", None, "c"]
    assert text_or_null(pa.array([], pa.binary())).to_pylist() == []
