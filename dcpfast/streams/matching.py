"""Responses matched to their requests, and the ``StreamTracker`` that carries requests and
stream opaques from batch to batch.

A response is matched to its request by opcode and opaque: the latest such request
before it in the batch, else one remembered by a ``StreamTracker`` from earlier batches
(feed it every batch, e.g. the client-to-server batches of a capture before or alongside
the server-to-client ones). A Stream Request response with no request in sight is still
placed when its opaque is used by the messages of exactly one stream: the server sends
every message of a stream under the opaque of the request that opened it.
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

    ``update(batch)`` remembers, by opaque, the Stream Requests and Get Failover Log
    requests of the batch (the latest wins) and the opaques that the producer messages
    of each vbucket stream carry (an opaque seen on two streams places nothing), and
    returns the Stream Requests whose value is malformed, which it passes over (strict
    mode: ``DcpFormatError`` for the first); the batch is left as it is. Pass the tracker
    to ``failover_logs``/``rollbacks`` *before* updating it with the same batch.
    """

    def __init__(self):
        #: (opcode, opaque) -> (vbucket, stream_id or 0)
        self.requests: dict[tuple[int, int], tuple[int, int]] = {}
        #: opaque -> stream key (vbucket << 16 | stream_id), or -1 when ambiguous
        self.opaques: dict[int, int] = {}

    def update(self, batch: FrameBatch) -> list[SkippedRegion]:
        """Learn the requests and stream opaques of ``batch``; returns the malformed Stream
        Requests passed over, in stream order (``batch.mode`` "strict" raises the first)."""
        decoded, damaged = read_requests(batch)
        checked(batch.mode, damaged)
        learn(self, batch_requests(batch, decoded), message_opaques(batch))
        return damaged


def learn(tracker: StreamTracker, asked: dict, opaques: dict) -> None:
    """Add a batch's requests (``batch_requests``) and ``message_opaques`` to ``tracker``."""
    tracker.requests.update(asked)
    for opaque, firsts in opaques.items():
        for _, key in firsts:
            known = tracker.opaques.get(opaque, key)
            tracker.opaques[opaque] = key if known == key else AMBIGUOUS


def batch_requests(batch: FrameBatch, decoded: dict) -> dict:
    """(opcode, opaque) -> (vbucket, stream_id) of the batch's requests, latest last;
    ``decoded``: the batch's Stream Requests (``read_requests``)."""
    out = {}
    found = [(i, P.Opcode.STREAM_REQUEST, r["vbucket"], r["stream_id"] or 0)
             for i, r in decoded.items()]
    for opcode in _FAILOVER_REQUESTS:
        found += [(i, opcode, int(batch["vbucket"][i]), 0)
                  for i in rows(batch, opcode, response=False).tolist()]
    for i, opcode, vbucket, sid in sorted(found):
        out[(int(opcode), int(batch["opaque"][i]))] = (vbucket, sid)
    return out


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
        self.batch, self.tracker, self.prefix = batch, tracker, prefix
        self.by_opaque: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        for i, r in decoded.items():
            self._add(i, P.Opcode.STREAM_REQUEST, r["vbucket"], r["stream_id"] or 0)
        for opcode in _FAILOVER_REQUESTS:
            for i in rows(batch, opcode, response=False).tolist():
                self._add(i, opcode, int(batch["vbucket"][i]), 0)
        self._opaques = opaques

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
        if not before and self.tracker is not None and (opcode, opaque) in self.tracker.requests:
            before = [stream_key(*self.tracker.requests[(opcode, opaque)])]
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
