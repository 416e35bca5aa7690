"""``audit``: what a connector delivered (its sink: the Couchbase Kafka connector's records,
or Debezium change events) judged against the captured DCP stream it came from.

A version is known by its vbucket, key and CAS (a version written again after a rollback
has a CAS of its own, where its seqno may be used again). Each delivered message is
``once``, ``duplicate`` (its version was delivered before), ``out_of_order`` (a version
of its document that the stream sent later was delivered before it), ``phantom`` (a
version the stream sent and a Rollback or a restart then discarded) or ``unknown`` (no
version the stream sent); every version current at the end of the capture (each
vbucket at its consistent seqno) that was never delivered, nor a later version of its
document, is ``missing``. What cannot be judged is counted apart, never as a problem:
messages of vbuckets the capture never streamed or that lost frames, messages below the
capture's first seqno of their vbucket, lines of the sink that do not parse, and current
versions older than the first message the sink holds for their vbucket.

The capture is read once (``ChangesBuilder``): which versions stand and which are
current come from its versions, restarts and clears (``replay.standing``,
``replay.final``); the sink's messages (``sinks.read_sink``) are joined with them
(Arrow) and judged with numpy.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..documents.feeding import fed
from ..documents.options import scan_collections
from .api import FEED_BATCH_BYTES, ChangesBuilder, stopped
from .replay import final, standing
from .sent import Sent
from .sinks import read_sink

#: What a delivered message (or a current version never delivered) can be.
KINDS = ("once", "duplicate", "out_of_order", "phantom", "unknown", "missing")
#: The problems: every kind but ``once``.
PROBLEMS = KINDS[1:]
#: The schema metadata key of the audit's summary (JSON).
METADATA_KEY = b"dcpfast.audit"


def audit_schema() -> pa.Schema:
    """The Arrow schema of ``audit``'s table of problems."""
    return pa.schema([("kind", pa.string()), ("vbucket", pa.uint16()), ("key", pa.string()),
                      ("seqno", pa.uint64()), ("cas", pa.uint64()),
                      ("sink_position", pa.int64())])


def audit(capture, sink, *, format: str | None = None, bucket: str | None = None,
          errors: str = "strict", collections: bool | None = None) -> pa.Table:
    """The problems of what a connector delivered (``sink``: a path of JSON lines or
    Parquet, or an Arrow table, of ``format`` records: ``couchbase-kafka`` or
    ``debezium``, None to tell from the columns) against the DCP stream ``capture`` (what
    ``state`` reads): one row per problem, ``kind`` one of ``PROBLEMS``, in sink order then
    the missing ones. ``bucket``: messages of another bucket are ``unknown``. The summary
    (``audit_summary``) counts every kind, per vbucket too, and what was not judged.
    See docs/changes.md."""
    messages, unreadable = read_sink(sink, format)
    reading = dict(errors=errors, collections=collections)
    capture_side = _Capture(capture, reading)
    judged, not_judged = _judged(messages, capture_side, bucket)
    missing, more = _missing(capture_side, judged)
    not_judged.update(more)
    if unreadable:
        not_judged["sink lines that do not parse"] += unreadable
    verdicts = pa.concat_tables([judged.rows.select(_ROW), missing.select(_ROW)])
    tally = verdicts.group_by(["vbucket", "kind"]).aggregate([("kind", "count")])
    counts: Counter = Counter()
    per_vbucket: dict[str, Counter] = {}
    for vb, kind, n in zip(*(tally[c].to_pylist() for c in ("vbucket", "kind",
                                                              "kind_count"))):
        counts[kind] += n
        per_vbucket.setdefault(str(vb), Counter())[kind] += n
    summary = {"counts": {k: counts.get(k, 0) for k in KINDS},
               "vbuckets": {vb: dict(c) for vb, c in sorted(per_vbucket.items(),
                                                            key=lambda kv: int(kv[0]))},
               "not_judged": {k: v for k, v in not_judged.items() if v},
               "messages": messages.num_rows + unreadable,
               "capture": {"lost": sorted(capture_side.lost),
                           "consistency": capture_side.consistency}}
    problems = verdicts.filter(pc.not_equal(verdicts["kind"], "once"))
    table = problems.rename_columns(audit_schema().names).cast(audit_schema())
    return table.replace_schema_metadata({METADATA_KEY: json.dumps(summary).encode()})


#: The columns of a verdict, as the table of problems names them in order.
_ROW = ["kind", "vbucket", "key", "seqno", "cas", "position"]


