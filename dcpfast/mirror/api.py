"""``mirror``: a Delta table of a bucket's documents, kept equal to the state of its
dumps as they grow, one commit per run.

Each run reads the inputs (``inputs.read``: up to their last whole frame), builds their
state at each vbucket's consistent seqno (a snapshot whose end has not arrived waits,
and a vbucket that lost frames stops before them), compares it with the table by each
document's identity and version, and commits the documents changed, added and gone in
one transaction (``table.commit``). The table after a commit is ``dcpfast.state`` of
everything read at each vbucket's consistent seqno; a run that finds nothing new commits
nothing. A run killed at any moment leaves the last commit as it was, and the next run
commits what it would have.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..documents import consistency
from ..documents.api import state
from ..documents.output import metadata
from ..events import Manifest
from .inputs import Read, check, files_of, read, read_on
from .table import (
    APP_ID,
    IDENTITY,
    VERSION_IDENTITY,
    as_history,
    as_table,
    commit,
    extended,
    held_in,
    last_run,
    merged,
    opened,
    rows_in,
)
from .tail import (
    Rebuild,
    Tail,
    TailState,
    above,
    built,
    frames_of,
    tail_after,
    tail_state,
    unfinished,
)

#: A document's version: unchanged where these are.
VERSION = ("by_seqno", "cas", "rev_seqno")
#: A version in the history table: unchanged where its end is.
HISTORY_VERSION = ("valid_to_seqno",)


@dataclass(frozen=True)
class MirrorRun:
    """What a run did: the table's ``version`` committed (None: nothing new), the run's
    number, the documents ``written`` (added or changed) and ``deleted``, the table's
    ``documents``, each vbucket's consistent seqno, the vbuckets that lost frames, and
    the bytes of a frame still being written at the end of the inputs (``waiting``), the
    history table's version committed (None: none, or nothing new), and the bytes of the
    stream the run read (``read``: the new ones alone where it read on from where the
    last run stood), and the vbuckets a rollback in the new frames made it build anew
    from the stream's start (``rebuilt``)."""

    table: str
    version: int | None
    run: int
    written: int
    deleted: int
    documents: int
    consistency: list = field(default_factory=list)
    lost: list = field(default_factory=list)
    waiting: int = 0
    history_version: int | None = None
    read: int = 0
    rebuilt: list = field(default_factory=list)


def mirror(inputs, table: str, *, history: str | None = None, values: bool = True,
           errors: str = "skip", collections: bool | None = None,
           until: dict[str, int] | None = None) -> MirrorRun:
    """Apply what ``inputs`` (dumps, directories of dumps read in name order as one
    stream, or one capture or compressed dump) hold to the Delta table at ``table``
    (created by the first run) and commit it. See docs/mirror.md.

    ``history``: a second Delta table, of every version with when it was current
    (``__START_AT``, ``__END_AT``), committed first. ``values``: the documents' bodies and
    xattrs too. ``errors``: "skip" (the default) passes over damaged frames and stops a
    vbucket that lost frames at its consistent seqno; "strict" refuses them
    (``DcpFormatError``), the tables unchanged. ``until``: each file's bytes to read at
    most (its absolute path -> bytes; a file it does not name: those applied before),
    where a stream delivered frames up to there (``dcpfast.spark.mirror_stream``)."""
    uri = os.fspath(table)
    files = files_of(inputs)
    existing = opened(uri)
    before = last_run(existing) if existing is not None else None
    kept = opened(os.fspath(history)) if history is not None else None
    if kept is not None:
        last_run(kept)                          # a history table no mirror wrote: refused
    applied = before["inputs"] if before is not None else []
    check(files, applied)
    number = before["run"] + 1 if before is not None else 1
    if before is not None:
        on = _read_on(uri, existing, files, before, number, values=values, errors=errors,
                      collections=collections, until=until,
                      history=(os.fspath(history), kept) if history is not None else None)
        if on is not None:
            return on
    got = read(files, applied, until)
    rows, cut, lost, tail = _state(got, values=values, errors=errors,
                                   collections=collections)
    versions = None if history is None else as_history(
        state(got.data, history=True, at_seqno=cut, values=values, errors=errors,
              collections=collections).replace_schema_metadata(None))
    points = sorted([vb, s] for vb, s in cut.items())
    waiting, taken = got.waiting, len(got.data)
    run = {"run": number, "inputs": got.positions, "consistency": points, "lost": lost,
           "waiting": waiting, "read": taken,
           "tail": tail.to_json() if tail is not None else None}
    del got                     # the inputs' bytes let go before the tables are written
    history_version = None
    if history is not None:
        history_version, _, _ = _applied(os.fspath(history), kept, versions, run,
                                         VERSION_IDENTITY, HISTORY_VERSION)
    version, written, deleted = _applied(uri, existing, rows, run, IDENTITY, VERSION)
    return MirrorRun(uri, version, number if version is not None else number - 1, written,
                     deleted, rows.num_rows, points, lost, waiting, history_version, taken)


