"""The table ``state`` returns: its schema, the rows built from the engine's versions (one
per document, or per version with ``history``), and the metadata that travels in its
schema (each vbucket's consistent seqno, the problems skipped), with readers for both.
"""

from __future__ import annotations

import json

import numpy as np

from ...errors import SkippedRegion
from ..events import Manifest
from .rows import COMMIT, MUTATION
from .versions import ALIVE, DISCARDED, Versions

#: The schema metadata key of the state's metadata (JSON).
METADATA_KEY = b"dcpfast.state"
_HISTORY = ("valid_from_seqno", "valid_to_seqno", "valid_from_time", "valid_to_time")


def state_schema(*, values: bool = True, history: bool = False):
    """The Arrow schema of ``state``'s table (without its metadata)."""
    import pyarrow as pa

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


def merged(versions: Versions, *, history: bool) -> Versions:
    """One vbucket's streams together: per document the version with the highest seqno
    (``history``: each seqno once, as last sent), ordered by vbucket, collection, key,
    seqno."""
    from .versions import group_ids, newest

    vbucket = versions["unit"] >> np.uint32(16)
    group = group_ids(vbucket, versions["cid"], versions["key"])
    if history:
        order = np.lexsort((versions["gpos"], versions["seqno"], group))
        last = np.ones(len(order), bool)
        last[:-1] = (group[order][1:] != group[order][:-1]) | \
            (versions["seqno"][order][1:] != versions["seqno"][order][:-1])
        return versions.take(order[last])
    keep = newest(group, versions["seqno"])
    return versions.take(keep[np.argsort(group[keep], kind="stable")])


def table(versions: Versions | None, manifest: Manifest, *, values: bool, history: bool,
          include_deleted: bool, collections, metadata: dict):
    """The rows of ``state``: ``versions`` as the schema says, named by ``manifest``,
    filtered by ``collections``, with ``metadata`` in the schema."""
    import pyarrow as pa

    schema = state_schema(values=values, history=history)
    if versions is None or not len(versions):
        out = schema.empty_table()
    else:
        versions = merged(versions, history=history)
        columns = _columns(versions, manifest, values=values, history=history)
        out = pa.table(columns, schema=schema)
        keep = np.ones(out.num_rows, bool)
        if not include_deleted:
            keep &= ~out.column("deleted").to_numpy(zero_copy_only=False)
        if collections is not None:
            keep &= _wanted(out, collections)
        if not keep.all():
            out = out.filter(pa.array(keep))
        out = out.sort_by([("vbucket", "ascending"), ("collection_id", "ascending"),
                           ("key", "ascending"), ("by_seqno", "ascending")])
    return out.replace_schema_metadata({METADATA_KEY: json.dumps(metadata).encode()})


def _columns(versions: Versions, manifest: Manifest, *, values: bool, history: bool) -> dict:
    import pyarrow as pa

    n = len(versions)
    what = versions["what"]
    carries_flags = (what == MUTATION) | (what == COMMIT)
    cid = versions["cid"]
    unique, inverse = np.unique(cid, return_inverse=True)
    scope_ids = [manifest.collection_scopes.get(c) for c in unique.tolist()]
    scopes = pa.array([None if s is None else manifest.scopes.get(s) for s in scope_ids],
                      pa.string()).take(pa.array(inverse))
    names = pa.array([manifest.collections.get(c) for c in unique.tolist()],
                     pa.string()).take(pa.array(inverse))
    key = versions["key"].cast(pa.binary())
    columns = {
        "vbucket": (versions["unit"] >> np.uint32(16)).astype(np.uint16),
        "collection_id": cid, "scope": scopes, "collection": names, "key": key,
        "key_str": utf8(key), "by_seqno": versions["seqno"], "rev_seqno": versions["rev"],
        "cas": versions["cas"],
        "flags": pa.array(versions["flags"], mask=~carries_flags),
        "expiration": pa.array(versions["expiration"], mask=~carries_flags),
        "datatype": versions["datatype"], "deleted": _tombstones(versions),
        "delete_time": pa.array(versions["delete_time"], mask=~versions["timed_delete"]),
    }
    if history:
        columns.update(_validity(versions, n))
    if values:
        columns["body"] = versions["body"].cast(pa.binary())
        columns["xattrs"] = versions["xattrs"].cast(pa.map_(pa.string(), pa.string()))
    return columns


