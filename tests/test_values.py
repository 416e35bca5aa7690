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
from tests.cores import COMPILED, TWINS
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
    assert len(batch.errors) == 1
    region = batch.errors[0]
    assert (region.offset, region.length) == (len(good), len(bad))
    assert region.reason.startswith(reason_of(code)), region.reason


def test_errors_argument_overrides_the_batch_mode():
    data = mutation(b"ok") + mutation(b"\xff" * 6, SNAPPY, seqno=2)
    strict = dcpfast.scan(data)
    table = strict.values(errors="skip")
    assert table["body"].null_count == 1 and len(strict.errors) == 1
    with pytest.raises(dcpfast.DcpFormatError):
        dcpfast.scan(data, errors="skip").values(errors="strict")


def test_skip_errors_are_listed_once():
    data = (mutation(b"\xff" * 6, SNAPPY, seqno=1) + mutation(b"ok", seqno=2)
            + mutation(b"\x00\x00", XATTR, seqno=3))
    batch = dcpfast.scan(data, errors="skip")
    first = batch.values()
    listed = list(batch.errors)
    assert [r.offset for r in listed] == [0, len(mutation(b"\xff" * 6, SNAPPY, seqno=1))
                                          + len(mutation(b"ok", seqno=2))]
    again = batch.values(xattrs="drop")
    batch.only("mutation").values()
    batch.filter(np.array([2])).values()
    assert batch.errors == listed
    assert again["body"].equals(first["body"])


def test_scan_damage_and_value_damage_share_the_list():
    bad = mutation(b"\xff" * 6, SNAPPY, seqno=2)
    data = t.noop() + b"\x99" * 30 + mutation(b"ok") + bad
    batch = dcpfast.scan(data, errors="skip", final=True)
    assert len(batch.errors) == 1
    batch.values()
    assert len(batch.errors) == 2
    assert batch.errors[1].offset == len(data) - len(bad)


def test_value_damage_is_listed_in_stream_order_among_scan_damage():
    bad = mutation(b"\xff" * 6, SNAPPY, seqno=1)
    data = bad + mutation(b"ok", seqno=2) + b"\x99" * 30 + t.noop()
    batch = dcpfast.scan(data, errors="skip", final=True)
    assert len(batch.errors) == 1
    batch.values()
    assert [r.offset for r in batch.errors] == sorted(r.offset for r in batch.errors)
    assert batch.errors[0].offset == 0 and len(batch.errors) == 2


def test_base_offset_in_errors():
    bad = mutation(b"\x00\x00", XATTR)
    batch = dcpfast.scan(bad, base_offset=1000)
    with pytest.raises(dcpfast.DcpFormatError) as info:
        batch.values()
    assert info.value.offset == 1000
    batch = dcpfast.scan(bad, base_offset=1000, errors="skip")
    batch.values()
    assert batch.errors == [dcpfast.SkippedRegion(1000, len(bad), batch.errors[0].reason)]


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
    assert (strict is None) == (table["body"].null_count == 1) == (len(batch.errors) == 1)
    if strict is not None:
        assert strict.equals(table)


# -- the compiled helper against its twin ----------------------------------------------------

_values_py = TWINS["values"]
compiled = COMPILED["values"] if COMPILED else None
needs_compiled = pytest.mark.skipif(compiled is None, reason="compiled helper not built")


def _layout(blobs):
    data = b"".join(blobs)
    lengths = np.array([len(b) for b in blobs], np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8), starts, lengths


def _both(name, *args, outputs=()):
    """Run ``name`` on both helpers with fresh copies of the output arrays; return the
    results and outputs of each."""
    got = []
    for core in (compiled, _values_py):
        outs = [o.copy() for o in outputs]
        got.append((getattr(core, name)(*args, *outs), [o.tolist() for o in outs]))
    return got


