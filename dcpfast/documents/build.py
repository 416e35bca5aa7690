"""``state`` and ``StateBuilder``: the options checked, batches fed to the engine, the
second pass for documents a restart makes current again, and the table with what it can
and cannot claim in its metadata."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from .. import protocol as P
from ..batch import FrameBatch, parts_of
from ..errors import DcpFormatError, SkippedRegion, checked_mode, is_capture_gap, text
from ..events import Manifest, system_events
from ..io import DEFAULT_BATCH_BYTES, is_capture
from ..io.dumps import iter_batches
from ..pcap import CLIENT_TO_SERVER, read_pcap
from ..pool import ahead, threads_of
from ..streams import opens
from .engine import Engine
from .options import chosen, flag, limits, nanoseconds, positive, scan_collections, seqnos
from .output import known_names, table, unknown_names
from .problems import Problems
from .restarts import Placer
from .rows import NEEDED, batch_rows, concat, losses, merged, take
from .segments import dense
from .versions import Lost, Versions, standing
from .versions import concat as concat_versions

if TYPE_CHECKING:
    import pyarrow as pa

#: DCP Open flags after which a stream lacks something: the values, the tombstones of its
#: initial backfill.
_NO_VALUE = P.OpenFlag.NO_VALUE | P.OpenFlag.NO_VALUE_WITH_UNDERLYING_DATATYPE
_U64_MAX = 2**64 - 1
#: The columns the state scans of a path or buffer.
SCANNED = (*NEEDED, "collection_id")
#: The most threads a state uses: the engine takes the batches on one; one more reads and
#: scans the next batch meanwhile (a batch scans several times faster than the engine
#: takes it); the values of a batch decode on up to this many. On a 16-core machine more
#: threads made the state slower, and some states slower than on one (docs/benchmarks.md).
MOST_THREADS = 4


def state_threads(threads: int | None) -> int:
    """The threads a state uses: ``threads`` (None: the cores idle now), at most
    ``MOST_THREADS``."""
    return min(threads_of(threads), MOST_THREADS)


class StateBuilder:
    """``state`` batch by batch: ``update`` with each batch of one stream, in order, then
    ``table``. Options as for ``state``, checked here; ``client(batch)`` takes the
    client's side of a capture (its requests place responses, its DCP Open says what the
    streams leave out). ``exact_units`` names the streams (vbucket << 16 | stream id)
    known beforehand to restart, whose documents keep every version so that ``table``
    needs no second pass for them (Spark's partitions use it). ``threads`` decode the
    values of a batch (None: the cores idle now)."""

    def __init__(self, *, at_seqno=None, at_time=None, include_deleted: bool = False,
                 values: bool = True, only_collections=None, errors: str = "strict",
                 history: bool = False, exact_units: Iterable[int] = (),
                 threads: int | None = None):
        self.mode = checked_mode(errors)
        self.at_seqno = seqnos(at_seqno)
        self.at_time = None if at_time is None else nanoseconds(at_time)
        self.include_deleted = flag("include_deleted", include_deleted)
        self.values = flag("values", values)
        self.history = flag("history", history)
        self.threads = None if threads is None else state_threads(threads)
        self.only_collections = chosen(only_collections)
        self.engine = Engine(limit=limits(self.at_seqno), at_time=self.at_time,
                             history=self.history, include_deleted=self.include_deleted)
        #: the streams (vbucket << 16 | stream id) known beforehand to need every version
        #: of their documents to be exact (``table``), and the engine that keeps them
        self.exact_units = np.array(sorted(set(exact_units)), np.uint32)
        self.exact: Engine | None = None
        if len(self.exact_units) and not self.history:
            self.exact = Engine(limit=self.engine.limit, at_time=self.at_time, history=True,
                                index=self.engine.index)
            self.exact.problems = self.engine.problems
        self.placer = Placer()
        self.manifest = Manifest()
        self.problems = Problems()
        self.open_flags = 0                       # the DCP Open flags seen (client side)
        self._frames = 0
        self._table: pa.Table | None = None

    def client(self, batch: FrameBatch) -> StateBuilder:
        """Take a batch of the client's side (a capture's client-to-server direction): its
        Stream Requests place the responses, its DCP Opens say whether the streams carry
        values and their backfill's tombstones."""
        for flags in opens(batch).column("flags").to_pylist():
            self.open_flags |= flags
        self.placer.tracker.update(batch)
        return self

    def update(self, batch: FrameBatch) -> StateBuilder:
        """Add the next batch of the stream."""
        if self._table is not None:
            raise RuntimeError("this StateBuilder has given its table; start a new one")
        scanned = list(batch.errors)              # what the scan skipped
        mine = FrameBatch(**{**parts_of(batch), "errors": list(scanned), "mode": "skip"})
        events = system_events(mine)
        event_errors = _new(mine.errors, scanned)
        self.manifest.update(events)
        rows = batch_rows(mine, self._frames, values=self.values, events=events,
                          threads=state_threads(self.threads))
        # the documents' ids, from the batch's own columns (one engine only: the index is
        # no one else's then), worked out on another thread while the rows are placed and
        # walked where there is one
        engine = self.engine
        keys: Callable[[], tuple[np.ndarray, int]] | None = None
        if self.exact is None and state_threads(self.threads) > 1:
            keys = ahead(lambda: engine.keys(rows))
        elif self.exact is None:
            known = engine.keys(rows)
            keys = lambda: known  # noqa: E731
        try:
            value_errors = _new(mine.errors, [*scanned, *event_errors])
            restarts = self.placer.place(mine, self._frames, rows, values=self.values)
            response_errors = _new(mine.errors, [*scanned, *event_errors, *value_errors])
            extra = [restarts] if len(restarts) else []
            if scanned:
                extra.append(losses(batch, self._frames, scanned))
            self._frames += len(batch)
            self.feed(merged(rows, concat(extra)) if extra else rows, keys)
        finally:
            if keys is not None:         # the index is left alone once this returns
                with contextlib.suppress(BaseException):
                    keys()
        hint = text("state_skip_hint")
        found = [(*r, "capture_gap" if kind == "skipped_bytes" and is_capture_gap(r.reason)
                  else kind, hint) for kind, regions in (
            ("skipped_bytes", scanned), ("damaged_event", event_errors),
            ("malformed_response", response_errors), ("damaged_value", value_errors))
            for r in regions]
        self._report(found + self.engine.problems)
        self.engine.problems.clear()
        return self

    def feed(self, rows, keys: Callable[[], tuple[np.ndarray, int]] | None = None) -> None:
        """Take the next rows of the stream (what ``update`` makes of a batch); ``keys``
        gives their document ids worked out beforehand (``Engine.keys``)."""
        if self.exact is None:
            self.engine.update(rows, keys)
            return
        exact = dense(rows.unit, self.exact_units)[1]
        self.engine.update(take(rows, np.flatnonzero(~exact)))
        self.exact.update(take(rows, np.flatnonzero(exact)))

    def _report(self, problems: list[tuple[int, int, str, str, str]]) -> None:
        """Raise the first of ``problems`` ((offset, length, reason, kind, strict note))
        in strict mode; count and keep them in skip mode, in stream order."""
        if not problems:
            return
        problems.sort(key=lambda p: p[0])
        if self.mode == "strict":
            offset, _, reason, _, note = problems[0]
            raise DcpFormatError(offset, reason + note)
        self.problems.add((p[:3], p[3]) for p in problems)

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
        self._report([(offset, length, text("state_unplaced_rollback", seqno=seqno),
                       "unplaced_rollback", text("state_skip_hint"))
                      for offset, length, seqno in self.placer.unplaced()])
        return self.result(again)

    def result(self, again: Callable[[StateBuilder], object] | None = None) -> pa.Table:
        """The state of the rows the engine read (``table`` without the check that every
        Rollback response found its stream)."""
        if self._table is not None:
            return self._table
        missing = unknown_names(self.manifest, self.only_collections)
        if missing:
            raise ValueError(text("state_unknown_collections", names=", ".join(missing),
                                  known=", ".join(known_names(self.manifest)) or "none"))
        versions, consistent = self.engine.finish()
        floors = self.engine.streams.floors()
        lost_units = set(self.engine.streams.lost())
        if self.exact is not None:
            found, more = self.exact.finish()
            versions = _joined(versions, None, found)
            consistent.update(more)
            floors.update(self.exact.streams.floors())
            lost_units |= set(self.exact.streams.lost())
        lost, unrestored = self.engine.lost, []
        if lost and again is not None:
            versions = self._restored(versions, lost, again)
        elif lost:
            unrestored = lost.vbuckets()
        metadata = {"consistency": _per_vbucket(consistent, min),
                    **self.problems.metadata(),
                    "at_seqno": self.at_seqno if not isinstance(self.at_seqno, dict)
                    else {str(k): v for k, v in self.at_seqno.items()},
                    "at_time": self.at_time, "history": self.history,
                    "unrestored": unrestored,
                    "lost": sorted({u >> 16 for u in lost_units}),
                    "lacks": self._lacks(floors)}
        self._table = table(versions, self.engine.index, self.manifest, values=self.values,
                            history=self.history, include_deleted=self.include_deleted,
                            collections=self.only_collections, metadata=metadata)
        return self._table

    def _lacks(self, floors: dict[int, int]) -> dict:
        """What the streams did not send: per vbucket the seqno at or below which its
        stream began (changes there are not in the table), and whether the streams were
        opened without values or without the tombstones of their initial backfill."""
        began = _per_vbucket({u: f for u, f in floors.items() if 0 < f < _U64_MAX}, max)
        return {"history": began, "values": bool(self.open_flags & _NO_VALUE),
                "backfill_tombstones": bool(self.open_flags
                                            & P.OpenFlag.SKIP_DELETES_IN_INITIAL_BACKFILL)}

    def _restored(self, versions: Versions | None, lost: Lost,
                  again: Callable[[StateBuilder], object]) -> Versions | None:
        """``versions`` with the ``lost`` documents' current versions worked out again from
        every version of theirs (a second pass, ``again``)."""
        exact = StateBuilder(at_seqno=self.at_seqno, at_time=self.at_time,
                             values=self.values, errors="skip", history=True,
                             threads=self.threads)
        exact.engine = Engine(limit=self.engine.limit, at_time=self.at_time, history=True,
                              only=lost, index=self.engine.index,
                              futures=self.engine.futures())
        again(exact)
        return _joined(versions, lost, exact.engine.finish()[0])


