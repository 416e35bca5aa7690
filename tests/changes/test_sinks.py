"""``changes.sinks`` (``read_sink``): what a connector delivered, in every form a sink
takes (an Arrow table, JSON lines, compressed too, Parquet, a folder of it, Delta), gives
the same messages; lines of other shapes, cut short or of another type are read as far
as they go and counted; and reading a sink holds its messages, not the documents it
carries."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dcpfast.changes import changes, formatted, json_lines
from dcpfast.changes.sinks import MESSAGE_SCHEMA, read_sink
from tests.state_scenarios import scenario


def _records(fmt: str) -> tuple[pa.Table, list[tuple]]:
    """A connector's records of ``fmt`` for every change a stream sent, and each one's
    (vbucket, key, CAS, seqno)."""
    feed = changes(scenario(21, restarts=0.1, vbuckets=3), errors="skip", before=True)
    sent = feed.filter(pa.compute.is_in(feed["change"], pa.array(
        ["mutation", "deletion", "expiration"])))
    records = formatted(sent if fmt == "debezium" else sent.drop_columns(["before"]), fmt)
    return records, list(zip(*(sent[c].to_pylist()
                               for c in ("vbucket", "key_str", "cas", "seqno"))))


@pytest.mark.parametrize("fmt", ["couchbase-kafka", "debezium"])
def test_every_form_of_a_sink_gives_its_messages(fmt, tmp_path):
    records, expected = _records(fmt)
    assert len(expected) > 50
    lines = tmp_path / "sink.jsonl"
    lines.write_bytes(b"".join(json_lines(records)))
    single = tmp_path / "sink.parquet"
    pq.write_table(records, single)
    folder = tmp_path / "parts"
    folder.mkdir()
    half = records.num_rows // 2
    pq.write_table(records.slice(0, half), folder / "part-0.parquet")
    pq.write_table(records.slice(half), folder / "part-1.parquet")
    packed = tmp_path / "sink.jsonl.gz"
    with pa.output_stream(packed) as out:           # compressed, as its name says
        out.write(lines.read_bytes())
    sinks = [records, lines, packed, single, folder]
    try:
        import deltalake
    except ImportError:
        pass
    else:
        delta = tmp_path / "sink.delta"       # taken, not sliced: deltalake takes no
        first, rest = pa.array(range(half)), pa.array(range(half, records.num_rows))
        deltalake.write_deltalake(delta, records.take(first))    # offsets of nested arrays
        deltalake.write_deltalake(delta, records.take(rest), mode="append")
        sinks.append(delta)
    for sink in sinks:
        for told in (fmt, None):
            messages, unreadable = read_sink(sink, told)
            assert unreadable == 0 and messages.schema == MESSAGE_SCHEMA
            got = list(zip(*(messages[c].to_pylist()
                             for c in ("vbucket", "key", "cas", "seqno"))))
            assert got == expected, (sink, told)
            assert set(messages["bucket"].to_pylist()) <= {None, "default"}


def test_lines_of_other_shapes_are_read_as_far_as_they_go(tmp_path):
    """A record whose key is an object, whose CAS is a string or too large, a line that is
    no object, blank lines and a line cut short: the line-by-line reading keeps every
    message with a vbucket and a key, a null for a field of another type."""
    good = [{"partition": 3, "key": "a", "cas": -5, "bySeqno": 7, "bucket": "b"},
            {"partition": 3, "key": "b", "cas": "12", "bySeqno": 8}]
    lines = [orjson.dumps(good[0]), orjson.dumps({"partition": 3, "key": {"id": "x"}}),
             b"[1, 2]", b"", orjson.dumps(good[1]),
             b'{"partition": 4, "key": "c", "cas": %d, "bySeqno": %d}' % (2**64, 2**63),
             b'{"partition": 3, "key": "cut']
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    messages, unreadable = read_sink(path)
    assert unreadable == 3                        # the object key, the list, the cut line
    assert messages.to_pylist() == [
        {"vbucket": 3, "key": "a", "cas": 2**64 - 5, "seqno": 7, "bucket": "b"},
        {"vbucket": 3, "key": "b", "cas": None, "seqno": 8, "bucket": None},
        {"vbucket": 4, "key": "c", "cas": None, "seqno": 2**63, "bucket": None}]
    with pytest.raises(ValueError, match="is a debezium message"):
        read_sink(path, "debezium")


def test_refusals(tmp_path):
    with pytest.raises(ValueError, match="sink format"):
        read_sink(pa.table({"x": [1]}), "avro")
    with pytest.raises(ValueError, match="is a couchbase-kafka message"):
        read_sink(pa.table({"x": [1]}))
    messages, unreadable = read_sink(pa.table({"x": []}))
    assert messages.num_rows == 0 and unreadable == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert read_sink(empty)[0].num_rows == 0
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), other)
    with pytest.raises(ValueError, match="none of the sink's 2 records"):
        read_sink(other)


def _debezium_lines(count: int, size: int) -> bytes:
    """``count`` Debezium events of 50 documents, each holding ``size`` bytes of content
    after the change and as much before it."""
    content = {"text": "x" * size}
    return b"".join(orjson.dumps({
        "key": {"scope": "_default", "collection": "_default", "id": f"k{i % 50}"},
        "value": {"before": {"content": content}, "after": {"content": content},
                  "op": "u", "ts_ms": i,
                  "source": {"vbucket": i % 4, "cas": 1000 + i, "seqno": i + 1,
                             "bucket": "b"}}}) + b"\n" for i in range(count))


@pytest.mark.parametrize("form", ["jsonl", "parquet"])
def test_reading_a_sink_holds_its_messages_not_its_documents(form, tmp_path, monkeypatch):
    """Eight times the events, each carrying 8 kB of documents: what reading the sink
    (JSON lines a MiB at a time) holds at its peak grows by their messages, not by the
    documents (56 MB more)."""
    from dcpfast.changes import sinks
    from tests.memory import peak_allocation

    monkeypatch.setattr(sinks, "_BLOCK_BYTES", 1 << 20)
    peaks = []
    for count in (1_000, 8_000):
        path = tmp_path / f"{count}.{form}"
        data = _debezium_lines(count, 4000)
        if form == "jsonl":
            path.write_bytes(data)
        else:
            import pyarrow.json as pj

            (tmp_path / "in.jsonl").write_bytes(data)
            pq.write_table(pj.read_json(tmp_path / "in.jsonl"), path)
        (messages, unreadable), peak = peak_allocation(lambda: read_sink(path))
        assert messages.num_rows == count and unreadable == 0
        assert messages["cas"].to_pylist() == [1000 + i for i in range(count)]
        peaks.append(peak)
    assert peaks[1] - peaks[0] < 4 << 20, peaks