blobs = st.lists(st.one_of(st.binary(max_size=60), st.sampled_from(
    [v for v, _ in BAD_SECTIONS] + [D22, t.xattr_blob({"a": "1", "é": "€"}), LONG_SECTION]),
    # long sections of few distinct keys: duplicates among the first pairs and past them
    st.lists(st.sampled_from([b"k%d" % i for i in range(40)]), min_size=10, max_size=60).map(
        lambda ks: section(*[pair(k, b"1") for k in ks])),
    st.builds(lambda d, tail: t.xattr_value(d, tail), st.dictionaries(keys, texts,
                                                                      max_size=4),
              st.binary(max_size=8))), max_size=8)


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(blobs)
def test_twin_parses_like_the_compiled_helper(values):
    buf, starts, lengths = _layout(values)
    n = len(values)
    source = np.zeros(n, np.uint8)
    fast, slow = _both("parse_xattrs", buf, buf, source, starts, lengths,
                       outputs=(np.empty(n, np.int64), np.empty(n, np.int64)))
    assert fast == slow
    (key_bytes, value_bytes, _), (skip, pairs) = fast
    total = sum(pairs)
    outs = (np.empty(total + 1, np.int64), np.empty(key_bytes, np.uint8),
            np.empty(total + 1, np.int64), np.empty(value_bytes, np.uint8))
    pairs = np.array(pairs, np.int64)
    results = []
    for core in (compiled, _values_py):
        copies = [o.copy() for o in outs]
        core.xattr_strings(buf, buf, source, starts, lengths, pairs, copies[0], copies[1],
                           copies[2], copies[3])
        results.append([c.tolist() for c in copies])
    assert results[0] == results[1]


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=30), st.binary(max_size=200).map(snappy),
                          st.sampled_from([v for v, _ in BAD_SNAPPY])), max_size=8))
def test_twin_inflates_like_the_compiled_helper(values):
    buf, starts, lengths = _layout(values)
    fast, slow = _both("snappy_lengths", buf, starts, lengths,
                       outputs=(np.empty(len(values), np.int64),))
    assert fast == slow
    declared = np.array(fast[1][0], np.int64)
    sound = declared >= 0
    bounds = np.concatenate([[0], np.cumsum(declared[sound])]).astype(np.int64)
    got = []
    for core in (compiled, _values_py):
        out = np.zeros(int(bounds[-1]), np.uint8)
        problems = core.inflate(buf, starts[sound], lengths[sound], out, bounds,
                                cramjam.snappy.decompress_raw_into)
        got.append((problems, out.tolist()))
    assert got[0] == got[1]