def _new(now: list[SkippedRegion], before: list[SkippedRegion]) -> list[SkippedRegion]:
    """The regions of ``now`` that ``before`` did not hold, in order."""
    if len(now) == len(before):
        return []
    known = set(before)
    return [r for r in now if r not in known]


def _per_vbucket(values: dict[int, int], pick) -> list[list[int]]:
    """``values`` of streams (vbucket << 16 | stream id) as ``[[vbucket, value], ...]``,
    the streams of a vbucket combined by ``pick``."""
    out: dict[int, int] = {}
    for unit, value in values.items():
        vbucket = unit >> 16
        out[vbucket] = pick(value, out.get(vbucket, value))
    return sorted([vb, value] for vb, value in out.items())


def _joined(versions: Versions | None, lost: Lost | None,
            found: Versions | None) -> Versions | None:
    """``versions`` (less the documents ``lost`` names) and the current version of each
    document of the history ``found``."""
    parts = []
    if versions is not None and len(versions):
        if lost is not None:
            versions = versions.take(np.flatnonzero(~lost.matches(
                versions["unit"], versions["cid"], versions["doc"])))
        parts.append(versions)
    if found is not None and len(found):
        parts.append(found.take(standing(found, include_deleted=True)))
    return concat_versions(parts) if parts else None


