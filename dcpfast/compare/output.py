"""The table ``diff`` returns: its schema, its rows (one per difference, in collection and
key order), and the metadata that travels in its schema (the counts per collection, and
per side its consistent seqnos and what skip mode passed over), with readers for both.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SkippedRegion
from .match import EQUAL, MISMATCH, NOT_COMPARED, Judged
from .rules import KINDS
from .sides import SIDES, Side

#: The schema metadata key of the diff's metadata (JSON).
METADATA_KEY = b"dcpfast.diff"

#: The columns of the summary, after ``scope`` and ``collection``: the documents each
#: side holds (a tombstone only with include_deleted), then each judgement.
COUNTS = ("source", "target", "equal", *KINDS, "not_compared")

#: Each side's columns in the rows, and the state column each comes from.
SIDE_COLUMNS = (("vbucket", "vbucket"), ("collection_id", "collection_id"),
                ("by_seqno", "by_seqno"), ("cas", "cas"))


def diff_schema() -> pa.Schema:
    """The Arrow schema of ``diff``'s rows (without its metadata)."""
    types = {"vbucket": pa.uint16(), "collection_id": pa.uint32(), "by_seqno": pa.uint64(),
             "cas": pa.uint64()}
    fields = [("scope", pa.string()), ("collection", pa.string()), ("key", pa.binary()),
              ("key_str", pa.string()), ("kind", pa.string()),
              ("fields", pa.list_(pa.string()))]
    fields += [(f"{side}_{name}", types[name]) for name, _ in SIDE_COLUMNS for side in SIDES]
    return pa.schema(fields)


def summary_schema() -> pa.Schema:
    """The Arrow schema of ``summary``'s table."""
    return pa.schema([("scope", pa.string()), ("collection", pa.string()),
                      *((name, pa.int64()) for name in COUNTS)])


def table(judged: Judged, a: Side, b: Side, *, include_deleted: bool) -> pa.Table:
    """The rows of the differences of ``judged``, with the metadata."""
    out = np.flatnonzero(judged.kind < len(KINDS))
    code = pa.array(judged.code[out])
    columns = _side_columns(out, judged, a, b)
    columns.update(
        scope=pa.array([lb[0] for lb in judged.labels], pa.string()).take(code),
        collection=pa.array([lb[1] for lb in judged.labels], pa.string()).take(code),
        key=_either(a, judged.source[out], b, judged.target[out], "key"),
        key_str=_either(a, judged.source[out], b, judged.target[out], "key_str"),
        kind=pa.array(KINDS, pa.string()).take(pa.array(judged.kind[out])),
        fields=_fields(out, judged))
    rows = pa.table({name: columns[name] for name in diff_schema().names},
                    schema=diff_schema())
    rows = rows.take(_key_order(code, columns["key"]))
    meta = {"fields": list(judged.fields), "include_deleted": include_deleted,
            "summary": counts(judged),
            "sides": {side.name: {"documents": side.rows,
                                  "consistency": sorted([list(p) for p in side.points.items()]),
                                  "unrestored": side.unrestored,
                                  "errors": [list(e) for e in side.errors]}
                      for side in (a, b)}}
    return rows.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()})


def _side_columns(out: np.ndarray, judged: Judged, a: Side, b: Side) -> dict:
    columns = {}
    for side, rows in ((a, judged.source[out]), (b, judged.target[out])):
        index = pa.array(np.maximum(rows, 0), mask=rows < 0)
        for name, column in SIDE_COLUMNS:
            columns[f"{side.name}_{name}"] = side.column(column).take(index) if side.rows \
                else pa.nulls(len(rows), diff_schema().field(f"{side.name}_{name}").type)
    return columns


def _either(a: Side, ra: np.ndarray, b: Side, rb: np.ndarray, name: str):
    """Column ``name`` of the source's row, else of the target's."""
    kind = a.table.schema.field(name).type
    taken = [side.column(name).take(pa.array(np.maximum(rows, 0), mask=rows < 0))
             if side.rows else pa.nulls(len(rows), kind) for side, rows in ((a, ra), (b, rb))]
    return pc.coalesce(*taken)


def _fields(out: np.ndarray, judged: Judged):
    """The ``fields`` column: the names of the fields that differ, for the mismatches."""
    at = np.full(len(judged.kind), -1, np.int64)
    at[judged.kind == MISMATCH] = np.arange(len(judged.differs))
    which = at[out]
    mine = judged.differs[which[which >= 0]]
    counts = np.zeros(len(out), np.int64)
    counts[which >= 0] = mine.sum(axis=1)
    field = np.nonzero(mine)[1]               # row by row, in field order
    names = pa.array(judged.fields, pa.string()).take(pa.array(field, pa.int64()))
    offsets = pa.array(np.r_[0, np.cumsum(counts)].astype(np.int32))
    return pa.ListArray.from_arrays(offsets, names, mask=pa.array(which < 0))


def _key_order(code, key):
    """The order of rows by collection, then key bytes."""
    return pc.sort_indices(pa.table({"code": code, "key": key}),
                           sort_keys=[("code", "ascending"), ("key", "ascending")])


def counts(judged: Judged) -> list[dict]:
    """Per collection, the documents on each side and how many were judged each way."""
    n = len(judged.labels)

    def count(mask):
        return np.bincount(judged.code[mask], minlength=n).tolist()

    columns = {"source": count(judged.present[0]), "target": count(judged.present[1]),
               "equal": count(judged.kind == EQUAL),
               **{kind: count(judged.kind == i) for i, kind in enumerate(KINDS)},
               "not_compared": count(judged.kind == NOT_COMPARED)}
    return [{"scope": lb[0], "collection": lb[1], **{name: columns[name][i] for name in COUNTS}}
            for i, lb in enumerate(judged.labels)]


def metadata(table: pa.Table) -> dict:
    """The metadata ``diff`` put in ``table``'s schema."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError("this table carries no dcpfast diff metadata")
    return json.loads(raw)


def summary(table: pa.Table) -> pa.Table:
    """Per collection (``scope``, ``collection``), the documents each side holds and how
    many were ``equal``, ``missing_from_source``, ``missing_from_target``, a
    ``mismatch`` or ``not_compared`` (a side could not vouch for them: past its
    consistent seqno, see docs/diff.md): a ``pyarrow.Table`` of ``summary_schema``."""
    return pa.Table.from_pylist(metadata(table)["summary"], schema=summary_schema())


def diff_errors(table: pa.Table) -> dict[str, list[SkippedRegion]]:
    """Per side (``"source"``, ``"target"``), what ``errors="skip"`` passed over while
    building its state, in stream order."""
    return {side: [SkippedRegion(*e) for e in report["errors"]]
            for side, report in metadata(table)["sides"].items()}
