"""What ``dcpfast info`` tells besides its counts: the input's time span, the names of its
collections and one line of stream health, pointing to ``dcpfast report`` for the rest.

Times are a capture's timestamps, or the CAS clock of a dump's document changes (as
``dcpfast report`` reads them, docs/report.md); names come from the system events; the
health is ``streams.summarize`` over each connection's server side.
"""

from __future__ import annotations

import numpy as np

from .. import protocol as P
from ..events import Manifest
from ..pcap import CLIENT_TO_SERVER
from ..reporting.clock import cas_times, iso
from ..streams import Summary
from ..streams.frames import STREAM_OPCODES, opcode_table
from .app import printable

#: The opcodes a stream health summary reads: a batch without them leaves it as it was.
_ABOUT_STREAMS = opcode_table(STREAM_OPCODES | {P.Opcode.GET_FAILOVER_LOG,
                                                P.Opcode.GET_FAILOVER_LOG_NON_DCP})


class Glance:
    """Time span, collection names and stream health of one input, batch by batch."""

    #: The columns ``update`` reads (the summary's, the system events' and the CAS); a
    #: scan may leave out every other.
    COLUMNS = ("offset", "magic", "opcode", "vbucket", "stream_id", "opaque", "status", "cas",
               "framing_len", "extras_len", "key_offset", "key_len", "value_offset",
               "value_len", "by_seqno", "snap_start", "snap_end", "snap_flags", "oso_flags",
               "end_status", "event_id", "event_version")

    def __init__(self) -> None:
        self.first: int | None = None
        self.last: int | None = None
        self.capture = False
        self.manifest = Manifest()
        self.summaries: dict[tuple, Summary] = {}

    def update(self, batch) -> None:
        connection = getattr(batch, "connection", None)
        self.capture = connection is not None
        times = batch.timestamps if self.capture else cas_times(batch)
        timed = times[times > 0]
        if len(timed):
            lo, hi = int(timed.min()), int(timed.max())
            self.first = lo if self.first is None else min(self.first, lo)
            self.last = hi if self.last is None else max(self.last, hi)
        op = batch["opcode"]
        if (op == P.Opcode.SYSTEM_EVENT).any():
            self.manifest.update(batch)
        if not _ABOUT_STREAMS[op].any():       # nothing a summary reads (NOOPs, damage)
            return
        if connection is None:
            self.summaries.setdefault((), Summary()).update(batch)
            return
        to_server = connection.direction == CLIENT_TO_SERVER
        ends = sorted([(connection.src, connection.src_port), (connection.dst,
                                                               connection.dst_port)])
        summary = self.summaries.setdefault(tuple(ends), Summary())
        if to_server:
            summary.tracker.update(batch)
        else:
            summary.update(batch)

    def names(self) -> dict[int, str]:
        """collection id -> ``scope.collection``, for the collections the events named."""
        m = self.manifest
        return {cid: f"{m.scopes.get(m.collection_scopes.get(cid, -1), '?')}.{name}"
                for cid, name in sorted(m.collections.items())}

    def health(self) -> dict:
        """Streams, anomalies, rollbacks and Stream End reasons, over every connection."""
        streams = anomalies = rollbacks = 0
        ends: dict[str, int] = {}
        for summary in self.summaries.values():
            table = summary.to_arrow()
            streams += table.num_rows
            anomalies += int(np.sum(table["anomalies"].to_numpy())) if table.num_rows else 0
            rollbacks += sum(len(r) for r in table["rollbacks"].to_pylist())
            for end in table["end_status"].to_pylist():
                if end is not None:
                    ends[end] = ends.get(end, 0) + 1
        return {"streams": streams, "anomalies": anomalies, "rollbacks": rollbacks,
                "ends": dict(sorted(ends.items()))}

    def lines(self, shown: str) -> list[str]:
        """The lines ``info`` prints; ``shown`` names the input."""
        clock = "capture timestamps" if self.capture else "CAS clock of the documents"
        out = []
        if self.first is not None and self.last is not None:
            span = (self.last - self.first) / 1e9
            out.append(f"  time: {_t(self.first)} to {_t(self.last)} UTC ({clock}), "
                       f"{span:,.3f} s")
        names = self.names()
        if len(names) > 1 or self.manifest.uid:
            out.append("  collection names: " + ", ".join(f"0x{cid:x} {printable(name)}"
                                                          for cid, name in names.items()))
        h = self.health()
        ended = ", ".join(f"{n} {end}" for end, n in h["ends"].items()) or "none"
        out.append(f"  stream health: {h['streams']} vbucket streams, {h['anomalies']} "
                   f"anomalies, {h['rollbacks']} rollbacks, ended: {ended}; streams over "
                   f"time, stalls and flow control: dcpfast report {shown} -o report.html")
        return out

    def as_json(self) -> dict:
        return {"time": {"first": iso(self.first), "last": iso(self.last),
                         "clock": "capture" if self.capture else "cas"},
                "collection_names": {f"0x{cid:x}": name for cid, name in self.names().items()},
                "stream_health": self.health()}


def _t(ns: int) -> str:
    text = iso(ns) or ""
    return text[:10] + " " + text[11:23]
