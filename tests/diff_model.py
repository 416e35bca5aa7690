"""What ``dcpfast.diff`` must answer, worked out in plain Python from the documents of
each side as ``state_model`` finds them: a dict per side, one document at a time.

A document is named by its collection's names (or, never named, its id) and its key; a
collection whose scope a side never named takes the scope of the other side's collection
of the same id and name, where the other side holds a document (a tombstone counts) of
it (``lent``); a side vouches for a document only up to its vbucket's consistent seqno
(and not where its value did not decode, or its vbucket could not be restored on either
side); the rest of docs/diff.md's rules are spelled out below.
"""

from __future__ import annotations

from collections import Counter

from dcpfast.compare import DEFAULT_FIELDS

KINDS = ("missing_from_source", "missing_from_target", "mismatch")
VALUE_FIELDS = {"body", "xattrs", "system_xattrs"}


def value(version: dict, field: str):
    """A field as it is compared."""
    xattrs = version["xattrs"] or {}
    if field == "xattrs":
        return {k: v for k, v in xattrs.items() if not k.startswith("_")}
    if field == "system_xattrs":
        return {k: v for k, v in xattrs.items() if k.startswith("_")}
    if field == "datatype":
        return version["datatype"] & ~0x02
    return version[field]


def named(cid: int, names: dict) -> tuple:
    if cid in names:
        return (*names[cid], True)
    return None, f"0x{cid:x}", False


def lent(names: dict, other: tuple) -> dict:
    """``names`` (collection id -> (scope, name)) with each scope a side never named (None)
    taken from the other side's collection of that id and name, among those ``other``
    (documents, consistency, names) holds a document of."""
    held = {cid for (_, cid, _) in other[0]}
    return {cid: (other[2][cid][0] if scope is None and cid in held and cid in other[2]
                  and other[2][cid][1] == name else scope, name)
            for cid, (scope, name) in names.items()}


def side(docs: dict, points: dict, names: dict, unrestored: set, values: bool) -> dict:
    """identity -> [version, vbucket, cid, unsure]: per identity the version with the
    highest seqno (then vbucket), unsure if any of its versions is."""
    out: dict = {}
    for (vb, cid, key), v in docs.items():
        unsure = (v["by_seqno"] > points.get(vb, 0) or vb in unrestored
                  or (values and v["body"] is None))
        ident = (*named(cid, names), key)
        held = out.get(ident)
        if held is None or (v["by_seqno"], vb) > (held[0]["by_seqno"], held[1]):
            out[ident] = [v, vb, cid, unsure or (held is not None and held[3])]
        elif unsure:
            held[3] = True
    return out


def diff(source: tuple, target: tuple, *, fields=DEFAULT_FIELDS, include_deleted=False,
         only_collections=None, unrestored=(set(), set())) -> tuple[list, list]:
    """(rows, summary) of ``dcpfast.diff``: ``source`` and ``target`` are (documents,
    consistency, names) of ``diff_scenarios.documents`` and the names of the side."""
    values = bool(VALUE_FIELDS & set(fields))
    lost = unrestored[0] | unrestored[1]
    a = side(*source[:2], lent(source[2], target), lost, values)
    b = side(*target[:2], lent(target[2], source), lost, values)
    rows, counts = [], {}
    for ident in set(a) | set(b):
        label = ident[:3]
        if only_collections is not None and label[1] not in only_collections \
                and f"{label[0]}.{label[1]}" not in only_collections:
            continue
        x, y = a.get(ident), b.get(ident)
        has_x = x is not None and (include_deleted or not x[0]["deleted"])
        has_y = y is not None and (include_deleted or not y[0]["deleted"])
        count = counts.setdefault(label, Counter())
        count["source"] += has_x
        count["target"] += has_y
        if (x and x[3]) or (y and y[3]):
            count["not_compared"] += 1
            continue
        if has_x and has_y:
            differ = [f for f in fields if value(x[0], f) != value(y[0], f)]
            kind = "mismatch" if differ else "equal"
        elif has_x:
            kind, differ = "missing_from_target", None
        elif has_y:
            kind, differ = "missing_from_source", None
        else:
            continue
        count[kind] += 1
        if kind != "equal":
            rows.append(_row(ident, kind, differ, x, y))
    rows.sort(key=lambda r: (*_order(r["scope"], r["collection"], r["named"]), r["key"]))
    for r in rows:
        del r["named"]
    summary = [{"scope": lb[0], "collection": lb[1],
                **{name: counts[lb][name] for name in ("source", "target", "equal", *KINDS,
                                                       "not_compared")}}
               for lb in sorted(counts, key=lambda lb: _order(*lb))]
    return rows, summary


def _order(scope, collection, named_) -> tuple:
    return scope is None, scope or "", collection, named_


def _row(ident, kind, differ, x, y) -> dict:
    scope, collection, named_, key = ident
    try:
        text = key.decode()
    except UnicodeDecodeError:
        text = None
    row = {"scope": scope, "collection": collection, "named": named_, "key": key,
           "key_str": text, "kind": kind, "fields": differ}
    for name, held in (("source", x), ("target", y)):
        row[f"{name}_vbucket"] = held and held[1]
        row[f"{name}_collection_id"] = held and held[2]
        row[f"{name}_by_seqno"] = held and held[0]["by_seqno"]
        row[f"{name}_cas"] = held and held[0]["cas"]
    return row


def rows_of(table) -> list:
    """A diff table's rows as the model's."""
    return table.to_pylist()
