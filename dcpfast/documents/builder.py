"""``StateBuilder``, which ``state`` runs: the options checked, batches fed to the engine, the
second pass for documents a restart makes current again, and the table with what it can
and cannot claim in its metadata."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeVar

import numpy as np
import pyarrow as pa

from .. import _core
from .. import protocol as P
from .._core.contract import W_SKIP
from ..batch import FrameBatch
from ..errors import DcpFormatError, checked_mode, is_capture_gap, text
from ..events import Manifest, read_events
from ..streams import opens
from ..threads import ahead, threads_of
from .engine import Engine
from .options import chosen, flag, limits, nanoseconds, seqnos
from .output import known_names, table, unknown_names
from .problems import Problems
from .restarts import Placer
from .rows import NEEDED, batch_rows, concat, losses, merged, subset, take
from .segments import dense
from .versions import Lost, Versions, standing
from .versions import concat as concat_versions

#: DCP Open flags after which a stream lacks something: the values, the tombstones of its
#: initial backfill.
_NO_VALUE = P.OpenFlag.NO_VALUE | P.OpenFlag.NO_VALUE_WITH_UNDERLYING_DATATYPE
_U64_MAX = 2**64 - 1
#: The opcodes of frames that say whether a stream's keys carry a collection id: a HELLO
#: (its features), and the messages only a stream with collections has.
_SAYS_KEYS = np.zeros(256, bool)
_SAYS_KEYS[[P.Opcode.HELLO, *P.COLLECTIONS_ONLY]] = True
#: The kinds of problem that concern the whole stream, not one vbucket: every share of a
#: state split among processes finds them (``StateBuilder.share``).
_WHOLE_STREAM = frozenset({"skipped_bytes", "capture_gap", "damaged_event",
                           "malformed_response", "unplaced_rollback"})
#: A problem a state meets: (offset, length, reason, kind, what a strict error adds to
#: the reason), the kind one of ``problems.KINDS``.
Problem = tuple[int, int, str, str, str]
#: What a strict error about the stream's own frames adds: how to go on.
_HINT = text("state_skip_hint")
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


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _in_working_memory(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """``method`` run with numpy's large arrays in the state engine's working memory
    (``_core.memory.numpy_spans``): its whole-array passes make and drop hundreds of
    arrays a stretch, whose pages stay resident there for the next pass instead of being
    faulted in afresh. The one place where the engine enters it, so that every way of
    feeding it (``state``, the command, the shares of processes, Spark's partitions) runs
    alike; a method called within another enters it again at little cost."""
    @functools.wraps(method)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with _core.memory.numpy_spans():
            return method(*args, **kwargs)
    return run


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
        #: whether the keys of the batches fed were read with their collection ids (None
        #: before the first), and whether the stream said whether they carry one
        self._keyed: bool | None = None
        self._said = False
        self._frames = 0
        self._table: pa.Table | None = None
        #: a flag per vbucket id: the vbuckets whose documents this builder keeps (None:
        #: all), and whether it reports the problems of the whole stream (``share``)
        self._vbuckets: np.ndarray | None = None
        self._lead = True

    def share(self, vbuckets: np.ndarray, *, lead: bool) -> StateBuilder:
        """Keep the documents and streams of ``vbuckets`` only (a flag per vbucket id,
        65,536): one share of a state split by vbucket among processes. Every frame is
        still read for what concerns the whole stream (collection names, responses
        placed on their streams, bytes skipped); ``lead``: this share reports those
        problems, which every share finds."""
        self._vbuckets, self._lead = np.asarray(vbuckets, bool), lead
        return self

    def client(self, batch: FrameBatch) -> StateBuilder:
        """Take a batch of the client's side (a capture's client-to-server direction): its
        Stream Requests place the responses, its DCP Opens say whether the streams carry
        values and their backfill's tombstones."""
        for flags in opens(batch).column("flags").to_pylist():
            self.open_flags |= flags
        self._heard(batch)
        self.placer.tracker.update(batch)
        return self

    def _heard(self, batch: FrameBatch) -> None:
        """Note whether ``batch`` (of either side) says whether the stream's keys carry a
        collection id, until one does."""
        if not self._said and len(batch):
            self._said = bool(_SAYS_KEYS[batch["opcode"]].any())

    @_in_working_memory
    def update(self, batch: FrameBatch) -> StateBuilder:
        """Add the next batch of the stream."""
        if self._table is not None:
            raise RuntimeError("this StateBuilder has given its table; start a new one")
        scanned = list(batch.errors)              # what the scan skipped
        self._keyed = bool(self._keyed) or batch.collections
        if not self._keyed:
            self._heard(batch)
        events, event_errors = read_events(batch)
        self.manifest.update(events)
        shared = self._vbuckets
        rows, value_errors = batch_rows(
            batch, self._frames, values=self.values, events=events,
            threads=state_threads(self.threads),
            valued=None if shared is None else shared[batch["vbucket"]])
        kept = None if shared is None else np.flatnonzero(
            shared[rows.columns["unit"] >> np.uint32(16)] & (rows.columns["what"] != W_SKIP))
        own = rows if kept is None else subset(rows, kept)
        # the documents' ids, from the batch's own columns (one engine only: the index is
        # no one else's then), worked out on another thread while the rows are placed and
        # walked where there is one
        engine = self.engine
        keys: Callable[[], tuple[np.ndarray, int]] | None = None
        if self.exact is None and state_threads(self.threads) > 1:
            keys = ahead(lambda: engine.keys(own))
        elif self.exact is None:
            known = engine.keys(own)
            keys = lambda: known  # noqa: E731
        try:
            restarts, response_errors = self.placer.place(batch, self._frames, rows,
                                                          values=self.values)
            if kept is not None and shared is not None:   # this share's rows as placing
                # left them (the requests)
                own = subset(rows, kept)
                restarts = take(restarts, np.flatnonzero(
                    shared[restarts.columns["unit"] >> np.uint32(16)]))
            extra = [restarts] if len(restarts) else []
            if scanned:
                extra.append(losses(batch, self._frames, scanned))
            self._frames += len(batch)
            self.feed(merged(own, concat(extra)) if extra else own, keys, problems=[
                (*r, "capture_gap" if kind == "skipped_bytes" and is_capture_gap(r.reason)
                 else kind, _HINT) for kind, regions in (
                    ("skipped_bytes", scanned), ("damaged_event", event_errors),
                    ("malformed_response", response_errors), ("damaged_value", value_errors))
                for r in regions])
        finally:
            if keys is not None:         # the index is left alone once this returns
                with contextlib.suppress(BaseException):
                    keys()
        return self

    @_in_working_memory
    def feed(self, rows, keys: Callable[[], tuple[np.ndarray, int]] | None = None,
             problems: Iterable[Problem] = ()) -> list[Problem]:
        """Take the next rows of the stream (what ``update`` makes of a batch); ``keys``
        gives their document ids worked out beforehand (``Engine.keys``). ``problems``,
        met while making the rows, are reported with those the engine finds in them
        (``_report``: the first raised in strict mode, kept in skip mode); returns what
        was reported, in stream order."""
        if self.exact is None:
            self.engine.update(rows, keys)
        else:
            exact = dense(rows.unit, self.exact_units)[1]
            self.engine.update(take(rows, np.flatnonzero(~exact)))
            self.exact.update(take(rows, np.flatnonzero(exact)))
        found = [*problems, *self.engine.problems]
        self.engine.problems.clear()
        return self._report(found)

    def _report(self, problems: list[Problem]) -> list[Problem]:
        """Raise the first of ``problems`` ((offset, length, reason, kind, strict note)) in
        strict mode; count and keep them in skip mode, in stream order. Returns them, in
        that order."""
        if not self._lead and self.mode == "skip":     # the lead share reports these
            problems = [p for p in problems if p[3] not in _WHOLE_STREAM]
        if not problems:
            return problems
        problems.sort(key=lambda p: p[0])
        if self.mode == "strict":
            offset, _, reason, _, note = problems[0]
            raise DcpFormatError(offset, reason + note)
        self.problems.add((p[:3], p[3]) for p in problems)
        return problems

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
        self.placed()
        return self.result(again)

    def placed(self) -> None:
        """Report each Rollback response that found no stream (at the stream's end: a
        response is placed by what comes after it too)."""
        self._report([(offset, length, text("state_unplaced_rollback", seqno=seqno),
                       "unplaced_rollback", _HINT)
                      for offset, length, seqno in self.placer.unplaced()])

    @_in_working_memory
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
                    "include_deleted": self.include_deleted, "collections": self._keys(),
                    "unrestored": unrestored,
                    "lost": sorted({u >> 16 for u in lost_units}),
                    "lacks": self._lacks(floors)}
        self._table = table(versions, self.engine.index, self.manifest, values=self.values,
                            history=self.history, include_deleted=self.include_deleted,
                            collections=self.only_collections, metadata=metadata)
        return self._table

    def _keys(self) -> bool | None:
        """Whether the keys were read with their collection ids: True, False where the
        stream said whether they carry one (a HELLO, a collection event, a DCP Open asking
        for collections), None where it did not (they may carry one)."""
        if self._keyed:
            return True
        said = self._said or bool(self.open_flags & P.OPEN_FLAG_COLLECTIONS)
        return False if said else None

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
        if self._vbuckets is not None:
            exact.share(self._vbuckets, lead=False)
        exact.engine = Engine(limit=self.engine.limit, at_time=self.at_time, history=True,
                              only=lost, index=self.engine.index,
                              futures=self.engine.futures())
        again(exact)
        return _joined(versions, lost, exact.engine.finish()[0])


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
