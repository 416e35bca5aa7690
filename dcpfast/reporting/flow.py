"""One connection's flow control and NOOPs: what the server sent against the buffer the
client asked for, what the client acknowledged, and how long each NOOP took to answer.

Flow control (the wire reference, section 8): the client sets the buffer with the
Control ``connection_buffer_size`` (a decimal integer from 0 to ``MAX_BUFFER``: the
server refuses any other value and keeps the buffer it had, and so does the report,
counting the value as ``refused``); the server charges each DCP request it sends at its
frame size (a Prepare 2 bytes more), Noops excepted; the client gives the bytes back with
Buffer Acknowledgements. Unacknowledged bytes are the sends minus the acknowledgements in
time order, so they need both directions' times: a capture's. The two directions arrive
in separate batches, so sends and acknowledgements wait until both directions have passed
their time (or ``PENDING_EVENTS`` of them wait), then are merged in time order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import protocol as P
from ..batch import FrameBatch
from ..streams import controls
from .grid import Thinned

if TYPE_CHECKING:
    from .partial import Partial

#: The share of the buffer counted as "at the limit".
NEAR_LIMIT = 0.9
#: Sends and acknowledgements held before they are merged whatever the other direction.
PENDING_EVENTS = 1 << 20
#: NOOPs waiting for their other half (request or response) per connection.
PENDING_NOOPS = 4096
_BUFFER_CONTROL = "connection_buffer_size"
#: The largest buffer size the server takes (kv_engine reads it as an unsigned 32-bit int).
MAX_BUFFER = 2**32 - 1
#: What a Prepare is charged over its frame size (kv_engine's prepareBaseMsgBytes).
PREPARE_SURCHARGE = 2


def buffer_size(value: str) -> int | None:
    """A ``connection_buffer_size`` as the server takes it: decimal digits (blanks around
    them allowed) from 0 to ``MAX_BUFFER``; None for any other value."""
    digits = value.strip()
    if not (digits.isascii() and digits.isdigit() and len(digits) <= len(str(MAX_BUFFER))):
        return None
    size = int(digits)
    return size if size <= MAX_BUFFER else None


class FlowControl:
    """Flow control of one connection, fed its server's sends and its client's acks."""

    def __init__(self) -> None:
        #: The ``connection_buffer_size`` the client asked for (0: off), None if unseen.
        self.buffer_bytes: int | None = None
        #: The ``connection_buffer_size`` values that are no size the server takes.
        self.refused = 0
        #: Buffer Acknowledgements the client sent, and the bytes they gave back.
        self.acks = 0
        self.acked_bytes = 0
        #: Bytes the server charged (sent requests, Noops excepted).
        self.sent_bytes = 0
        #: The most bytes unacknowledged at once (None without both directions' times).
        self.max_unacked: int | None = None
        #: Time (ns) with unacknowledged bytes at or above NEAR_LIMIT of the buffer.
        self.near_ns = 0
        #: Intervals between acknowledgements, ms.
        self.ack_gaps = Thinned()
        self.unacked = 0
        self.near = False                  # at the limit after the last event merged
        self.last: int | None = None       # time of the last event merged
        self._last_ack: int | None = None
        self._seen = [0, 0]                # latest time of each direction (server, client)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []   # (times, +/- bytes)
        self._held = 0

    def learn(self, batch: FrameBatch) -> None:
        """The buffer size of the batch's Control requests (the latest wins)."""
        if not (batch["opcode"] == P.Opcode.CONTROL).any():
            return
        for row in controls(batch).to_pylist():
            if row["key"] == _BUFFER_CONTROL:
                size = buffer_size(row["value"])
                if size is None:
                    self.refused += 1
                else:
                    self.buffer_bytes = size

    def sent(self, times: np.ndarray, sizes: np.ndarray) -> None:
        """The server's charged sends (``times``: 0 where unknown)."""
        self.sent_bytes += int(sizes.sum())
        self._hold(times, sizes.astype(np.int64), 0)

    def acked(self, times: np.ndarray, sizes: np.ndarray) -> None:
        """The client's Buffer Acknowledgements."""
        self.acks += len(sizes)
        self.acked_bytes += int(sizes.sum())
        timed = times[times > 0]
        if len(timed):
            gaps = np.diff(timed if self._last_ack is None
                           else np.concatenate(([self._last_ack], timed)))
            self.ack_gaps.add(gaps / 1e6)
            self._last_ack = int(timed[-1])
        self._hold(times, -sizes.astype(np.int64), 1)

    def _hold(self, times: np.ndarray, deltas: np.ndarray, side: int) -> None:
        timed = times > 0
        if not timed.any():
            return
        self._seen[side] = max(self._seen[side], int(times[timed].max()))
        self._pending.append((times[timed], deltas[timed]))
        self._held += int(timed.sum())

    def settle(self, partial: Partial, row: int, *, final: bool = False) -> None:
        """Merge, in time order, the held events both directions have passed (all of them
        when ``final`` or too many wait); the unacknowledged bytes go to ``partial``'s
        series as row ``row``."""
        if not self._pending:
            return
        limit = None if final or self._held > PENDING_EVENTS else min(self._seen)
        times = np.concatenate([t for t, _ in self._pending])
        deltas = np.concatenate([d for _, d in self._pending])
        keep = np.ones(len(times), bool) if limit is None else times <= limit
        self._pending = [] if keep.all() else [(times[~keep], deltas[~keep])]
        self._held = len(self._pending[0][0]) if self._pending else 0
        times, deltas = times[keep], deltas[keep]
        if not len(times):
            return
        order = np.lexsort((deltas < 0, times))      # at one time, sends before acks
        times, deltas = times[order], deltas[order]
        unacked = self.unacked + np.cumsum(deltas)
        top = int(unacked.max())
        self.max_unacked = top if self.max_unacked is None else max(self.max_unacked, top)
        partial.add(partial.unacked, np.full(len(times), row), times, bytes=unacked)
        if self.buffer_bytes:
            near = unacked >= NEAR_LIMIT * self.buffer_bytes
            before = np.concatenate(([self.near], near[:-1]))
            starts = np.concatenate(([self.last if self.last is not None else times[0]],
                                     times[:-1]))
            self.near_ns += int(((times - starts) * before).sum())
            self.near = bool(near[-1])
        self.unacked, self.last = int(unacked[-1]), int(times[-1])

    def finish(self, end: int | None) -> None:
        """Count the time at the limit from the last event to ``end`` (the report's)."""
        if self.near and self.last is not None and end is not None and end > self.last:
            self.near_ns += end - self.last
            self.last = end


