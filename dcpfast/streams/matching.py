"""Responses matched to their requests, and the ``StreamTracker`` that carries requests and
stream opaques from batch to batch.

A response is matched to its request by opcode and opaque: the latest such request
before it in the batch, else one remembered by a ``StreamTracker`` from earlier batches
(feed it every batch, e.g. the client-to-server batches of a capture before or alongside
the server-to-client ones). The tracker keeps every request not answered yet, oldest
first, with its capture time: a response takes the oldest one sent before it (the server
answers a connection's requests in turn, each once), so that a client that asks again
under the same opaque, or asks several vbuckets under one opaque, has each answer placed
with the request it follows, whether or not the client's batch holds later requests too.
A Stream Request response with no request in sight is still placed when its opaque is
used by the messages of exactly one stream: the server sends every message of a stream
under the opaque of the request that opened it.
"""

from __future__ import annotations

import numpy as np

from .. import protocol as P
from ..arrays import unique as distinct
from ..batch import FrameBatch
from ..errors import SkippedRegion, checked
from .frames import IS_MESSAGE, read_requests, requests, rows

#: A stream opaque seen on more than one stream: it places nothing.
AMBIGUOUS = -1
#: Requests answered by a failover log (besides Stream Request), remembered by opaque.
_FAILOVER_REQUESTS = (P.Opcode.GET_FAILOVER_LOG, P.Opcode.GET_FAILOVER_LOG_NON_DCP)
#: Every request a tracker remembers, by opcode.
_TRACKED = np.zeros(256, bool)
_TRACKED[[P.Opcode.STREAM_REQUEST, *_FAILOVER_REQUESTS]] = True
#: Unanswered requests remembered per opcode and opaque (past it the oldest are dropped:
#: their answers were lost).
MAX_WAITING = 4096


def stream_key(vbucket: int, stream_id: int) -> int:
    """One int for a vbucket stream: ``vbucket << 16 | stream_id`` (0 without one)."""
    return vbucket << 16 | stream_id


def placed(requests: list[int], streams: set[int]) -> int | None:
    """The stream (key) a Stream Request response answers: that of the latest of
    ``requests`` (the stream keys of the requests with its opaque before it), else the
    one of ``streams`` (the streams whose messages used its opaque before it); None when
    there is no request and not exactly one such stream (``AMBIGUOUS``: an opaque seen
    on two streams). The one rule, for batches here and for rows on Spark."""
    if requests:
        return requests[-1]
    if len(streams) == 1 and AMBIGUOUS not in streams:
        return next(iter(streams))
    return None


class StreamTracker:
    """What a response needs from earlier batches: requests and stream opaques.

    ``update(batch)`` answers the requests that the batch's responses answer, remembers
    the Stream Requests and Get Failover Log requests of the batch (by opcode and
    opaque, with their capture times where the batch is a capture's), and the opaques
    that the producer messages of each vbucket stream carry (an opaque seen on two
    streams places nothing), and returns the Stream Requests whose value is malformed,
    which it passes over (strict mode: ``DcpFormatError`` for the first); the batch is
    left as it is. Pass the tracker to ``failover_logs``/``rollbacks`` *before* updating
    it with the same batch.
    """

    def __init__(self):
        #: (opcode, opaque) -> the requests not answered yet, oldest first: (capture time,
        #: 0 where unknown; vbucket; stream_id or 0)
        self.requests: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        #: opaque -> stream key (vbucket << 16 | stream_id), or -1 when ambiguous
        self.opaques: dict[int, int] = {}
        #: the batch last looked at, its answers and the requests each key's answers took
        self._answered: tuple[FrameBatch, dict[int, tuple[int, int]],
                              dict[tuple[int, int], int]] | None = None

    def update(self, batch: FrameBatch) -> list[SkippedRegion]:
        """Learn the requests and stream opaques of ``batch``; returns the malformed Stream
        Requests passed over, in stream order (``batch.mode`` "strict" raises the first)."""
        decoded, damaged = read_requests(batch)
        checked(batch.mode, damaged)
        learn(self, batch, batch_requests(batch, decoded), message_opaques(batch))
        return damaged

    def answers(self, batch: FrameBatch, asked: list) -> dict[int, tuple[int, int]]:
        """Row -> (vbucket, stream_id) of each response of ``batch`` that a remembered
        request answers: of its opcode and opaque, the oldest not answered yet, sent no
        later than the response (where both have a capture time); responses that a
        request of the batch itself (``asked``: ``batch_requests``) precedes are left to
        it. The same for a batch until ``learn`` takes it."""
        if self._answered is not None and self._answered[0] is batch:
            return self._answered[1]
        out: dict[int, tuple[int, int]] = {}
        taken: dict[tuple[int, int], int] = {}
        if self.requests and len(batch):
            at = np.flatnonzero(_TRACKED[batch["opcode"]])
            at = at[~requests(batch)[at]] if len(at) else at
            own: dict[tuple[int, int], int] = {}
            for row, opcode, opaque, *_ in asked:
                own.setdefault((opcode, opaque), row)
            times = getattr(batch, "timestamps", None)
            for i in at.tolist():
                key = (int(batch["opcode"][i]), int(batch["opaque"][i]))
                waiting = self.requests.get(key)
                if not waiting or own.get(key, i) < i:
                    continue
                n = taken.get(key, 0)
                if n == len(waiting):
                    continue
                sent, t = waiting[n][0], 0 if times is None else int(times[i])
                if sent and t and sent > t:          # asked after this answer
                    continue
                out[i] = waiting[n][1:]
                taken[key] = n + 1
        self._answered = (batch, out, taken)
        return out


