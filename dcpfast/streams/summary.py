"""Stream health: every vbucket stream's seqno range, snapshots, message counts,
rollbacks, end status and anomalies, built batch by batch.

``summarize`` (or ``Summary.update`` per batch) reports every vbucket stream. Its
checks are ``checks`` (the compiled core's, shared with ``dcpfast.state``); its per-stream
bookkeeping runs on numpy arrays.
Responses are placed on their streams as ``matching`` says. A malformed Stream Request or
Rollback value follows ``batch.mode`` as in the ``tables``: in skip mode ``to_arrow()``
lists it in its metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import protocol as P
from .._core import contract as C
from ..arrays import unique as distinct
from ..batch import FrameBatch
from ..errors import SkippedRegion, checked, text, with_skipped
from . import frames as F
from .checks import (
    ANOMALIES,
    BYTES_LOST,
    EVENT_OF_OPCODE,
    UNMATCHED,
    Checks,
    details,
    oso_events,
    request_info,
)
from .matching import (
    Matcher,
    StreamTracker,
    batch_requests,
    learn,
    message_opaques,
    stream_key,
)

if TYPE_CHECKING:
    import pandas as pd

U64 = np.uint64


class _Stream:
    """What the summary reports for one vbucket stream: a few hundred bytes (its opcode
    counts and snapshot ranges are kept by the summary, in arrays for all streams, and
    its check state by ``checks``)."""

    __slots__ = ("vbucket", "stream_id", "slot", "opaque", "streams", "first_seqno",
                 "last_seqno", "rollbacks", "end_status", "anomalies")

    def __init__(self, key: int, slot: int):
        self.vbucket, self.stream_id = key >> 16, key & 0xFFFF
        self.slot = slot                # its number in the summary's counts and ranges
        self.opaque: int | None = None
        self.streams = 0
        self.first_seqno: int | None = None
        self.last_seqno: int | None = None
        self.rollbacks: list[int] | None = None
        self.end_status: int | None = None
        self.anomalies = 0


class _Tally:
    """Frames by (stream slot, opcode), kept sparse: sorted ``slot << 8 | opcode`` keys
    and their counts, the pairs of later batches merged in when they outnumber those
    merged (so that n pairs cost O(n log n) in all)."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)
        self.counts = np.empty(0, np.int64)
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._unmerged = 0

    def add(self, keys: np.ndarray, counts: np.ndarray) -> None:
        self._parts.append((keys, counts))
        self._unmerged += len(keys)
        if self._unmerged > len(self.keys):
            self._merge()

    def _merge(self) -> None:
        if not self._parts:
            return
        keys = np.concatenate([self.keys, *(k for k, _ in self._parts)])
        counts = np.concatenate([self.counts, *(n for _, n in self._parts)])
        self._parts, self._unmerged = [], 0
        if not len(keys):                   # batches of responses only: nothing counted
            return
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        heads = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        self.keys, self.counts = keys[heads], np.add.reduceat(counts, heads)

    def of(self, slots: list[int]) -> pa.MapArray:
        """The counts of the stream slots, in that order, as a map of opcode name to frames."""
        self._merge()
        pick, offsets = _slot_rows(self.keys >> 8, slots)
        names = pa.array(F.OPCODE_NAMES).take(pa.array(self.keys[pick] & 0xFF))
        return pa.MapArray.from_arrays(pa.array(offsets.astype(np.int32)), names,
                                       pa.array(self.counts[pick]))