def _read_on(uri: str, existing, files: list[str], before: dict, number: int, *,
             values: bool, errors: str, collections: bool | None,
             until: dict[str, int] | None, history: tuple[str, Any] | None
             ) -> MirrorRun | None:
    """The run that reads the stream on from where the last one left its ``Tail`` and
    commits what the new frames change (``history``: the history table's path and the
    table, its new versions first); None where it cannot (no tail kept, inputs that are
    not the stream applied grown, new frames that cannot be applied alone, a history
    table that is not at the last run)."""
    if before.get("tail") is None:
        return None
    if history is not None and (history[1] is None or history[1].transaction_version(
            APP_ID) != number - 1):
        return None
    tail = Tail.from_json(before["tail"])
    if collections is not None and collections != tail.keyed:
        return None
    got = read_on(files, before["inputs"], tail.offset, until)
    if got is None:
        return None
    cut = {int(vb): int(s) for vb, s in before["consistency"]}
    found = tail_state(got.data, got.base, tail, cut, values=values, errors=errors,
                       history=history is not None)
    if isinstance(found, Rebuild):          # vbuckets rolled back: built anew from the start
        whole = read_on(files, before["inputs"], 0, until) if got.base else got
        if whole is None:
            return None
        got = whole
        found = tail_state(got.data, 0, tail, cut, values=values, errors=errors,
                           rebuild=found.vbuckets)
    if not isinstance(found, TailState):
        return None
    written, gone = _rebuilt(existing, found) if found.rebuilt else \
        (as_table(found.written), as_table(found.gone).select(list(IDENTITY)))
    if found.cleared:
        gone = pa.concat_tables([gone, _emptied(existing, found.cleared, written, gone)])
    points = sorted([vb, s] for vb, s in found.cut.items())
    if not written.num_rows and not gone.num_rows:
        return MirrorRun(uri, None, number - 1, 0, 0, rows_in(existing), points,
                         before["lost"], got.waiting, None, len(got.data),
                         sorted(found.rebuilt))
    run = {"run": number, "inputs": got.positions, "consistency": points,
           "lost": before["lost"], "waiting": got.waiting, "read": len(got.data),
           "tail": found.tail.to_json()}
    history_version = None
    if history is not None and found.versions is not None and (
            found.versions.num_rows or found.cleared):
        history_version = extended(history[0], history[1], as_history(found.versions), run,
                                   found.cleared)
    version, counts = merged(uri, existing, written, gone, run)
    documents = rows_in(existing)
    return MirrorRun(uri, version, number, written.num_rows, counts["deleted"], documents,
                     points, before["lost"], got.waiting, history_version, len(got.data),
                     sorted(found.rebuilt))


def _rebuilt(existing, found: TailState) -> tuple[pa.Table, pa.Table]:
    """The rows the run writes and the documents it deletes where ``found`` built some
    vbuckets anew: theirs by difference with what the table holds of them (as
    ``_differences``), the others' as ``found`` has them."""
    anew = pa.array(sorted(found.rebuilt), pa.uint16())
    live = as_table(found.written.filter(pc.is_in(found.written["vbucket"], anew)))
    changed, gone = _differences(existing, live, IDENTITY, VERSION,
                                 [("vbucket", "in", sorted(found.rebuilt))])
    others = pc.invert(pc.is_in(found.written["vbucket"], anew))
    dead = pc.invert(pc.is_in(found.gone["vbucket"], anew))
    return (pa.concat_tables([as_table(found.written.filter(others)), changed]),
            pa.concat_tables([as_table(found.gone.filter(dead)).select(list(IDENTITY)), gone]))


