"""The figures of a report: a merged ``Partial`` made into the JSON object of
docs/report.md (``"version": 1``), from which the page is drawn too.

Times are ISO 8601 UTC; a series gives its ``start`` time, the ``bucket_seconds`` of its
buckets and, per point, the bucket's number from the start. Lists that could grow with
the input are cut (the longest stalls, the first anomalies) and say how many they left
out.
"""

from __future__ import annotations

import numpy as np

from ..streams.frames import OPCODE_NAMES
from .clock import CAPTURE, iso
from .content import CHANGES, SIZE_BINS, VALUED
from .conversation import damage_kind
from .flow import MAX_BUFFER, NEAR_LIMIT
from .grid import Thinned
from .partial import LAG_BINS, MARK_BITS, Partial, lag_low

#: The version of the figures' layout (docs/report.md).
VERSION = 1
#: Anomalies listed in all (every one is counted in ``anomaly_counts``).
MAX_LISTED_ANOMALIES = 2000
#: Points of the per-stream series in all: past it, their buckets are merged.
STREAM_POINTS = 60_000
#: Streams given a series at most (``_ranked``: the troubled, then the busiest); the rest
#: are counted (``series.streams_not_drawn``). Two points each fit ``STREAM_POINTS``, so
#: merging buckets always gets there.
SERIES_STREAMS = 4096
#: How far a stream's stall may begin and end from its connection's and still be that
#: pause (``_folds``): this share of the connection's stall, at most ``FOLD_SECONDS``.
FOLD_SHARE = 0.1
FOLD_SECONDS = 1.0
#: Keys listed among the most changed.
TOP_KEYS = 20
_DATATYPES = ("raw", "json", "snappy", "json+snappy", "xattr", "json+xattr",
              "snappy+xattr", "json+snappy+xattr")


def _name(op: int) -> str:
    return OPCODE_NAMES[op]


def _ms(values: Thinned) -> dict | None:
    """Median and maximum of a thinned sample of ms, None when empty."""
    if not values.count:
        return None
    return {"median": round(values.quantile(0.5) or 0.0, 3), "max": round(values.max or 0.0, 3)}


def _spread(ms: Thinned) -> dict | None:
    """Count, median, 99th percentile and maximum of a thinned sample of ms, None when
    empty."""
    if not ms.count:
        return None
    return {"count": ms.count, "median": round(ms.quantile(0.5) or 0.0, 3),
            "p99": round(ms.quantile(0.99) or 0.0, 3), "max": round(ms.max or 0.0, 3)}


def _lag(partial: Partial) -> dict | None:
    """The lag's spread (captures only)."""
    return _spread(partial.lag_ms) if partial.clock == CAPTURE else None


def build(partial: Partial, generator: str) -> dict:
    """The figures of ``partial`` (closed and merged; this adds its ongoing stalls and
    keeps each connection's longest)."""
    first = min((c.first for c in partial.conversations if c.first is not None), default=None)
    last = max((c.last for c in partial.conversations if c.last is not None), default=None)
    for c in partial.conversations:
        c.flow.finish(c.last)
        c.finish()
    seconds = (last - first) / 1e9 if first is not None and last is not None else None
    frames, nbytes = partial.frames, partial.bytes
    streams, index = _streams(partial)
    flow = _flow(partial)
    stalls = _stalls(partial, flow)
    out = {
        "version": VERSION, "generator": generator, "inputs": partial.inputs,
        "frames": frames, "bytes": nbytes,
        "time": {"first": iso(first), "last": iso(last), "clock": partial.clock,
                 "seconds": seconds},
        "rates": {"frames_per_second": frames / seconds, "bytes_per_second": nbytes / seconds}
        if seconds else None,
        "stall_seconds": partial.stall_ns / 1e9,
        "connections": _connections(partial, stalls),
        "streams": streams,
        "behind_server": _behind(streams),
        "stalls": stalls,
        "stalls_not_listed": sum(c.more_stalls for c in partial.conversations),
        "noops": {"count": sum(c.noops.count for c in partial.conversations),
                  "answered": sum(c.noops.answered for c in partial.conversations),
                  "rtt_ms": _ms(partial.rtt_ms)},
        "flow_control": [f for f in flow],
        "lag_ms": _lag(partial),
        "server_duration_ms": _spread(partial.server_ms),
        "documents": _documents(partial),
    }
    out.update(_anomalies(partial))
    out["series"] = _series(partial, streams, index)
    out["warnings"] = _warnings(partial, out)
    return out


