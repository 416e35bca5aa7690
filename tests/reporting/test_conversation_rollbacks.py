"""Every Stream Request answer is placed with the request it follows: a Rollback and the
client's retry (under the same opaque or a new one) in a capture, whichever direction the
capture reader yields first and however the directions are cut into batches, and in a
client's dump beside the server's dump, given in either order. The report and
``streams.summarize`` agree."""

from __future__ import annotations

import pytest

import dcpfast
from dcpfast import streams
from dcpfast import testing as t
from dcpfast.pcap import CLIENT_TO_SERVER, read_pcap
from dcpfast.testing.capture import pcap_file, timed_packets

MS = 1_000_000
T0 = 1_700_000_000 * 10**9
FIRST, RETRY = 7, 11                      # the first request's opaque, a new one


def items(vbucket: int, opaque: int, count: int = 2, size: int = 1) -> bytes:
    """A snapshot of ``count`` mutations of ``vbucket`` from seqno 1."""
    out = t.snapshot_marker(1, count, opaque=opaque, vbucket=vbucket)
    for k in range(count):
        out += t.mutation(b"k%d-%d" % (vbucket, k), b"v" * size, by_seqno=k + 1,
                          opaque=opaque, vbucket=vbucket)
    return out


def conversation(retry: int, *, retried: int = 9, bulk: int = 0) -> list:
    """vb 9 asked from seqno 20 (opaque 7) and vb 10 (opaque 8); vb 9 rolls back to 0;
    the client then asks vb ``retried`` from 0 under ``retry``, and is answered.
    ``bulk``: mutations of 4 KB vb 10 carries before the retry."""
    return [(T0, True, t.stream_request(vbucket=9, opaque=FIRST, start=20)
             + t.stream_request(vbucket=10, opaque=8, start=0)),
            (T0 + MS, False, t.rollback_response(0, opaque=FIRST)
             + t.failover_log_response([(5, 0)], opaque=8)
             + items(10, 8, max(bulk, 2), 4000 if bulk else 1)),
            (T0 + 2 * MS, True, t.stream_request(vbucket=retried, opaque=retry, start=0)),
            (T0 + 3 * MS, False, t.failover_log_response([(5, 0)], opaque=retry)
             + items(retried, retry))]


def capture(tmp_path, events, *, fin: bool = True, handshake: bool = True):
    path = tmp_path / "rollback.pcap"
    path.write_bytes(pcap_file(timed_packets(events, fin=fin, handshake=handshake)))
    return path


def stream_of(figures: dict, vbucket: int) -> dict:
    return next(s for s in figures["streams"] if s["vbucket"] == vbucket)


def summary_rollbacks(summary) -> dict[int, list[int]]:
    table = summary.to_arrow().to_pylist()
    return {r["vbucket"]: r["rollbacks"] for r in table if r["rollbacks"]}


def assert_rolled_back_once(figures: dict, *, retried: int = 9, timed: bool = True) -> None:
    vb9 = stream_of(figures, 9)
    assert vb9["rollbacks"] == 1 and vb9["rollback_seqnos"] == [0]
    assert figures["anomaly_counts"] == {}
    assert figures["connections"][0]["unplaced_responses"] == 0
    accepted = stream_of(figures, retried)
    assert [e["what"] for e in accepted["events"]].count("accepted") == 1
    if timed:
        assert [e["what"] for e in vb9["events"]][:2] == ["request", "rollback"]
    if retried == 9:
        assert vb9["requests"] == 2
        assert [e["what"] for e in vb9["events"]].count("accepted") == 1


@pytest.mark.parametrize("retry", [FIRST, RETRY])
@pytest.mark.parametrize("bulk, fin", [(0, True), (0, False), (400, False), (2200, True)])
def test_a_rollback_and_its_retry_in_a_capture(tmp_path, retry, bulk, fin):
    """Without a FIN the client's few bytes wait for the end of the capture while the
    server's first MiB is yielded; 2,200 mutations of 4 KB cut the capture (and the
    server's direction) into several batches."""
    path = capture(tmp_path, conversation(retry, bulk=bulk), fin=fin)
    assert_rolled_back_once(dcpfast.report(path).figures)
    summary = streams.summarize(read_pcap(path))
    assert summary_rollbacks(summary) == {9: [0]}
    assert summary.anomaly_counts == {}


@pytest.mark.parametrize("retry", [FIRST, RETRY])
def test_the_server_yielded_first_still_finds_its_requests(tmp_path, retry):
    """The capture reader yields a connection's client-to-server frames before the
    server-to-client frames of the same bytes read, also when it cuts both into batches."""
    path = capture(tmp_path, conversation(retry, bulk=400), fin=False)
    for batch_bytes in (1 << 16, 1 << 23):
        order = [b.connection.direction == CLIENT_TO_SERVER
                 for b in read_pcap(path, batch_bytes=batch_bytes)]
        assert order[0] and order.count(True) >= 1
        summary = streams.summarize(read_pcap(path, batch_bytes=batch_bytes))
        assert summary_rollbacks(summary) == {9: [0]} and summary.anomaly_counts == {}