class _Capture:
    """What the capture sent: each version (``sent``: vbucket, key, CAS, its first place
    in the stream, its document, whether it stands), each vbucket's first seqno, the
    versions current at each stream's consistent seqno (``current``: their rows in
    ``sent``, vbuckets and seqnos); and which vbuckets lost frames, each one's
    consistent seqno. One pass over the capture: its feed's pieces
    (``ChangesBuilder.replayed``)."""

    def __init__(self, capture, reading: dict):
        builder = ChangesBuilder(values=False, errors=reading["errors"])
        with fed(builder, capture, reading["errors"], {
                "collections": scan_collections(reading["collections"]),
                "batch_bytes": FEED_BATCH_BYTES, "threads": None}, again=False):
            pass
        done = builder.replayed()
        per_vbucket: dict[int, int] = {}
        for unit, seqno in done.consistent.items():
            per_vbucket[unit >> 16] = min(seqno, per_vbucket.get(unit >> 16, seqno))
        self.consistency = sorted([vb, s] for vb, s in per_vbucket.items())
        self.lost = {u >> 16 for u in done.lost}
        versions = done.versions
        empty = np.zeros(0, np.int64)
        if versions is None or not len(versions):
            self.sent = Sent.of(empty, pa.array([], pa.string()), empty, empty, empty,
                                np.zeros(0, bool))
            self.current = (empty, empty, np.zeros(0, np.uint64))
            self.first_seqno: dict[int, int] = {}
            return
        docs, of_doc = np.unique(versions["doc"], return_inverse=True)
        doc_keys = builder.keys(docs)
        vbuckets = (versions["unit"] >> np.uint32(16)).astype(np.int64)
        self.sent = Sent.of(vbuckets, doc_keys.take(pa.array(of_doc)), versions["cas"],
                            versions["gpos"], versions["doc"],
                            standing(versions, done.restarts))
        self.first_seqno = _firsts(vbuckets, versions["seqno"])
        # the versions current at each stream's consistent seqno: the feed of what is at or
        # below it, replayed, each document's last version
        cut, clears = stopped(versions, done.clears, done.consistent)
        _, at = final(cut, done.restarts, clears)
        now = cut.take(np.sort(at[at >= 0]))
        vb = (now["unit"] >> np.uint32(16)).astype(np.int64)
        keys = doc_keys.take(pa.array(np.searchsorted(docs, now["doc"])))
        self.current = (self.sent.find(vb, keys, now["cas"]), vb,
                        np.asarray(now["seqno"], np.uint64))


def _firsts(vbucket: np.ndarray, seqno: np.ndarray) -> dict[int, int]:
    """Each vbucket's lowest seqno."""
    order = np.lexsort((seqno, vbucket))
    vb, low = vbucket[order], seqno[order]
    starts = np.flatnonzero(np.r_[True, vb[1:] != vb[:-1]]) if len(vb) else np.empty(0, int)
    return dict(zip(vb[starts].tolist(), low[starts].tolist()))


@dataclass
class _Judged:
    """The messages judged, in sink order: their verdicts (``_ROW``), and of each its
    row in ``Sent`` (-1: none)."""

    rows: pa.Table
    found: np.ndarray


def _judged(messages: pa.Table, capture: _Capture,
            bucket: str | None) -> tuple[_Judged, Counter]:
    """Each message judged, those that can be, in sink order; and how many could not
    be, by reason."""
    n = messages.num_rows
    vb = messages["vbucket"].to_numpy()
    cas = messages["cas"].fill_null(0).to_numpy()
    seqno = messages["seqno"].fill_null(2**64 - 1).to_numpy()
    found = capture.sent.find(vb, messages["key"].combine_chunks(), cas)
    found[messages["cas"].is_null().to_numpy(zero_copy_only=False)] = -1
    sent = found >= 0
    row = np.maximum(found, 0)
    place = np.where(sent, capture.sent.place[row], -1) if n and len(capture.sent) else \
        np.full(n, -1, np.int64)
    doc = np.where(sent, capture.sent.doc[row], -1) if n and len(capture.sent) else \
        np.full(n, -1, np.int64)
    standing = sent & capture.sent.stands[row] if n and len(capture.sent) else \
        np.zeros(n, bool)
    captured = np.isin(vb, list(capture.first_seqno))
    lost = np.isin(vb, list(capture.lost))
    first_seqno = _per_vbucket(capture.first_seqno, vb, 0)
    other_bucket = np.zeros(n, bool) if bucket is None else pc.fill_null(pc.not_equal(
        messages["bucket"], bucket), False).to_numpy(zero_copy_only=False)
    not_captured = ~other_bucket & ~captured
    lost_out = ~other_bucket & captured & lost
    early = ~other_bucket & captured & ~lost & ~sent & (seqno < first_seqno)
    not_judged = Counter({"vbucket not in the capture": int(not_captured.sum()),
                          "vbucket lost frames in the capture": int(lost_out.sum()),
                          "before the capture's first seqno": int(early.sum())})
    judged = other_bucket | ~(not_captured | lost_out | early)
    counted = judged & sent                  # what a later message of its version follows
    identity = np.where(counted, place, -1)
    # a duplicate: a message of a version counted before it
    order = np.lexsort((np.arange(n), identity))
    repeat = np.zeros(n, bool)
    same = (identity[order][1:] == identity[order][:-1]) & (identity[order][1:] >= 0)
    repeat[order[1:]] = same
    # out of order: a version the stream sent before one of its document delivered earlier
    later = _delivered_before(doc, place, counted)
    kind = np.full(n, "once", object)
    kind[~sent] = "unknown"
    kind[sent & repeat] = "duplicate"
    kind[sent & ~repeat & ~standing] = "phantom"
    kind[sent & ~repeat & standing & (place < later)] = "out_of_order"
    kind[other_bucket] = "unknown"
    rows = pa.table({"kind": pa.array(kind, pa.string()), "vbucket": messages["vbucket"],
                     "key": messages["key"], "seqno": messages["seqno"],
                     "cas": messages["cas"],
                     "position": pa.array(np.arange(n, dtype=np.int64))})
    return _Judged(rows.filter(pa.array(judged)), found[judged]), not_judged