def _connections(partial: Partial, stalls: list[dict]) -> list[dict]:
    return [{"name": c.name, "frames_client": c.frames[1], "frames_server": c.frames[0],
             "bytes_client": c.bytes[1], "bytes_server": c.bytes[0],
             "first": iso(c.first), "last": iso(c.last), "streams": len(c.streams),
             "stalls": sum(s["connection"] == c.name for s in stalls) + c.more_stalls,
             "anomalies": sum(c.anomaly_counts.values()),
             "noops": c.noops.count, "noop_rtt_ms": _ms(c.noops.rtt_ms),
             "unplaced_responses": c.unplaced}
            for c in partial.conversations]


def _streams(partial: Partial) -> tuple[list[dict], dict[int, int]]:
    """Every stream of every connection, by connection, vbucket and stream id; and the
    index of each stream slot among them."""
    out: list[dict] = []
    index: dict[int, int] = {}
    for c in partial.conversations:
        for key in sorted(c.streams):
            s = c.streams[key]
            index[s.slot] = len(out)
            out.append({
                "connection": c.name, "vbucket": s.vbucket, "stream_id": s.stream_id or None,
                "requests": s.requests, "rollbacks": s.rollbacks,
                "rollback_seqnos": s.rollback_seqnos, "end": s.end,
                "snapshots": s.snapshot_total,
                "snapshot_kinds": dict(zip(MARK_BITS, s.snapshots.tolist())),
                "last_seqno": s.highest, "items": s.items, "first": iso(s.first),
                "last": iso(s.last), "stalls": s.stalls,
                "anomalies": c.stream_anomalies.get((s.vbucket, s.stream_id), 0),
                "events": _events(s.events), "more_events": s.more_events,
                "server_seqno": c.server_seqnos.get(s.vbucket, (None,))[0],
            })
    return out, index


def _behind(streams: list[dict]) -> list[dict]:
    """The streams whose last seqno did not reach the high seqno the server gave for their
    vbucket (GetAllVbSeqnos), by how far they fell short, the furthest first."""
    found = [{"connection": s["connection"], "vbucket": s["vbucket"],
              "stream_id": s["stream_id"], "last_seqno": s["last_seqno"],
              "server_seqno": s["server_seqno"]}
             for s in streams if s["server_seqno"] and (s["last_seqno"] or 0) < s["server_seqno"]]
    return sorted(found, key=lambda b: (b["last_seqno"] or 0) - b["server_seqno"])


def _events(events: list[tuple[int, str, str]]) -> list[dict]:
    """A stream's events, in time order when all have a time (else as read: the client's
    side of a dump pair first)."""
    if all(t for t, _, _ in events):
        events = sorted(events, key=lambda e: e[0])
    return [{"time": iso(t) if t else None, "what": what, "detail": detail}
            for t, what, detail in events]


def _stalls(partial: Partial, flow: list[dict]) -> list[dict]:
    """Every stall kept, by start. A connection's stall while one stream was open is that
    stream's (listed as its); a stream's stall that coincides with its connection's
    (``_folds``) is folded into it, counted in its ``streams_folded``."""
    shift = partial.grid.shift
    rows, buckets, values = partial.unacked.table(shift)
    unacked = dict(zip(zip(rows.tolist(), buckets.tolist()), values["bytes"].tolist()))
    out: list[dict] = []
    for c, f in zip(partial.conversations, flow):
        kept = [s for s in c.stalls if s[0] is not None or s[5] > 1]
        wide = sorted((start, end) for vb, _, start, end, _, _ in kept if vb is None)
        folded = dict.fromkeys(wide, 0)
        listed = []
        for stall in kept:
            vb, _, start, end, _, _ = stall
            into = None if vb is None else next((w for w in wide if _folds(w, start, end)),
                                                None)
            if into is None:
                listed.append(stall)
            else:
                folded[into] += 1
        for vb, sid, start, end, ongoing, opened in listed:
            held = unacked.get((c.number, start >> shift))
            buffer = f["buffer_bytes"]
            out.append({"connection": c.name, "vbucket": vb, "stream_id": sid or None,
                        "start": iso(start), "end": iso(end), "seconds": (end - start) / 1e9,
                        "ongoing": ongoing,
                        "at_flow_control_limit": None if held is None or not buffer
                        else held >= NEAR_LIMIT * buffer,
                        "streams_open": opened if vb is None else None,
                        "streams_folded": folded[(start, end)] if vb is None else 0})
    out.sort(key=lambda s: (s["start"], s["connection"], -1 if s["vbucket"] is None
                            else s["vbucket"]))
    return out


