"""What "the same" means when two buckets are compared: the fields compared, the kinds of
difference, and how a collection is named on either side (its name, or its id where the
stream never named it), so that documents match by (scope, collection, key) whatever
their collection ids and vbuckets; and which collections ``only_collections`` keeps."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import text
from ..protocol import Datatype

#: The kinds of difference, as the ``kind`` column holds them.
KINDS = ("missing_from_source", "missing_from_target", "mismatch")

#: Every field ``diff`` can compare: the body (Snappy inflated, without xattrs), the user
#: xattrs and the system xattrs (names starting with ``_``), each as a map; the metadata;
#: ``datatype`` without its Snappy bit (compression is how the bytes travel).
FIELDS = ("body", "xattrs", "system_xattrs", "flags", "expiration", "datatype", "deleted",
          "delete_time", "cas", "rev_seqno")

#: The fields compared unless ``fields`` says otherwise: what a replica or a restore must
#: keep. ``cas`` and ``rev_seqno`` (kept by XDCR, not by a restore), ``system_xattrs`` and
#: ``delete_time`` are compared only when asked.
DEFAULT_FIELDS = ("body", "xattrs", "flags", "expiration", "datatype", "deleted")

#: The fields that need the documents' values.
VALUE_FIELDS = ("body", "xattrs", "system_xattrs")

#: The datatype bits compared.
DATATYPE_MASK = 0xFF & ~int(Datatype.SNAPPY)

#: The first character of a system xattr's name.
SYSTEM_XATTR = "_"


def checked_fields(fields: Iterable[str] | None) -> tuple[str, ...]:
    """``fields`` as a tuple in ``FIELDS`` order (``DEFAULT_FIELDS`` for None); an unknown
    or missing field is a ``ValueError``."""
    if fields is None:
        return DEFAULT_FIELDS
    if isinstance(fields, str):
        raise TypeError("fields is a list of field names, not a string")
    asked = list(fields)
    unknown = [f for f in asked if f not in FIELDS]
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(map(repr, unknown))}: the fields are "
                         f"{', '.join(FIELDS)}")
    if not asked:
        raise ValueError("fields names no field to compare")
    return tuple(f for f in FIELDS if f in asked)


def label(collection_id: int, scope: str | None, collection: str | None) -> tuple:
    """A collection as both sides can know it: ``(scope, collection, named)``, the names
    the stream gave (``scope`` None where it named the collection, not its scope), or for a
    collection it never named ``(None, "0x<id>", False)`` (ids differ between clusters, so
    an unnamed collection matches only the same unnamed id)."""
    if collection is None:
        return None, f"0x{collection_id:x}", False
    return scope, collection, True


def labels(mine: Iterable[tuple], other: Iterable[tuple]) -> list[tuple]:
    """The labels of a side's collections ``mine``, each ``(id, scope, name)`` as its state
    names it, beside the other side's ``other``: a collection whose scope the side never
    named takes the scope of the other side's collection of the same id and name, so that
    the two match. Ids are unique in a bucket and a collection never changes scope, so
    copies of one bucket that hold the same id under the same name hold the same
    collection; under another id (another cluster numbers its own) it stays apart."""
    lent = {(cid, name): scope for cid, scope, name in other
            if scope is not None and name is not None}
    return [label(cid, lent.get((cid, name)) if scope is None else scope, name)
            for cid, scope, name in mine]


def order(labels: Iterable[tuple]) -> list[tuple]:
    """``labels`` sorted as the rows are: by scope then collection, unnamed scopes last."""
    return sorted(set(labels), key=lambda lb: (lb[0] is None, lb[0] or "", lb[1], lb[2]))


def shown(lb: tuple) -> str:
    """A label as a user names it: ``scope.name``, or ``name`` (``0x<id>`` for a collection
    never named) where its scope has no name."""
    return lb[1] if lb[0] is None else f"{lb[0]}.{lb[1]}"


class UnknownCollections(ValueError):
    """``only_collections`` names a collection neither side holds."""


def checked_collections(collections: Iterable[str] | None) -> frozenset[str] | None:
    """``only_collections`` checked: None, or the names (collection or ``scope.name``) to
    keep; ids are a ``TypeError`` (they differ between clusters)."""
    if collections is None:
        return None
    if isinstance(collections, str):
        raise TypeError("only_collections is a list of collection names, not a string")
    names = frozenset(collections)
    if not all(isinstance(n, str) for n in names):
        raise TypeError("only_collections holds names (collection or scope.collection): ids "
                        "differ between clusters")
    return names


def wanted(labels: Iterable[tuple], collections: Iterable[str] | None) -> set[tuple]:
    """The labels that ``collections`` (names, ``scope.name``, or ``0x<id>`` for a
    collection never named) keep; all of them for None. A name that none of ``labels``
    goes by is an ``UnknownCollections`` error (a typo would otherwise compare nothing and
    find no difference)."""
    labels = set(labels)
    names = checked_collections(collections)
    if names is None:
        return labels
    known = {lb: {lb[1], shown(lb)} for lb in labels}
    unknown = sorted(names.difference(*known.values()))
    if unknown:
        raise UnknownCollections(text("diff_unknown_collections", names=", ".join(unknown),
                                      known=", ".join(shown(lb) for lb in order(labels))
                                      or "none"))
    return {lb for lb, called in known.items() if called & names}