# long: the one entry point, its options checked before any work and its docstring whole
def state(source, *, at_seqno=None, at_time=None, include_deleted: bool = False,
          values: bool = True, only_collections=None, collections: bool | None = None,
          errors: str = "strict", history: bool = False,
          batch_bytes: int = DEFAULT_BATCH_BYTES, threads: int | None = None) -> pa.Table:
    """The documents of a DCP stream as they stood at its end, at ``at_seqno`` or at
    ``at_time``: one row per document (``history``: per version). See docs/state.md.

    ``source``: a dump's path (a pcap/pcapng capture's: its server-to-client side is the
    stream, its client-to-server side places the responses), a buffer, a ``FrameBatch``
    or an iterable of the batches of one stream in order (``iter_batches``; a capture's
    batches). ``at_seqno``: an int, or a mapping vbucket -> seqno (vbuckets it leaves out
    give no rows); ``at_time``: a ``datetime``, an ISO 8601 string or nanoseconds since the
    epoch, compared with the CAS's hybrid logical clock. ``include_deleted`` keeps
    tombstones; ``values`` adds ``body`` and ``xattrs``; ``only_collections`` keeps only
    these collections (ids, names or ``scope.collection``; one alone or several).
    ``collections`` and ``batch_bytes`` are how a path or buffer is scanned (as for
    ``iter_batches``); ``threads`` (None: the cores idle now; at most ``MOST_THREADS``)
    read and scan the next batch ahead and decode the values. ``errors``: "strict" raises
    ``DcpFormatError`` at the first damaged or inconsistent frame and where the stream
    checks show lost frames; "skip" goes on, stops each vbucket's consistent seqno before
    the frames it lost, and lists the first problems and counts them all in the table's
    metadata (``state_errors``).
    Each vbucket's consistent seqno, and what its stream did not send: ``consistency``.
    """
    reading = dict(collections=scan_collections(collections),
                   batch_bytes=positive("batch_bytes", batch_bytes),
                   threads=None if threads is None else positive("threads", threads))
    builder = StateBuilder(at_seqno=at_seqno, at_time=at_time, include_deleted=include_deleted,
                           values=values, only_collections=only_collections, errors=errors,
                           history=history, threads=reading["threads"])
    _feed(builder, source, errors, reading)
    return builder.table(_again(source, errors, reading))


