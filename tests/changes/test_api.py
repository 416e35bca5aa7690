"""``dcpfast.changes``: the feed, applied in order by a plain applier (a row with
``deleted`` removes its document, any other sets it), ends with ``dcpfast.state`` of the
same stream, over random conversations with rollbacks, restarts from 0, durable writes,
collection drops and flushes, expirations, lost frames, read whole or in pieces; and a
document's changes in ``(epoch, seqno)`` order are its changes in stream order."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.changes import ChangesBuilder, changes, changes_schema, feed_metadata
from dcpfast.documents.feeding import fed
from tests.documents.test_api import chunks
from tests.state_scenarios import scenario

FIELDS = ("by_seqno", "rev_seqno", "cas", "flags", "expiration", "datatype", "delete_time",
          "body", "xattrs")
CONVERSATIONS = [{}, {"requests": True}, {"restarts": 0.3, "vbuckets": 2},
                 {"restarts": 0.5, "vbuckets": 2, "requests": True},
                 {"collections": False, "restarts": 0.2}]


def applied(table) -> dict:
    """The documents a consumer holds after applying ``table``'s rows in order."""
    docs: dict = {}
    for row in table.to_pylist():
        key = (row["vbucket"], row["collection_id"], row["key"])
        if row["deleted"]:
            docs.pop(key, None)
        else:
            docs[key] = {name: row[name] for name in FIELDS}
    return docs


def documents(state) -> dict:
    return {(r["vbucket"], r["collection_id"], r["key"]): {name: r[name] for name in FIELDS}
            for r in state.to_pylist()}


def state_of(data, feed) -> dict:
    """The state the feed stands for: each vbucket that lost frames at its consistent
    seqno."""
    said = feed_metadata(feed)
    cut = {vb: seqno for vb, seqno in said["consistency"] if vb in said["lost"]}
    if not cut:
        return documents(dcpfast.state(data, errors="skip"))
    whole = documents(dcpfast.state(data, errors="skip"))
    lost = documents(dcpfast.state(data, errors="skip", at_seqno=cut))
    return {k: v for k, v in whole.items() if k[0] not in cut} | lost


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", range(len(CONVERSATIONS)))
def test_the_feed_applied_is_the_state(seed, kind):
    data = scenario(seed * 10 + kind, **CONVERSATIONS[kind])
    feed = changes(data, errors="skip")
    assert applied(feed) == state_of(data, feed)
    assert feed.schema.remove_metadata() == changes_schema()


@pytest.mark.parametrize("seed", range(12))
def test_a_stream_cut_short_stops_where_it_lost_frames(seed):
    """Frames cut out of the middle of a conversation: each vbucket that lost some stops
    at its consistent seqno, the others go on; applied, the state at those seqnos."""
    import random

    data = scenario(seed + 900, restarts=0.2, vbuckets=3)
    batch = dcpfast.scan(data, final=True)
    rng = random.Random(seed)
    gone = set(rng.sample(range(len(batch)), 3))
    offsets = batch["offset"].tolist() + [len(data)]
    cut = b"".join(data[offsets[i]:offsets[i + 1]] for i in range(len(batch))
                   if i not in gone)
    feed = changes(cut, errors="skip")
    assert applied(feed) == state_of(cut, feed)
    assert wrong_befores(changes(cut, errors="skip", before=True)) == []


def wrong_befores(feed) -> list:
    """The changes whose ``before`` is not the version that a consumer of the feed, in
    order, holds for the document then (null: none, or a tombstone)."""
    held: dict = {}
    wrong = []
    for r in feed.to_pylist():
        key = (r["vbucket"], r["collection_id"], r["key"])
        was, before = held.get(key), r["before"]
        if (before is None) != (was is None or was[1]) or \
                before is not None and before["cas"] != was[0]:
            wrong.append((key, r["seqno"]))
        held[key] = (r["cas"], r["deleted"])
    return wrong