@pytest.mark.parametrize("core", ["compiled", "twin"])
def test_helpers_reject_ranges_outside_their_buffers(core):
    module = _values_py if core == "twin" else compiled
    if module is None:
        pytest.skip("compiled helper not built")
    chunks = [np.zeros(10, np.uint8), np.zeros(3, np.uint8)]
    for chunk, start, bounds in (([1], 0, [0, 4]), ([2], 0, [0, 1]), ([-1], 0, [0, 1]),
                                 ([0], -1, [0, 1]), ([0], 8, [0, 3]), ([0], 0, [3, 2])):
        with pytest.raises(ValueError):
            module.gather_chunks(chunks, np.array(chunk, np.int32), np.array([start], np.int64),
                                 np.array(bounds, np.int64), np.empty(8, np.uint8))
    with pytest.raises(ValueError):                # more rows than bounds
        module.gather_chunks(chunks, np.zeros(2, np.int32), np.zeros(2, np.int64),
                             np.array([0, 1], np.int64), np.empty(8, np.uint8))
    offsets = [np.array([0, 4, 10], np.int64), np.array([0], np.int64),
               np.array([2, 3, 7], np.int32)]
    valids = [None, None, np.array([False, True])]
    for chunk, entry in (([3], [0]), ([0], [2]), ([0], [-1]), ([1], [0])):
        with pytest.raises(ValueError):            # no such chunk, or no such value
            module.spans_at(offsets, valids, np.array(chunk, np.int32),
                            np.array(entry, np.int64), np.empty(1, np.int64),
                            np.zeros(2, np.int64), np.empty(1, np.uint8))
    with pytest.raises(ValueError):                # more rows than bounds
        module.spans_at(offsets, valids, np.zeros(2, np.int32), np.zeros(2, np.int64),
                        np.empty(2, np.int64), np.zeros(2, np.int64), np.empty(2, np.uint8))
    with pytest.raises(ValueError):                # a validity of another length
        module.spans_at(offsets, [None, None, np.array([True])], np.zeros(1, np.int32),
                        np.zeros(1, np.int64), np.empty(1, np.int64), np.zeros(2, np.int64),
                        np.empty(1, np.uint8))
    starts, bounds, valid = np.empty(5, np.int64), np.zeros(6, np.int64), np.empty(5, np.uint8)
    module.spans_at(offsets, valids, np.array([0, -1, 0, 2, 2], np.int32),
                    np.array([1, 5, 0, 0, 1], np.int64), starts, bounds, valid)
    assert bounds.tolist() == [0, 6, 6, 10, 10, 14] and valid.tolist() == [1, 0, 1, 0, 1]
    assert starts[[0, 2, 4]].tolist() == [4, 0, 3]
    source, start, bounds = np.empty(2, np.int32), np.empty(2, np.int64), np.zeros(3, np.int64)
    taken = np.empty(2, np.uint8)
    spans = ([np.array([0, 1], np.int32)], [np.array([3, 0], np.int64)],
             [np.array([2, 5], np.int64)], [None], np.array([4], np.int32))
    for chunk, entry in (([1, 0], [0, 0]), ([0, 0], [2, 0]), ([0, 0], [-1, 0])):
        with pytest.raises(ValueError):
            module.chunk_spans(*spans, np.array(chunk, np.int32), np.array(entry, np.int64),
                               source, start, bounds, taken)
    with pytest.raises(ValueError):                # a validity of another length
        module.chunk_spans(*spans[:3], [np.array([True])], spans[4], np.zeros(2, np.int32),
                           np.zeros(2, np.int64), source, start, bounds, taken)
    module.chunk_spans(*spans, np.array([0, -1], np.int32), np.array([1, 9], np.int64), source,
                       start, bounds, taken)
    assert (source[0], start[0], bounds.tolist(), taken.tolist()) == (5, 0, [0, 5, 5], [1, 0])
    two = ([np.array([0, 1], np.int32), np.array([0], np.int32)],
           [np.array([3, 0], np.int64), np.array([7], np.int64)],
           [np.array([2, 5], np.int64), np.array([1], np.int64)],
           [np.array([True, False]), None], np.array([4, 6], np.int32))
    source, start = np.empty(4, np.int32), np.empty(4, np.int64)
    bounds, taken = np.zeros(5, np.int64), np.empty(4, np.uint8)
    module.chunk_spans(*two, np.array([0, 0, 1, -1], np.int32), np.array([0, 1, 0, 0], np.int64),
                       source, start, bounds, taken)
    assert taken.tolist() == [1, 0, 1, 0]           # a null of a chunk is taken as a null
    assert bounds.tolist() == [0, 2, 2, 3, 3] and (source[2], start[2]) == (6, 7)