def _folds(wide: tuple[int, int], start: int, end: int) -> bool:
    """Whether a stream's stall from ``start`` to ``end`` (ns) is part of its connection's
    stall ``wide``: inside it, or beginning and ending within ``FOLD_SHARE`` of the
    connection's stall (at most ``FOLD_SECONDS``) of its beginning and end. Each stream
    falls silent at its own last message and speaks again at its own next one, a few
    milliseconds from the others: the same pause."""
    lo, hi = wide
    slack = min(int(FOLD_SECONDS * 1e9), int((hi - lo) * FOLD_SHARE))
    return (lo <= start and end <= hi) or (abs(start - lo) <= slack and abs(end - hi) <= slack)


def _flow(partial: Partial) -> list[dict]:
    return [{"connection": c.name, "buffer_bytes": c.flow.buffer_bytes, "acks": c.flow.acks,
             "acked_bytes": c.flow.acked_bytes, "sent_bytes": c.flow.sent_bytes,
             "max_unacked_bytes": c.flow.max_unacked,
             "seconds_near_limit": c.flow.near_ns / 1e9 if c.flow.max_unacked is not None
             and c.flow.buffer_bytes else None,
             "ack_interval_ms": _ms(c.flow.ack_gaps)}
            for c in partial.conversations]


def _documents(partial: Partial) -> dict:
    content = partial.content
    changes = np.zeros(len(CHANGES), np.int64)
    for counts in content.collections.values():
        changes += counts[:-1]
    return {
        "changes": {_name(op): int(n) for op, n in zip(CHANGES, changes.tolist())},
        "datatypes": {name: int(n) for name, n in zip(_DATATYPES, content.datatypes.tolist())},
        "value_sizes": {"bins": [0] + [2 ** k for k in range(SIZE_BINS - 1)],
                        **{_name(op): content.sizes[i].tolist()
                           for i, op in enumerate(VALUED)}},
        "collections": [{"collection_id": cid, "name": content.names.get(cid),
                         **{_name(op): int(n) for op, n in zip(CHANGES, counts[:-1].tolist())},
                         "value_bytes": int(counts[-1])}
                        for cid, counts in sorted(content.collections.items())],
        "top_keys": [{"collection_id": cid, "collection": content.names.get(cid),
                      "key": key.decode("utf-8", "backslashreplace"), "versions": n}
                     for cid, key, n in content.top_keys(TOP_KEYS)],
        "key_versions_exact": content.floor == 0,
        "key_versions_short_by_at_most": content.floor,
    }


def _anomalies(partial: Partial) -> dict:
    listed: list[dict] = []
    counts: dict[str, int] = {}
    for c in partial.conversations:
        for kind, n in c.anomaly_counts.items():
            counts[kind] = counts.get(kind, 0) + n
        for a in c.anomalies:
            listed.append({"kind": a["kind"], "connection": c.name, "vbucket": a["vbucket"],
                           "stream_id": a["stream_id"], "offset": a["offset"],
                           "side": "server", "time": iso(a["time"]), "detail": a["details"]})
        for side, offset, length, reason, t in c.damage:
            listed.append({"kind": damage_kind(reason), "connection": c.name, "vbucket": None,
                           "stream_id": None, "offset": offset,
                           "side": "server" if side == 0 else "client",
                           "time": iso(t or None),
                           "detail": f"{length} bytes: {reason}"})
    for p in partial.problems:
        listed.append({"kind": "capture_damage", "connection": None, "vbucket": None,
                       "stream_id": None, "offset": p["offset"], "side": None, "time": None,
                       "detail": f"{p['input']}: {p['length']} bytes: {p['reason']}"})
    if partial.problems or partial.more_problems:
        counts["capture_damage"] = len(partial.problems) + partial.more_problems
    return {"anomalies": listed[:MAX_LISTED_ANOMALIES], "anomaly_counts": counts,
            "anomalies_not_listed": max(0, sum(counts.values()) - min(len(listed),
                                                                       MAX_LISTED_ANOMALIES))}