def learn(tracker: StreamTracker, batch: FrameBatch, asked: list, opaques: dict) -> None:
    """Take ``batch`` into ``tracker``: the requests its responses answer are forgotten,
    its requests (``batch_requests``) and ``message_opaques`` added."""
    tracker.answers(batch, asked)
    assert tracker._answered is not None
    for key, n in tracker._answered[2].items():
        del tracker.requests[key][:n]
        if not tracker.requests[key]:
            del tracker.requests[key]
    tracker._answered = None
    for _, opcode, opaque, sent, vbucket, sid in asked:
        waiting = tracker.requests.setdefault((opcode, opaque), [])
        waiting.append((sent, vbucket, sid))
        if len(waiting) > MAX_WAITING:
            del waiting[0]
    for opaque, firsts in opaques.items():
        for _, key in firsts:
            known = tracker.opaques.get(opaque, key)
            tracker.opaques[opaque] = key if known == key else AMBIGUOUS


def batch_requests(batch: FrameBatch, decoded: dict) -> list[tuple[int, ...]]:
    """(row, opcode, opaque, capture time or 0, vbucket, stream_id) of the batch's
    requests, in order; ``decoded``: the batch's Stream Requests (``read_requests``)."""
    found = [(i, P.Opcode.STREAM_REQUEST, r["vbucket"], r["stream_id"] or 0)
             for i, r in decoded.items()]
    for opcode in _FAILOVER_REQUESTS:
        found += [(i, opcode, int(batch["vbucket"][i]), 0)
                  for i in rows(batch, opcode, response=False).tolist()]
    times = getattr(batch, "timestamps", None)
    return [(i, int(opcode), int(batch["opaque"][i]), 0 if times is None else int(times[i]),
             vbucket, sid) for i, opcode, vbucket, sid in sorted(found)]


def message_opaques(batch: FrameBatch) -> dict[int, list[tuple[int, int]]]:
    """opaque -> [(first row, stream key)] of the producer messages in ``batch``."""
    if not len(batch):
        return {}
    at = np.flatnonzero(requests(batch) & IS_MESSAGE[batch["opcode"]])
    pairs = batch["opaque"][at].astype(np.uint64) << np.uint64(32)
    pairs |= batch["vbucket"][at].astype(np.uint64) << np.uint64(16)
    pairs |= batch["stream_id"][at]
    if len(pairs) > 1:              # runs first: streams arrive in long stretches
        heads = np.concatenate(([True], pairs[1:] != pairs[:-1]))
        at, pairs = at[heads], pairs[heads]
    unique, first = distinct(pairs, first=True)
    out: dict[int, list[tuple[int, int]]] = {}
    for pair, row in sorted(zip(unique.tolist(), at[first].tolist()), key=lambda x: x[1]):
        out.setdefault(pair >> 32, []).append((row, pair & 0xFFFFFFFF))
    return out


class Matcher:
    """Places responses of one batch: request in the batch, then tracker, then opaques.

    ``decoded`` is the batch's Stream Requests (``read_requests``); ``opaques`` its
    ``message_opaques`` when already at hand.
    """

    def __init__(self, batch: FrameBatch, tracker: StreamTracker | None, decoded: dict, *,
                 prefix: bool = False, opaques=None):
        self.batch, self.tracker, self.prefix, self.decoded = batch, tracker, prefix, decoded
        self.by_opaque: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        for i, r in decoded.items():
            self._add(i, P.Opcode.STREAM_REQUEST, r["vbucket"], r["stream_id"] or 0)
        for opcode in _FAILOVER_REQUESTS:
            for i in rows(batch, opcode, response=False).tolist():
                self._add(i, opcode, int(batch["vbucket"][i]), 0)
        self._opaques = opaques
        self._answers: dict[int, tuple[int, int]] | None = None

    def _add(self, i, opcode, vbucket, sid):
        key = (int(opcode), int(self.batch["opaque"][i]))
        self.by_opaque.setdefault(key, []).append((i, vbucket, sid))

    def place(self, i: int) -> tuple[int, int] | None:
        """(vbucket, stream_id) of the request answered by response row ``i``.

        With ``prefix`` only the stream messages before the response are considered,
        so that the answer does not depend on where a stream is cut into batches.
        """
        opcode, opaque = int(self.batch["opcode"][i]), int(self.batch["opaque"][i])
        before = [stream_key(vb, sid) for row, vb, sid
                  in self.by_opaque.get((opcode, opaque), ()) if row < i]
        if not before and self.tracker is not None:
            if self._answers is None:
                self._answers = self.tracker.answers(self.batch,
                                                     batch_requests(self.batch, self.decoded))
            if i in self._answers:
                before = [stream_key(*self._answers[i])]
        keys: set[int] = set()
        if not before and opcode == P.Opcode.STREAM_REQUEST:
            if self._opaques is None:
                self._opaques = message_opaques(self.batch)
            keys = {key for row, key in self._opaques.get(opaque, ())
                    if row < i or not self.prefix}
            if self.tracker is not None and opaque in self.tracker.opaques:
                keys.add(self.tracker.opaques[opaque])
        key = placed(before, keys)
        return None if key is None else (key >> 16, key & 0xFFFF)