class Noops:
    """One connection's NOOPs: the server's requests counted and each paired with the
    client's response of the same opaque (whichever of the two is read first)."""

    def __init__(self) -> None:
        self.count = 0
        self.answered = 0
        self.rtt_ms = Thinned()
        self._asked: dict[int, int] = {}
        self._answers: dict[int, int] = {}

    def close(self) -> None:
        """Forget the NOOPs still waiting for their other half."""
        self._asked, self._answers = {}, {}

    def asked(self, opaques: np.ndarray, times: np.ndarray) -> tuple[list, list]:
        """The server's NOOP requests; returns the round trips completed
        ``(times, ms)``."""
        self.count += len(opaques)
        return self._pair(opaques, times, self._answers, self._asked, request=True)

    def answer(self, opaques: np.ndarray, times: np.ndarray) -> tuple[list, list]:
        """The client's NOOP responses; returns the round trips completed."""
        return self._pair(opaques, times, self._asked, self._answers, request=False)

    def _pair(self, opaques, times, others: dict, mine: dict, *, request: bool):
        done_at, done_ms = [], []
        for opaque, t in zip(opaques.tolist(), times.tolist()):
            other = others.pop(opaque, None)
            if other is None or t <= 0 or other <= 0:
                mine[opaque] = t
                if len(mine) > PENDING_NOOPS:
                    del mine[next(iter(mine))]
                continue
            asked, answered = (t, other) if request else (other, t)
            if answered >= asked:
                self.answered += 1
                done_at.append(asked)
                done_ms.append((answered - asked) / 1e6)
        self.rtt_ms.add(np.asarray(done_ms))
        return done_at, done_ms