def _emptied(existing, cleared: tuple[tuple[int, int, int], ...], written: pa.Table,
             gone: pa.Table) -> pa.Table:
    """The identities of the documents the table holds in the collections ``cleared``
    ((vbucket, collection id, seqno)) that neither ``written`` nor ``gone`` name."""
    held = held_in(existing, cleared, list(IDENTITY)).select(list(IDENTITY))
    named = pa.concat_tables([written.select(list(IDENTITY)), gone])
    return held.join(named, list(IDENTITY), join_type="left anti")


def _applied(uri: str, existing, rows: pa.Table, run: dict, identity: tuple[str, ...],
             version: tuple[str, ...]) -> tuple[int | None, int, int]:
    """Commit ``rows`` to the table at ``uri`` (``existing``: it, or None): all of them
    to a new table, else the difference on ``identity`` and ``version``; the version
    committed (None: nothing new), the rows written and deleted."""
    if existing is None:
        return commit(uri, None, rows, rows.slice(0, 0), rows.slice(0, 0), run,
                      identity), rows.num_rows, 0
    changed, gone = _differences(existing, rows, identity, version)
    if not changed.num_rows and not gone.num_rows:
        return None, 0, 0
    return commit(uri, existing, None, changed, gone, run, identity), changed.num_rows, \
        gone.num_rows


def _state(got: Read, *, values: bool, errors: str, collections: bool | None
           ) -> tuple[pa.Table, dict[int, int], list[int], Tail | None]:
    """The state of what ``got`` read at each vbucket's consistent seqno, as the table
    holds it; the consistent seqnos; the vbuckets that lost frames; where a later run
    reads on from (None: a capture or compressed dump, read whole each run).

    Where a stream ends inside a snapshot (a dump still being written) the consistent
    seqnos come first from a state without the values, then the state at them; else
    the state at the end is the state at them, built once (again at them where a loss
    stopped a vbucket before its end)."""
    frames = None if got.whole else frames_of(got.data, collections)

    def state_of(at_seqno=None, with_values: bool = values) -> tuple[pa.Table, Manifest]:
        return built(got.data, values=with_values, errors=errors, collections=collections,
                     at_seqno=at_seqno)
    if frames is None or unfinished(frames):
        cut = _cut(state_of(with_values=False)[0])
        rows, manifest = state_of(cut)
    else:
        rows, manifest = state_of()
        cut = _cut(rows)
        if above(frames, cut):
            rows, manifest = state_of(cut)
    meta = metadata(rows)
    lost = meta.get("lost", [])
    tail = None if frames is None else tail_after(
        frames, 0, len(got.data), cut, lost, manifest, meta.get("collections"))
    return as_table(rows.replace_schema_metadata(None)), cut, lost, tail


def _cut(rows: pa.Table) -> dict[int, int]:
    """Each vbucket's consistent seqno in a state's ``rows``."""
    return {r["vbucket"]: r["consistent_seqno"] for r in consistency(rows).to_pylist()}


def _differences(existing, rows: pa.Table, identity: tuple[str, ...],
                 version: tuple[str, ...], filters: list | None = None
                 ) -> tuple[pa.Table, pa.Table]:
    """The rows of ``rows`` that the table lacks or holds with another ``version``, and
    the ``identity`` of the rows the table holds that ``rows`` lacks (of the table's rows
    ``filters`` keeps: deltalake's filters)."""
    held = existing.to_pyarrow_table(columns=[*identity, *version], filters=filters)
    now = rows.select([*identity, *version]).append_column(
        "_row", pa.array(range(rows.num_rows), pa.int64()))
    was = held.rename_columns([*identity, *(f"_was_{c}" for c in version)]) \
        .append_column("_held", pa.array([True] * held.num_rows, pa.bool_()))
    joined = now.join(was, list(identity), join_type="full outer")
    row = joined["_row"]
    same = pc.and_(pc.is_valid(row), pc.is_valid(joined["_held"]))
    for c in version:
        equal = pc.equal(joined[c], joined[f"_was_{c}"])
        both_null = pc.and_(pc.is_null(joined[c]), pc.is_null(joined[f"_was_{c}"]))
        same = pc.and_(same, pc.or_(pc.fill_null(equal, False), both_null))
    written = joined.filter(pc.and_(pc.is_valid(row), pc.invert(same)))["_row"]
    gone = joined.filter(pc.is_null(row)).select(list(identity))
    return rows.take(np.sort(written.to_numpy())), gone