def _per_vbucket(values: dict[int, int], vbucket: np.ndarray, missing: int) -> np.ndarray:
    """``values`` (vbucket -> seqno) at each of ``vbucket``, ``missing`` where it has none."""
    if not values:
        return np.full(len(vbucket), missing, np.uint64)
    keys = np.array(sorted(values), np.int64)
    found = np.array([values[k] for k in keys.tolist()], np.uint64)
    at = np.minimum(np.searchsorted(keys, vbucket), len(keys) - 1)
    return np.where(keys[at] == vbucket, found[at], np.uint64(missing))


def _delivered_before(doc: np.ndarray, place: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """Per message, the latest place in the stream of a version of its document delivered
    (and counted) before it; -1 where none."""
    n = len(doc)
    out = np.full(n, -1, np.int64)
    at = np.flatnonzero(counted)
    if not len(at):
        return out
    order = at[np.lexsort((at, doc[at]))]              # by document, then sink order
    group = doc[order]
    stride = int(place.max()) + 2
    key = group * stride + place[order] + 1
    running = np.maximum.accumulate(key)
    previous = np.full(len(order), -1, np.int64)
    previous[1:] = np.where(group[1:] == group[:-1], running[:-1] - group[1:] * stride - 1, -1)
    out[order] = previous
    return out


def _missing(capture: _Capture, judged: _Judged) -> tuple[pa.Table, Counter]:
    """The versions current at each vbucket's consistent seqno that were never delivered,
    nor a later version of their document (``_ROW``, kind ``missing``); and those that
    cannot be judged, by reason."""
    sent = capture.sent
    row, vb, seqno = capture.current
    counted = judged.found[judged.found >= 0]
    done = np.zeros(len(row), bool)
    if len(sent):
        delivered = np.zeros(len(sent), bool)
        delivered[counted] = True
        latest = np.full(int(sent.doc.max()) + 1, -1, np.int64)
        np.maximum.at(latest, sent.doc[counted], sent.place[counted])
        at = np.maximum(row, 0)
        done = (row >= 0) & (delivered[at] | (latest[sent.doc[at]] > sent.place[at]))
    rows = judged.rows
    firsts = rows.filter(pc.and_(pc.not_equal(rows["kind"], "unknown"),
                                 pc.is_valid(rows["seqno"])))
    first = _firsts(firsts["vbucket"].to_numpy(), firsts["seqno"].to_numpy())
    lost = np.isin(vb, list(capture.lost))
    start = _per_vbucket(first, vb, 2**64 - 1)
    late = ~done & ~lost & (seqno < start)
    missing = np.flatnonzero(~done & ~lost & ~late)
    more = Counter({"vbucket lost frames in the capture": int((~done & lost).sum()),
                    "current before the sink's first message": int(late.sum())})
    missing = missing[np.lexsort((seqno[missing], vb[missing]))]
    at = np.maximum(row[missing], 0)
    out = pa.table({"kind": pa.array(["missing"] * len(missing), pa.string()),
                    "vbucket": pa.array(vb[missing], pa.int64()),
                    "key": sent.key.take(pa.array(at)),
                    "seqno": pa.array(seqno[missing], pa.uint64()),
                    "cas": pa.array(sent.cas[at], pa.uint64()),
                    "position": pa.nulls(len(missing), pa.int64())})
    return out, more


def audit_summary(table: pa.Table) -> dict:
    """The summary of an ``audit`` table: ``counts`` of every kind, the same per vbucket
    (``vbuckets``), what was ``not_judged`` and why, the messages read and the capture's
    lost vbuckets and consistent seqnos."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError("not a table of dcpfast.changes.audit (no dcpfast.audit metadata)")
    return json.loads(raw)