def _series(partial: Partial, streams: list[dict], index: dict[int, int]) -> dict:
    grid = partial.grid
    span = grid.span()
    if span is None:
        return {"start": None, "bucket_seconds": grid.seconds, "buckets": 0}
    origin = span[0]
    out: dict = {"start": iso(origin << grid.shift), "bucket_seconds": grid.seconds,
                 "buckets": span[1] - span[0] + 1}
    rows, buckets, v = partial.traffic.table(grid.shift)
    out["traffic"] = [{"opcode": _name(row & 0xFF), "response": bool(row >> 8),
                       "buckets": (buckets[at] - origin).tolist(),
                       "frames": v["frames"][at].tolist(), "bytes": v["bytes"][at].tolist()}
                      for row, at in _groups(rows)]
    out["streams"], out["streams_not_drawn"] = _stream_series(partial, streams, index,
                                                              origin)
    rows, buckets, v = partial.unacked.table(grid.shift)
    out["unacked"] = [{"connection": partial.conversations[row].name,
                       "buckets": (buckets[at] - origin).tolist(),
                       "bytes": v["bytes"][at].tolist()} for row, at in _groups(rows)]
    _, buckets, v = partial.rtt.table(grid.shift)
    out["noop_rtt_ms"] = {"buckets": (buckets - origin).tolist(), "min": v["low"].tolist(),
                          "max": v["high"].tolist(),
                          "mean": (v["total"] / np.maximum(v["count"], 1)).tolist()}
    out["lag_ms"] = _lag_series(partial, origin)
    return out


def _groups(rows: np.ndarray):
    """(row, slice of its cells) for each row of sorted ``rows``."""
    heads = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1]))) if len(rows) \
        else rows
    ends = np.append(heads[1:], len(rows))
    return [(int(rows[h]), slice(int(h), int(e))) for h, e in zip(heads, ends)]


def trouble(stream: dict) -> tuple[int, int]:
    """How a stream ranks for drawing, troubled first: with stalls, then with rollbacks,
    anomalies or an end other than ``ok``."""
    return (-(stream["stalls"] > 0), -(stream["rollbacks"] > 0 or stream["anomalies"] > 0
                                       or stream["end"] not in (None, "ok")))


def _ranked(streams: list[dict], wanted: np.ndarray) -> np.ndarray:
    """The drawing order of ``wanted`` (indexes into ``streams``), as positions in it: the
    troubled first (``trouble``), then those with the most items, then by index."""
    keys = np.array([(*trouble(streams[i]), -streams[i]["items"]) for i in wanted.tolist()],
                    np.int64).reshape(-1, 3)
    return np.lexsort((wanted, keys[:, 2], keys[:, 1], keys[:, 0]))


def _stream_series(partial: Partial, streams: list[dict], index: dict[int, int],
                   origin: int) -> tuple[list[dict], int]:
    """Each drawn stream's items, highest seqno and snapshot kinds per bucket, and how
    many streams with a series were left out: at most ``SERIES_STREAMS`` are drawn
    (``_ranked``), their buckets merged (by powers of two) to stay near
    ``STREAM_POINTS``."""
    shift = partial.grid.shift
    rows, buckets, v = partial.progress.table(shift)
    slots = np.unique(rows)
    left_out = max(0, len(slots) - SERIES_STREAMS)
    if left_out:
        at = np.array([index[slot] for slot in slots.tolist()], np.int64)
        drawn = np.isin(rows, slots[_ranked(streams, at)[:SERIES_STREAMS]])
        rows, buckets, v = rows[drawn], buckets[drawn], {n: a[drawn] for n, a in v.items()}
    coarser = 0
    while len(rows) and _cells_after(rows, buckets, coarser) > STREAM_POINTS:
        coarser += 1
    out = []
    for row, at in _groups(rows):
        b = (buckets[at] - origin) >> coarser
        heads = np.flatnonzero(np.concatenate(([True], b[1:] != b[:-1])))
        out.append({"stream": index[row], "buckets": (b[heads] << coarser).tolist(),
                    "width": 1 << coarser,
                    "items": np.add.reduceat(v["items"][at], heads).tolist(),
                    "seqno": np.maximum.reduceat(v["seqno"][at], heads).tolist(),
                    "snapshots": np.bitwise_or.reduceat(v["marks"][at], heads).tolist()})
    return out, left_out


