"""``diff``: two buckets compared offline, from their dumps, captures' batches or states."""

from __future__ import annotations

import pyarrow as pa

from ..documents.options import scan_collections
from ..errors import checked_mode
from ..io import DEFAULT_BATCH_BYTES
from ..threads import threads_of
from .match import judge
from .output import table
from .rules import VALUE_FIELDS, checked_collections, checked_fields
from .sides import alike, sides


def diff(source, target, *, at_seqno=None, at_time=None, fields=None,
         include_deleted: bool = False, only_collections=None, errors: str = "strict",
         threads: int | None = None, collections: bool | None = None,
         batch_bytes: int = DEFAULT_BATCH_BYTES) -> pa.Table:
    """What differs between two buckets: one row per document missing from the source,
    missing from the target, or present on both with fields that differ (``kind``,
    ``fields``), matched by scope, collection and key (names: collection ids and vbuckets
    may differ), in collection and key order. See docs/diff.md.

    ``source``, ``target``: whatever ``dcpfast.state`` reads (a dump's path, a buffer,
    a ``FrameBatch``, the batches of one stream), or a table it built (tombstones
    included: ``include_deleted=True``). ``at_seqno``, ``at_time``, ``errors``,
    ``collections`` (whether keys carry a collection id: None decides from each stream)
    and ``batch_bytes`` are passed to ``state`` for both sides. ``fields``: the fields
    compared (``dcpfast.compare.FIELDS``; by default ``DEFAULT_FIELDS``: body and user
    xattrs after Snappy decompression, flags, expiration, deleted, datatype without its
    Snappy bit; ``cas`` and ``rev_seqno`` only when named). A tombstone counts as no
    document unless ``include_deleted``. ``only_collections``: only these (names or
    ``scope.name``; a name neither side holds is a ``ValueError``). ``threads``: with 2 or
    more (by default: the cores idle now), the two states are built at the same time.
    Where one side's keys were read with their collection ids and the other's without,
    its stream not saying whether they carry one, the diff is a ``ValueError``.

    Each side is compared only up to its consistent seqno: a document whose version on
    either side lies past it is counted as ``not_compared`` in the summary
    (``dcpfast.compare.summary``), never reported as a difference. What skip mode
    passed over on either side: ``dcpfast.compare.diff_errors``.
    """
    fields = checked_fields(fields)
    checked_mode(errors)
    checked_collections(only_collections)                   # checks its type
    options = dict(at_seqno=at_seqno, at_time=at_time, errors=errors,
                   collections=scan_collections(collections), batch_bytes=batch_bytes,
                   values=any(f in VALUE_FIELDS for f in fields))
    a, b = sides(source, target, options, together=threads_of(threads) > 1)
    alike(a, b)
    judged = judge(a, b, fields=fields, include_deleted=include_deleted,
                   collections=only_collections)
    return table(judged, a, b, include_deleted=include_deleted)
