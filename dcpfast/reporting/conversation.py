"""One DCP connection, both directions: its streams over time, stalls, flow control,
NOOPs, damage, and the stream health ``dcpfast.streams`` reports.

A capture's TCP connection is one conversation (its server-to-client batches are the
server side, the client-to-server batches the client side); a dump is the server side of
one, and a client's dump beside it its client side. The server side runs through a
``streams.Summary`` (the anomalies, per-stream counts and end states are its), the client
side through the summary's tracker, so that responses find their requests.

A stall is silence on an open stream longer than the report's threshold: between two
messages of one vbucket stream (a Stream Request's success response opens it, a Stream
End closes it), or, on a capture, between two stream messages of the connection while
any of its streams is open. Silence that lasts to the connection's last frame counts too, as
``ongoing`` (captures only: a vbucket's CAS clock stops when its documents stop changing).
"""

from __future__ import annotations

import numpy as np

from .. import protocol as P
from ..batch import FrameBatch, kinds_of
from ..errors import SkippedRegion, checked, is_capture_gap, skipped_regions, text
from ..events import Manifest
from ..streams import Summary, high_seqnos
from ..streams.frames import IS_ITEM, IS_MESSAGE, read_requests, requests, rollback_seqnos
from ..streams.matching import Matcher
from .clock import CAPTURE, carried
from .flow import PREPARE_SURCHARGE, FlowControl, Noops
from .partial import MARK_BITS, Partial, Stream

SERVER, CLIENT = 0, 1
#: Stalls kept per connection (the longest); the rest are counted.
MAX_STALLS = 500
#: Damaged regions listed per connection; the rest are counted.
MAX_DAMAGE = 200
#: Anomalies of the summary kept per connection (the first by offset); all are counted.
MAX_ANOMALIES = 1000
#: Offset-to-time points kept per direction (for the time of an anomaly).
_MARKS = 4096
_MARK_EVERY = 256
_MARKER_FLAGS = np.uint32(sum(v for k, v in MARK_BITS.items() if k != "oso"))
_CUT = text("frame_cut_by_gap").split(" by ")[0]


def damage_kind(reason: str) -> str:
    """The anomaly kind of a skipped region: ``capture_gap``, ``frame_cut`` (a frame a gap
    cut short) or ``damaged_bytes``."""
    return "capture_gap" if is_capture_gap(reason) else \
        "frame_cut" if reason.startswith(_CUT) else "damaged_bytes"


def status_name(enum, number: int) -> str:
    try:
        return enum(number).name.lower()
    except ValueError:
        return f"0x{number:x}"


