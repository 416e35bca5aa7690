"""``state`` and ``StateBuilder``: the options checked, batches fed to the engine, the
second pass for documents a restart makes current again, and the table."""

from __future__ import annotations

import datetime as dt
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..batch import FrameBatch, parts_of
from ..errors import DcpFormatError, Reporter, SkippedRegion, checked_mode, text
from ..events import Manifest, system_events
from ..io import DEFAULT_BATCH_BYTES
from ..io.dumps import iter_batches
from .engine import Engine
from .output import table
from .restarts import Placer
from .rows import Rows, batch_rows, concat, sort, take
from .segments import dense
from .versions import Lost, Versions, standing
from .versions import concat as concat_versions

if TYPE_CHECKING:
    import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_NO_LIMIT = np.uint64(2**64 - 1)


def nanoseconds(at_time) -> int:
    """``at_time`` as nanoseconds since the epoch: a ``datetime`` (naive means UTC), an ISO
    8601 string, or an int of nanoseconds; a time the CAS clock cannot hold (before the
    epoch, or 2**64 ns after it) is a ``ValueError``."""
    ns = _nanoseconds(at_time)
    if not 0 <= ns < 2**64:
        raise ValueError(f"at_time {at_time!r} is outside the CAS clock's range "
                         "(1970-01-01 to 2554-07-21 UTC)")
    return ns


