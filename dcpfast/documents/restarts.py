"""Where a stream restarts: Stream Request responses (success or Rollback) placed on the
vbucket stream they answer, as ``RESTART`` rows.

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
from ..batch import FrameBatch
from ..streams import StreamTracker
from ..streams import frames as F
from ..streams.matching import Matcher, stream_key
from .rows import RESTART, Rows, make_rows


class Placer:
    """Places the responses of a stream's batches, in order; carries what waits."""

    def __init__(self):
        self.tracker = StreamTracker()
        #: responses waiting for a message with their opaque: (opaque, pos, rolled,
        #: rollback seqno, offset, length)
        self.waiting: list[tuple[int, int, bool, int, int, int]] = []

    def place(self, batch: FrameBatch, first: int, *, values: bool) -> Rows:
        """The ``RESTART`` rows of ``batch`` (whose first frame is number ``first``)."""
        rolled = F.rollback_seqnos(batch)
        ok = F.rows(batch, P.Opcode.STREAM_REQUEST, response=True, status=P.Status.SUCCESS)
        match = Matcher(batch, self.tracker, prefix=True)
        found: list[tuple[int, int, bool, int, int, int, int]] = []
        for i in sorted([*ok.tolist(), *rolled]):
            pos = (first + i) * 2
            offset = int(batch["offset"][i])
            length = P.HEADER_SIZE + int(batch["body_len"][i])
            opaque = int(batch["opaque"][i])
            where = match.place(i)
            if where is None:
                self.waiting.append((opaque, pos, i in rolled, rolled.get(i, 0), offset,
                                     length))
            else:
                found.append((pos, stream_key(*where), i in rolled, rolled.get(i, 0), offset,
                              length, opaque))
        found += self._resolve(batch, first)
        self.tracker.update(batch)
        if not found:
            return make_rows(0, values)
        names = ("pos", "unit", "rolled", "seqno", "offset", "length", "opaque")
        columns = {name: np.array(c) for name, c in zip(names, zip(*found))}
        info = np.full(len(found), C.INFO_COLLECTIONS if batch.collections else 0)
        return make_rows(len(found), values, what=np.full(len(found), RESTART), info=info,
                         **columns)

    def _resolve(self, batch: FrameBatch, first: int) -> list:
        """Place the waiting responses that a message of ``batch`` places."""
        if not self.waiting or not len(batch):
            return []
        messages = np.flatnonzero(F.requests(batch) & F.IS_MESSAGE[batch["opcode"]])
        if not len(messages):
            return []
        opaques = batch["opaque"][messages].astype(np.int64)
        order = np.argsort(opaques, kind="stable")
        span = len(batch) + 1
        keys = opaques[order] * span + messages[order]
        waiting = np.array([(o, p) for o, p, *_ in self.waiting], np.int64).reshape(-1, 2)
        after = np.clip(waiting[:, 1] // 2 - first, -1, span - 1)   # the response's row
        at = np.searchsorted(keys, waiting[:, 0] * span + after, "right")
        placed = at < len(keys)
        placed[placed] = keys[at[placed]] // span == waiting[placed, 0]
        found, kept = [], []
        for (opaque, pos, rolled, seqno, offset, length), hit, j in zip(
                self.waiting, placed.tolist(), at.tolist()):
            if not hit:
                kept.append((opaque, pos, rolled, seqno, offset, length))
                continue
            row = int(messages[order[j]])
            unit = stream_key(int(batch["vbucket"][row]), int(batch["stream_id"][row]))
            found.append(((first + row) * 2 - 1, unit, rolled, seqno, offset, length, opaque))
        self.waiting = kept
        return found

    def unplaced(self) -> list[tuple[int, int, int]]:
        """(offset, length, rollback seqno) of the Rollback responses nothing placed."""
        return [(offset, length, seqno) for _, _, rolled, seqno, offset, length
                in self.waiting if rolled]