class Conversation:
    """Both directions of one connection, fed batch by batch (``server``, ``client``)."""

    def __init__(self, name: str, number: int, clock: str, stall_ns: int):
        self.name, self.number, self.clock, self.stall_ns = name, number, clock, stall_ns
        self.summary: Summary | None = Summary(keep=MAX_ANOMALIES)
        self.manifest: Manifest | None = Manifest()
        self.flow = FlowControl()
        self.noops = Noops()
        self.streams: dict[int, Stream] = {}
        self.frames = [0, 0]
        self.bytes = [0, 0]
        self.first: int | None = None
        self.last: int | None = None
        self.open_streams = 0                    # streams open after the last message
        self.quiet_since = 0                     # time of its last stream message
        #: (vbucket or None, stream id, start, end, ongoing, streams open): the longest
        #: MAX_STALLS (vbucket None: the whole connection's, with its open streams)
        self.stalls: list[tuple[int | None, int, int, int, bool, int]] = []
        self.more_stalls = 0
        self.unplaced = 0                        # Stream Request responses placed nowhere
        #: vbucket -> (its high seqno, the time) in the server's last GetAllVbSeqnos answer
        self.server_seqnos: dict[int, tuple[int, int]] = {}
        self.damage: list[tuple[int, int, int, str, int]] = []  # side, offset, length, why, t
        self.more_damage = 0
        self.marks: list[list[np.ndarray]] = [[], []]        # per side: offsets, times
        # what the end of the connection gives: filled by ``close``
        #: (vbucket, stream id) -> the anomalies the summary found on it
        self.stream_anomalies: dict[tuple[int, int], int] = {}
        self.anomalies: list[dict] = []
        self.anomaly_counts: dict[str, int] = {}

    # -- both sides ----------------------------------------------------------------------

    def _common(self, batch: FrameBatch, req: np.ndarray, times: np.ndarray, side: int,
                partial: Partial, damaged: list[SkippedRegion] | None = None) -> None:
        """Counts, traffic, times and damage of a batch of either side; ``damaged``: its
        malformed frames found so far, listed as damage with what the scan skipped."""
        n = len(batch)
        sizes = batch["body_len"].astype(np.int64) + P.HEADER_SIZE
        self.frames[side] += n
        self.bytes[side] += int(sizes.sum())
        timed = times[times > 0]
        if len(timed):
            lo, hi = int(timed.min()), int(timed.max())
            self.first = lo if self.first is None else min(self.first, lo)
            self.last = hi if self.last is None else max(self.last, hi)
        op = batch["opcode"].astype(np.int64)
        partial.add(partial.traffic, op | (~req).astype(np.int64) << 8, times,
                    frames=np.ones(n, np.int64), bytes=sizes)
        self._mark(batch, times, side)
        self._note_damage(batch, times, side,
                          sorted([*batch.errors, *damaged]) if damaged else batch.errors)

    def _mark(self, batch: FrameBatch, times: np.ndarray, side: int) -> None:
        """Keep offset-to-time points of a direction, thinned to ``_MARKS``."""
        if not len(batch):
            return
        pick = np.arange(0, len(batch), _MARK_EVERY)
        pick = pick[times[pick] > 0]
        if not len(pick):
            return
        self.marks[side].append(np.stack([batch["offset"][pick].astype(np.int64),
                                          times[pick]]))
        if sum(m.shape[1] for m in self.marks[side]) > 2 * _MARKS:
            joined = np.concatenate(self.marks[side], axis=1)
            self.marks[side] = [joined[:, ::2]]

    def time_at(self, side: int, offset: int) -> int | None:
        """About when byte ``offset`` of a direction was seen (None if unknown)."""
        if not self.marks[side]:
            return None
        joined = np.concatenate(self.marks[side], axis=1)
        at = int(np.searchsorted(joined[0], offset, side="right")) - 1
        return int(joined[1][max(at, 0)])

    def _note_damage(self, batch: FrameBatch, times: np.ndarray, side: int,
                     regions: list[SkippedRegion]) -> None:
        for k, region in enumerate(regions):
            if len(self.damage) >= MAX_DAMAGE:
                self.more_damage += len(regions) - k
                break
            at = int(np.searchsorted(batch["offset"], region.offset))
            t = int(times[min(at, len(batch) - 1)]) if len(batch) else 0
            self.damage.append((side, region.offset, region.length, region.reason, t))

    def stream(self, key: int, partial: Partial) -> Stream:
        found = self.streams.get(key)
        if found is None:
            found = self.streams[key] = partial.new_stream(self.number, key)
        return found

    # -- the client's side ---------------------------------------------------------------

    def client(self, batch: FrameBatch, times: np.ndarray, partial: Partial) -> None:
        """The next batch the client sent."""
        op, req = batch["opcode"], requests(batch)
        self._common(batch, req, times, CLIENT, partial)
        if self.summary is not None:
            self.summary.tracker.update(batch)
        self._requests(batch, req, times, partial)
        self.flow.learn(batch)
        acks = np.flatnonzero(req & (op == P.Opcode.BUFFER_ACK))
        if len(acks):
            self.flow.acked(times[acks], batch["ack_bytes"][acks])
        answers = np.flatnonzero(~req & (op == P.Opcode.NOOP))
        if len(answers):
            self._round_trips(self.noops.answer(batch["opaque"][answers], times[answers]),
                              partial)
        self.flow.settle(partial, self.number)

    def _requests(self, batch: FrameBatch, req: np.ndarray, times: np.ndarray,
                  partial: Partial) -> list[SkippedRegion]:
        """Stream Requests and Close Streams the batch holds (a client's); returns the
        malformed Stream Requests (``batch.mode`` "strict" raises the first)."""
        op = batch["opcode"]
        if not (req & ((op == P.Opcode.STREAM_REQUEST) | (op == P.Opcode.CLOSE_STREAM))).any():
            return []
        decoded, damaged = read_requests(batch)
        checked(batch.mode, damaged)
        for i, r in decoded.items():
            stream = self.stream(r["vbucket"] << 16 | (r["stream_id"] or 0), partial)
            stream.requests += 1
            stream.seen(int(times[i]), int(times[i]))
            stream.event(int(times[i]), "request", f"from seqno {r['start_seqno']}")
        closing = np.flatnonzero(req & (op == P.Opcode.CLOSE_STREAM))
        for i in closing.tolist():
            key = int(batch["vbucket"][i]) << 16 | int(batch["stream_id"][i])
            self.stream(key, partial).event(int(times[i]), "close", "")
        return damaged

    def _round_trips(self, done: tuple[list, list], partial: Partial) -> None:
        at, ms = done
        if at:
            values = np.asarray(ms)
            partial.rtt_ms.add(values)
            partial.add(partial.rtt, np.zeros(len(at), np.int64), np.asarray(at, np.int64),
                        low=values, high=values, total=values, count=np.ones(len(at)))

    # -- the server's side ---------------------------------------------------------------

    def server(self, batch: FrameBatch, times: np.ndarray, own: np.ndarray,
               partial: Partial) -> None:
        """The next batch the server sent: ``times`` each frame's capture time (0 on a
        dump), ``own`` its own CAS tick (the clock of a dump; a capture's lag)."""
        op, req = batch["opcode"], requests(batch)
        opened, damaged = self._responses(batch, req, times, partial)
        rows, keys, group, heads, streams = self._stream_rows(batch, req, opened, partial)
        if self.clock != CAPTURE:
            times = own.copy()
            if len(rows):
                before = np.array([s.carry for s in streams], np.int64)
                times[rows] = carried(times[rows], group, heads, before)
        self._common(batch, req, times, SERVER, partial, damaged)
        damaged = sorted({*damaged, *self._requests(batch, req, times, partial)})
        if len(rows):
            self._messages(batch, req, times, (rows, keys, group, heads, streams), partial)
        if self.summary is not None:
            self.summary.update(batch, damaged)
        charged = np.flatnonzero(req & (op != P.Opcode.NOOP))
        if len(charged):
            sizes = batch["body_len"][charged].astype(np.int64) + P.HEADER_SIZE
            sizes += PREPARE_SURCHARGE * (op[charged] == P.Opcode.PREPARE)
            self.flow.sent(times[charged] if self.clock == CAPTURE else np.zeros_like(sizes),
                           sizes)
        asked = np.flatnonzero(req & (op == P.Opcode.NOOP))
        if len(asked):
            self._round_trips(self.noops.asked(batch["opaque"][asked], times[asked]), partial)
        timed = batch["server_duration_us"]
        if timed.any():
            partial.server_ms.add(timed[timed != 0] / 1000.0)
        if (op == P.Opcode.GET_ALL_VB_SEQNOS).any():
            self._high_seqnos(batch, times)
        manifest = self.manifest if self.manifest is not None else Manifest()
        if (op == P.Opcode.SYSTEM_EVENT).any():
            manifest.update(batch)
        partial.content.update(batch, np.flatnonzero(P.DOCUMENT_CHANGE_KINDS[kinds_of(batch)]),
                               manifest)
        if self.clock == CAPTURE:
            partial.lags(times, own)
        self.flow.settle(partial, self.number)

    def _high_seqnos(self, batch: FrameBatch, times: np.ndarray) -> None:
        """Keep each vbucket's high seqno from the server's GetAllVbSeqnos answers (the
        last one wins), and what a malformed answer skipped as damage."""
        answered = high_seqnos(batch)
        rows = answered["index"].to_numpy()
        for vb, seqno, t in zip(answered["vbucket"].to_pylist(), answered["seqno"].to_pylist(),
                                times[rows].tolist()):
            self.server_seqnos[vb] = (seqno, t)
        self._note_damage(batch, times, SERVER, skipped_regions(answered))

    def _responses(self, batch: FrameBatch, req: np.ndarray, times: np.ndarray,
                   partial: Partial
                   ) -> tuple[tuple[np.ndarray, np.ndarray], list[SkippedRegion]]:
        """Place the Stream Request responses on their streams (as the summary will);
        returns the rows and stream keys of the successful ones (they open a stream), and
        the malformed Rollback responses and Stream Requests met placing them
        (``batch.mode`` "strict" raises the first)."""
        rows = np.flatnonzero(~req & (batch["opcode"] == P.Opcode.STREAM_REQUEST))
        if not len(rows):
            return (rows, rows), []
        rolled, malformed = rollback_seqnos(batch)
        checked(batch.mode, malformed)
        decoded, damaged = read_requests(batch)
        checked(batch.mode, damaged)
        match = Matcher(batch, self.summary.tracker if self.summary else None, decoded,
                        prefix=True)
        ok_rows, ok_keys = [], []
        for i in rows.tolist():
            where = match.place(i)
            if where is None:
                self.unplaced += 1
                continue
            key, t, status = where[0] << 16 | where[1], int(times[i]), int(batch["status"][i])
            stream = self.stream(key, partial)
            stream.seen(t, t)
            if status == P.Status.SUCCESS:
                entries = int(batch["value_len"][i]) // 16
                stream.event(t, "accepted", f"failover log of {entries} entries")
                ok_rows.append(i)
                ok_keys.append(key)
            elif i in rolled:
                stream.event(t, "rollback", f"to seqno {rolled[i]}")
                stream.rolled(rolled[i])
                self._shut(stream)
            else:
                stream.event(t, "refused", status_name(P.Status, status))
                self._shut(stream)
        return (np.asarray(ok_rows, np.int64), np.asarray(ok_keys, np.int64)), \
            sorted(malformed + damaged)

    def _shut(self, stream: Stream) -> None:
        """A refused or rolled-back Stream Request leaves its stream closed."""
        if stream.open:
            stream.open = False
            self.open_streams = max(0, self.open_streams - 1)

    def _stream_rows(self, batch: FrameBatch, req: np.ndarray,
                     opened: tuple[np.ndarray, np.ndarray], partial: Partial):
        """The batch's stream messages and the responses that opened a stream, sorted by
        stream and arrival: ``rows, keys, group`` (each row's stream, numbered),
        ``heads`` (each stream's first row) and the ``Stream`` of each."""
        rows = np.flatnonzero(req & IS_MESSAGE[batch["opcode"]])
        keys = batch["vbucket"][rows].astype(np.int64) << 16 | batch["stream_id"][rows]
        rows = np.concatenate([rows, opened[0]])
        keys = np.concatenate([keys, opened[1]])
        order = np.lexsort((rows, keys))
        rows, keys = rows[order], keys[order]
        heads = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) \
            if len(rows) else rows
        group = np.repeat(np.arange(len(heads)), np.diff(np.append(heads, len(rows))))
        streams = [self.stream(k, partial) for k in keys[heads].tolist()]
        return rows, keys, group, heads, streams

    # long: one pass of array steps over a batch's stream rows: per-stream figures, series,
    # stalls per stream and per connection, each a few lines
    def _messages(self, batch: FrameBatch, req: np.ndarray, times: np.ndarray, found,
                  partial: Partial) -> None:
        """Per stream: items, seqnos, snapshots, ends, times and stalls; per connection:
        stalls while a stream is open. ``found``: the batch's ``_stream_rows``."""
        rows, _, group, heads, streams = found
        o = batch["opcode"][rows]
        message = req[rows]
        end = message & (o == P.Opcode.STREAM_END)
        item = message & IS_ITEM[o]
        before = np.array([s.carry for s in streams], np.int64)
        t = times[rows]
        timed = t > 0
        marker = message & (o == P.Opcode.SNAPSHOT_MARKER)
        oso = message & (o == P.Opcode.OSO_SNAPSHOT) & \
            (batch["oso_flags"][rows] & P.OsoFlag.START != 0)
        marks = np.where(marker, batch["snap_flags"][rows] & _MARKER_FLAGS, 0) | \
            np.where(oso, MARK_BITS["oso"], 0)
        seqno = np.where(item, batch["by_seqno"][rows], 0)
        slots = np.array([s.slot for s in streams], np.int64)
        partial.add(partial.progress, slots[group][timed], t[timed], items=item[timed],
                    seqno=seqno[timed], marks=marks[timed])
        items = np.add.reduceat(item, heads)
        highest = np.maximum.reduceat(seqno, heads)
        kinds = [np.add.reduceat((marks & bit) != 0, heads) for bit in MARK_BITS.values()]
        snapshots = np.add.reduceat(marker | oso, heads)
        last_t = np.maximum.reduceat(t, heads)
        never = np.iinfo(np.int64).max
        first_t = np.minimum.reduceat(np.where(timed, t, never), heads)
        prev_open = np.concatenate(([False], ~end[:-1]))
        prev_t = np.concatenate(([0], t[:-1]))
        prev_open[heads] = [s.open for s in streams]
        prev_t[heads] = before
        lasts = np.append(heads[1:], len(rows)) - 1
        for g, s in enumerate(streams):
            s.items += int(items[g])
            if items[g]:
                s.highest = max(s.highest or 0, int(highest[g]))
            for k in range(len(kinds)):
                s.snapshots[k] += kinds[k][g]
            s.snapshot_total += int(snapshots[g])
            s.seen(int(first_t[g]) if first_t[g] < never else 0, int(last_t[g]))
            s.open = not end[lasts[g]]
            if last_t[g] > 0:
                s.carry = int(last_t[g])
        for i in np.flatnonzero(end).tolist():
            status = status_name(P.StreamEndStatus, int(batch["end_status"][rows[i]]))
            streams[group[i]].event(int(t[i]), "end", status)
            streams[group[i]].end = status
        gaps = (prev_t > 0) & timed & prev_open & (t - prev_t > self.stall_ns)
        for i in np.flatnonzero(gaps).tolist():
            s = streams[group[i]]
            s.stalls += 1
            self._stall(s.vbucket, s.stream_id, int(prev_t[i]), int(t[i]))
        if self.clock == CAPTURE:
            self._quiet(rows, t, ~prev_open, end)

    def _quiet(self, rows: np.ndarray, t: np.ndarray, opens: np.ndarray,
               end: np.ndarray) -> None:
        """Connection-wide stalls: gaps between stream messages (in arrival order) while
        any stream is open."""
        order = np.argsort(rows, kind="stable")
        t, delta = t[order], (opens.astype(np.int64) - end)[order]
        open_after = self.open_streams + np.cumsum(delta)
        open_before = np.concatenate(([self.open_streams], open_after[:-1]))
        prev = np.concatenate(([self.quiet_since], t[:-1]))
        gaps = (prev > 0) & (t > 0) & (open_before > 0) & (t - prev > self.stall_ns)
        for i in np.flatnonzero(gaps).tolist():
            self._stall(None, 0, int(prev[i]), int(t[i]), opened=int(open_before[i]))
        self.open_streams = max(int(open_after[-1]), 0)
        timed = t[t > 0]
        if len(timed):
            self.quiet_since = int(timed[-1])

    def _stall(self, vbucket: int | None, stream_id: int, start: int, end: int,
               ongoing: bool = False, opened: int = 0) -> None:
        self.stalls.append((vbucket, stream_id, start, end, ongoing, opened))
        if len(self.stalls) > 2 * MAX_STALLS:
            self._keep_longest()

    def _keep_longest(self) -> None:
        """Keep the ``MAX_STALLS`` longest stalls (of equal ones the first), count the rest."""
        if len(self.stalls) > MAX_STALLS:
            self.stalls.sort(key=lambda s: s[2] - s[3])
            self.more_stalls += len(self.stalls) - MAX_STALLS
            del self.stalls[MAX_STALLS:]

    # -- the end -------------------------------------------------------------------------

    def close(self, partial: Partial) -> None:
        """The connection has ended: settle its flow control, take the summary's counts
        and the anomalies it kept (the first ``MAX_ANOMALIES``), drop the summary."""
        self.flow.settle(partial, self.number, final=True)
        summary, self.summary = self.summary, None
        if summary is None:
            return
        for a in summary.anomalies.to_pylist():
            a["time"] = self.time_at(SERVER, a["offset"])
            self.anomalies.append(a)
            self.anomaly_counts.setdefault(a["kind"], 0)     # kinds in the order first met
        for kind, n in summary.anomaly_counts.items():
            self.anomaly_counts[kind] = self.anomaly_counts.get(kind, 0) + n
        self.stream_anomalies = {(vb, sid or 0): n
                                 for (vb, sid), n in summary.stream_anomalies.items()}
        for k, (side, offset, length, reason, t) in enumerate(self.damage):
            kind = damage_kind(reason)
            self.anomaly_counts[kind] = self.anomaly_counts.get(kind, 0) + 1
            self.damage[k] = (side, offset, length, reason, self.time_at(side, offset) or t)
        if self.more_damage:
            self.anomaly_counts["damaged_bytes"] = \
                self.anomaly_counts.get("damaged_bytes", 0) + self.more_damage
        self.marks = [[], []]                     # every time they give is taken
        self.manifest = None                      # its names are the report's by now
        self.noops.close()

    def finish(self) -> None:
        """The stalls that last to the connection's last frame (either side's), on a
        capture (a healthy idle connection still carries NOOPs and their answers); then
        the ``MAX_STALLS`` longest kept."""
        end = self.last
        if end is not None and self.clock == CAPTURE:
            if self.open_streams > 0 and self.quiet_since and \
                    end - self.quiet_since > self.stall_ns:
                self._stall(None, 0, self.quiet_since, end, True, self.open_streams)
            for s in self.streams.values():
                if s.open and s.carry and end - s.carry > self.stall_ns:
                    s.stalls += 1
                    self._stall(s.vbucket, s.stream_id, s.carry, end, True)
        self._keep_longest()
