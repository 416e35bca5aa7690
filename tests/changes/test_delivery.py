"""``changes.delivery`` (``audit``): a simulated at-least-once connector (it publishes
every version the stream sends, the ones a rollback then discards too; restarts from an
earlier offset, publishing a stretch again; drops a few messages; delivers two versions
of a document the wrong way round; and a message nobody wrote) is judged exactly: the
injected duplicates, phantoms, reorderings, unknowns and the current versions dropped,
nothing else; what cannot be judged is counted apart."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import dcpfast
from dcpfast.changes import audit, audit_summary, changes, formatted, json_lines
from dcpfast.changes.sinks import read_sink
from tests.state_scenarios import scenario


def _sent(data: bytes) -> pa.Table:
    feed = changes(data, errors="skip")
    return feed.filter(pa.compute.is_in(feed["change"], pa.array(
        ["mutation", "deletion", "expiration"])))


def _published(data: bytes) -> list[dict]:
    """What a connector that publishes every version the stream sends delivers: the
    feed's own changes as the Kafka connector's records, in stream order."""
    return formatted(_sent(data), "couchbase-kafka").to_pylist()


def _identity(record: dict) -> tuple:
    return record["partition"], record["key"], record["cas"] & (2**64 - 1)


@pytest.mark.parametrize("seed", range(6))
def test_an_at_least_once_connector_is_judged_exactly(seed, tmp_path):
    rng = random.Random(seed)
    data = scenario(seed + 500, restarts=0.08, vbuckets=3, collections=seed % 2 == 0)
    published = _published(data)
    history = dcpfast.state(data, history=True, include_deleted=True, errors="skip")
    standing = set(zip(*(history[c].to_pylist() for c in ("vbucket", "key_str", "cas"))))
    phantoms = {_identity(r) for r in published} - standing
    # a restart from an earlier offset: a stretch published again
    cut = rng.randrange(2 * len(published) // 3, len(published))
    again = published[cut - rng.randrange(5, 30):cut]
    delivered = published[:cut] + again + published[cut:]
    # a few messages lost (none that is published again: its second sending would come
    # after later versions of its document, out of order)
    dropped = set(rng.sample([*range(cut - 30 - 34), *range(cut + len(again) + 1,
                                                          len(delivered))], 3))
    lost = [delivered[i] for i in sorted(dropped)]
    delivered = [r for i, r in enumerate(delivered) if i not in dropped]
    # two versions of one document delivered the wrong way round
    sent = _sent(data)
    collection = {(vb, key, cas): cid for vb, key, cas, cid in zip(*(
        sent[c].to_pylist() for c in ("vbucket", "key_str", "cas", "collection_id")))}
    by_key: dict = {}
    for i, r in enumerate(delivered[:cut - 34]):       # before the stretch published again
        if _identity(r) not in phantoms:
            by_key.setdefault((r["partition"], collection[_identity(r)], r["key"]),
                              []).append(i)
    first, second = next(ix for ix in by_key.values() if len(ix) >= 2)[:2]
    delivered[first], delivered[second] = delivered[second], delivered[first]
    swapped = _identity(delivered[second])
    # a message of no version the stream sent
    stranger = dict(delivered[0], cas=12345, key="nobody")
    delivered.insert(len(delivered) // 2, stranger)
    sink = tmp_path / "sink.jsonl"
    sink.write_bytes(b"".join(json_lines(pa.Table.from_pylist(delivered))))
    found = audit(data, sink, errors="skip")
    summary = audit_summary(found)
    rows = found.to_pylist()
    kinds = {k: [(r["vbucket"], r["key"], r["cas"]) for r in rows if r["kind"] == k]
             for k in ("duplicate", "phantom", "out_of_order", "unknown", "missing")}
    delivered_ids = [_identity(r) for r in delivered]
    # duplicates: the stretch published again, less what was lost of its first sending
    seen, want_duplicates = set(), []
    for identity in delivered_ids:
        if identity in seen:
            want_duplicates.append(identity)
        seen.add(identity)
    assert sorted(kinds["duplicate"]) == sorted(want_duplicates)
    assert set(kinds["phantom"]) == phantoms & set(delivered_ids)
    assert kinds["out_of_order"] == [swapped]
    assert kinds["unknown"] == [(stranger["partition"], "nobody", 12345)]
    # missing: what was lost of the versions current at each vbucket's consistent seqno,
    # where no later version of the document was delivered
    cut = {vb: s for vb, s in summary["capture"]["consistency"]}
    current = dcpfast.state(data, include_deleted=True, errors="skip", at_seqno=cut)
    final = set(zip(*(current[c].to_pylist() for c in ("vbucket", "key_str", "cas"))))
    order = {_identity(r): i for i, r in enumerate(published)}
    document = {_identity(r): (r["partition"], collection[_identity(r)], r["key"])
                for r in published}
    later = {}
    for identity in delivered_ids:
        if identity in order:
            later[document[identity]] = max(later.get(document[identity], -1),
                                            order[identity])
    want_missing = {i for i in {_identity(r) for r in lost} & final - set(delivered_ids)
                    if later.get(document[i], -1) < order[i]}
    assert set(kinds["missing"]) == want_missing
    assert summary["counts"]["duplicate"] == len(want_duplicates)
    assert summary["messages"] == len(delivered)


def test_a_clean_sink_and_what_cannot_be_judged(tmp_path):
    data = scenario(7, restarts=0.0, vbuckets=2, sync=False)
    published = _published(data)
    sink = tmp_path / "sink.parquet"
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(published), sink)
    found = audit(data, sink, errors="skip")
    assert found.num_rows == 0
    summary = audit_summary(found)
    assert summary["counts"]["once"] == len(published) and not summary["not_judged"]
    # a vbucket the capture never streamed, a line cut short
    other = dict(published[0], partition=1000)
    lines = tmp_path / "sink.jsonl"
    text = b"".join(json_lines(pa.Table.from_pylist([*published, other])))
    lines.write_bytes(text + b'{"event": "mutat')
    summary = audit_summary(audit(data, lines, errors="skip"))
    assert summary["not_judged"] == {"vbucket not in the capture": 1,
                                     "sink lines that do not parse": 1}
    assert sum(summary["counts"][k] for k in ("duplicate", "phantom", "unknown",
                                               "missing", "out_of_order")) == 0


def test_the_summary_of_something_else_is_refused():
    with pytest.raises(ValueError, match="dcpfast.audit"):
        audit_summary(pa.table({"x": [1]}))


def test_a_delta_sink_and_a_folder_of_parquet_are_read_in_delivery_order(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    data = scenario(11, restarts=0.0, vbuckets=2, sync=False)
    published = pa.Table.from_pylist(_published(data))
    half = published.num_rows // 2
    table = tmp_path / "sink.delta"
    deltalake.write_deltalake(table, published.slice(0, half))
    deltalake.write_deltalake(table, published.slice(half), mode="append")
    summary = audit_summary(audit(data, table, errors="skip"))
    assert summary["counts"]["once"] == published.num_rows
    assert sum(summary["counts"][k] for k in ("duplicate", "out_of_order", "missing")) == 0
    # the second half delivered first: its documents' later versions come before
    swapped = tmp_path / "swapped.delta"
    deltalake.write_deltalake(swapped, published.slice(half))
    deltalake.write_deltalake(swapped, published.slice(0, half), mode="append")
    assert audit_summary(audit(data, swapped, errors="skip"))["counts"]["out_of_order"] > 0
    # partitioned by vbucket: each commit's files in its log's order, a vbucket's in order
    parted = tmp_path / "parted.delta"
    for piece in (published.slice(0, half), published.slice(half)):
        deltalake.write_deltalake(parted, piece, partition_by=["partition"], mode="append")
    found = audit_summary(audit(data, parted, errors="skip"))
    assert found["counts"]["once"] == published.num_rows
    folder = tmp_path / "parts"
    folder.mkdir()
    import pyarrow.parquet as pq

    pq.write_table(published.slice(0, half), folder / "part-0.parquet")
    pq.write_table(published.slice(half), folder / "part-1.parquet")
    messages, unreadable = read_sink(folder)
    assert unreadable == 0 and messages.num_rows == published.num_rows
    assert messages["cas"].to_pylist() == [c & (2**64 - 1) for c in
                                           published["cas"].to_pylist()]
