"""Cache Transfer records as rows (``dcpfast.cached``): every field of records the
encoder wrote, the wire reference's vector, and values that do not hold their records."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
import dcpfast.testing as t
from dcpfast.cached import cache_records, collection_prefix
from tests.spec_vectors import VECTORS

_RECORDS = st.lists(st.fixed_dictionaries({
    "cas": st.integers(0, 2**64 - 1), "by_seqno": st.integers(0, 2**64 - 1),
    "rev_seqno": st.integers(0, 2**64 - 1), "flags": st.integers(0, 2**32 - 1),
    "expiration": st.integers(0, 2**32 - 1), "datatype": st.integers(0, 7),
    "cache_hint": st.integers(0, 255),
    "collection_id": st.sampled_from([0, 8, 127, 128, 2**14, 2**32 - 1]),
    "key": st.binary(min_size=1, max_size=240), "value": st.binary(max_size=300)}),
    min_size=1, max_size=6)


def _wire(record: dict) -> dict:
    """The encoder's record: the key behind its collection id."""
    return {**{k: v for k, v in record.items() if k != "collection_id"},
            "key": t.leb128(record["collection_id"]) + record["key"]}


@given(st.lists(_RECORDS, min_size=1, max_size=3), st.integers(0, 1023),
       st.integers(0, 0xFFFF))
@settings(max_examples=80, deadline=None)
def test_records_round_trip(frames, vbucket, sid):
    data = b"".join(t.cache_transfer([_wire(r) for r in records], vbucket=vbucket,
                                     stream_id=sid or None) for records in frames)
    data += t.cache_transfer_end(vbucket=vbucket)
    table = cache_records(dcpfast.scan(data, collections=True))
    want = [dict(r, record=k, vbucket=vbucket, stream_id=sid or None)
            for records in frames for k, r in enumerate(records)]
    got = table.drop_columns(["index", "offset"]).to_pylist()
    assert got == [{name: w[name] for name in table.drop_columns(["index", "offset"]).schema.names}
                   for w in want]
    assert table["index"].to_pylist() == [i for i, records in enumerate(frames)
                                          for _ in records]


def test_the_wire_references_vector():
    """C14: one record of the documentation's values (its key not collection-prefixed,
    so its first byte reads as collection 0x68)."""
    data = next(v for v in VECTORS if v.id == "C14").data
    (row,) = cache_records(dcpfast.scan(data)).to_pylist()
    assert (row["cas"], row["by_seqno"], row["rev_seqno"], row["cache_hint"]) == (4, 1, 5, 0x0A)
    assert (row["collection_id"], row["key"], row["value"]) == (0x68, b"ello", b"world")


@pytest.mark.parametrize("record, reason", [
    (t.cache_transfer([{"by_seqno": 1, "key": b"\x00k", "value": b"v"}])[:-1],
     "runs past"),
    (t.cache_transfer([{"by_seqno": 1, "key": b"\x00" * 252}]), "key of 252 bytes"),
    (t.cache_transfer([{"by_seqno": 1, "key": b"\x80\x00k"}]), "collection id"),
    (t.cache_transfer([{"by_seqno": 1, "key": b"\x03k"}]), "collection id"),
    (t.cache_transfer([{"by_seqno": 1, "key": b"\x00k"}, {"by_seqno": 2, "key": b"\x00"}]),
     "record 1: key of 1 bytes"),
])
def test_a_value_that_does_not_hold_its_records(record, reason):
    """Strict raises at the frame; skip leaves the frame's records out, lists the frame
    and keeps the other frames' records. (A value under 42 bytes is the scan's to refuse.)"""
    good = t.cache_transfer([{"by_seqno": 5, "key": b"\x00good"}])
    if "runs past" in reason:           # a value one byte short: its frame says so
        body = int.from_bytes(record[8:12], "big") - 1
        record = record[:8] + body.to_bytes(4, "big") + record[12:]
    data = good + record + good
    with pytest.raises(dcpfast.DcpFormatError, match=reason):
        cache_records(dcpfast.scan(data))
    table = cache_records(dcpfast.scan(data, errors="skip"))
    assert table["key"].to_pylist() == [b"good", b"good"]
    (region,) = dcpfast.skipped_regions(table)
    assert (region.offset, region.length) == (len(good), len(record))


@pytest.mark.parametrize("key, found", [
    (b"\x00k", (0, 1)), (b"\x7fk", (127, 1)), (b"\x80\x01k", (128, 2)),
    (b"\xff\xff\xff\xff\x0fk", (2**32 - 1, 5)),
])
def test_collection_prefix(key, found):
    assert collection_prefix(key) == found


@pytest.mark.parametrize("key", [b"", b"\x00", b"\x80\x00k", b"\x05k", b"\xff\xff\xff\xff\x1fk",
                                 b"\x80\x80\x80\x80\x80k"])
def test_collection_prefix_refuses(key):
    with pytest.raises(ValueError):
        collection_prefix(key)


def test_state_leaves_cached_documents_out():
    """Records are documents the vbucket already held, not changes."""
    data = t.cache_transfer([{"by_seqno": 3, "key": b"\x08hello", "value": b"world"}])
    assert dcpfast.state(data, collections=True).num_rows == 0
