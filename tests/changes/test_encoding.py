"""Base64 of a bytes column, all at once: the text ``base64.b64encode`` gives each value."""

from __future__ import annotations

import base64

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dcpfast.changes.encoding import base64_text


@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=30),
       st.integers(0, 5), st.sampled_from([pa.binary(), pa.large_binary()]))
@settings(max_examples=300, deadline=None)
def test_each_value_as_b64encode_writes_it(values, cut, kind):
    array = pa.array(values, kind).slice(min(cut, len(values)))
    want = [None if v is None else base64.b64encode(v).decode()
            for v in values[min(cut, len(values)):]]
    got = base64_text(array)
    got.validate(full=True)
    assert got.to_pylist() == want


def test_no_values_and_only_nulls():
    assert base64_text(pa.array([], pa.binary())).to_pylist() == []
    assert base64_text(pa.array([None, None], pa.binary())).to_pylist() == [None, None]