def per_vbucket(table) -> dict:
    out: dict = {}
    for row in table.to_pylist():
        out.setdefault(row["vbucket"], []).append(row)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_read_in_pieces_gives_the_same_feed(seed):
    """Each vbucket's changes are the same, in the same order, wherever the stream is
    cut into batches (a restart whose point the next batch tells may come later among
    the other vbuckets' changes, never among its own)."""
    data = scenario(seed + 200, restarts=0.3, vbuckets=2, requests=seed % 2 == 1)
    whole = changes(data, errors="skip")
    pieces = changes(chunks(data, 300, errors="skip"), errors="skip")
    assert per_vbucket(pieces) == per_vbucket(whole)


@pytest.mark.parametrize("seed", range(6))
def test_each_documents_changes_in_sequence_order_are_in_stream_order(seed):
    """``(epoch, rollback or not, seqno)`` sorts each document's rows as the feed has
    them (it never ties), where ``by_seqno`` does not once a stream has rolled back."""
    feed = changes(scenario(seed + 300, restarts=0.4, vbuckets=2), errors="skip")
    rows = feed.select(["vbucket", "collection_id", "key", "epoch", "change",
                        "seqno"]).to_pylist()
    per_doc: dict = {}
    for i, r in enumerate(rows):
        per_doc.setdefault((r["vbucket"], r["collection_id"], r["key"]), []).append(
            ((r["epoch"], r["change"] != "rollback", r["seqno"]), i))
    for changes_of_doc in per_doc.values():
        assert sorted(changes_of_doc) == changes_of_doc
        assert len({s for s, _ in changes_of_doc}) == len(changes_of_doc)


def _mutation(key, seqno, value=b'{"v":1}', vbucket=1):
    return t.mutation(key, value, by_seqno=seqno, vbucket=vbucket, datatype=1,
                      cas=(1_700_000_000 * 10**9 + seqno * 10**6) & ~0xFFFF)


def test_a_rollback_brings_back_the_version_before_and_deletes_what_is_new():
    """After a Rollback to 2: k1 (written at 1 and 3) is back as at 1, k2 (written at 4
    only) is deleted; both rows say ``rollback``, in the new epoch, at the rollback point."""
    frames = [t.stream_request(start=0, vbucket=1, opaque=7),
              t.snapshot_marker(1, 4, vbucket=1, opaque=7),
              _mutation(b"k1", 1), _mutation(b"k0", 2), _mutation(b"k1", 3),
              _mutation(b"k2", 4, b"x"),
              t.stream_request(start=4, vbucket=1, opaque=8),
              t.response(0x53, status=0x23, value=(2).to_bytes(8, "big"), opaque=8),
              t.snapshot_marker(3, 3, vbucket=1, opaque=8), _mutation(b"k3", 3)]
    data = b"".join(frames)
    feed = changes(data, before=True)
    rows = feed.select(["key", "change", "deleted", "epoch", "seqno", "by_seqno"]).to_pylist()
    assert rows == [
        {"key": b"k1", "change": "mutation", "deleted": False, "epoch": 0, "seqno": 1,
         "by_seqno": 1},
        {"key": b"k0", "change": "mutation", "deleted": False, "epoch": 0, "seqno": 2,
         "by_seqno": 2},
        {"key": b"k1", "change": "mutation", "deleted": False, "epoch": 0, "seqno": 3,
         "by_seqno": 3},
        {"key": b"k2", "change": "mutation", "deleted": False, "epoch": 0, "seqno": 4,
         "by_seqno": 4},
        {"key": b"k1", "change": "rollback", "deleted": False, "epoch": 1, "seqno": 2,
         "by_seqno": 1},
        {"key": b"k2", "change": "rollback", "deleted": True, "epoch": 1, "seqno": 2,
         "by_seqno": None},
        {"key": b"k3", "change": "mutation", "deleted": False, "epoch": 1, "seqno": 3,
         "by_seqno": 3}]
    before = feed["before"].to_pylist()
    assert [b and b["by_seqno"] for b in before] == [None, None, 1, None, 3, 4, None]
    assert applied(feed) == documents(dcpfast.state(data))