@pytest.mark.parametrize("core", ["compiled", "twin"])
def test_spread_spans_lists_every_item_of_its_span(core):
    """``spread_spans`` gives each item of each span its chunk and place, spans of no item
    (nulls) giving none, counted from ``bounds[0]``; bounds that go down or answers of
    another length are refused."""
    module = _values_py if core == "twin" else compiled
    if module is None:
        pytest.skip("compiled helper not built")
    chunk = np.array([2, -1, 0, 1], np.int32)
    starts = np.array([5, 0, 0, 9], np.int64)
    bounds = np.array([3, 6, 6, 7, 9], np.int64)
    item_chunk, item_entry = np.empty(6, np.int32), np.empty(6, np.int64)
    module.spread_spans(chunk, starts, bounds, item_chunk, item_entry)
    assert item_chunk.tolist() == [2, 2, 2, 0, 1, 1]
    assert item_entry.tolist() == [5, 6, 7, 0, 9, 10]
    with pytest.raises(ValueError):                 # bounds that go down
        module.spread_spans(chunk, starts, np.array([0, 2, 1, 3, 4], np.int64),
                            np.empty(4, np.int32), np.empty(4, np.int64))
    with pytest.raises(ValueError):                 # answers of another length
        module.spread_spans(chunk, starts, bounds, np.empty(5, np.int32), np.empty(6, np.int64))
    with pytest.raises(ValueError):                 # one bound too few
        module.spread_spans(chunk, starts, bounds[:-1], np.empty(3, np.int32),
                            np.empty(3, np.int64))


_chunk = st.tuples(st.lists(st.one_of(st.none(), st.binary(max_size=9)), max_size=6),
                   st.booleans(), st.integers(0, 3), st.integers(0, 3))


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(_chunk, max_size=5), data=st.data())
def test_binary_taken_from_chunks_as_arrow_takes_it(chunks, data):
    """``take_binary`` of a column in chunks (binary or large_binary, sliced, with nulls,
    empty) at any positions gives what Arrow's ``take`` of the joined column gives, with
    each core's gather."""
    from dcpfast import _core
    from dcpfast.arrow import take_binary

    arrays = []
    for values, wide, head, tail in chunks:
        array = pa.array(values, pa.large_binary() if wide else pa.binary())
        arrays.append(array.slice(min(head, len(array)),
                                  max(len(array) - head - tail, 0)).cast(pa.large_binary()))
    if data.draw(st.booleans()):           # a null slot that spans bytes: none are taken
        arrays.append(pa.Array.from_buffers(
            pa.large_binary(), 2, [pa.py_buffer(bytes([0b10])),
                                   pa.py_buffer(np.array([0, 3, 5], np.int64)),
                                   pa.py_buffer(b"abcde")]))
    column = pa.chunked_array(arrays, pa.large_binary())
    index = np.array(data.draw(st.lists(st.integers(-2, max(len(column) - 1, -1)),
                                        max_size=20)), np.int64)
    expected = column.combine_chunks().take(pa.array(index, pa.int64(),
                                                     mask=index < 0)).to_pylist()
    for module in [m for m in (_values_py, compiled) if m is not None]:
        _core.values, before = module, _core.values
        try:
            taken = take_binary(column if len(arrays) != 1 else arrays[0], index)
        finally:
            _core.values = before
        taken.validate(full=True)
        assert taken.type == pa.binary()
        assert taken.to_pylist() == expected
        if len(expected) and not all(v is None for v in expected):
            assert taken.buffers()[2].size == sum(len(v) for v in expected if v is not None)
        wide = take_binary(column, index, wide=True)
        assert wide.type == pa.large_binary() and wide.to_pylist() == expected
    if len(column):
        with pytest.raises(IndexError):
            take_binary(column, np.array([len(column)]))
        with pytest.raises(TypeError):                # another layout: refused, not read
            take_binary(column.cast(pa.binary_view()), index)


_maps = st.lists(st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=4),
                                                           st.text(max_size=6)),
                                                 max_size=3)), max_size=6)


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(st.tuples(_maps, st.integers(0, 2), st.integers(0, 2)), max_size=4),
       large=st.booleans(), data=st.data())
