"""What ``state`` is asked and what it says back: options checked before any work (one-line
messages, numpy integers welcome, ``only_collections`` apart from the scan's
``collections``), what a stream did not send (values, backfill tombstones, what came
before it began), and metadata bounded whatever the stream (the first problems and counts
of all; files that open), with memory bounded on hostile input."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.documents import StateBuilder, consistency, state_errors
from dcpfast.documents.output import metadata
from dcpfast.documents.problems import LISTED
from dcpfast.protocol import Opcode, OpenFlag, SnapshotFlag, Status

HDR = dict(vbucket=5, opaque=0x1005)


def marker(start, end, **kw):
    return t.snapshot_marker(start, end, SnapshotFlag.MEMORY, **{**HDR, **kw})


def mutation(key, seqno, cid=None, **kw):
    return t.mutation(key, b'{"v":%d}' % seqno, by_seqno=seqno, cas=seqno << 16, datatype=1,
                      collection_id=cid, **{**HDR, **kw})


def collections_dump() -> bytes:
    hdr = dict(scope_id=0, **HDR)
    return b"".join([
        marker(1, 4),
        t.create_collection(b"fleet", by_seqno=1, manifest_uid=1, collection_id=8, **hdr),
        mutation(b"a", 2, cid=8), mutation(b"b", 3, cid=0), mutation(b"c", 4, cid=8)])


# -- options ------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, error, words", [
    ({"only_collections": True}, TypeError, "only_collections takes"),
    ({"only_collections": [1.5]}, TypeError, "not 1.5"),
    ({"only_collections": {"a": 1}}, TypeError, "not dict"),
    ({"only_collections": [-1]}, ValueError, "not a collection id"),
    ({"collections": ["fleet"]}, TypeError, "only_collections= keeps collections"),
    ({"at_seqno": {"0": 5}}, TypeError, "vbuckets must be integers"),
    ({"at_seqno": {0: True}}, TypeError, "at_seqno[0] must be an integer"),
    ({"at_seqno": {70000: 5}}, ValueError, "not in 0..65535"),
    ({"at_seqno": -1}, ValueError, "not a seqno"),
    ({"at_seqno": "12"}, TypeError, "not str"),
    ({"values": "yes"}, TypeError, "values must be True or False"),
    ({"history": 1}, TypeError, "history must be True or False"),
    ({"batch_bytes": 0}, ValueError, "batch_bytes"),
    ({"threads": 0}, ValueError, "threads"),
    ({"errors": "ignore"}, ValueError, "errors must be"),
])
def test_wrong_options_are_one_line_before_any_work(kwargs, error, words):
    class Unread:                  # a source that fails if anything is read of it
        def read(self, *_):
            raise AssertionError("read before the options were checked")
    with pytest.raises(error) as e:
        dcpfast.state(Unread(), **kwargs)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_numpy_integers_are_integers():
    data = collections_dump()
    seqno = dcpfast.scan(data)["by_seqno"][3]                 # np.uint64(3)
    at = dcpfast.state(data, at_seqno=seqno)
    assert at.num_rows == 2 and metadata(at)["at_seqno"] == 3
    mapped = dcpfast.state(data, at_seqno={np.uint16(5): np.int64(3)})
    assert metadata(mapped)["at_seqno"] == {"5": 3} and mapped.num_rows == 2
    assert dcpfast.state(data, only_collections=np.uint32(8)).num_rows == 2
    assert dcpfast.state(data, at_time=np.int64(2 << 16) + 1).num_rows == 1


def test_collections_filter_and_the_scan_option_apart():
    data = collections_dump()
    assert dcpfast.state(data, collections=True).num_rows == 3       # keys carry prefixes
    assert dcpfast.state(data, only_collections="_default.fleet").column(
        "key").to_pylist() == [b"a", b"c"]
    assert dcpfast.state(data, only_collections=["fleet", 0]).num_rows == 3
    with pytest.raises(ValueError) as e:
        dcpfast.state(data, only_collections=["scope.name", "fleet", "nope"])
    assert "scope.name, nope" in str(e.value) and "_default.fleet" in str(e.value)


def test_the_command_names_a_wrong_collection(tmp_path):
    dump = tmp_path / "c.dcp"
    dump.write_bytes(collections_dump())
    result = CliRunner().invoke(main, ["state", str(dump), "-o", str(tmp_path / "s.parquet"),
                                       "--collection", "nope"])
    assert result.exit_code == 2 and "nope" in result.output


# -- what a stream does not send ----------------------------------------------------------


def test_what_the_streams_did_not_send(tmp_path):
    client = t.open(b"conn", OpenFlag.PRODUCER | OpenFlag.NO_VALUE
                    | OpenFlag.SKIP_DELETES_IN_INITIAL_BACKFILL)
    resumed = [marker(501, 502), mutation(b"a", 501), mutation(b"b", 502)]
    whole = [marker(0, 2, vbucket=6), mutation(b"c", 1, vbucket=6), mutation(b"d", 2, vbucket=6)]
    server = b"".join([*resumed, *whole])
    builder = StateBuilder()
    builder.client(dcpfast.scan(client))
    builder.update(dcpfast.scan(server))
    table = builder.table()
    lacks = metadata(table)["lacks"]
    assert lacks == {"history": [[5, 500]], "values": True, "backfill_tombstones": True}
    assert {r["vbucket"]: r["starts_after"] for r in consistency(table).to_pylist()} == \
        {5: 500, 6: 0}
    # from a capture of both sides, the command says so in one line
    capture = tmp_path / "c.pcap"
    capture.write_bytes(t.pcap_file(t.tcp_packets(t.tcp_conversation(client, server))))
    result = CliRunner().invoke(main, ["state", str(capture), "-o", str(tmp_path / "s.parquet")])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if "lacks" in line]
    assert len(notes) == 1 and "NO_VALUE" in notes[0] and "1 vbucket(s) (5" in notes[0]
    assert metadata(dcpfast.state(capture))["lacks"] == lacks


# -- bounded metadata and memory --------------------------------------------------------------


def orphan_commits(n: int) -> bytes:
    """``n`` commits of 100 documents whose prepares the stream never sent."""
    out = [marker(1, n)]
    for s in range(1, n + 1):
        out.append(t.commit(b"k%d" % (s % 100), prepared_seqno=s + 10**9, commit_seqno=s,
                            **HDR))
    return b"".join(out)


def test_problems_are_listed_first_and_counted_all(tmp_path):
    n = LISTED + 700
    table = dcpfast.state(orphan_commits(n), errors="skip")
    meta = metadata(table)
    assert len(state_errors(table)) == LISTED and meta["errors_total"] == n
    assert meta["error_counts"] == {"commit_without_prepare": n}
    offsets = [e.offset for e in state_errors(table)]
    assert offsets == sorted(offsets)
    path = tmp_path / "s.parquet"
    pq.write_table(table, path)
    assert metadata(pq.read_table(path)) == meta
    dump = tmp_path / "d.dcp"
    dump.write_bytes(orphan_commits(3000))
    out = tmp_path / "twice.parquet"
    result = CliRunner().invoke(main, ["state", str(dump), str(dump), "-o", str(out),
                                       "--errors", "skip"])
    assert result.exit_code == 0, result.output
    assert metadata(pq.read_table(out))["errors_total"] >= 6000
    assert "skipped 6,000" in result.output


def rollback_storm(restarts: int, changes: int = 50, keys: int = 20) -> bytes:
    """A stream that, ``restarts`` times, sends ``changes`` changes to ``keys`` documents
    and rolls half of them back."""
    out = [t.failover_log_response([(1, 0)], opaque=0x1005)]
    seqno, body = 0, b"x" * 1000
    for _ in range(restarts):
        out.append(marker(seqno + 1, seqno + changes))
        for _ in range(changes):
            seqno += 1
            out.append(t.mutation(b"k%d" % (seqno % keys), body, by_seqno=seqno,
                                  cas=seqno << 16, **HDR))
        seqno -= changes // 2
        out += [t.stream_end(**HDR),
                t.response(Opcode.STREAM_REQUEST, status=Status.ROLLBACK,
                           value=struct.pack(">Q", seqno), opaque=0x1005),
                t.failover_log_response([(1, 0)], opaque=0x1005)]
    return b"".join(out)


@pytest.mark.parametrize("make", [orphan_commits, rollback_storm])
def test_memory_grows_with_the_documents_not_the_stream(make):
    """Eight times the stream, the same documents: the peak grows by much less (the
    state's second pass after restarts holds only the versions that may still stand)."""
    from tests.memory import peak_allocation

    small, large = (20_000, 160_000) if make is orphan_commits else (300, 2_400)
    peaks = []
    dcpfast.state(make(100), errors="skip")                       # imports done
    for n in (small, large):
        data = make(n)
        table, peak = peak_allocation(lambda: dcpfast.state(data, errors="skip",
                                                            batch_bytes=1 << 20))
        assert table.num_rows == (0 if make is orphan_commits else 20)
        peaks.append(peak)
    # the input itself is not counted (it is given whole); the batch is one MiB
    assert peaks[1] < 2 * peaks[0] + (4 << 20), peaks


def test_the_storm_state_is_the_history_current():
    data = rollback_storm(120)
    once = dcpfast.state(data)
    every = dcpfast.state(data, history=True)
    current = {r["key"]: r["by_seqno"] for r in every.to_pylist()
               if r["valid_to_seqno"] is None}
    assert {r["key"]: r["by_seqno"] for r in once.to_pylist()} == current
    assert dcpfast.state(iter(list(dcpfast.iter_batches(data, 1 << 14)))).num_rows <= 20


@pytest.mark.parametrize("threads", [1, 2])
def test_values_are_decoded_on_the_threads_asked_for(threads, monkeypatch):
    """``threads=1`` is one thread for everything, the values too; more lets the values
    of a large batch be decoded on several."""
    import threading

    from dcpfast import values as v

    data = t.synthetic_stream(12_000, seed=5, value_size=600)
    decoded_on: set[int] = set()
    piece = v._spans

    def spied(*args, **kwargs):
        decoded_on.add(threading.get_ident())
        return piece(*args, **kwargs)
    monkeypatch.setattr(v, "_spans", spied)
    monkeypatch.setattr("dcpfast.pool.idle_threads", lambda: 2)   # the cores look idle
    monkeypatch.setattr("dcpfast.pool.default_threads", lambda: 2)
    table = dcpfast.state(data, threads=threads, batch_bytes=64 << 20)
    assert table.num_rows and sum(map(len, table.column("body").to_pylist())) > 2 << 20
    if threads == 1:
        assert decoded_on == {threading.get_ident()}
    else:
        assert len(decoded_on) == 2