def test_a_collection_drop_deletes_its_documents():
    frames = [t.snapshot_marker(1, 4, vbucket=1),
              t.mutation(b"a", b"1", by_seqno=1, vbucket=1, collection_id=8),
              t.mutation(b"b", b"1", by_seqno=2, vbucket=1, collection_id=9),
              t.drop_collection(by_seqno=3, manifest_uid=2, scope_id=0, collection_id=8,
                                vbucket=1),
              t.mutation(b"c", b"1", by_seqno=4, vbucket=1, collection_id=8)]
    feed = changes(b"".join(frames), collections=True)
    rows = feed.select(["collection_id", "key", "change", "deleted", "seqno"]).to_pylist()
    assert rows[2] == {"collection_id": 8, "key": b"a", "change": "clear", "deleted": True,
                       "seqno": 3}
    assert [r["key"] for r in rows] == [b"a", b"b", b"a", b"c"]


def test_lost_frames_are_said():
    """A stream that lost frames: strict refuses it as ``state`` does; skip gives the
    feed with the vbucket listed as lost and its consistent seqno before the loss."""
    frames = [t.snapshot_marker(1, 2, vbucket=3), _mutation(b"a", 1, vbucket=3),
              _mutation(b"b", 2, vbucket=3), t.snapshot_marker(3, 4, vbucket=3),
              _mutation(b"c", 3, vbucket=3), _mutation(b"d", 4, vbucket=3),
              _mutation(b"e", 6, vbucket=3)]
    data = b"".join(frames)
    with pytest.raises(dcpfast.DcpFormatError, match="vbucket 3"):
        changes(data)
    feed = changes(data, errors="skip")
    said = feed_metadata(feed)
    assert said["lost"] == [3] and said["consistency"] == [[3, 4]]
    assert [r["key"] for r in feed.to_pylist()] == [b"a", b"b", b"c", b"d"]
    assert applied(feed) == documents(dcpfast.state(data, errors="skip", at_seqno={3: 4}))


def test_an_empty_stream_and_a_table_of_something_else():
    feed = changes(b"")
    assert feed.num_rows == 0 and feed_metadata(feed)["lost"] == []
    with pytest.raises(ValueError, match="dcpfast.changes"):
        feed_metadata(dcpfast.state(b""))


def test_a_capture_gives_the_feed_of_its_stream(tmp_path):
    """A capture's server side is the stream, as for ``state``: the same feed as its
    dump's, read from the path or from its batches."""
    data = scenario(77, restarts=0.3, vbuckets=2)
    capture = tmp_path / "c.pcap"
    capture.write_bytes(t.pcap_file(t.tcp_packets(t.tcp_conversation(b"", data,
                                                                     sizes=(700, 1448)))))
    feed = changes(capture, errors="skip")
    assert per_vbucket(feed) == per_vbucket(changes(data, errors="skip"))
    assert applied(feed) == state_of(capture, feed)


def fed_builder(data, **options):
    """A ``ChangesBuilder`` fed ``data``."""
    builder = ChangesBuilder(errors="skip", **options)
    reading = {"collections": None, "batch_bytes": 1 << 20, "threads": 1}
    with fed(builder, data, "skip", reading, again=False):
        return builder


