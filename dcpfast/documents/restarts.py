"""Where a stream restarts: Stream Request responses (success or Rollback) placed on the
vbucket stream they answer, as ``W_RESTART`` rows.

A response is placed as ``dcpfast.streams`` places it (``Matcher``: the request in the
stream, else the one stream whose messages used its opaque before it); one that nothing
places yet waits for the first stream message with its opaque after it, which places it
just before that message. A Rollback response that is never placed is reported at the
end (``unplaced``).
"""

from __future__ import annotations

import numpy as np

from .. import protocol as P
from .._core import contract as C
from ..arrays import unique as distinct
from ..batch import FrameBatch
from ..errors import SkippedRegion
from ..streams import StreamTracker
from ..streams import frames as F
from ..streams.checks import request_info
from ..streams.matching import Matcher, batch_requests, learn, stream_key
from .rows import Rows, make_rows

#: The requests a ``StreamTracker`` remembers (Stream Requests, Get Failover Logs): a
#: batch without any has none to learn.
_ASKING = [int(P.Opcode.STREAM_REQUEST), int(P.Opcode.GET_FAILOVER_LOG),
           int(P.Opcode.GET_FAILOVER_LOG_NON_DCP)]


class Placer:
    """Places the responses of a stream's batches, in order; carries what waits."""

    def __init__(self):
        self.tracker = StreamTracker()
        #: responses waiting for a message with their opaque: (opaque, pos, rolled,
        #: rollback seqno, offset, length)
        self.waiting: list[tuple[int, int, bool, int, int, int]] = []

    def place(self, batch: FrameBatch, first: int, rows: Rows, *,
              values: bool) -> tuple[Rows, list[SkippedRegion]]:
        """The ``W_RESTART`` rows of ``batch`` (whose first frame is number ``first``, and
        whose ``batch_rows`` are ``rows``: its stream messages), and the malformed Stream
        Requests and Rollback responses it passed over, in stream order."""
        opcode = batch["opcode"]
        requested = bool(np.count_nonzero(opcode == P.Opcode.STREAM_REQUEST))
        asked = requested or any(np.count_nonzero(opcode == o) for o in _ASKING)
        decoded, damaged = F.read_requests(batch) if asked else ({}, [])
        opaques = _opaques(rows, first)
        found: list[tuple[int, int, bool, int, int, int, int]] = []
        answers: dict[int, tuple[bool, int]] = {}
        if requested:
            answers, malformed = self._answers(batch)
            damaged = sorted(damaged + malformed)
        if answers:
            match = Matcher(batch, self.tracker, decoded, prefix=True, opaques=opaques)
            for i, (rolled, seqno) in answers.items():
                pos = (first + i) * 2
                offset = int(batch["offset"][i])
                length = P.HEADER_SIZE + int(batch["body_len"][i])
                opaque = int(batch["opaque"][i])
                where = match.place(i)
                if where is None:
                    self.waiting.append((opaque, pos, rolled, seqno, offset, length))
                else:
                    found.append((pos, stream_key(*where), rolled, seqno, offset, length,
                                  opaque))
        found += self._resolve(rows)
        learn(self.tracker, batch, batch_requests(batch, decoded) if asked else [], opaques)
        if requested:
            _requested(rows, first, decoded, batch.collections)
        if not found:
            return make_rows(0, values), damaged
        names = ("pos", "unit", "rolled", "seqno", "offset", "length", "opaque")
        columns = {name: np.array(c) for name, c in zip(names, zip(*found))}
        info = np.full(len(found), C.INFO_COLLECTIONS if batch.collections else 0)
        return make_rows(len(found), values, what=np.full(len(found), C.W_RESTART), info=info,
                         **columns), damaged

    @staticmethod
    def _answers(batch: FrameBatch) -> tuple[dict[int, tuple[bool, int]],
                                             list[SkippedRegion]]:
        """Row -> (a Rollback, its seqno) of each successful or Rollback Stream Request
        response; and the Rollback responses whose value is malformed."""
        at = np.flatnonzero((batch["opcode"] == P.Opcode.STREAM_REQUEST)
                            & F.responses(batch))
        out, damaged = {}, []
        for i in at.tolist():
            status = int(batch["status"][i])
            if status == P.Status.SUCCESS:
                out[i] = (False, 0)
            elif status == P.Status.ROLLBACK:
                try:
                    out[i] = (True, F.rollback_seqno(F.value(batch, i)))
                except ValueError as e:
                    damaged.append(F.frame_region(batch, i, str(e)))
        return out, damaged

    def _resolve(self, rows: Rows) -> list:
        """Place the waiting responses that a stream message of ``rows`` places: the first
        one with the response's opaque after it."""
        if not self.waiting or not len(rows):
            return []
        c = rows.columns
        pos = c["pos"]
        found, kept = [], []
        for opaque, at, rolled, seqno, offset, length in self.waiting:
            # the rows of frames after the response's (rows of no frame have odd places)
            row = _first_message(c, int(np.searchsorted(pos, at // 2 * 2 + 1, "right")),
                                 opaque)
            if row is None:
                kept.append((opaque, at, rolled, seqno, offset, length))
                continue
            found.append((int(pos[row]) // 2 * 2 - 1, int(c["unit"][row]), rolled, seqno, offset,
                          length, opaque))
        self.waiting = kept
        return found

    def unplaced(self) -> list[tuple[int, int, int]]:
        """(offset, length, rollback seqno) of the Rollback responses nothing placed."""
        return [(offset, length, seqno) for _, _, rolled, seqno, offset, length
                in self.waiting if rolled]


def _first_message(c, start: int, opaque: int) -> int | None:
    """The first row from ``start`` on of a stream message with ``opaque`` (None: none),
    looked for in windows that grow (it is most often the next row)."""
    n, width = len(c["what"]), 64
    while start < n:
        stop = min(n, start + width)
        hit = np.flatnonzero((c["opaque"][start:stop] == opaque)
                             & (c["what"][start:stop] < C.W_RESTART))
        if len(hit):
            return start + int(hit[0])
        start, width = stop, width * 8
    return None


def _opaques(rows: Rows, first: int) -> dict[int, list[tuple[int, int]]]:
    """opaque -> [(first frame row, stream key)] of the stream messages of ``rows``
    (``streams.matching.message_opaques``, from the rows at hand)."""
    c = rows.columns
    message = c["what"] < C.W_RESTART
    # the first row of each run of one stream's messages (streams arrive in long
    # stretches): each (opaque, stream)'s first row is one
    head = message.copy()
    opaque, unit = c["opaque"], c["unit"]
    head[1:] &= (opaque[1:] != opaque[:-1]) | (unit[1:] != unit[:-1]) | ~message[:-1]
    at = np.flatnonzero(head)
    if not len(at):
        return {}
    pairs = opaque[at].astype(np.uint64) << np.uint64(32) | unit[at]
    unique, index = distinct(pairs, first=True)
    frames = rows.gather("pos", at[index]) // 2 - first
    out: dict[int, list[tuple[int, int]]] = {}
    for pair, row in sorted(zip(unique.tolist(), frames.tolist()), key=lambda x: x[1]):
        out.setdefault(pair >> 32, []).append((row, pair & 0xFFFFFFFF))
    return out


def _requested(rows: Rows, first: int, decoded: dict, collections: bool) -> None:
    """The Stream Requests among ``rows``: their stream (the one they ask for), start
    seqno and what the stream checks read of them (``streams.checks.request_info``)."""
    c = rows.columns
    asked = np.flatnonzero(c["what"] == C.W_REQUEST)
    if not len(asked):
        return
    c["what"][asked] = C.W_NONE             # a request whose value does not decode
    at = np.searchsorted(c["pos"], [(first + i) * 2 for i in decoded])
    c["seqno"] = c["seqno"].copy()          # the batch's own column: not written to
    c["what"][at] = C.W_REQUEST
    c["seqno"][at] = [r["start_seqno"] for r in decoded.values()]
    c["unit"][at] = [stream_key(r["vbucket"], r["stream_id"] or 0) for r in decoded.values()]
    c["info"][at] = [request_info(r["flags"], r["filter"], collections)
                     for r in decoded.values()]