def test_maps_taken_from_chunks_as_arrow_takes_them(chunks, large, data):
    """``take_map`` of a map column in chunks (sliced, with nulls and empty maps, string
    or large_string) at any positions, nulls among them, gives what Arrow's ``take`` of
    the joined column gives, of the column's type."""
    from dcpfast.arrow import take_map

    text = pa.large_string() if large else pa.string()
    kind = pa.map_(text, text)
    arrays = []
    for maps, head, tail in chunks:
        array = pa.array(maps, kind)
        arrays.append(array.slice(min(head, len(array)), max(len(array) - head - tail, 0)))
    column = pa.chunked_array(arrays, kind)
    index = np.array(data.draw(st.lists(st.integers(-1, max(len(column) - 1, -1)),
                                        max_size=20)), np.int64)
    expected = column.combine_chunks().take(pa.array(index, pa.int64(), mask=index < 0))
    for source in (column, *(arrays if len(arrays) == 1 else ())):
        taken = take_map(source, index)
        taken.validate(full=True)
        assert taken.type == kind
        assert taken.to_pylist() == expected.to_pylist()
    if len(column):
        with pytest.raises(IndexError):
            take_map(column, np.array([len(column)]))


_bodies = st.lists(st.one_of(st.none(), st.binary(max_size=8)), max_size=6)


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(st.tuples(_bodies, _maps), max_size=4), data=st.data())
def test_state_values_by_reference(chunks, data):
    """The state's values held by reference (``documents.bodies``): gathered at any refs
    (-1 among them) from chunks that come together from several sets, they are the
    values referred to; copied down (``owned``: into a chunk that holds only them;
    ``compacted``: those of chunks holding more than twice what is used), they still
    are, and a compacted set has nothing more to copy down."""
    from dcpfast.documents import bodies

    sets, expected_body, expected_maps = [], {}, {}
    for body, maps in chunks:
        n = min(len(body), len(maps))
        chunk, held = bodies.register(bodies.arrow_chunk(
            pa.array(body[:n], pa.large_binary()), pa.array(maps[:n], bodies.xattr_type())))
        sets.append(held)
        for i in range(n):
            ref = int(bodies.refs(chunk, np.array([i]))[0])
            expected_body[ref], expected_maps[ref] = body[i], maps[i]
    every = bodies.union(sets)
    refs = [-1, *expected_body]
    vref = np.array(data.draw(st.lists(st.sampled_from(refs), max_size=12)), np.int64)

    def check(held, vref_now):
        body, maps = bodies.gather(held, vref_now)
        assert body.to_pylist() == [expected_body.get(int(r)) for r in vref]
        got = [None if m is None else dict(m) for m in maps.to_pylist()]
        assert got == [None if expected_maps.get(int(r)) is None
                       else dict(expected_maps[int(r)]) for r in vref]

    check(every, vref)
    held, moved = bodies.owned(every, vref)
    check(held, moved)
    assert held is None or [len(c) for c in held.values()] == [len(vref)]
    held, moved = bodies.compacted(every, vref, slack=0)
    check(held, moved)
    assert (held is None) == (every is None)      # values stay values, even none used
    again = bodies.compacted(held, moved, slack=0)
    assert again[0] is held and (again[1] == moved).all()
    if bodies.nbytes(every) and not (vref >= 0).any():     # chunks held for nothing
        assert bodies.compacted(every, vref, slack=0)[0] is not every
    assert bodies.compacted(every, vref, slack=bodies.nbytes(every))[0] is every
    if every and any(r >= 0 for r in vref):
        with pytest.raises(ValueError):
            bodies.gather({}, vref)


nul_free = st.binary(max_size=12).map(lambda b: b.replace(b"\0", b"\1"))


@settings(max_examples=500, deadline=None)
@given(nul_free.filter(bool), st.binary(max_size=24).map(lambda b: b.replace(b"\0", b"\1")),
       st.sampled_from(["\u00e9", "\u20ac", "\U0001d11e", "\ud7ff", "\ud800", "\ue000",
                        "\U0010ffff"]), nul_free)
