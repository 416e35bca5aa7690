"""The table ``state`` returns: its schema, the rows built from the engine's versions (one
per document, or per version with ``history``), and the metadata that travels in its
schema (each vbucket's consistent seqno, the problems skipped), with readers for both.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from .. import _core
from .._core.contract import W_COMMIT, W_MUTATION, ValidityRequest, ValidityResult
from ..arrays import unique as distinct
from ..arrow import binary_column, cast_map, masked
from ..buffers import pooled, pooled_take
from ..errors import SkippedRegion
from ..events import Manifest
from ..values import text_or_null
from . import bodies
from .versions import ALIVE, DISCARDED, Versions, tombstones

#: The schema metadata key of the state's metadata (JSON).
METADATA_KEY = b"dcpfast.state"


def state_schema(*, values: bool = True, history: bool = False):
    """The Arrow schema of ``state``'s table (without its metadata)."""
    time = pa.timestamp("ns", tz="UTC")
    fields = [("vbucket", pa.uint16()), ("collection_id", pa.uint32()),
              ("scope", pa.string()), ("collection", pa.string()), ("key", pa.binary()),
              ("key_str", pa.string()), ("by_seqno", pa.uint64()), ("rev_seqno", pa.uint64()),
              ("cas", pa.uint64()), ("flags", pa.uint32()), ("expiration", pa.uint32()),
              ("datatype", pa.uint8()), ("deleted", pa.bool_()), ("delete_time", pa.uint32())]
    if history:
        fields += [("valid_from_seqno", pa.uint64()), ("valid_to_seqno", pa.uint64()),
                   ("valid_from_time", time), ("valid_to_time", time)]
    if values:
        fields += [("body", pa.binary()), ("xattrs", pa.map_(pa.string(), pa.string()))]
    return pa.schema(fields)


def ordered(versions: Versions, index, *, history: bool):
    """The rows to return, in order (vbucket, collection, key bytes, seqno): per document
    its version with the highest seqno (several streams of a vbucket can each hold one),
    or with ``history`` each seqno once, as last sent; whether each row's document is
    the next row's; and the rows' seqnos (None where they were not needed to order them).
    ``index`` is the engine's ``KeyIndex``."""
    doc = versions["doc"]
    if not history and not (versions["unit"] & np.uint32(0xFFFF)).any():
        order, _ = index.order(doc)               # one version per document
        return order, np.zeros(len(order), bool), None
    order, ties, seqno = index.order_versions(doc, versions["seqno"], versions["gpos"])
    same = np.append(ties[1:], False)             # the next row is the same document
    drop = same & np.append(seqno[1:] == seqno[:-1], False) if history else same
    if drop.any():
        order, same, seqno = order[~drop], same[~drop], seqno[~drop]
    if not history:
        same[:] = False
    return order, same, seqno


def keys_of(index, doc: np.ndarray):
    """The keys of documents ``doc`` (ids in ``index``) as a ``binary`` column."""
    offsets, data = index.keys(np.ascontiguousarray(doc, np.int64))
    return binary_column(data, offsets, [None])


#: The numeric columns of ``Versions`` the table shows (or reads to show one).
_SHOWN = ("doc", "unit", "cid", "seqno", "rev", "cas", "flags", "expiration", "datatype",
          "delete_time", "timed_delete", "deleted", "what")


def table(versions: Versions | None, index, manifest: Manifest, *, values: bool,
          history: bool, include_deleted: bool, collections, metadata: dict):
    """The rows of ``state``: ``versions`` (of documents of ``index``) as the schema says,
    named by ``manifest``, filtered by ``collections``, with ``metadata`` in the schema.
    Each Arrow column is taken once, in the final order."""
    schema = state_schema(values=values, history=history)
    if versions is None or not len(versions):
        out = schema.empty_table()
    else:
        order, same, seqno = ordered(versions, index, history=history)
        # the rows the filters keep, then each column they need taken once, in order
        keep = np.ones(len(versions), bool)
        if not include_deleted:
            keep &= ~tombstones(versions)
        if collections is not None:
            keep &= wanted(versions["cid"], manifest, collections)
        keep = keep[order]
        kept = None if keep.all() else np.flatnonzero(keep)
        shown = order if kept is None else order[kept]
        if seqno is None:
            rows = versions.take(shown, numeric=_SHOWN)
            validity = {}
        else:                   # the seqnos and CASes at ``order``, taken once
            rows = versions.take(shown, numeric=[n for n in _SHOWN if n not in ("seqno", "cas")])
            at = pooled_take(versions.columns, ("cas", "gone"), order)
            validity = _validity(seqno, at["cas"], at["gone"], same, kept) if history else {}
            rows["seqno"], rows["cas"] = (seqno, at["cas"]) if kept is None \
                else pooled_take({"seqno": seqno, "cas": at["cas"]}, ("seqno", "cas"),
                                 kept).values()
        rows["key"] = keys_of(index, rows["doc"])
        columns = columns_of(rows, manifest) | validity
        if values:
            body, xattrs = bodies.gather(rows.values, rows["vref"])
            columns["body"] = body.cast(pa.binary())
            columns["xattrs"] = cast_map(xattrs, pa.map_(pa.string(), pa.string()))
        out = pa.table(columns, schema=schema)
    return out.replace_schema_metadata({METADATA_KEY: json.dumps(metadata).encode()})


