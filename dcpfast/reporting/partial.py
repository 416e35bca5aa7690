"""The aggregates of a report: one ``Partial`` per input (or client and server pair), read
on a thread or in a Spark task, merged into one on the driver.

A partial keeps counts, bounded series and per-connection figures, never frames: the
time grid and its cells (throughput by opcode, each stream's items, seqnos and snapshot
kinds, unacknowledged bytes per connection, NOOP round trips, lag), thinned samples for
quantiles, the documents (``content``), the connections (``conversation``) and their
streams. Two partials of different inputs merge exactly: their connections and streams
are renumbered after the first's and their cells added.
"""

from __future__ import annotations

import numpy as np

from .. import protocol as P
from ..errors import text
from .clock import CAPTURE
from .content import Content
from .grid import Cells, Grid, Thinned

#: Lag bins per doubling of the lag, and the bin of 1 ms (bin 0 holds lags <= 0).
LAG_STEPS = 4
LAG_ONE_MS = 81
LAG_BINS = LAG_ONE_MS + LAG_STEPS * 40 + 1
#: Capture-file damage listed; the rest is counted.
MAX_PROBLEMS = 100
#: Events (request, answer, end) kept per stream; the rest are counted.
MAX_EVENTS = 48
#: Snapshot kinds, as bits of a stream's marks: the marker flags and an OSO start.
MARK_BITS = {"memory": int(P.SnapshotFlag.MEMORY), "disk": int(P.SnapshotFlag.DISK),
             "checkpoint": int(P.SnapshotFlag.CHECKPOINT),
             "history": int(P.SnapshotFlag.HISTORY), "oso": 0x40}


def lag_bin(ms: np.ndarray) -> np.ndarray:
    """The lag bin of each lag in ms: 0 for <= 0, then ``LAG_STEPS`` bins per doubling,
    bin ``LAG_ONE_MS`` starting at 1 ms."""
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.floor(LAG_STEPS * np.log2(np.where(ms > 0, ms, 1.0)))
    bins = np.clip(steps + LAG_ONE_MS, 1, LAG_BINS - 1).astype(np.int64)
    return np.where(ms > 0, bins, 0)


def lag_low(bins: np.ndarray) -> np.ndarray:
    """The lowest lag (ms) of each bin (0 for bin 0)."""
    return np.where(bins > 0, 2.0 ** ((bins - LAG_ONE_MS) / LAG_STEPS), 0.0)


class Stream:
    """What a report keeps of one vbucket stream of a connection (a few hundred bytes)."""

    __slots__ = ("slot", "conversation", "vbucket", "stream_id", "requests", "items",
                 "highest", "first", "last", "open", "carry", "snapshots", "snapshot_total",
                 "events", "more_events", "stalls", "rollbacks", "rollback_seqnos", "end")

    def __init__(self, slot: int, conversation: int, key: int):
        self.slot, self.conversation = slot, conversation
        self.vbucket, self.stream_id = key >> 16, key & 0xFFFF
        self.requests = self.items = self.stalls = 0
        self.highest: int | None = None          # the highest seqno of its items
        self.first: int | None = None            # times of its first and last frame
        self.last: int | None = None
        self.open = False
        self.carry = 0                           # time of its latest timed frame
        self.snapshots = np.zeros(len(MARK_BITS), np.int64)     # by kind (MARK_BITS)
        self.snapshot_total = 0                  # markers and OSO snapshots
        self.events: list[tuple[int, str, str]] = []     # (time, what, detail)
        self.more_events = 0
        self.rollbacks = 0
        self.rollback_seqnos: list[int] = []     # the first MAX_EVENTS
        self.end: str | None = None              # the latest Stream End's status

    def rolled(self, seqno: int) -> None:
        self.rollbacks += 1
        if len(self.rollback_seqnos) < MAX_EVENTS:
            self.rollback_seqnos.append(seqno)

    def event(self, time: int, what: str, detail: str = "") -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append((time, what, detail))
        else:
            self.more_events += 1

    def seen(self, first: int, last: int) -> None:
        if first > 0:
            self.first = first if self.first is None else min(self.first, first)
        if last > 0:
            self.last = last if self.last is None else max(self.last, last)