def test_utf8_rule_is_pythons(key, text, char, tail):
    """A section's keys and values are accepted exactly when Python decodes them, the
    character anywhere among ASCII runs that are checked eight bytes at a time."""
    value = text + char.encode("utf-8", "surrogatepass") + tail
    blob = section(pair(key, value))
    try:
        key.decode("utf-8")
        value.decode("utf-8")
        expect = []
    except UnicodeDecodeError:
        expect = [(0, VP.XATTR_UTF8, 4, 0)]
    buf, starts, lengths = _layout([blob])
    for core in filter(None, (compiled, _values_py)):
        found = core.parse_xattrs(buf, buf, np.zeros(1, np.uint8), starts, lengths,
                                  np.empty(1, np.int64), np.empty(1, np.int64))[2]
        assert found == expect, core.__name__


@pytest.mark.parametrize("body, pairs", [(b"b" * 100, {"k": "1"}), (b"b", {"k": "v" * 100})])
def test_large_columns_past_the_int32_limit(monkeypatch, body, pairs):
    """Past 2 GiB of bodies or of xattr text both turn large (tried at a 50-byte limit)."""
    monkeypatch.setattr(buffers, "INT32_MAX", 50)
    data = mutation(t.xattr_value(pairs, body), XATTR) + mutation(b"plain", seqno=2)
    table = dcpfast.scan(data).values()
    assert table.schema == V.values_schema(large=True)
    table.validate(full=True)
    assert rows(table) == [(body, pairs, False), (b"plain", None, False)]


@pytest.mark.parametrize("shape", ["whole", "sliced", "taken", "taken with nulls", "chunked",
                                   "all null", "empty"])
def test_map_columns_change_key_type_whatever_their_shape(shape):
    """xattrs go from large_string maps to string maps (and back) through ``cast_map``:
    pyarrow 25 aborts the process on a plain cast of a map array that ``take`` made."""
    from dcpfast.arrow import cast_map

    large = pa.map_(pa.large_string(), pa.large_string())
    small = pa.map_(pa.string(), pa.string())
    base = pa.array([[("a", "1")], None, [("b", "2"), ("c", "3")], [], [("d", "4")]], large)
    array = {"whole": base, "sliced": base.slice(1, 3),
             "taken": base.take(pa.array([4, 2, 0])),
             "taken with nulls": base.take(pa.array([4, None, 1, 2])),
             "chunked": pa.chunked_array([base.slice(2), base.take(pa.array([1, 0]))]),
             "all null": pa.nulls(3, large), "empty": pa.array([], large)}[shape]
    expected = array.to_pylist()
    for to in (small, large):
        out = cast_map(array, to)
        out.validate(full=True)
        assert out.type == to
        assert out.to_pylist() == expected


@pytest.mark.parametrize("threads", [1, 3])
def test_state_values_as_spans(threads, monkeypatch):
    """The state's chunk of a batch's values (spans of the batch's bytes and of the
    buffers its Snappy values were inflated into: no body copied) gathers, in any order,
    to the bodies and xattrs ``values`` gives, in one piece or several."""
    from dcpfast.documents import bodies

    monkeypatch.setattr("dcpfast.pool.idle_threads", lambda: 3)
    monkeypatch.setattr("dcpfast.pool.default_threads", lambda: 3)
    data = t.synthetic_stream(6000, seed=9, value_size=600, snappy_ratio=0.5,
                              xattr_ratio=0.5)
    batch = dcpfast.scan(data)
    expected = batch.values(threads=1)
    rows, chunk = bodies.spans_chunk(V.value_spans(batch, threads=threads))
    assert rows.tolist() == expected.column("index").to_pylist()
    assert (len(chunk.buffers) > 2) == (threads > 1)     # a buffer inflated per piece
    assert (chunk.source > 0).any() and (chunk.source == 0).any()
    ident, held = bodies.register(chunk)
    order = np.random.default_rng(1).permutation(len(rows))
    body, maps = bodies.gather(held, bodies.refs(ident, order))
    assert body.to_pylist() == expected.column("body").take(order).to_pylist()
    assert [None if m is None else dict(m) for m in maps.to_pylist()] == \
        [None if m is None else dict(m)
         for m in expected.column("xattrs").take(order).to_pylist()]