def _cells_after(rows: np.ndarray, buckets: np.ndarray, coarser: int) -> int:
    keys = rows << 32 | (buckets >> coarser)
    return int(np.count_nonzero(np.concatenate(([True], keys[1:] != keys[:-1]))))


def _lag_series(partial: Partial, origin: int) -> dict:
    """Per bucket: how many changes, and their median, 99th percentile and highest lag
    (ms, from the bins: each the low edge of its bin)."""
    rows, buckets, v = partial.lag.table(partial.grid.shift)
    if not len(rows):
        return {"buckets": [], "count": [], "p50": [], "p99": [], "max": []}
    counts = np.zeros((int(buckets.max() - buckets.min()) + 1, LAG_BINS), np.int64)
    low = int(buckets.min())
    np.add.at(counts, (buckets - low, rows), v["count"])
    used = np.flatnonzero(counts.sum(axis=1))
    counts = counts[used]
    total = counts.sum(axis=1)
    cum = np.cumsum(counts, axis=1)
    edges = lag_low(np.arange(LAG_BINS))

    def at(q):
        return edges[np.argmax(cum >= np.ceil(q * total)[:, None], axis=1)].round(3).tolist()
    top = LAG_BINS - 1 - np.argmax(counts[:, ::-1] > 0, axis=1)
    return {"buckets": (used + low - origin).tolist(), "count": total.tolist(),
            "p50": at(0.5), "p99": at(0.99), "max": edges[top].round(3).tolist()}


def _warnings(partial: Partial, out: dict) -> list[str]:
    """What the figures cannot tell, in words for the page."""
    notes = []
    counts = out["anomaly_counts"]
    lost = sum(counts.get(k, 0) for k in ("capture_gap", "damaged_bytes", "frame_cut",
                                          "capture_damage"))
    if lost:
        notes.append(f"{lost:,} damaged or missing stretches of input were skipped: the "
                     "figures miss the frames they held (see the anomalies).")
    if partial.clock != CAPTURE:
        notes.append("Times are the CAS clock of the documents (a dump has no arrival "
                     "times): a gap on it is a gap in the documents' changes, not "
                     "necessarily a pause on the wire. Frames without a CAS of their own "
                     "take their stream's latest; NOOPs, responses and the client's frames "
                     "have no time, so NOOP round trips and unacknowledged bytes are "
                     "unknown.")
    refused = sum(c.flow.refused for c in partial.conversations)
    if refused:
        notes.append(f"{refused:,} Control connection_buffer_size values are no size the "
                     f"server takes (an integer from 0 to {MAX_BUFFER:,}): left out, as the "
                     "server refuses them.")
    if out["stalls_not_listed"]:
        notes.append(f"{out['stalls_not_listed']:,} shorter stalls are not listed.")
    if out["series"].get("streams_not_drawn"):
        notes.append(f"{out['series']['streams_not_drawn']:,} streams are left out of the "
                     f"series: they hold the {SERIES_STREAMS:,} with stalls, rollbacks, "
                     "anomalies or a bad end first, then the busiest (the streams table "
                     "lists every one).")
    if out["anomalies_not_listed"]:
        notes.append(f"{out['anomalies_not_listed']:,} anomalies are counted but not "
                     "listed.")
    if not partial.content.floor == 0:
        notes.append("Key version counts are lower bounds (too many distinct keys to count "
                     f"every one): each may be short by up to {partial.content.floor:,}.")
    if not out["frames"]:
        notes.append("The input holds no DCP frames.")
    return notes