class Partial:
    """The aggregates of one or more inputs (see the module's docstring)."""

    def __init__(self, clock: str, stall_seconds: float):
        #: ``"capture"`` or ``"cas"``: the clock of every input.
        self.clock = clock
        self.stall_ns = int(stall_seconds * 1e9)
        self.grid = Grid()
        #: rows: opcode | 256 for responses; frames and bytes.
        self.traffic = Cells({"frames": "sum", "bytes": "sum"},
                             {"frames": np.int64, "bytes": np.int64})
        #: rows: stream slots; items, highest seqno, snapshot kinds (``MARK_BITS``).
        self.progress = Cells({"items": "sum", "seqno": "max", "marks": "or"},
                              {"items": np.int64, "seqno": np.uint64, "marks": np.uint32})
        #: rows: connection numbers; the most unacknowledged bytes.
        self.unacked = Cells({"bytes": "max"}, {"bytes": np.int64})
        #: row 0: NOOP round trips, ms.
        self.rtt = Cells({"low": "min", "high": "max", "total": "sum", "count": "sum"},
                         {"low": np.float64, "high": np.float64, "total": np.float64,
                          "count": np.int64})
        #: rows: lag bins; document changes.
        self.lag = Cells({"count": "sum"}, {"count": np.int64})
        self.rtt_ms = Thinned()
        self.lag_ms = Thinned()
        #: The server's receive-to-send times its responses carried (frame info 0), ms.
        self.server_ms = Thinned()
        self.content = Content()
        #: The connections (``conversation.Conversation``), by number.
        self.conversations: list = []
        self.streams: list[Stream] = []
        #: What was read: ``name, kind ("capture"/"dump"), side, compression``.
        self.inputs: list[dict] = []
        #: Capture-file damage (the first MAX_PROBLEMS): ``input, offset, length, reason``.
        self.problems: list[dict] = []
        self.more_problems = 0

    # -- filling -------------------------------------------------------------------------

    def add(self, cells: Cells, rows: np.ndarray, times: np.ndarray, **values) -> None:
        """Add values at their times (those at time 0, unknown, are left out)."""
        timed = times > 0
        if not timed.all():
            rows, times = rows[timed], times[timed]
            values = {name: np.asarray(v)[timed] for name, v in values.items()}
        if len(rows):
            cells.add(rows, times, self.grid.see(times), **values)

    def lags(self, times: np.ndarray, own: np.ndarray) -> None:
        """Capture time minus CAS time of the document changes (``own`` > 0)."""
        at = np.flatnonzero((own > 0) & (times > 0))
        if not len(at):
            return
        ms = (times[at] - own[at]) / 1e6
        self.lag_ms.add(ms)
        self.add(self.lag, lag_bin(ms), times[at], count=np.ones(len(at), np.int64))

    def new_stream(self, conversation: int, key: int) -> Stream:
        found = Stream(len(self.streams), conversation, key)
        self.streams.append(found)
        return found

    def problem(self, name: str, offset: int, length: int, reason: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append({"input": name, "offset": offset, "length": length,
                                  "reason": reason})
        else:
            self.more_problems += 1

    # -- merging -------------------------------------------------------------------------

    def merge(self, other: Partial) -> None:
        """Add ``other`` (of other inputs, read with the same options) to this one."""
        if other.clock != self.clock:
            captures, dumps = (self, other) if self.clock == CAPTURE else (other, self)
            raise ValueError(text("report_clocks",
                                  captures=", ".join(i["name"] for i in captures.inputs),
                                  dumps=", ".join(i["name"] for i in dumps.inputs)))
        streams, conversations = len(self.streams), len(self.conversations)
        other.progress.rows(streams)
        other.unacked.rows(conversations)
        self.grid.merge(other.grid)
        for mine, theirs in ((self.traffic, other.traffic), (self.progress, other.progress),
                             (self.unacked, other.unacked), (self.rtt, other.rtt),
                             (self.lag, other.lag)):
            mine.merge(theirs)
        self.rtt_ms.merge(other.rtt_ms)
        self.lag_ms.merge(other.lag_ms)
        self.server_ms.merge(other.server_ms)
        self.content.merge(other.content)
        names = {c.name for c in self.conversations}
        for c in other.conversations:
            c.number += conversations
            base, n = c.name, 2
            while c.name in names:
                c.name, n = f"{base} #{n}", n + 1
            names.add(c.name)
        for s in other.streams:
            s.slot += streams
            s.conversation += conversations
        self.conversations += other.conversations
        self.streams += other.streams
        self.inputs += other.inputs
        for p in other.problems:
            self.problem(**p)
        self.more_problems += other.more_problems

    @property
    def frames(self) -> int:
        return sum(sum(c.frames) for c in self.conversations)

    @property
    def bytes(self) -> int:
        return sum(sum(c.bytes) for c in self.conversations)
