"""``audit``: what a connector delivered (its sink: the Couchbase Kafka connector's records,
or Debezium change events) judged against the captured DCP stream it came from.

A version is known by its vbucket, key and CAS (a version written again after a rollback
has a CAS of its own, where its seqno may be used again). Each delivered message is
``once``, ``duplicate`` (its version was delivered before), ``out_of_order`` (a version
of its document that the stream sent later was delivered before it), ``phantom`` (a
version the stream sent and a Rollback or a restart then discarded) or ``unknown`` (no
version the stream sent); every version current at the end of the capture (each
vbucket at its consistent seqno) that was never delivered, nor a later version of its
document, is ``missing``. What cannot be
judged is counted apart, never as a problem: messages of vbuckets the capture never
streamed or that lost frames, messages below the capture's first seqno of their vbucket,
lines of the sink that do not parse, and current versions older than the first message
the sink holds for their vbucket.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..documents.api import state
from .api import changes, feed_metadata

#: What a delivered message (or a current version never delivered) can be.
KINDS = ("once", "duplicate", "out_of_order", "phantom", "unknown", "missing")
#: The problems: every kind but ``once``.
PROBLEMS = KINDS[1:]
#: The schema metadata key of the audit's summary (JSON).
METADATA_KEY = b"dcpfast.audit"
SINK_FORMATS = ("couchbase-kafka", "debezium")
_MASK = (1 << 64) - 1


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
    judge = _Judge(capture, reading)
    for position, message in enumerate(messages):
        judge.message(position, *message, bucket=bucket)
    judge.missing(capture, reading)
    if unreadable:
        judge.judged_out["sink lines that do not parse"] += unreadable
    summary = {"counts": {k: judge.counts.get(k, 0) for k in KINDS},
               "vbuckets": {str(vb): dict(c) for vb, c in sorted(judge.per_vbucket.items())},
               "not_judged": dict(judge.judged_out), "messages": len(messages) + unreadable,
               "capture": {"lost": sorted(judge.lost), "consistency": judge.consistency}}
    names = audit_schema().names
    table = pa.table({name: list(column) for name, column in zip(names, zip(*judge.rows))}
                     if judge.rows else {name: [] for name in names}, schema=audit_schema())
    return table.replace_schema_metadata({METADATA_KEY: json.dumps(summary).encode()})


class _Judge:
    """What the capture sent (each version's place in the stream and its document, a key
    of a collection), which of it stands (not discarded by a restart), and the verdicts
    so far."""

    def __init__(self, capture, reading: dict):
        feed = changes(capture, values=False, **reading)
        meta = feed_metadata(feed)
        self.lost, self.consistency = set(meta["lost"]), meta["consistency"]
        history = state(capture, history=True, include_deleted=True, values=False,
                        **reading)
        self.standing = set(zip(*(history[c].to_pylist()
                                  for c in ("vbucket", "key_str", "cas"))))
        sent = feed.filter(pc.is_in(feed["change"], pa.array(
            ["mutation", "deletion", "expiration"])))
        self.sent: dict[tuple, tuple[int, tuple]] = {}
        self.first_seqno: dict[int, int] = {}
        for i, (vb, cid, key, cas, seqno) in enumerate(zip(*(sent[c].to_pylist() for c in (
                "vbucket", "collection_id", "key_str", "cas", "by_seqno")))):
            self.sent.setdefault((vb, key, cas), (i, (vb, cid, key)))
            self.first_seqno[vb] = min(seqno, self.first_seqno.get(vb, seqno))
        self.counts: Counter = Counter()
        self.judged_out: Counter = Counter()
        self.per_vbucket: dict[int, Counter] = {}
        self.delivered: set[tuple] = set()
        self.latest: dict[tuple, int] = {}     # per document: the latest place delivered
        self.first_delivered: dict[int, int] = {}
        self.rows: list[tuple] = []

    def _kind(self, vb: int, version: tuple, seqno: int | None) -> str | None:
        """The verdict on a message of ``version``; None (counted) where none is given."""
        if vb not in self.first_seqno:
            self.judged_out["vbucket not in the capture"] += 1
        elif vb in self.lost:
            self.judged_out["vbucket lost frames in the capture"] += 1
        elif version not in self.sent and seqno is not None and \
                seqno < self.first_seqno[vb]:
            self.judged_out["before the capture's first seqno"] += 1
        elif version not in self.sent:
            return "unknown"
        elif version in self.delivered:
            return "duplicate"
        elif version not in self.standing:
            return "phantom"
        elif self.sent[version][0] < self.latest.get(self.sent[version][1], -1):
            return "out_of_order"
        else:
            return "once"
        return None

    def message(self, position: int, vb: int, key: str, cas: int | None, seqno: int | None,
                named: str | None, *, bucket: str | None) -> None:
        version = (vb, key, cas)
        kind = "unknown" if bucket is not None and named not in (None, bucket) \
            else self._kind(vb, version, seqno)
        if kind is None:
            return
        if kind != "unknown" and seqno is not None:
            self.first_delivered[vb] = min(seqno, self.first_delivered.get(vb, seqno))
        if version in self.sent:
            self.delivered.add(version)
            place, document = self.sent[version]
            self.latest[document] = max(self.latest.get(document, -1), place)
        self._count(kind, vb, key, seqno, cas, position)

    def _count(self, kind: str, vb: int, key: str, seqno, cas, position) -> None:
        self.counts[kind] += 1
        self.per_vbucket.setdefault(vb, Counter())[kind] += 1
        if kind != "once":
            self.rows.append((kind, vb, key, seqno, cas, position))

    def missing(self, capture, reading: dict) -> None:
        """The versions current at each vbucket's consistent seqno that were never
        delivered, nor a later version of their document."""
        current = state(capture, include_deleted=True, values=False, **reading,
                        at_seqno={vb: s for vb, s in self.consistency} or None)
        for vb, key, cas, seqno in zip(*(current[c].to_pylist() for c in (
                "vbucket", "key_str", "cas", "by_seqno"))):
            place, document = self.sent.get((vb, key, cas), (-1, ()))
            if (vb, key, cas) in self.delivered or self.latest.get(document, -1) > place:
                continue
            if vb in self.lost:
                self.judged_out["vbucket lost frames in the capture"] += 1
            elif vb not in self.first_delivered or seqno < self.first_delivered[vb]:
                self.judged_out["current before the sink's first message"] += 1
            else:
                self._count("missing", vb, key, seqno, cas, None)


def audit_summary(table: pa.Table) -> dict:
    """The summary of an ``audit`` table: ``counts`` of every kind, the same per vbucket
    (``vbuckets``), what was ``not_judged`` and why, the messages read and the capture's
    lost vbuckets and consistent seqnos."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError("not a table of dcpfast.changes.audit (no dcpfast.audit metadata)")
    return json.loads(raw)


