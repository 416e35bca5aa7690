"""Point-in-time document state rebuilt from a DCP stream: ``state`` gives one row per
document (or per version, with ``history``) as of the end of the dump, a seqno or a time.

``rows`` turns batches into the rows the engine reads, ``restarts`` places Stream Request
responses on their streams, ``walk`` follows each stream (restart points, seqno order,
cut points, snapshots), ``versions`` holds the documents' versions, ``engine`` ties them
together and ``output`` builds the table and reads its metadata (``consistency``,
``state_errors``).
"""

from __future__ import annotations

import datetime as dt
import numbers
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from ...batch import FrameBatch
from ...errors import DcpFormatError, Reporter, SkippedRegion, text
from ...io import DEFAULT_BATCH_BYTES, iter_batches
from ..events import Manifest, system_events
from .engine import Engine
from .output import METADATA_KEY, consistency, state_errors, state_schema, table
from .restarts import Placer
from .rows import batch_rows, concat, sort

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["METADATA_KEY", "StateBuilder", "consistency", "nanoseconds", "state",
           "state_errors", "state_schema"]

_ERRORS = ("strict", "skip")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_NO_LIMIT = np.uint64(2**64 - 1)


def nanoseconds(at_time) -> int:
    """``at_time`` as nanoseconds since the epoch: a ``datetime`` (naive means UTC), an ISO
    8601 string, or an int of nanoseconds."""
    if isinstance(at_time, numbers.Integral) and not isinstance(at_time, bool):
        return int(at_time)
    if isinstance(at_time, str):
        try:
            at_time = dt.datetime.fromisoformat(at_time)
        except ValueError:
            raise ValueError(f"at_time {at_time!r} is not an ISO 8601 time") from None
    if isinstance(at_time, dt.datetime):
        if at_time.tzinfo is None:
            at_time = at_time.replace(tzinfo=dt.timezone.utc)
        return (at_time - _EPOCH) // dt.timedelta(microseconds=1) * 1000
    raise TypeError(f"at_time must be a datetime, an ISO string or nanoseconds, "
                    f"not {type(at_time).__name__}")


def limits(at_seqno):
    """A function from vbucket ids (uint32 array) to their at_seqno limits: no limit
    (None), one seqno for every vbucket (an int), or a mapping vbucket -> seqno, where the
    vbuckets it leaves out get nothing."""
    if at_seqno is None:
        return lambda vb: np.full(len(vb), _NO_LIMIT, np.uint64)
    if isinstance(at_seqno, numbers.Integral) and not isinstance(at_seqno, bool):
        if not 0 <= at_seqno < 2**64:
            raise ValueError(f"at_seqno {at_seqno} is not a seqno")
        return lambda vb: np.full(len(vb), at_seqno, np.uint64)
    if isinstance(at_seqno, Mapping):
        known = np.array(sorted(int(v) for v in at_seqno), np.int64)
        seqnos = np.array([int(at_seqno[v]) for v in known.tolist()], np.uint64)
        if len(known) and (known.min() < 0 or known.max() > 0xFFFF):
            raise ValueError("at_seqno's vbuckets must be in 0..65535")

        def lookup(vb):
            at = np.clip(np.searchsorted(known, vb), 0, max(len(known) - 1, 0))
            found = (known[at] == vb) if len(known) else np.zeros(len(vb), bool)
            return np.where(found, seqnos[at] if len(known) else 0, 0).astype(np.uint64)
        return lookup
    raise TypeError("at_seqno must be None, an int or a mapping vbucket -> seqno")