def _tombstones(versions: Versions) -> np.ndarray:
    from .rows import DELETION, EXPIRATION

    what = versions["what"]
    return (what == DELETION) | (what == EXPIRATION) | versions["deleted"]


def _validity(versions: Versions, n: int) -> dict:
    """``valid_from``/``valid_to`` seqnos and times of ordered versions: a version lasts
    until the next version of its document, or the collection clear that ended it."""
    import pyarrow as pa

    time = pa.timestamp("ns", tz="UTC")
    same = np.zeros(n, bool)
    vbucket = versions["unit"] >> np.uint32(16)
    same[:-1] = (vbucket[1:] == vbucket[:-1]) & (versions["cid"][1:] == versions["cid"][:-1])
    if n > 1:
        same[:-1] &= _equal_next(versions["key"])
    gone = versions["gone"]
    ended = (gone != ALIVE) & (gone != DISCARDED)
    following = np.zeros(n, np.uint64)
    following[:-1] = versions["seqno"][1:]
    clock = (versions["cas"] & ~np.uint64(0xFFFF)).astype(np.int64)
    next_clock = np.zeros(n, np.int64)
    next_clock[:-1] = clock[1:]
    to_seqno = np.where(ended, gone, following)
    return {"valid_from_seqno": versions["seqno"],
            "valid_to_seqno": pa.array(to_seqno, mask=~(ended | same)),
            "valid_from_time": pa.array(clock, time),
            "valid_to_time": pa.array(next_clock, time, mask=ended | ~same)}


def _equal_next(key) -> np.ndarray:
    """Whether each key equals the next one (n - 1 flags)."""
    import pyarrow.compute as pc

    return pc.equal(key[1:], key[:-1]).to_numpy(zero_copy_only=False)


def utf8(keys):
    """Keys as strings; a key that is not valid UTF-8 becomes null."""
    import pyarrow as pa

    keys = keys.cast(pa.binary())
    text = pa.Array.from_buffers(pa.string(), len(keys), keys.buffers(), offset=keys.offset)
    try:
        text.validate(full=True)
        return text
    except pa.ArrowInvalid:
        out = []
        for key in keys.to_pylist():
            try:
                out.append(None if key is None else key.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
        return pa.array(out, pa.string())


def _wanted(out, collections) -> np.ndarray:
    """Rows whose collection is one of ``collections`` (ids, ``name`` or
    ``scope.collection``)."""
    ids = {c for c in collections if isinstance(c, int)}
    names = {c for c in collections if isinstance(c, str)}
    cid = out.column("collection_id").to_numpy()
    keep = np.isin(cid, list(ids))
    if names:
        scope = out.column("scope").to_pylist()
        name = out.column("collection").to_pylist()
        keep |= np.array([n in names or f"{s}.{n}" in names for s, n in zip(scope, name)],
                         bool)
    return keep


def metadata(table) -> dict:
    """The metadata ``state`` put in ``table``'s schema."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ValueError("this table carries no dcpfast state metadata")
    return json.loads(raw)


def consistency(table):
    """Per vbucket, up to which seqno ``table`` (a ``state`` result) is consistent: the end
    of the last complete snapshot it covers. A ``pyarrow.Table`` of ``vbucket``,
    ``consistent_seqno``."""
    import pyarrow as pa

    rows = metadata(table)["consistency"]
    return pa.table({"vbucket": pa.array([r[0] for r in rows], pa.uint16()),
                     "consistent_seqno": pa.array([r[1] for r in rows], pa.uint64())})


def state_errors(table) -> list[SkippedRegion]:
    """What ``errors="skip"`` passed over while building ``table``, in stream order."""
    return [SkippedRegion(*e) for e in metadata(table)["errors"]]
