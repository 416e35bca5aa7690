"""What ``state`` says back of what a stream did not send (values, backfill tombstones, what
came before it began), and its metadata and memory bounded whatever the stream: the first
problems and counts of all, files that open, memory that grows with the documents, not
with hostile streams (orphan commits, rollback storms); values decoded on the threads
asked for."""

from __future__ import annotations

import struct

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.documents import StateBuilder, consistency, state_errors
from dcpfast.documents.output import metadata
from dcpfast.documents.problems import LISTED
from dcpfast.protocol import Opcode, OpenFlag, Status
from tests.documents.test_options import HDR, marker, mutation

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
    piece = v._extents

    def spied(*args, **kwargs):
        decoded_on.add(threading.get_ident())
        return piece(*args, **kwargs)
    monkeypatch.setattr(v, "_extents", spied)
    monkeypatch.setattr("dcpfast.threads.idle_threads", lambda: 2)   # the cores look idle
    monkeypatch.setattr("dcpfast.threads.default_threads", lambda: 2)
    table = dcpfast.state(data, threads=threads, batch_bytes=64 << 20)
    assert table.num_rows and sum(map(len, table.column("body").to_pylist())) > 2 << 20
    if threads == 1:
        assert decoded_on == {threading.get_ident()}
    else:
        assert len(decoded_on) == 2