@pytest.mark.parametrize("retry", [FIRST, RETRY])
def test_a_capture_without_its_handshake(tmp_path, retry):
    """The capture began after the connection's SYNs and DCP Open."""
    path = capture(tmp_path, conversation(retry, bulk=400), fin=False, handshake=False)
    assert_rolled_back_once(dcpfast.report(path).figures)
    assert summary_rollbacks(streams.summarize(read_pcap(path))) == {9: [0]}


@pytest.mark.parametrize("retry", [FIRST, RETRY])
def test_a_rollback_of_one_stream_id_beside_another(tmp_path, retry):
    """vb 9 asked twice, under stream-ids 1 and 2: stream-id 1 rolls back, and its retry
    is answered while stream-id 2 streams 400 mutations."""
    def run(sid: int, opaque: int, count: int, size: int) -> bytes:
        out = t.snapshot_marker(1, count, opaque=opaque, vbucket=9, stream_id=sid)
        return out + b"".join(t.mutation(b"k%d" % k, b"v" * size, by_seqno=k + 1,
                                         opaque=opaque, vbucket=9, stream_id=sid)
                              for k in range(count))
    events = [(T0, True, t.stream_request(vbucket=9, opaque=FIRST, start=20, stream_id=1)
               + t.stream_request(vbucket=9, opaque=8, start=0, stream_id=2)),
              (T0 + MS, False, t.rollback_response(0, opaque=FIRST)
               + t.failover_log_response([(5, 0)], opaque=8) + run(2, 8, 400, 4000)),
              (T0 + 2 * MS, True, t.stream_request(vbucket=9, opaque=retry, start=0,
                                                   stream_id=1)),
              (T0 + 3 * MS, False, t.failover_log_response([(5, 0)], opaque=retry)
               + run(1, retry, 2, 1))]
    path = capture(tmp_path, events, fin=False)
    got = {s["stream_id"]: (s["requests"], s["rollback_seqnos"], [e["what"] for e in s["events"]])
           for s in dcpfast.report(path).figures["streams"]}
    assert got == {1: (2, [0], ["request", "rollback", "request", "accepted"]),
                   2: (1, [], ["request", "accepted"])}
    table = streams.summarize(read_pcap(path)).to_arrow().to_pylist()
    assert {r["stream_id"]: r["rollbacks"] for r in table} == {1: [0], 2: []}


@pytest.mark.parametrize("bulk", [0, 400])
def test_an_opaque_reused_on_another_vbucket_after_its_answer(tmp_path, bulk):
    """The retry asks vb 12 under the opaque vb 9's request used: the Rollback still goes
    to vb 9, the request it follows (the client's batch holds both requests)."""
    path = capture(tmp_path, conversation(FIRST, retried=12, bulk=bulk), fin=False)
    figures = dcpfast.report(path).figures
    assert_rolled_back_once(figures, retried=12)
    assert stream_of(figures, 12)["rollbacks"] == 0
    assert summary_rollbacks(streams.summarize(read_pcap(path))) == {9: [0]}


def dumps(tmp_path, events) -> tuple:
    client, server = tmp_path / "client.dcp", tmp_path / "server.dcp"
    client.write_bytes(b"".join(data for _, from_client, data in events if from_client))
    server.write_bytes(b"".join(data for _, from_client, data in events if not from_client))
    return client, server


@pytest.mark.parametrize("retry", [FIRST, RETRY])
@pytest.mark.parametrize("server_first", [False, True])
def test_a_rollback_and_its_retry_in_dumps(tmp_path, retry, server_first):
    client, server = dumps(tmp_path, conversation(retry))
    figures = dcpfast.report([server, client] if server_first else [client, server]).figures
    assert_rolled_back_once(figures, timed=False)


@pytest.mark.parametrize("server_first", [False, True])
def test_one_opaque_for_every_request_in_dumps(tmp_path, server_first):
    """A client that asks every stream under one opaque: each answer goes to the request
    it answers, in order (the server answers a connection's requests in turn)."""
    events = [(T0, True, t.stream_request(vbucket=9, opaque=FIRST, start=20)
               + t.stream_request(vbucket=10, opaque=FIRST, start=0)),
              (T0 + MS, False, t.rollback_response(0, opaque=FIRST)
               + t.failover_log_response([(5, 0)], opaque=FIRST) + items(10, FIRST)),
              (T0 + 2 * MS, True, t.stream_request(vbucket=9, opaque=FIRST, start=0)),
              (T0 + 3 * MS, False, t.failover_log_response([(5, 0)], opaque=FIRST)
               + items(9, FIRST))]
    client, server = dumps(tmp_path, events)
    figures = dcpfast.report([server, client] if server_first else [client, server]).figures
    assert_rolled_back_once(figures, timed=False)
    assert stream_of(figures, 10)["rollbacks"] == 0
    assert [e["what"] for e in stream_of(figures, 10)["events"]] == ["request", "accepted"]
    path = capture(tmp_path, events, fin=False)
    assert_rolled_back_once(dcpfast.report(path).figures)
    assert summary_rollbacks(streams.summarize(read_pcap(path))) == {9: [0]}
