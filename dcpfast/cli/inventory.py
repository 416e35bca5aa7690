"""Counts over a stream of batches: what ``dcpfast info`` reports about an input.

An ``Inventory`` takes the batches of one input one at a time (``update``) and keeps only
counts, so any input is summarised in bounded memory: frames and bytes, frames by opcode,
frames, documents and the seqno range by vbucket, the high seqno of each vbucket the
server last answered a GetAllVbSeqnos with, documents by collection, frames by capture
connection, and the regions skipped as damage: all of them counted, by reason, and the
first ``LISTED_PER_REASON`` of each reason listed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from ..batch import kinds_of
from ..errors import skipped_regions
from ..protocol import DOCUMENT_CHANGES, HEADER_SIZE, Opcode, kinds_where
from ..streams import high_seqnos

#: Document changes: the opcodes counted as documents, by vbucket and by collection.
DOCUMENT_OPCODES = np.array(sorted(DOCUMENT_CHANGES), np.uint8)
#: Per frame kind: whether it is a response.
_RESPONSE_KINDS = kinds_where(lambda k: k.response)
#: Skipped regions listed for each reason; the others are only counted.
LISTED_PER_REASON = 20
#: Reasons counted apart; past them, regions are counted under ``OTHER_REASONS``.
MAX_REASONS = 100
OTHER_REASONS = "other reasons"
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")
_REASON, _LENGTH = attrgetter("reason"), attrgetter("length")


def reason_kind(reason: str) -> str:
    """A reason without its numbers ("unknown magic 0x42" -> "unknown magic N"): the
    kind of damage, under which regions are counted."""
    return _NUMBERS.sub("N", reason)


@dataclass
class VbucketCounts:
    """Request frames of one vbucket, how many of them change a document, and the lowest
    and highest ``by_seqno`` of those (None without documents)."""

    frames: int = 0
    documents: int = 0
    first_seqno: int | None = None
    last_seqno: int | None = None


class Inventory:
    """Frames, bytes, opcodes, vbuckets, collections, connections and damage of a stream."""

    #: The columns ``update`` reads; a scan may leave out every other.
    COLUMNS = ("opcode", "vbucket", "by_seqno", "collection_id", "body_len",
               # a GetAllVbSeqnos answer's
               "offset", "magic", "status", "opaque", "value_offset", "value_len")

    def __init__(self) -> None:
        #: Frames seen.
        self.frames = 0
        #: Bytes of those frames, headers included.
        self.bytes = 0
        #: Frames by opcode, indexed by the opcode (256 entries).
        self.opcodes = np.zeros(256, np.int64)
        #: The response frames among them, by opcode.
        self.responses = np.zeros(256, np.int64)
        #: Counts by vbucket, for the vbuckets of request frames.
        self.vbuckets: dict[int, VbucketCounts] = {}
        #: The high seqno of each vbucket in the server's last GetAllVbSeqnos answer.
        self.server_seqnos: dict[int, int] = {}
        #: Document changes by collection id (only batches with collections on).
        self.collections: Counter = Counter()
        #: Frames by capture connection direction (empty for DCP dumps).
        self.connections: Counter = Counter()
        #: The regions skipped as damage, in order: the first ``LISTED_PER_REASON`` of
        #: each reason (``reason_kind``).
        self.skipped: list = []
        #: Regions skipped, all of them, by reason kind (at most ``MAX_REASONS`` kinds,
        #: the rest under ``OTHER_REASONS``), and their bytes.
        self.skipped_by_reason: Counter = Counter()
        self.skipped_bytes = 0
        self._listed: Counter = Counter()           # regions listed, by reason kind
        #: Whether the last batch had collections on; None before any batch.
        self.collections_on: bool | None = None

    def update(self, batch) -> None:
        """Add one batch (a ``FrameBatch``, or a capture batch with its ``connection``)."""
        n = len(batch)
        self.collections_on = batch.collections
        connection = getattr(batch, "connection", None)
        if connection is not None:            # a capture: one direction per batch
            self.connections[connection] += n
        self.frames += n
        self.bytes += int(batch["body_len"].sum()) + HEADER_SIZE * n
        self._add_skipped(batch.errors)
        opcodes = batch["opcode"]
        self.opcodes += np.bincount(opcodes, minlength=256)
        self.responses += np.bincount(opcodes[_RESPONSE_KINDS[kinds_of(batch)]], minlength=256)
        requests = batch.validity("vbucket")
        documents = np.isin(opcodes, DOCUMENT_OPCODES) & requests
        vbuckets = batch["vbucket"]
        frames = np.bincount(vbuckets[requests])
        for vb in np.flatnonzero(frames).tolist():
            self.vbuckets.setdefault(vb, VbucketCounts()).frames += int(frames[vb])
        self._add_seqnos(vbuckets[documents], batch["by_seqno"][documents])
        if batch.collections:
            ids, counts = np.unique(batch["collection_id"][documents], return_counts=True)
            self.collections.update(dict(zip(ids.tolist(), counts.tolist())))
        if (opcodes == Opcode.GET_ALL_VB_SEQNOS).any():
            answered = high_seqnos(batch)
            self.server_seqnos.update(zip(answered["vbucket"].to_pylist(),
                                          answered["seqno"].to_pylist()))
            self._add_skipped(skipped_regions(answered))

    def behind(self) -> list[tuple[int, int | None, int]]:
        """(vbucket, its last seqno here or None, the server's high seqno) of the vbuckets
        the server answered a GetAllVbSeqnos with a seqno this input's documents did not
        reach, by vbucket."""
        out = []
        for vb, seqno in sorted(self.server_seqnos.items()):
            counts = self.vbuckets.get(vb)
            last = counts.last_seqno if counts else None
            if seqno and (last is None or last < seqno):
                out.append((vb, last, seqno))
        return out

    @property
    def skipped_count(self) -> int:
        """Regions skipped as damage, listed or not."""
        return sum(self.skipped_by_reason.values())

    @property
    def unlisted(self) -> int:
        """Regions skipped but not in ``skipped``."""
        return self.skipped_count - len(self.skipped)

    def _add_skipped(self, regions) -> None:
        """Count the regions by reason; list the first of each reason. The work per region
        is C-level; Python's is per distinct reason, and per region only while one of the
        batch's reasons still lists."""
        if not regions:
            return
        kinds = {}
        for reason, n in Counter(map(_REASON, regions)).items():
            kind = reason_kind(reason)
            if kind not in self.skipped_by_reason and len(self.skipped_by_reason) >= MAX_REASONS:
                kind = OTHER_REASONS
            kinds[reason] = kind
            self.skipped_by_reason[kind] += n
        self.skipped_bytes += sum(map(_LENGTH, regions))
        room = {kind: LISTED_PER_REASON - self._listed[kind] for kind in set(kinds.values())
                if kind != OTHER_REASONS and self._listed[kind] < LISTED_PER_REASON}
        for region in regions if room else ():
            kind = kinds[region.reason]
            if room.get(kind, 0) > 0:
                room[kind] -= 1
                self._listed[kind] += 1
                self.skipped.append(region)
                if not any(room.values()):
                    break

    def _add_seqnos(self, vbuckets: np.ndarray, seqnos: np.ndarray) -> None:
        """Count the documents of each vbucket and widen its seqno range."""
        if not len(vbuckets):
            return
        order = np.lexsort((seqnos, vbuckets))
        vbuckets, seqnos = vbuckets[order], seqnos[order]
        starts = np.flatnonzero(np.r_[True, vbuckets[1:] != vbuckets[:-1]])
        ends = np.append(starts[1:], len(vbuckets))
        for vb, start, end in zip(vbuckets[starts].tolist(), starts.tolist(), ends.tolist()):
            entry = self.vbuckets[vb]
            low, high = int(seqnos[start]), int(seqnos[end - 1])
            entry.documents += end - start
            entry.first_seqno = low if entry.first_seqno is None else min(entry.first_seqno, low)
            entry.last_seqno = high if entry.last_seqno is None else max(entry.last_seqno, high)