def read_sink(sink, format: str | None = None) -> tuple[list[tuple], int]:
    """The messages of ``sink`` in delivery order as (vbucket, key, cas, seqno, bucket),
    and how many lines of it did not parse (a file cut mid-line)."""
    unreadable = 0
    if isinstance(sink, pa.Table):
        records = sink.to_pylist()
    else:
        path = os.fspath(sink)
        if path.endswith((".parquet", ".pq")):
            records = pq.read_table(path).to_pylist()
        else:
            records = []
            with open(path, "rb") as f:
                for line in f:
                    if not line.strip():
                        continue
                    try:
                        records.append(orjson.loads(line))
                    except orjson.JSONDecodeError:
                        unreadable += 1
    if format is None and records:
        format = "debezium" if "value" in records[0] else "couchbase-kafka"
    if format not in (*SINK_FORMATS, None):
        raise ValueError(f"sink format must be one of {', '.join(SINK_FORMATS)}, "
                         f"not {format!r}")
    out = []
    for record in records:
        try:
            out.append(_debezium(record) if format == "debezium" else _kafka(record))
        except (KeyError, TypeError, AttributeError, ValueError):
            unreadable += 1
    if records and not out:
        raise ValueError(f"none of the sink's {len(records):,} records is a {format} "
                         f"message (its fields: {', '.join(sorted(records[0]))})")
    return out, unreadable


def _kafka(record: dict) -> tuple:
    return (int(record["partition"]), record["key"], int(record["cas"]) & _MASK,
            None if record.get("bySeqno") is None else int(record["bySeqno"]),
            record.get("bucket"))


def _debezium(record: dict) -> tuple:
    """A Debezium event's version: its source's CAS (null for an event that holds no
    version the stream sent: such an event is ``unknown``)."""
    source = record["value"]["source"]
    cas = source.get("cas")
    return (int(source["vbucket"]), record["key"]["id"],
            None if cas is None else int(cas) & _MASK,
            None if source.get("seqno") is None else int(source["seqno"]),
            source.get("bucket"))