def test_pooled_take_is_a_take(monkeypatch):
    """``buffers.pooled_take`` gives what numpy's indexing gives, small columns and those
    taken into Arrow's pool alike, read through first or not (a column of another's
    strides is taken as it is), by positions (negative ones among them) or a mask, and
    refuses a position outside the columns whatever their size."""
    rng = np.random.default_rng(4)
    columns = {"a": rng.integers(0, 2**63, 5000, np.uint64),
               "b": rng.integers(0, 2**31, 5000).astype(np.int32),
               "c": rng.random(5000) < 0.5,
               "d": rng.integers(0, 2**16, 10000).astype(np.uint16)[::2]}
    index = rng.integers(-5000, 5000, 3000)
    mask = rng.random(5000) < 0.3
    for pooled_from, read_from in ((buffers.POOLED_FROM, buffers.READ_THROUGH_FROM), (0, 0)):
        monkeypatch.setattr(buffers, "POOLED_FROM", pooled_from)
        monkeypatch.setattr(buffers, "READ_THROUGH_FROM", read_from)
        for chosen in (index, mask):
            taken = buffers.pooled_take(columns, ["a", "b", "c", "d"], chosen)
            for name, column in columns.items():
                assert taken[name].dtype == column.dtype
                np.testing.assert_array_equal(taken[name], column[chosen])
        for outside in ([5000], [-5001]):
            with pytest.raises(IndexError):
                buffers.pooled_take(columns, ["a", "b"], np.array(outside))


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


def test_masked_is_pyarrow_with_a_mask():
    """``arrow.masked`` gives what ``pa.array(values, mask=~valid)`` gives, of the values'
    type or one given of their width, none null or some; a mask of another length is
    refused."""
    import pyarrow as pa

    from dcpfast.arrow import masked

    rng = np.random.default_rng(5)
    for values in (rng.integers(0, 2**32, 1000).astype(np.uint32),
                   rng.integers(0, 2**63, 1000).astype(np.uint64)):
        for valid in (rng.random(1000) < 0.7, np.ones(1000, bool), np.zeros(1000, bool)):
            got = masked(values, valid)
            got.validate(full=True)
            assert got.equals(pa.array(values, mask=~valid))
    times = rng.integers(0, 2**62, 10)
    valid = rng.random(10) < 0.5
    kind = pa.timestamp("ns", tz="UTC")
    assert masked(times, valid, kind).equals(pa.array(times, kind, mask=~valid))
    with pytest.raises(ValueError):
        masked(times, valid[:9])


def test_state_values_gathered_whatever_their_chunk_ids():
    """Values are gathered from chunks whose ids follow each other, leave gaps, or lie far
    apart (ids that wrapped past 2**31), and a ref to a chunk not held (below, between or
    above those held) is refused."""
    from dcpfast.documents import bodies

    def chunk(i):
        return bodies.arrow_chunk(pa.array([b"a%d" % i, None, b"b%d" % i], pa.large_binary()),
                                  pa.array([None, None, [("k", "v")]], bodies.xattr_type()))
    for ids, missing in (((7, 8, 9), (6, 10)), ((2, 4), (1, 3, 5)),
                         ((3, 2**30, 2**31 - 5), (4, 2**31 - 4)), ((1, 5000), (2, 4999))):
        held = {i: chunk(i) for i in ids}
        vref = np.array([*(int(bodies.refs(i, np.array([e]))[0]) for i in ids
                           for e in (2, 0, 1)), -1], np.int64)
        body, maps = bodies.gather(held, vref)
        assert body.to_pylist() == [*(v for i in ids for v in (b"b%d" % i, b"a%d" % i, None)),
                                    None]
        assert maps.to_pylist() == [*([[("k", "v")], None, None] * len(ids)), None]
        for i in missing:
            with pytest.raises(ValueError):
                bodies.gather(held, bodies.refs(i, np.array([0])))