def _feed(builder: StateBuilder, source, errors: str, reading: dict) -> None:
    """Feed ``builder`` the batches of ``source``: a capture's client-to-server batches to
    ``client``, the others to ``update``. Where a dump is scanned here and more than one
    core may be used, the next batch is read and scanned on another thread (``ahead``)
    while ``builder`` takes this one."""
    if state_threads(reading["threads"]) == 1 or not _scanned_here(source):
        for batch in _batches(source, errors, {**reading, "threads": 1}):
            _give(builder, batch)
        return
    batches = iter(_batches(source, errors, {**reading, "threads": 1}))
    pending: Callable | None = ahead(lambda: next(batches, None))
    try:
        while pending is not None:
            batch, pending = pending(), None
            if batch is None:
                return
            pending = ahead(lambda: next(batches, None))
            _give(builder, batch)
    finally:
        if pending is not None:       # a batch still being read when the builder raised
            with contextlib.suppress(BaseException):
                pending()


def _give(builder: StateBuilder, batch: FrameBatch) -> None:
    connection = getattr(batch, "connection", None)
    if connection is not None and connection.direction == CLIENT_TO_SERVER:
        builder.client(batch)
    else:
        builder.update(batch)


def _scanned_here(source) -> bool:
    """Whether ``state`` reads and scans ``source`` itself: a dump's path or buffer."""
    return (_is_buffer(source) or isinstance(source, (str, os.PathLike))) \
        and not isinstance(source, FrameBatch)


def _again(source, errors: str, reading: dict) -> Callable[[StateBuilder], object] | None:
    """A function that feeds a builder ``source``'s batches once more, where ``source``
    can be read twice: a path, a buffer, a batch or a list or tuple of batches (not a
    file object or an iterator)."""
    if hasattr(source, "read") or not (isinstance(source, (str, os.PathLike, FrameBatch,
                                                            list, tuple))
                                       or _is_buffer(source)):
        return None
    return lambda builder: _feed(builder, source, errors, reading)


def _is_buffer(source) -> bool:
    try:
        memoryview(source)
    except TypeError:
        return False
    return True


def _batches(source, errors: str, reading: dict) -> Iterable[FrameBatch]:
    """The batches of ``source``: a batch, a capture, a dump (path, file or buffer), or
    batches."""
    if isinstance(source, FrameBatch):
        return [source]
    if isinstance(source, (str, os.PathLike)) and _capture(source):
        return read_pcap(source, collections=reading["collections"], errors=errors,
                         batch_bytes=reading["batch_bytes"], columns=SCANNED)
    if _is_buffer(source) or isinstance(source, (str, os.PathLike)) \
            or hasattr(source, "read") or not isinstance(source, Iterable):
        if _is_buffer(source) and is_capture(_head(source)):
            raise ValueError(text("state_capture_buffer"))
        return iter_batches(source, reading["batch_bytes"], errors=errors,
                            collections=reading["collections"], threads=reading["threads"],
                            columns=SCANNED)
    return source


def _head(buffer) -> bytes:
    """The first bytes of ``buffer``."""
    view = memoryview(buffer)
    return view.tobytes()[:8] if view.nbytes <= 8 or not view.c_contiguous \
        else bytes(view.cast("B")[:8])


def _capture(path) -> bool:
    """Whether the file at ``path`` is a pcap or pcapng capture (an unreadable one is not:
    reading it says why)."""
    try:
        with open(path, "rb") as f:
            return is_capture(f.read(8))
    except OSError:
        return False
