"""Encoder-to-scanner round trips of every frame kind, with random field values."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import schema
from tests.strategies import CHECKED, frames, streams


def assert_decodes_to(batch, expected):
    assert len(batch) == len(expected)
    for i, expect in enumerate(expected):
        frame = batch.frame(i)
        assert {k: frame.get(k) for k in expect} == expect, i
        assert {k for k in frame if k in CHECKED} == {k for k in expect if k in CHECKED}, i


@given(streams())
def test_every_kind_round_trips(stream):
    collections, data, expected = stream
    batch = dcpfast.scan(data, collections=collections)
    assert batch.consumed == len(data) and not batch.errors
    assert_decodes_to(batch, expected)
    lengths = batch["body_len"].astype(np.int64) + 24
    assert list(batch["offset"]) == list(np.cumsum(lengths) - lengths)


@given(streams(), st.integers(0, 50))
def test_offsets_follow_start_and_base_offset(stream, base):
    collections, data, expected = stream
    first = len(dcpfast.testing.noop())
    batch = dcpfast.scan(dcpfast.testing.noop() + data, collections=collections, start=first,
                         base_offset=base)
    assert_decodes_to(batch, expected)
    assert batch["offset"][0] == base + first
    assert batch.consumed == first + len(data)
    key, value = batch.key(0), batch.value(0)
    assert (key, value) == (expected[0].get("key"), expected[0].get("value"))


@given(frames(collections=True))
def test_uncarried_fields_are_zero_and_null(item):
    data, expect = item
    batch = dcpfast.scan(data, collections=True)
    table = batch.to_arrow()
    for name in schema.NAMES:
        valid = batch.validity(name)
        carried = True if valid is None else bool(valid[0])
        assert table.column(name).null_count == (0 if carried else 1), name
        if not carried:
            assert batch[name][0] == 0, name


@settings(max_examples=50)
@given(streams(max_frames=30), st.data())
def test_projection_matches_full_scan(stream, data):
    collections, raw, _ = stream
    columns = data.draw(st.lists(st.sampled_from(schema.NAMES + ("key", "value")), unique=True))
    full = dcpfast.scan(raw, collections=collections)
    part = dcpfast.scan(raw, collections=collections, columns=columns)
    assert part.columns == schema.resolve(columns)
    for name in part.columns:
        np.testing.assert_array_equal(part[name], full[name])


@given(streams(max_frames=20), st.integers(0, 25))
def test_max_frames_stops_at_a_frame_boundary(stream, limit):
    collections, data, expected = stream
    batch = dcpfast.scan(data, collections=collections, max_frames=limit)
    assert_decodes_to(batch, expected[:limit])
    whole = dcpfast.scan(data, collections=collections)
    assert batch.consumed == (len(data) if limit >= len(expected)
                              else int(whole["offset"][limit]))
