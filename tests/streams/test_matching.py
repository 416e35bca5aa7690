"""Responses matched to their requests (``dcpfast.streams.matching``): by opcode and opaque
in a batch, across batches and by stream opaques with a ``StreamTracker``, and nothing
placed where a stream opaque is ambiguous."""

from __future__ import annotations

import numpy as np

from dcpfast import streams as S
from dcpfast import testing as t
from dcpfast.pcap import CaptureBatch, Connection
from dcpfast.protocol import Opcode
from tests.streams.test_tables import rows, scan


def test_matching_by_opcode_and_opaque_in_batch():
    batch = scan(t.stream_request(vbucket=5, opaque=1),
                 t.get_failover_log(vbucket=6, opaque=1),
                 t.failover_log_response([(1, 0)], opaque=1),
                 t.failover_log_response([(2, 0)], opcode=Opcode.GET_FAILOVER_LOG, opaque=1),
                 t.rollback_response(7, opaque=1),
                 t.stream_request(vbucket=8, opaque=1),
                 t.rollback_response(9, opaque=1),
                 t.rollback_response(3, opaque=2))
    got = rows(S.failover_logs(batch))
    assert [(r["opcode"], r["vbucket"], r["vbucket_uuid"]) for r in got] == \
        [(0x53, 5, 1), (0x54, 6, 2)]
    got = rows(S.rollbacks(batch))
    assert [(r["index"], r["vbucket"], r["rollback_seqno"]) for r in got] == \
        [(4, 5, 7), (6, 8, 9), (7, None, 3)]


def test_tracker_matches_across_batches_and_stream_opaques():
    requests = scan(t.stream_request(vbucket=5, opaque=10, stream_id=2),
                    t.get_failover_log(vbucket=6, opaque=11))
    answers = scan(t.failover_log_response([(1, 0)], opaque=10),
                   t.failover_log_response([(1, 0)], opcode=Opcode.GET_FAILOVER_LOG,
                                           opaque=11),
                   t.rollback_response(4, opaque=12),
                   t.snapshot_marker(1, 1, vbucket=7, opaque=12),
                   t.mutation(b"k", by_seqno=1, vbucket=7, opaque=12))
    assert [r["vbucket"] for r in rows(S.failover_logs(answers))] == [None, None]
    tracker = S.StreamTracker()
    tracker.update(requests)
    got = rows(S.failover_logs(answers, tracker))
    assert [(r["vbucket"], r["stream_id"]) for r in got] == [(5, 2), (6, None)]
    # no request for opaque 12, but the messages of vbucket 7 carry it
    assert [r["vbucket"] for r in rows(S.rollbacks(answers, tracker))] == [7]


def test_ambiguous_stream_opaque_places_nothing():
    batch = scan(t.rollback_response(4, opaque=1),
                 t.snapshot_marker(1, 1, vbucket=7, opaque=1),
                 t.snapshot_marker(1, 1, vbucket=8, opaque=1))
    assert rows(S.rollbacks(batch))[0]["vbucket"] is None


def timed(batch, *times):
    """``batch`` as a capture's, its frames seen at ``times``."""
    return CaptureBatch(batch, Connection("a", 1, "b", 11210, "client->server"),
                        np.array(times, np.int64))


def test_each_remembered_request_is_answered_once_oldest_first():
    """Two requests under one opaque: the first answer goes to the first, the second to
    the second (the latest-wins rule would give both to vb 6), and an answered request
    places nothing more once the tracker has taken its answer."""
    tracker = S.StreamTracker()
    tracker.update(scan(t.stream_request(vbucket=5, opaque=1),
                        t.stream_request(vbucket=6, opaque=1)))
    answers = scan(t.rollback_response(3, opaque=1), t.failover_log_response([(1, 0)], opaque=1))
    assert [r["vbucket"] for r in rows(S.rollbacks(answers, tracker))] == [5]
    assert [r["vbucket"] for r in rows(S.failover_logs(answers, tracker))] == [6]
    tracker.update(answers)
    assert tracker.requests == {}
    assert [r["vbucket"] for r in rows(S.rollbacks(scan(t.rollback_response(3, opaque=1)),
                                                   tracker))] == [None]


def test_an_answer_goes_to_a_request_sent_before_it():
    """The client's batch holds the retry too (asked at 30 under the same opaque, for vb
    12): the Rollback seen at 20 goes to vb 5, asked at 10; the answer at 40 to vb 12."""
    tracker = S.StreamTracker()
    tracker.update(timed(scan(t.stream_request(vbucket=5, opaque=1),
                              t.stream_request(vbucket=12, opaque=1)), 10, 30))
    early = timed(scan(t.rollback_response(0, opaque=1)), 20)
    assert [r["vbucket"] for r in rows(S.rollbacks(early, tracker))] == [5]
    tracker.update(early)
    late = timed(scan(t.rollback_response(0, opaque=1)), 40)
    assert [r["vbucket"] for r in rows(S.rollbacks(late, tracker))] == [12]
    before = S.StreamTracker()
    before.update(timed(scan(t.stream_request(vbucket=5, opaque=1)), 30))
    assert [r["vbucket"] for r in rows(S.rollbacks(early, before))] == [None]