def columns_of(versions: Versions, manifest: Manifest) -> dict:
    """The columns of the state's rows that ``versions`` (their ``key`` set, a binary
    column) give, named by ``manifest``."""
    what = versions["what"]
    carries_flags = (what == W_MUTATION) | (what == W_COMMIT)
    cid = versions["cid"]
    unique, inverse = distinct(cid, inverse=True)
    scope_ids = [manifest.collection_scopes.get(c) for c in unique.tolist()]
    scopes = pa.array([None if s is None else manifest.scopes.get(s) for s in scope_ids],
                      pa.string()).take(pa.array(inverse))
    names = pa.array([manifest.collections.get(c) for c in unique.tolist()],
                     pa.string()).take(pa.array(inverse))
    key = versions["key"].cast(pa.binary())
    return {
        "vbucket": (versions["unit"] >> np.uint32(16)).astype(np.uint16),
        "collection_id": cid, "scope": scopes, "collection": names, "key": key,
        "key_str": text_or_null(key), "by_seqno": versions["seqno"], "rev_seqno": versions["rev"],
        "cas": versions["cas"],
        "flags": masked(versions["flags"], carries_flags),
        "expiration": masked(versions["expiration"], carries_flags),
        "datatype": versions["datatype"], "deleted": tombstones(versions),
        "delete_time": masked(versions["delete_time"], versions["timed_delete"]),
    }


def _validity(seqno: np.ndarray, cas: np.ndarray, gone: np.ndarray, same: np.ndarray,
              kept: np.ndarray | None) -> dict:
    """``valid_from``/``valid_to`` seqnos and times of versions in order (their ``seqno``,
    ``cas`` and ``gone``; ``same``: the next one is of the same document), of those at
    ``kept`` among them (None: all), as Arrow columns: a version lasts until the next
    version of its document (kept or not), or the collection clear that ended it
    (``_core.state.validity``, one pass, into Arrow's memory pool)."""
    time = pa.timestamp("ns", tz="UTC")
    m = len(seqno) if kept is None else len(kept)
    out = _core.state.validity(ValidityRequest(
        seqno=seqno, cas=cas, gone=gone, same=same.view(np.uint8), kept=kept,
        alive=int(ALIVE), discarded=int(DISCARDED),
        out=ValidityResult(from_seqno=pooled(8 * m).view(np.uint64),
                           from_time=pooled(8 * m).view(np.int64),
                           to_seqno=pooled(8 * m).view(np.uint64),
                           to_time=pooled(8 * m).view(np.int64),
                           seqno_valid=pooled(m).view(np.uint8),
                           time_valid=pooled(m).view(np.uint8))))
    return {"valid_from_seqno": pa.array(out.from_seqno),
            "valid_from_time": pa.array(out.from_time, time),
            "valid_to_seqno": masked(out.to_seqno, out.seqno_valid.view(bool)),
            "valid_to_time": masked(out.to_time, out.time_valid.view(bool), time)}


def _names(manifest: Manifest) -> dict[int, tuple[str | None, str | None]]:
    """Collection id -> (its name, its scope's name), as the manifest knows them."""
    return {c: (name, manifest.scopes.get(manifest.collection_scopes.get(c, -1)))
            for c, name in manifest.collections.items()}


def unknown_names(manifest: Manifest, collections) -> list[str]:
    """The names among ``collections`` (names, ``scope.name`` and ids) that no collection
    the manifest knows goes by."""
    known = {n for name, scope in _names(manifest).values() for n in (name, f"{scope}.{name}")}
    return [c for c in collections or () if isinstance(c, str) and c not in known]


def known_names(manifest: Manifest) -> list[str]:
    """``scope.name`` of every collection the manifest knows."""
    return sorted(f"{scope}.{name}" for name, scope in _names(manifest).values())


def wanted(cid: np.ndarray, manifest: Manifest, collections) -> np.ndarray:
    """Rows whose collection is one of ``collections`` (ids, ``name`` or
    ``scope.collection``)."""
    wanted = set()
    for c in distinct(cid).tolist():
        name = manifest.collections.get(c)
        scope = manifest.scopes.get(manifest.collection_scopes.get(c, -1))
        if c in collections or name in collections or f"{scope}.{name}" in collections:
            wanted.add(c)
    return np.isin(cid, list(wanted))


def metadata(table) -> dict:
    """The metadata ``state`` put in ``table``'s schema."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError("this table carries no dcpfast state metadata")
    return json.loads(raw)


def consistency(table):
    """Per vbucket, what ``table`` (a ``state`` result) can claim: ``consistent_seqno``,
    up to which seqno it is consistent (the end of the last complete snapshot it covers,
    stopped before frames the stream lost); ``restored``, whether every document is as
    the stream left it (false: a restart made current again a version that a one-pass
    ``state`` had let go, see docs/state.md); ``frames_lost``, whether the stream checks
    (or a capture gap, or skipped damage) showed frames lost; ``starts_after``, the seqno
    at or below which the stream sent nothing (0: it began at the beginning), so that a
    document last changed there is not in the table. A ``pyarrow.Table``."""
    meta = metadata(table)
    rows, unrestored = meta["consistency"], set(meta.get("unrestored", ()))
    lost = set(meta.get("lost", ()))
    began = dict(map(tuple, meta.get("lacks", {}).get("history", ())))
    vbuckets = [r[0] for r in rows]
    return pa.table({"vbucket": pa.array(vbuckets, pa.uint16()),
                     "consistent_seqno": pa.array([r[1] for r in rows], pa.uint64()),
                     "restored": pa.array([v not in unrestored for v in vbuckets], pa.bool_()),
                     "frames_lost": pa.array([v in lost for v in vbuckets], pa.bool_()),
                     "starts_after": pa.array([began.get(v, 0) for v in vbuckets],
                                              pa.uint64())})


def state_errors(table) -> list[SkippedRegion]:
    """What ``errors="skip"`` passed over while building ``table``, in stream order: the
    first ``documents.problems.LISTED`` (the metadata's ``error_counts`` and
    ``errors_total`` count them all)."""
    return [SkippedRegion(*e) for e in metadata(table)["errors"]]
