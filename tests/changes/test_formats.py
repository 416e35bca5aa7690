"""The feed in its consumers' shapes: each format, applied as its consumers apply it,
ends with ``dcpfast.state`` (documents told apart by vbucket too: the test streams use
the same keys on several vbuckets, which a bucket never does); the field names and
types are those of the published definitions (written down here as data, with where
they come from); JSON lines parse, a JSON document's content stays JSON."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa
import pytest

import dcpfast
from dcpfast.changes import FORMATS, changes, formatted, json_lines
from dcpfast.testing import SAMPLE
from tests.state_scenarios import scenario

#: kafka-connect-couchbase, src/main/java/com/couchbase/connect/kafka/util/Schemas.java
#: (``VALUE_DEFAULT_SCHEMA``, struct ``com.couchbase.DcpMessage``): name, Kafka Connect
#: type, optional; then the record headers ``scope`` and ``collection``
#: (``CouchbaseHeaderSetter``), strings.
CONNECTOR_FIELDS = [("event", "string", False), ("partition", "int16", False),
                    ("key", "string", False), ("cas", "int64", False),
                    ("bySeqno", "int64", False), ("revSeqno", "int64", False),
                    ("expiration", "int32", True), ("flags", "int32", True),
                    ("lockTime", "int32", True), ("content", "bytes", True),
                    ("bucket", "string", True), ("vBucketUuid", "int64", True),
                    ("scope", "string", True), ("collection", "string", True)]
_ARROW = {"string": pa.string(), "int16": pa.int16(), "int32": pa.int32(),
          "int64": pa.int64(), "bytes": pa.binary()}
#: Debezium's envelope (debezium-core ``Envelope.FieldName``): the value's fields; ``op``
#: is one of ``Envelope.Operation``'s codes.
DEBEZIUM_VALUE = ["before", "after", "op", "ts_ms", "source"]
DEBEZIUM_OPS = {"c", "u", "d", "r"}

CONVERSATIONS = [{}, {"restarts": 0.3, "vbuckets": 2}, {"restarts": 0.5, "requests": True},
                 {"collections": False, "restarts": 0.2}]


def _state(data) -> dict:
    table = dcpfast.state(data, errors="skip")
    return {(r["vbucket"], r["scope"], r["collection"], r["key_str"]):
            (r["by_seqno"], r["cas"], r["body"])
            for r in table.to_pylist()}


def _kafka_applied(table) -> dict:
    docs: dict = {}
    for r in table.to_pylist():
        key = (r["partition"], r["scope"], r["collection"], r["key"])
        if r["event"] in ("deletion", "expiration"):
            docs.pop(key, None)
        else:
            docs[key] = (r["bySeqno"], r["cas"] & (2**64 - 1), r["content"])
    return docs


def _debezium_applied(table) -> dict:
    docs: dict = {}
    for r in table.to_pylist():
        k, v = r["key"], r["value"]
        key = (v["source"]["vbucket"], k["scope"], k["collection"], k["id"])
        assert v["op"] in DEBEZIUM_OPS
        was = docs.get(key)          # a consumer's own view agrees with ``before``
        assert (None if v["before"] is None else v["before"]["cas"] & (2**64 - 1)) == \
            (None if was is None else was[1])      # (Debezium's documents carry no seqno)
        if v["op"] == "d":
            assert v["after"] is None
            docs.pop(key, None)
        else:
            after = v["after"]
            body = None if after["content"] is None else (
                after["content"].encode() if after["content_encoding"] == "json"
                else base64.b64decode(after["content"]))
            docs[key] = (None, after["cas"] & (2**64 - 1), body)
    return docs


def _auto_cdc_applied(table) -> dict:
    """What Auto CDC (SCD type 1) keeps: per key, the row of the highest sequence, in
    whatever order and batches the rows arrive; none where that row is a deletion. No two
    rows of a key share a sequence: Auto CDC's choice between them is not defined (within
    a batch, and between SCD types 1 and 2 across batches, it differs)."""
    last: dict = {}
    seen: set = set()
    for r in table.to_pylist():
        key = (r["vbucket"], r["scope"], r["collection"], r["id"])
        order = (r["sequence"]["epoch"], r["sequence"]["step"], r["sequence"]["seqno"])
        assert (key, order) not in seen, f"two changes of {key} at sequence {order}"
        seen.add((key, order))
        if key not in last or order > last[key][0]:
            last[key] = (order, r)
    return {key: (r["by_seqno"], r["cas"] & (2**64 - 1), r["body"])
            for key, (_, r) in last.items() if not r["deleted"]}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("kind", range(len(CONVERSATIONS)))
def test_each_format_applied_is_the_state(seed, kind):
    data = scenario(seed * 7 + kind, **CONVERSATIONS[kind])
    feed = changes(data, errors="skip", before=True)
    want = _state(data)
    assert _kafka_applied(formatted(feed, "couchbase-kafka")) == want
    assert _auto_cdc_applied(formatted(feed, "auto-cdc")) == want
    assert _debezium_applied(formatted(feed, "debezium")) == \
        {key: (None, cas, body) for key, (_, cas, body) in want.items()}


def test_the_connectors_fields_and_types():
    table = formatted(changes(scenario(1), errors="skip"), "couchbase-kafka", bucket="b")
    assert [(f.name, f.type, f.nullable) for f in table.schema] == \
        [(name, _ARROW[kind], optional) for name, kind, optional in CONNECTOR_FIELDS]
    assert set(table["bucket"].to_pylist()) == {"b"}
    assert set(table["event"].to_pylist()) <= {"mutation", "deletion", "expiration"}


def test_debezium_envelope_and_json_lines():
    data = scenario(2, restarts=0.3)
    table = formatted(changes(data, errors="skip", before=True), "debezium")
    assert table.schema.field("value").type.names == DEBEZIUM_VALUE
    lines = b"".join(json_lines(table, rows=7)).splitlines()
    assert len(lines) == table.num_rows
    records = [json.loads(line) for line in lines]
    for record in records:
        assert set(record) == {"key", "value"}
        after = record["value"]["after"]
        if after is not None and after["content_encoding"] == "json":
            assert not isinstance(after["content"], str)     # the document itself
        assert record["value"]["source"]["connector"] == "dcpfast"
    ops = {r["value"]["op"] for r in records}
    assert {"c", "d"} <= ops


def test_json_lines_of_every_format_parse():
    feed = changes(scenario(4, restarts=0.3), errors="skip", before=True)
    for name in FORMATS:
        table = formatted(feed, name)
        lines = b"".join(json_lines(table)).splitlines()
        assert [json.loads(line) for line in lines] and len(lines) == table.num_rows


def test_refusals():
    feed = changes(scenario(1), errors="skip")
    with pytest.raises(ValueError, match="format must be one of"):
        formatted(feed, "avro")
    with pytest.raises(ValueError, match="before=True"):
        formatted(feed, "debezium")


GOLDEN = Path(__file__).parent.parent / "data" / "changes"


@pytest.mark.parametrize("name", FORMATS)
def test_the_bundled_sample_in_each_format_is_its_golden_file(name):
    """Every 25th change of the bundled sample, in each format, as JSON lines, is the file
    kept in tests/data/changes (written by this code when the format was checked against
    its published definition, above): a change to a format shows here."""
    feed = changes(SAMPLE, before=True)
    table = formatted(feed if name == "debezium" else feed.drop_columns(["before"]), name,
                      bucket="sample").take(pa.array(range(0, feed.num_rows, 25)))
    want = (GOLDEN / f"sample.{name}.jsonl").read_bytes().splitlines()
    got = b"".join(json_lines(table)).splitlines()
    assert [json.loads(line) for line in got] == [json.loads(line) for line in want]


def test_content_is_json_where_it_is_else_base64():
    """A JSON document is spliced in as JSON; a binary one, or one flagged JSON that is
    not UTF-8, is base64; one flagged JSON that does not parse is text."""
    from dcpfast import testing as t

    frames = [t.snapshot_marker(1, 4, vbucket=1),
              t.mutation(b"j", b'{"a": [1, 2]}', by_seqno=1, vbucket=1, datatype=1),
              t.mutation(b"b", b"\x00\x01\xff", by_seqno=2, vbucket=1),
              t.mutation(b"x", b"\xff\xfe", by_seqno=3, vbucket=1, datatype=1),
              t.mutation(b"n", b"{not json", by_seqno=4, vbucket=1, datatype=1)]
    table = formatted(changes(b"".join(frames), before=True), "debezium")
    after = [json.loads(line)["value"]["after"]
             for line in b"".join(json_lines(table)).splitlines()]
    assert [(a["id"], a["content_encoding"]) for a in after] == [
        ("j", "json"), ("b", "base64"), ("x", "base64"), ("n", "text")]
    assert after[0]["content"] == {"a": [1, 2]}
    assert base64.b64decode(after[1]["content"]) == b"\x00\x01\xff"
    assert base64.b64decode(after[2]["content"]) == b"\xff\xfe"
    assert after[3]["content"] == "{not json"
