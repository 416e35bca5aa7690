"""What "the same" means when two buckets are compared: the fields compared, the kinds of
difference, and how a collection is named on either side (its name, or its id where the
stream never named it), so that documents match by (scope, collection, key) whatever
their collection ids and vbuckets."""

from __future__ import annotations

from collections.abc import Iterable

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
    the stream gave, or for a collection it never named ``(None, "0x<id>", False)`` (ids
    differ between clusters, so an unnamed collection matches only the same unnamed id)."""
    if collection is None:
        return None, f"0x{collection_id:x}", False
    return scope, collection, True


def order(labels: Iterable[tuple]) -> list[tuple]:
    """``labels`` sorted as the rows are: by scope then collection, unnamed scopes last."""
    return sorted(set(labels), key=lambda lb: (lb[0] is None, lb[0] or "", lb[1], lb[2]))


def wanted(labels: Iterable[tuple], collections: Iterable[str] | None) -> set[tuple]:
    """The labels that ``collections`` (names, ``scope.name``, or ``0x<id>`` for a
    collection never named) keep; all of them for None."""
    labels = set(labels)
    if collections is None:
        return labels
    if isinstance(collections, str):
        raise TypeError("only_collections is a list of collection names, not a string")
    names = set(collections)
    if not all(isinstance(n, str) for n in names):
        raise TypeError("only_collections holds names (collection or scope.collection): ids "
                        "differ between clusters")
    return {lb for lb in labels if lb[1] in names or f"{lb[0]}.{lb[1]}" in names}