@pytest.mark.parametrize("seed", range(4))
def test_the_feed_in_batches_is_the_table(seed):
    """``batches`` makes the table's rows, in its order, a few at a time; the stream form
    of ``changes`` carries the same metadata."""
    data = scenario(seed + 500, restarts=0.4, vbuckets=2, requests=True)
    whole = changes(data, errors="skip", before=True)
    parts = list(fed_builder(data, before=True).batches(rows=7))
    assert len(parts) == -(-whole.num_rows // 7) and all(len(p) <= 7 for p in parts)
    assert pa.Table.from_batches(parts, whole.schema).equals(whole, check_metadata=True)
    stream = changes(data, errors="skip", stream=True)
    assert isinstance(stream, pa.RecordBatchReader)
    assert feed_metadata(stream) == feed_metadata(whole)
    assert stream.read_all().equals(whole.drop_columns(["before"]))
    empty = changes(b"", stream=True)
    assert feed_metadata(empty)["lost"] == [] and empty.read_all().num_rows == 0


def output_job(how: str):
    """What building the feed of a stream of large values holds at its peak, made whole
    (``table``) or a batch at a time and let go (``batches``)."""
    builder = fed_builder(t.synthetic_stream(6000, value_size=4000, snappy_ratio=0,
                                             seed=3), before=True)

    def job():
        if how == "table":
            table = builder.table()
            return table.num_rows, table.nbytes
        batches = [(len(b), b.nbytes) for b in builder.batches(rows=500)]
        return sum(n for n, _ in batches), sum(size for _, size in batches)
    return job


def test_the_feed_in_batches_holds_one_batch_at_a_time():
    """Read batch by batch, the feed holds what the stream sent and one batch, not the
    feed: its peak stays below a quarter of the whole table's."""
    from tests.memory import peak_in_child

    (rows, nbytes), whole = peak_in_child("tests.changes.test_api", "output_job", "table")
    (streamed, _), peak = peak_in_child("tests.changes.test_api", "output_job", "batches")
    assert streamed == rows and nbytes > 20e6
    assert whole >= nbytes and peak < whole / 4, (peak, whole)


def spilling_job(path: str):
    """What building the feed of the dump at ``path`` holds at its peak, read in small
    batches and output a batch at a time (``before`` included)."""
    def job():
        builder = ChangesBuilder(before=True)
        reading = {"collections": None, "batch_bytes": 256 << 10, "threads": 1}
        with fed(builder, path, "strict", reading, again=False):
            return sum(len(b) for b in builder.batches(rows=500))
    return job


def test_what_the_feed_holds_grows_with_its_versions_not_their_bodies(tmp_path):
    """Eight times the changes of the same 100 documents, each with a 4 kB body: what
    building the feed holds grows by the versions' places, not by their bodies (they
    wait in a spill file until a batch of the feed reads them back)."""
    from tests.documents.test_api import churn
    from tests.memory import peak_in_child

    peaks = []
    for count in (2_000, 16_000):
        path = tmp_path / f"{count}.dcp"
        path.write_bytes(churn(count, size=4000))
        rows, peak = peak_in_child("tests.changes.test_api", "spilling_job", str(path))
        assert rows == count
        peaks.append(peak)
    # the 14,000 bodies more are 56 MB
    assert peaks[1] - peaks[0] < 12 << 20, peaks


@pytest.mark.parametrize("fails", ["open", "second write"])
def test_the_feed_keeps_its_bodies_in_memory_where_no_spill_file_can_be_written(
        fails, monkeypatch):
    """No temporary file to be had, or no room left in it after a first batch's bodies:
    the feed is the same, the bodies not spilled kept in memory."""
    from dcpfast.documents import bodies

    data = scenario(31, restarts=0.3, vbuckets=2)
    expected = fed_builder(data, before=True).table()
    written = []

    def refused(*args, **kwargs):
        raise OSError(28, "No space left on device")
    if fails == "open":
        monkeypatch.setattr(bodies.tempfile, "TemporaryFile", refused)
    else:
        spill = bodies.SpillFile.spill

        def once(self, chunk):
            if written:
                refused()
            written.append(chunk)
            return spill(self, chunk)
        monkeypatch.setattr(bodies.SpillFile, "spill", once)
    builder = ChangesBuilder(errors="skip", before=True)
    reading = {"collections": None, "batch_bytes": 4 << 10, "threads": 1}
    with fed(builder, data, "skip", reading, again=False):
        assert builder.table().equals(expected, check_metadata=True)
    assert len(written) == (fails != "open")