def _slot_rows(at: np.ndarray, slots) -> tuple[np.ndarray, np.ndarray]:
    """The rows of sorted ``at`` equal to each of ``slots``, one slot after the other, and
    the offsets of each slot's rows among them."""
    wanted = np.asarray(slots, np.int64)
    lo = np.searchsorted(at, wanted)
    sizes = np.searchsorted(at, wanted, side="right") - lo
    offsets = np.zeros(len(wanted) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    pick = np.repeat(lo - offsets[:-1], sizes) + np.arange(offsets[-1])
    return pick, offsets


class Summary:
    """Health of every vbucket stream in a DCP dump, built batch by batch.

    ``update(batch)`` takes the batches of one stream in order (``iter_batches`` gives
    them); the result does not depend on where the batches are cut. A stream is a
    vbucket (and stream id, when there is one); it restarts at a Stream Request, after a
    Stream End, at a successful or Rollback response placed on it, and when its messages
    change opaque (the server sends a stream's messages under its request's opaque).
    Give it one ordered stream: a dump, or a capture's server-to-client direction (feed
    the client-to-server batches to ``summary.tracker.update`` so that responses find
    their requests without those requests restarting streams out of order).

    Anomalies (``summary.anomalies``), each checked within one run of a stream, are the
    evidence of lost frames that docs/streams.md lists (``checks``):
    ``seqno_not_increasing``, ``outside_snapshot``, ``snapshot_ended_early``,
    ``ended_in_snapshot``, ``oso_not_ended``, ``oso_not_started``; ``unmatched_rollback``
    (a Rollback response that neither a request nor a stream opaque places on a vbucket)
    and ``bytes_lost`` (a region a skip-mode scan passed over: a capture gap, damage; or a
    frame its caller's decoders passed over, given to ``update``). ``anomaly_counts``
    counts them by kind.

    ``keep``: list only the first ``keep`` anomalies by offset and count the rest, so
    that memory does not follow them (None: list every one).
    """

    def __init__(self, keep: int | None = None):
        #: Frames seen.
        self.frames = 0
        #: Requests and stream opaques of the batches seen so far.
        self.tracker = StreamTracker()
        self._streams: dict[int, _Stream] = {}
        self._counts = _Tally()                            # frames by stream slot, opcode
        self._markers: list[np.ndarray] = []   # per batch: slot, start, end, flags rows
        self._anomalies: list[dict[str, np.ndarray]] = []
        self._keep = keep
        self._found = 0                                     # rows of ``_anomalies``
        #: anomalies (by kind, the index of ``ANOMALIES``) past the first ``keep``
        self._dropped = np.zeros(len(ANOMALIES), np.int64)
        #: responses nothing placed yet: opaque, rollback seqno (None: success), offset,
        #: frame number
        self._pending: list[tuple[int, int | None, int, int]] = []
        self._checks = Checks()                             # each stream's check state
        self._lost: list[tuple[int, int, str]] = []        # skipped regions
        #: the malformed Stream Requests and Rollback responses passed over (skip mode)
        self._skipped: list[SkippedRegion] = []

    # -- input ---------------------------------------------------------------------------

    def update(self, batch: FrameBatch, damaged: Sequence[SkippedRegion] = ()) -> Summary:
        """Add the next batch of the stream; returns the summary. ``damaged``: frames of
        the batch that the caller's own decoders passed over, counted as ``bytes_lost``
        with what the scan skipped."""
        self.frames += len(batch)
        # what the scan skipped and the caller gives (not what the decoders below find
        # malformed: those ``to_arrow`` lists)
        lost = sorted([*batch.errors, *damaged]) if damaged else batch.errors
        self._lost += [tuple(region) for region in lost]
        if self._keep is not None and len(self._lost) > 2 * self._keep:
            self._lost.sort(key=lambda region: region[0])
            self._dropped[BYTES_LOST] += len(self._lost) - self._keep
            del self._lost[self._keep:]
        if not len(batch):
            return self
        decoded, malformed = F.read_requests(batch)
        self._skipped += checked(batch.mode, malformed)
        opaques = message_opaques(batch)
        self._update(batch, decoded, opaques)
        learn(self.tracker, batch, batch_requests(batch, decoded), opaques)
        return self

    def _stream(self, key: int) -> _Stream:
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream(key, len(self._streams))
        return stream

    def _place_responses(self, batch, match) -> dict[int, int]:
        """Stream keys of the Stream Request responses that open (or refuse) a stream and
        that their request or an earlier message places; the others wait for the first
        stream message with their opaque (``_waiting``). Rollback seqnos go to their
        stream."""
        rolled, malformed = F.rollback_seqnos(batch)
        self._skipped += checked(batch.mode, malformed)
        ok = F.rows(batch, P.Opcode.STREAM_REQUEST, response=True, status=P.Status.SUCCESS)
        placed = {}
        for i in sorted([*ok.tolist(), *rolled]):
            where = match.place(i)
            if where is None:
                self._pending.append((int(batch["opaque"][i]), rolled.get(i),
                                      int(batch["offset"][i]), self.frames - len(batch) + i))
                continue
            placed[i] = stream_key(*where)
            if i in rolled:
                stream = self._stream(placed[i])
                stream.rollbacks = (stream.rollbacks or []) + [rolled[i]]
        return placed

    def _waited(self, batch: FrameBatch, rows: np.ndarray, keys: np.ndarray,
                message: np.ndarray) -> list[tuple[int, int, int, int]]:
        """The waiting responses that the first stream message with their opaque after
        them, among ``rows`` (``message`` says which are messages, ``keys`` their
        streams), places: (row before which, stream key, opaque, offset) each."""
        if not self._pending:
            return []
        first = self.frames - len(batch)
        at = np.flatnonzero(message)
        opaques = batch["opaque"][rows[at]]
        out, kept = [], []
        for opaque, seqno, offset, number in self._pending:
            hits = at[(opaques == opaque) & (rows[at] + first > number)]
            if not len(hits):
                kept.append((opaque, seqno, offset, number))
                continue
            j = int(hits[0])
            out.append((j, int(keys[j]), opaque, offset))
            if seqno is not None:
                stream = self._stream(int(keys[j]))
                stream.rollbacks = (stream.rollbacks or []) + [seqno]
        self._pending = kept
        return out

    def _update(self, batch: FrameBatch, decoded: dict, opaques: dict) -> None:
        op = batch["opcode"]
        real_mask = F.requests(batch) & F.IS_STREAM[op]
        placed = self._place_responses(batch, Matcher(batch, self.tracker, decoded,
                                                       prefix=True, opaques=opaques))
        mask = real_mask.copy()
        mask[list(placed)] = True
        rows = np.flatnonzero(mask)
        keys = batch["vbucket"][rows].astype(np.uint32) << 16 | batch["stream_id"][rows]
        fixes = {**placed, **{i: stream_key(r["vbucket"], r["stream_id"] or 0)
                              for i, r in decoded.items()}}
        if fixes:
            keys[np.searchsorted(rows, list(fixes))] = list(fixes.values())
        real, ops = real_mask[rows], op[rows]
        event = np.where(real, EVENT_OF_OPCODE[ops], C.EV_RESPONSE).astype(np.uint8)
        oso = real & (ops == P.Opcode.OSO_SNAPSHOT)
        event[oso] = oso_events(batch["oso_flags"][rows[oso]])
        info = np.full(len(rows), C.INFO_COLLECTIONS if batch.collections else 0, np.uint8)
        cols = {"seqno": batch["by_seqno"][rows], "opaque": batch["opaque"][rows],
                "snap_start": batch["snap_start"][rows], "snap_end": batch["snap_end"][rows],
                "snap_flags": batch["snap_flags"][rows],
                "end_status": batch["end_status"][rows], "offset": batch["offset"][rows]}
        if decoded:
            at = np.searchsorted(rows, list(decoded))
            cols["seqno"] = cols["seqno"].copy()
            event[at] = C.EV_REQUEST
            cols["seqno"][at] = [r["start_seqno"] for r in decoded.values()]
            info[at] = [request_info(r["flags"], r["filter"], batch.collections)
                        for r in decoded.values()]
        waited = self._waited(batch, rows, keys, real & F.IS_MESSAGE[ops])
        if waited:          # each placed just before the message that placed it
            where = np.array([w[0] for w in waited], np.int64)
            rows, keys = np.insert(rows, where, rows[where]), np.insert(
                keys, where, [w[1] for w in waited])
            real = np.insert(real, where, False)
            event = np.insert(event, where, C.EV_RESPONSE)
            info = np.insert(info, where, info[where])
            extra = {"opaque": [w[2] for w in waited], "offset": [w[3] for w in waited]}
            cols = {name: np.insert(col, where, extra.get(name, 0))
                    for name, col in cols.items()}
        slots = self._slots(keys)
        found, starts = self._checks.run(
            event=event, slot=slots, info=info, opaque=cols["opaque"], seqno=cols["seqno"],
            snap_start=cols["snap_start"], snap_end=cols["snap_end"],
            snap_flags=cols["snap_flags"], end_status=cols["end_status"])
        self._record(found, cols["offset"], keys, cols["end_status"])
        self._tally(batch, rows, real, event, slots, starts)

    def _slots(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each stream key (streams first seen get the next slots)."""
        unique, inverse = distinct(keys, inverse=True)
        slots = np.array([self._stream(k).slot for k in unique.tolist()], np.int64)
        return slots[inverse].reshape(len(keys))

    def _record(self, found: C.Findings, offsets: np.ndarray, keys: np.ndarray,
                end_status: np.ndarray) -> None:
        """Keep the anomaly columns found in a batch; count them against their streams."""
        if not len(found.at):
            return
        at = found.at
        self._anomalies.append({"kind": found.rule.astype(np.int8), "offset": offsets[at],
                                "key": keys[at], "seqno": found.found, "given": found.given,
                                "low": found.low, "high": found.high,
                                "end_status": end_status[at].astype(np.int64)})
        for k, n in zip(*np.unique(keys[at], return_counts=True)):
            self._stream(int(k)).anomalies += int(n)
        self._found += len(at)
        if self._keep is not None and self._found > 2 * self._keep:
            self._keep_first()

    def _keep_first(self) -> None:
        """Keep the first ``keep`` anomalies found by offset (in the order found: of equal
        offsets the first found), count the others."""
        cols = {name: np.concatenate([a[name] for a in self._anomalies])
                for name in self._anomalies[0]}
        order = np.argsort(cols["offset"], kind="stable")
        self._dropped += np.bincount(cols["kind"][order[self._keep:]].astype(np.intp),
                                     minlength=len(ANOMALIES))
        kept = np.sort(order[:self._keep])
        self._anomalies = [{name: col[kept] for name, col in cols.items()}]
        self._found = len(kept)

    def _tally(self, batch: FrameBatch, rows: np.ndarray, real: np.ndarray,
               event: np.ndarray, slots: np.ndarray, starts: np.ndarray) -> None:
        """Per-stream counts, runs, seqnos, snapshots, end status and opaque."""
        ops = batch["opcode"][rows]
        keys, counts = np.unique(slots[real] << 8 | ops[real], return_counts=True)
        self._counts.add(keys, counts.astype(np.int64))
        by_slot = {s.slot: s for s in self._streams.values()}
        for slot, n in zip(*np.unique(slots[starts], return_counts=True)):
            by_slot[int(slot)].streams += int(n)
        markers = np.flatnonzero(event == C.EV_MARKER)
        if len(markers):
            at = rows[markers]
            self._markers.append(np.stack([slots[markers].astype(U64), batch["snap_start"][at],
                                           batch["snap_end"][at],
                                           batch["snap_flags"][at].astype(U64)], axis=1))
        items = np.flatnonzero(real & F.IS_ITEM[ops])
        seqno = batch["by_seqno"][rows]
        for slot, i in _firsts(slots[items], items):
            stream = by_slot[slot]
            if stream.first_seqno is None:
                stream.first_seqno = int(seqno[i])
        for slot, i in _lasts(slots[items], items):
            by_slot[slot].last_seqno = int(seqno[i])
        ends = np.flatnonzero(event == C.EV_END)
        for slot, i in _lasts(slots[ends], ends):
            by_slot[slot].end_status = int(batch["end_status"][rows[i]])
        messages = np.flatnonzero((real & F.IS_MESSAGE[ops]) | (event == C.EV_REQUEST)
                                  | (event == C.EV_RESPONSE))
        for slot, i in _lasts(slots[messages], messages):
            by_slot[slot].opaque = int(batch["opaque"][rows[i]])

    # -- output --------------------------------------------------------------------------

    def _unplaced(self) -> list[tuple[int, int, int]]:
        """(opaque, seqno, offset) of the Rollback responses nothing placed."""
        return [(opaque, seqno, offset) for opaque, seqno, offset, _ in self._pending
                if seqno is not None]

    def to_arrow(self) -> pa.Table:
        """One row per vbucket stream, ordered by vbucket and stream id.

        ``vbucket, stream_id`` (null without one), ``opaque`` (of its latest message),
        ``streams`` (runs of it that began in the data), ``first_seqno, last_seqno`` (of
        the first and last item in arrival order), ``snapshots`` and ``snapshot_ranges``
        (start, end, flags of each marker), ``counts`` (frames by opcode name),
        ``rollbacks`` (rollback seqnos), ``end_status`` (name of the latest Stream End's
        status, null if none) and ``anomalies`` (how many). In skip mode the malformed
        Stream Requests and Rollback responses passed over are listed in its metadata
        (``dcpfast.skipped_regions``).
        """
        streams = [self._streams[k] for k in sorted(self._streams)]
        ranges = self._ranges([s.slot for s in streams])
        counts = self._counts.of([s.slot for s in streams])
        range_type = pa.struct([("start", pa.uint64()), ("end", pa.uint64()),
                                ("flags", pa.uint32())])
        return with_skipped(pa.table({
            "vbucket": pa.array([s.vbucket for s in streams], pa.uint16()),
            "stream_id": pa.array([s.stream_id or None for s in streams], pa.uint16()),
            "opaque": pa.array([s.opaque for s in streams], pa.uint32()),
            "streams": pa.array([s.streams for s in streams], pa.int64()),
            "first_seqno": pa.array([s.first_seqno for s in streams], pa.uint64()),
            "last_seqno": pa.array([s.last_seqno for s in streams], pa.uint64()),
            "snapshots": pa.array(np.diff(np.asarray(ranges.offsets)).astype(np.int64)),
            "snapshot_ranges": ranges.cast(pa.list_(range_type)),
            "counts": counts.cast(pa.map_(pa.string(), pa.int64())),
            "rollbacks": pa.array([s.rollbacks or [] for s in streams],
                                  pa.list_(pa.uint64())),
            "end_status": pa.array([None if s.end_status is None else
                                    F.enum_name(P.StreamEndStatus, s.end_status)
                                    or str(s.end_status) for s in streams], pa.string()),
            "anomalies": pa.array([s.anomalies for s in streams], pa.int64()),
        }), sorted(self._skipped))

    def _ranges(self, slots: list[int]) -> pa.ListArray:
        """The snapshot ranges of the stream slots, in that order, each in arrival order."""
        rows = np.concatenate(self._markers) if self._markers else np.zeros((0, 4), U64)
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        pick, offsets = _slot_rows(rows[:, 0].astype(np.int64), slots)
        rows = rows[pick]
        ranges = pa.StructArray.from_arrays(
            [pa.array(rows[:, 1]), pa.array(rows[:, 2]), pa.array(rows[:, 3].astype(np.uint32))],
            names=["start", "end", "flags"])
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), ranges)

    def to_pandas(self) -> pd.DataFrame:
        """``to_arrow()`` as a pandas DataFrame with Arrow-backed dtypes."""
        import pandas as pd

        return self.to_arrow().to_pandas(types_mapper=pd.ArrowDtype)

    @property
    def anomaly_counts(self) -> dict[str, int]:
        """Every anomaly found (listed in ``anomalies`` or not), by kind."""
        counts = self._dropped.copy()
        for a in self._anomalies:
            counts += np.bincount(a["kind"].astype(np.intp), minlength=len(ANOMALIES))
        counts[UNMATCHED] += len(self._unplaced())
        counts[BYTES_LOST] += len(self._lost)
        return {ANOMALIES[k]: n for k, n in enumerate(counts.tolist()) if n}

    @property
    def stream_anomalies(self) -> dict[tuple[int, int | None], int]:
        """The anomalies found on each stream that has any, by ``(vbucket, stream_id)``
        (None without one): the ``anomalies`` column of ``to_arrow()``."""
        return {(s.vbucket, s.stream_id or None): s.anomalies
                for s in self._streams.values() if s.anomalies}

    @property
    def anomalies(self) -> pa.Table:
        """Every anomaly found (the first ``keep``), by stream offset: ``kind, offset,
        vbucket, stream_id, by_seqno, details`` (``by_seqno``: the item's, or the seqno a
        snapshot reached)."""
        unmatched = self._unplaced()
        cols = {name: np.concatenate([a[name] for a in self._anomalies])
                for name in self._anomalies[0]} if self._anomalies else None
        rows = []
        if cols is not None:
            for k, off, key, s, given, lo, hi, status in zip(
                    *(cols[n].tolist() for n in ("kind", "offset", "key", "seqno", "given",
                                                 "low", "high", "end_status"))):
                rows.append((off, ANOMALIES[k], key >> 16, key & 0xFFFF or None,
                             s if given & C.GIVEN_FOUND else None,
                             details(k, s, given, lo, hi, status)))
        for opaque, seqno, offset in unmatched:
            rows.append((offset, ANOMALIES[UNMATCHED], None, None, seqno,
                         text("check_unmatched_rollback", seqno=seqno, opaque=opaque)))
        for offset, length, reason in self._lost:
            rows.append((offset, ANOMALIES[BYTES_LOST], None, None, None,
                         text("check_bytes_lost", length=length, reason=reason)))
        rows.sort(key=lambda r: r[0])
        columns = list(zip(*rows[:self._keep])) or [()] * 6
        return pa.table({
            "kind": pa.array(columns[1], pa.string()),
            "offset": pa.array(columns[0], pa.uint64()),
            "vbucket": pa.array(columns[2], pa.uint16()),
            "stream_id": pa.array(columns[3], pa.uint16()),
            "by_seqno": pa.array(columns[4], pa.uint64()),
            "details": pa.array(columns[5], pa.string()),
        })

    def report(self, max_anomalies: int = 20) -> str:
        """A readable account: one line per stream, then the first anomalies."""
        table = self.to_arrow().to_pylist()
        anomalies = self.anomalies
        total = sum(self.anomaly_counts.values())
        lines = [f"{self.frames} frames, {len(table)} vbucket streams, {total} anomalies"]
        for s in table:
            name = f"vb {s['vbucket']}" + (f" sid {s['stream_id']}" if s["stream_id"] else "")
            seqnos = ("no items" if s["first_seqno"] is None
                      else f"seqno {s['first_seqno']}..{s['last_seqno']}")
            counts = ", ".join(f"{n} {op}" for op, n in sorted(s["counts"],
                                                                key=lambda x: -x[1])[:4])
            extra = f", rollbacks to {s['rollbacks']}" if s["rollbacks"] else ""
            lines.append(f"  {name}: {seqnos}, {s['snapshots']} snapshots ({counts}){extra}, "
                         f"end {s['end_status'] or '-'}, {s['anomalies']} anomalies")
        for a in anomalies.slice(0, max_anomalies).to_pylist():
            lines.append(f"  ! {a['kind']} at byte {a['offset']}"
                         + (f" (vb {a['vbucket']})" if a["vbucket"] is not None else "")
                         + f": {a['details']}")
        shown = min(anomalies.num_rows, max_anomalies)
        if total > shown:
            lines.append(f"  ... {total - shown} more anomalies")
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def __repr__(self):
        return (f"<Summary {self.frames} frames, {len(self._streams)} vbucket streams, "
                f"{sum(s.anomalies for s in self._streams.values())} anomalies>")


def _firsts(slots: np.ndarray, rows: np.ndarray) -> list[tuple[int, int]]:
    """(slot, its first of ``rows``) for each slot among ``slots`` (one per row)."""
    unique, first = distinct(slots, first=True)
    return list(zip(unique.tolist(), rows[first].tolist()))


def _lasts(slots: np.ndarray, rows: np.ndarray) -> list[tuple[int, int]]:
    """(slot, its last of ``rows``) for each slot among ``slots`` (one per row)."""
    unique, first = distinct(slots[::-1], first=True)
    return list(zip(unique.tolist(), rows[::-1][first].tolist()))


def summarize(batches: FrameBatch | Iterable[FrameBatch]) -> Summary:
    """Stream health of one batch or an iterable of batches (e.g. ``iter_batches``)."""
    summary = Summary()
    for batch in [batches] if isinstance(batches, FrameBatch) else batches:
        summary.update(batch)
    return summary