def _nanoseconds(at_time) -> int:
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
    ``table``. Options as for ``state``; ``exact_units`` names the streams (vbucket << 16
    | stream id) known beforehand to restart, whose documents keep every version so that
    ``table`` needs no second pass for them (Spark's partitions use it)."""

    def __init__(self, *, at_seqno=None, at_time=None, include_deleted: bool = False,
                 values: bool = True, collections=None, errors: str = "strict",
                 history: bool = False, exact_units: Iterable[int] = ()):
        checked_mode(errors)
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
        #: the streams (vbucket << 16 | stream id) known beforehand to need every version
        #: of their documents to be exact (``table``), and the engine that keeps them
        self.exact_units = np.array(sorted(set(exact_units)), np.uint32)
        self.exact: Engine | None = None
        if len(self.exact_units) and not history:
            self.exact = Engine(limit=self.engine.limit, at_time=self.at_time, history=True)
            self.exact.problems = self.engine.problems
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
        mine = FrameBatch(**{**parts_of(batch), "errors": list(batch.errors), "mode": "skip"})
        events = system_events(mine)
        self.manifest.update(events)
        restarts = self.placer.place(mine, self._frames, values=self.values)
        rows = batch_rows(mine, self._frames, values=self.values, events=events)
        self._frames += len(batch)
        self.feed(sort(concat([rows, restarts])) if len(restarts) else rows)
        found = [*mine.errors, *(SkippedRegion(*p) for p in self.engine.problems)]
        self.engine.problems.clear()
        self._report(found)
        return self

    def feed(self, rows: Rows) -> None:
        """Take the next rows of the stream (what ``update`` makes of a batch)."""
        if self.exact is None:
            self.engine.update(rows)
            return
        exact = dense(rows.unit, self.exact_units)[1]
        self.engine.update(take(rows, np.flatnonzero(~exact)))
        self.exact.update(take(rows, np.flatnonzero(exact)))

    def _report(self, problems: list[SkippedRegion]) -> None:
        if not problems:
            return
        if self.mode == "strict":
            first = min(problems)
            raise DcpFormatError(first.offset, first.reason)
        for region in problems:
            self._reporter.report(*region)

    def table(self, again: Callable[[StateBuilder], object] | None = None) -> pa.Table:
        """The state of what the batches held (built once: the builder then holds nothing
        else).

        Keeping one version per document, the builder cannot bring back the version a
        restart (or a time cut inside an OSO snapshot) makes current again once a later
        one replaced it. ``again(builder)`` feeds ``builder`` the same batches once more
        (as this builder was fed); with it, those documents are worked out exactly in a
        second pass over their changes only. Without it, their vbuckets are listed
        under ``unrestored`` in the metadata."""
        if self._table is not None:
            return self._table
        self._report([SkippedRegion(offset, length, text("state_unplaced_rollback",
                                                         seqno=seqno))
                      for offset, length, seqno in self.placer.unplaced()])
        return self.result(again)

    def result(self, again: Callable[[StateBuilder], object] | None = None) -> pa.Table:
        """The state of the rows the engine read (``table`` without the check that every
        Rollback response found its stream)."""
        if self._table is not None:
            return self._table
        versions, consistent = self.engine.finish()
        if self.exact is not None:
            found, more = self.exact.finish()
            versions = _joined(versions, None, found)
            consistent.update(more)
        lost, unrestored = self.engine.lost, []
        if lost and again is not None:
            versions = self._restored(versions, lost, again)
        elif lost:
            unrestored = lost.vbuckets()
        by_vbucket: dict[int, int] = {}
        for unit, seqno in consistent.items():
            vbucket = unit >> 16
            by_vbucket[vbucket] = min(seqno, by_vbucket.get(vbucket, seqno))
        metadata = {"consistency": sorted(by_vbucket.items()),
                    "errors": [list(e) for e in self.errors],
                    "at_seqno": self.at_seqno if not isinstance(self.at_seqno, Mapping)
                    else {str(k): int(v) for k, v in self.at_seqno.items()},
                    "at_time": self.at_time, "history": self.history,
                    "unrestored": unrestored}
        self._table = table(versions, self.manifest, values=self.values,
                            history=self.history, include_deleted=self.include_deleted,
                            collections=self.collections, metadata=metadata)
        return self._table


    def _restored(self, versions: Versions | None, lost: Lost,
                  again: Callable[[StateBuilder], object]) -> Versions | None:
        """``versions`` with the ``lost`` documents' current versions worked out again from
        every version of theirs (a second pass, ``again``)."""
        exact = StateBuilder(at_seqno=self.at_seqno, at_time=self.at_time,
                             values=self.values, errors="skip", history=True)
        exact.engine.only = lost
        again(exact)
        return _joined(versions, lost, exact.engine.finish()[0])


def _joined(versions: Versions | None, lost: Lost | None,
            found: Versions | None) -> Versions | None:
    """``versions`` (less the documents ``lost`` names) and the current version of each
    document of the history ``found``."""
    parts = []
    if versions is not None and len(versions):
        if lost is not None:
            versions = versions.take(np.flatnonzero(~lost.matches(
                versions["unit"], versions["cid"], versions["key"])))
        parts.append(versions)
    if found is not None and len(found):
        parts.append(found.take(standing(found, include_deleted=True)))
    return concat_versions(parts) if parts else None


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
    return builder.table(_again(source, errors, batch_bytes))


def _again(source, errors: str, batch_bytes: int) -> Callable[[StateBuilder], object] | None:
    """A function that feeds a builder ``source``'s batches once more, where ``source``
    can be read twice: a path, a buffer, a batch or a list or tuple of batches (not a
    file object or an iterator)."""
    if hasattr(source, "read") or not (isinstance(source, (str, os.PathLike, FrameBatch,
                                                            list, tuple))
                                       or _is_buffer(source)):
        return None

    def feed(builder: StateBuilder) -> None:
        for batch in _batches(source, errors, batch_bytes):
            builder.update(batch)
    return feed


def _is_buffer(source) -> bool:
    try:
        memoryview(source)
    except TypeError:
        return False
    return True


def _batches(source, errors: str, batch_bytes: int) -> Iterable[FrameBatch]:
    """The batches of ``source``: a batch, a dump (path, file or buffer), or batches."""
    if isinstance(source, FrameBatch):
        return [source]
    if _is_buffer(source):
        return iter_batches(source, batch_bytes, errors=errors)
    if isinstance(source, (str, os.PathLike)) or hasattr(source, "read") \
            or not isinstance(source, Iterable):
        return iter_batches(source, batch_bytes, errors=errors)
    return source