class StateBuilder:
    """``state`` batch by batch: ``update`` with each batch of one stream, in order, then
    ``table``. Options as for ``state``."""

    def __init__(self, *, at_seqno=None, at_time=None, include_deleted: bool = False,
                 values: bool = True, collections=None, errors: str = "strict",
                 history: bool = False):
        if errors not in _ERRORS:
            raise ValueError(f"errors must be one of {_ERRORS}, not {errors!r}")
        if collections is not None:
            collections = list(collections)
            if not all(isinstance(c, (int, str)) for c in collections):
                raise TypeError("collections holds collection ids (int) and names (str)")
        self.values, self.collections, self.mode = values, collections, errors
        self.history, self.include_deleted = history, include_deleted
        self.at_seqno = at_seqno
        self.at_time = None if at_time is None else nanoseconds(at_time)
        self.engine = Engine(limit=limits(at_seqno), at_time=self.at_time, history=history,
                             include_deleted=include_deleted)
        self.placer = Placer()
        self.manifest = Manifest()
        self.errors: list[SkippedRegion] = []
        self._reporter = Reporter("skip", self.errors)
        self._frames = 0
        self._table: pa.Table | None = None

    def update(self, batch: FrameBatch) -> StateBuilder:
        """Add the next batch of the stream."""
        if self._table is not None:
            raise RuntimeError("this StateBuilder has given its table; start a new one")
        mine = FrameBatch(**{**batch.state(), "errors": list(batch.errors), "mode": "skip"})
        events = system_events(mine)
        self.manifest.update(events)
        restarts = self.placer.place(mine, self._frames, values=self.values)
        rows = batch_rows(mine, self._frames, values=self.values, events=events)
        self._frames += len(batch)
        self.engine.update(sort(concat([rows, restarts])) if len(restarts) else rows)
        found = [*mine.errors, *(SkippedRegion(*p) for p in self.engine.problems)]
        self.engine.problems.clear()
        self._report(found)
        return self

    def _report(self, problems: list[SkippedRegion]) -> None:
        if not problems:
            return
        if self.mode == "strict":
            first = min(problems)
            raise DcpFormatError(first.offset, first.reason)
        for region in problems:
            self._reporter.report(*region)

    def table(self) -> pa.Table:
        """The state of what the batches held (built once: the builder then holds nothing
        else)."""
        if self._table is not None:
            return self._table
        self._report([SkippedRegion(offset, length, text("state_unplaced_rollback",
                                                         seqno=seqno))
                      for offset, length, seqno in self.placer.unplaced()])
        return self.result()

    def result(self) -> pa.Table:
        """The state of the rows the engine read (``table`` without the check that every
        Rollback response found its stream)."""
        if self._table is not None:
            return self._table
        versions, consistent = self.engine.finish()
        by_vbucket: dict[int, int] = {}
        for unit, seqno in consistent.items():
            vbucket = unit >> 16
            by_vbucket[vbucket] = min(seqno, by_vbucket.get(vbucket, seqno))
        metadata = {"consistency": sorted(by_vbucket.items()),
                    "errors": [list(e) for e in self.errors],
                    "at_seqno": self.at_seqno if not isinstance(self.at_seqno, Mapping)
                    else {str(k): int(v) for k, v in self.at_seqno.items()},
                    "at_time": self.at_time, "history": self.history}
        self._table = table(versions, self.manifest, values=self.values,
                            history=self.history, include_deleted=self.include_deleted,
                            collections=self.collections, metadata=metadata)
        return self._table


def state(source, *, at_seqno=None, at_time=None, include_deleted: bool = False,
          values: bool = True, collections=None, errors: str = "strict",
          history: bool = False, batch_bytes: int = DEFAULT_BATCH_BYTES) -> pa.Table:
    """The documents of a DCP stream as they stood at its end, at ``at_seqno`` or at
    ``at_time``: one row per document (``history``: per version). See docs/state.md.

    ``source``: a dump's path, a buffer, a ``FrameBatch`` or an iterable of the batches of
    one stream in order (``iter_batches``; a capture's server-to-client batches).
    ``at_seqno``: an int, or a mapping vbucket -> seqno (vbuckets it leaves out give no
    rows); ``at_time``: a ``datetime``, an ISO 8601 string or nanoseconds since the epoch,
    compared with the CAS's hybrid logical clock. ``include_deleted`` keeps tombstones;
    ``values`` adds ``body`` and ``xattrs``; ``collections`` keeps only these collections
    (ids, names or ``scope.collection``). ``errors``: "strict" raises ``DcpFormatError`` at
    the first damaged or inconsistent frame; "skip" goes on and lists each in the table's
    metadata (``state_errors``). Each vbucket's consistent seqno: ``consistency``.
    """
    builder = StateBuilder(at_seqno=at_seqno, at_time=at_time, include_deleted=include_deleted,
                           values=values, collections=collections, errors=errors,
                           history=history)
    for batch in _batches(source, errors, batch_bytes):
        builder.update(batch)
    return builder.table()


def _batches(source, errors: str, batch_bytes: int) -> Iterable[FrameBatch]:
    """The batches of ``source``: a batch, a dump (path, file or buffer), or batches."""
    if isinstance(source, FrameBatch):
        return [source]
    try:
        memoryview(source)
    except TypeError:
        pass
    else:
        return iter_batches(source, batch_bytes, errors=errors)
    if isinstance(source, (str, os.PathLike)) or hasattr(source, "read") \
            or not isinstance(source, Iterable):
        return iter_batches(source, batch_bytes, errors=errors)
    return source
