"""The two sides of a diff: each one's state (built from its source, or a state table
given), read through the state's public metadata into what the comparison needs: its
collections, and which of its documents it cannot vouch for.

A side vouches for a document only up to its vbucket's consistent seqno (the end of the
last complete snapshot, as ``consistency`` reports it): a version above it comes from a
snapshot that did not arrive whole. A vbucket whose versions a restart made current again
and the state could not restore (``restored`` false) vouches for nothing, and neither
does a document whose value did not decode.

A side's keys must be read as the other's: where one side's keys were read with their
collection ids and the other's without, because nothing in its stream said whether they
carry one, the comparison is refused (``alike``) rather than made with an id's byte in
every key.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import unique as distinct
from ..documents import consistency, state_errors
from ..documents.api import state
from ..documents.output import metadata
from ..errors import DcpFormatError, SkippedRegion, text
from ..io.kinds import Kind, classify, is_parquet_path
from ..threads import beside
from .rules import labels

#: The sides, in the order ``diff`` takes them.
SIDES = ("source", "target")


class Side:
    """One side's state table and what its metadata says, with the columns the comparison
    reads as single arrays."""

    def __init__(self, name: str, table: pa.Table):
        self.name, self.table = name, table
        points = consistency(table)
        #: vbucket -> consistent seqno
        self.points = dict(zip(points["vbucket"].to_pylist(),
                               points["consistent_seqno"].to_pylist()))
        restored = points["restored"].to_pylist()
        #: the vbuckets whose documents may lack a version a restart made current again
        self.unrestored = sorted(vb for vb, ok in zip(self.points, restored) if not ok)
        self.errors: list[SkippedRegion] = state_errors(table)
        #: whether its keys were read with their collection ids: True, False, or None
        #: where read without them, its stream not saying whether they carry one
        self.keyed: bool | None = metadata(table).get("collections")
        self.rows = table.num_rows
        self._columns: dict[str, object] = {}
        self._numbers: dict[str, np.ndarray] = {}

    def column(self, name: str):
        """Column ``name`` as one Arrow array (made once)."""
        if name not in self._columns:
            column = self.table.column(name)
            self._columns[name] = column.chunk(0) if column.num_chunks == 1 else \
                column.combine_chunks()
        return self._columns[name]

    def numbers(self, name: str, dtype=None) -> np.ndarray:
        """Column ``name`` as numpy, nulls as 0 (made once)."""
        if name not in self._numbers:
            column = self.column(name)
            zero = False if pa.types.is_boolean(column.type) else 0
            self._numbers[name] = pc.fill_null(column, zero).to_numpy(zero_copy_only=False)
        out = self._numbers[name]
        return out if dtype is None else out.astype(dtype, copy=False)

    def collections(self) -> tuple[list[tuple], np.ndarray]:
        """The collections of the rows, each ``(id, scope, name)`` as the state names it,
        and each row's index into them."""
        cid = self.numbers("collection_id", np.uint32)
        unique, first, inverse = distinct(cid, first=True, inverse=True)
        at = pa.array(first)
        return (list(zip(unique.tolist(), self.column("scope").take(at).to_pylist(),
                         self.column("collection").take(at).to_pylist())),
                inverse.reshape(-1))

    def labels(self, other: Side) -> tuple[list[tuple], np.ndarray]:
        """The collections of the rows (``rules.labels``, beside the ``other`` side's) and
        each row's index into them."""
        mine, inverse = self.collections()
        return labels(mine, other.collections()[0]), inverse

    def uncertain(self, other: Side, *, values: bool) -> np.ndarray:
        """The rows this side cannot vouch for: above their vbucket's consistent seqno, in
        a vbucket it could not restore, with a value that did not decode (``values``), or
        in a vbucket of the same number that the ``other`` side could not restore (where
        the two clusters place keys alike, the other side may lack them there)."""
        vbucket = self.numbers("vbucket", np.int64)
        limit = np.zeros(1 << 16, np.uint64)
        for vb, seqno in self.points.items():
            limit[vb] = seqno
        out = self.numbers("by_seqno", np.uint64) > limit[vbucket]
        lost = sorted({*self.unrestored, *other.unrestored})
        if lost:
            out |= np.isin(vbucket, lost)
        if values:
            out |= self.column("body").is_null().to_numpy(zero_copy_only=False)
        return out


def state_of(source, side: str, options: dict) -> pa.Table:
    """The state of one side, tombstones included; a damaged side in strict mode raises
    ``DcpFormatError`` naming the side and the offset."""
    if classify(source, sniff=False).kind is Kind.TABLE:
        return given(source, side, options)
    if isinstance(source, (str, os.PathLike)) and is_parquet_path(source):
        return given(table_file(source), side, options)
    try:
        return state(source, include_deleted=True, **options)
    except DcpFormatError as e:
        raise type(e)(e.offset, text("diff_side", side=side, reason=e.reason)) from None


def table_file(path) -> pa.Table:
    """A state table written to a Parquet file (``dcpfast state -o``), its metadata with
    it."""
    import pyarrow.parquet as pq  # here: every command imports this module at its start

    return pq.read_table(path)


def given(table: pa.Table, side: str, options: dict) -> pa.Table:
    """A state table given as a side, checked: one version per document, its values when
    they are compared, and no cut asked of it (it carries its own)."""
    consistency(table)                           # a state table: it has the metadata
    if "valid_to_seqno" in table.column_names:
        raise ValueError(f"the {side} is a history table: give the state of one version "
                         "per document")
    if options["values"] and "body" not in table.column_names:
        raise ValueError(f"the {side} state has no values: build it with values=True, or "
                         "compare fields without body and xattrs")
    if options["at_seqno"] is not None or options["at_time"] is not None:
        raise ValueError(f"the {side} is a state table, cut when it was built: at_seqno "
                         "and at_time apply to sources read by diff")
    if metadata(table).get("include_deleted") is not True:
        raise ValueError(text("diff_without_tombstones", side=side))
    return table


def alike(a: Side, b: Side) -> None:
    """Refuse sides whose keys were read differently where one was read without collection
    ids only because its stream did not say whether they carry one (and it holds keys):
    each of its keys may begin with its collection id's byte."""
    for mine, other in ((a, b), (b, a)):
        if mine.keyed is None and mine.rows and other.keyed:
            raise ValueError(text("diff_keys_unsaid", side=mine.name, other=other.name))


def sides(source, target, options: dict, *, together: bool) -> tuple[Side, Side]:
    """Both sides' states, built at the same time when ``together``."""
    return both(lambda: state_of(source, "source", options),
                lambda: state_of(target, "target", options), together=together)


def both(make_source, make_target, *, together: bool) -> tuple[Side, Side]:
    """The sides whose state tables ``make_source()`` and ``make_target()`` build: at the
    same time (the target's on the thread ``threads.beside`` keeps, which waits on no
    worker of those the states' scans use) when ``together``, else one after the other."""
    if not together:
        return Side("source", make_source()), Side("target", make_target())
    other = beside(make_target)
    try:
        first = make_source()
    except Exception:
        with contextlib.suppress(Exception):       # the target's end is waited for
            other()
        raise
    return Side("source", first), Side("target", other())
