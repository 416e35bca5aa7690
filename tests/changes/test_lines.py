"""JSON lines built column by column: the same bytes as orjson writing each row."""

from __future__ import annotations

import base64
import json

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcpfast.changes import changes, formatted, json_lines
from dcpfast.changes.formats import DOCUMENT
from dcpfast.testing import SAMPLE


def _row_by_row(table: pa.Table) -> bytes:
    """The model: each row to Python, then orjson (maps as objects, bytes as base64, a
    Debezium document's content as JSON where it is meant as JSON and parses)."""
    def plain(value, kind):
        if value is None:
            return None
        if pa.types.is_map(kind):
            return dict(value)
        if pa.types.is_struct(kind):
            out = {f.name: plain(value[f.name], f.type) for f in kind}
            if kind == DOCUMENT and out["content_encoding"] == "json" and \
                    out["content"] is not None:
                try:
                    json.loads(out["content"])
                    out["content"] = orjson.Fragment(out["content"])
                except ValueError:
                    out["content_encoding"] = "text"
            return out
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        return value

    lines = [orjson.dumps({f.name: plain(row[f.name], f.type) for f in table.schema})
             for row in table.to_pylist()]
    return b"".join(line + b"\n" for line in lines)


_TEXTS = st.one_of(st.none(), st.text(max_size=12),
                   st.sampled_from(['a"b', "back\\slash", "line\nfeed", "\x00\x1f", "é✓"]))
_CONTENT = st.one_of(st.none(), st.sampled_from(
    ['{"a":1}', "[1, 2]", "3", "1,2", "{bad", '"x"', "", "null", '{"k":"\\u00e9"}']))


@st.composite
def _tables(draw) -> pa.Table:
    n = draw(st.integers(0, 12))
    ints = st.one_of(st.none(), st.integers(0, 2**64 - 1))
    columns = {
        "u64": pa.array([draw(ints) for _ in range(n)], pa.uint64()),
        "i8": pa.array([draw(st.one_of(st.none(), st.integers(-128, 127)))
                        for _ in range(n)], pa.int8()),
        "flag": pa.array([draw(st.one_of(st.none(), st.booleans())) for _ in range(n)]),
        "name": pa.array([draw(_TEXTS) for _ in range(n)], pa.string()),
        "kind": pa.array([draw(st.sampled_from(["x", "y"])) for _ in range(n)])
        .dictionary_encode(),
        "blob": pa.array([draw(st.one_of(st.none(), st.binary(max_size=9)))
                          for _ in range(n)], pa.binary()),
        "attrs": pa.array([draw(st.one_of(st.none(), st.dictionaries(
            _TEXTS.filter(lambda t: t is not None), _TEXTS, max_size=3).map(
            lambda d: list(d.items())))) for _ in range(n)],
            pa.map_(pa.string(), pa.string())),
        "empty": pa.nulls(n),
    }
    docs = [draw(st.one_of(st.none(), st.fixed_dictionaries({
        "id": _TEXTS, "content": _CONTENT,
        "content_encoding": st.sampled_from([None, "json", "base64"]),
        "xattrs": st.none(), "cas": ints.map(lambda v: v and v >> 1),
        "rev_seqno": st.none(), "expiration": st.integers(0, 5),
        "flags": st.integers(-2, 2), "datatype": st.integers(0, 7)}))) for _ in range(n)]
    columns["doc"] = pa.array(docs, DOCUMENT)
    nested = pa.struct([("inner", pa.struct([("v", pa.int32()), ("s", pa.string())]))])
    columns["nested"] = pa.array([draw(st.one_of(st.none(), st.fixed_dictionaries(
        {"inner": st.one_of(st.none(), st.fixed_dictionaries(
            {"v": st.integers(-3, 3), "s": _TEXTS}))}))) for _ in range(n)], nested)
    table = pa.table(columns)
    cut = draw(st.integers(0, n))
    return table.slice(cut)                      # offsets into the buffers too


@given(_tables(), st.integers(1, 5))
@settings(max_examples=150, deadline=None)
def test_the_lines_are_those_of_each_row(table, rows):
    assert b"".join(json_lines(table, rows=rows)) == _row_by_row(table)


@pytest.mark.parametrize("format", ["changes", "debezium", "couchbase-kafka", "auto-cdc"])
def test_every_format_of_the_sample_as_each_row_writes_it(format):
    table = formatted(changes(SAMPLE, before=format == "debezium"), format,
                      bucket="sample")
    assert b"".join(json_lines(table, rows=1000)) == _row_by_row(table)


def test_an_empty_table_gives_no_lines():
    assert b"".join(json_lines(pa.table({"a": pa.array([], pa.int64())}))) == b""
    assert b"".join(json_lines(pa.table({}))) == b""
