"""``state``: the documents of a DCP stream as one call, its options checked before any
work; a big dump's vbuckets shared among processes (``processes``)."""

from __future__ import annotations

import pyarrow as pa

from ..io import DEFAULT_BATCH_BYTES
from .builder import StateBuilder
from .feeding import fed
from .options import positive, scan_collections
from .processes import split_state, state_processes


# long: the one entry point, its options checked before any work and its docstring whole
def state(source, *, at_seqno=None, at_time=None, include_deleted: bool = False,
          values: bool = True, only_collections=None, collections: bool | None = None,
          errors: str = "strict", history: bool = False,
          batch_bytes: int = DEFAULT_BATCH_BYTES, threads: int | None = None,
          processes: int = 1) -> pa.Table:
    """The documents of a DCP stream as they stood at its end, at ``at_seqno`` or at
    ``at_time``: one row per document (``history``: per version). See docs/state.md.

    ``source``: a dump's path (a pcap/pcapng capture's: its server-to-client side is the
    stream, its client-to-server side places the responses), a buffer, a ``FrameBatch``
    or an iterable of the batches of one stream in order (``iter_batches``; a capture's
    batches). ``at_seqno``: an int, or a mapping vbucket -> seqno (vbuckets it leaves out
    give no rows); ``at_time``: a ``datetime``, an ISO 8601 string or nanoseconds since the
    epoch, compared with the CAS's hybrid logical clock. ``include_deleted`` keeps
    tombstones; ``values`` adds ``body`` and ``xattrs``; ``only_collections`` keeps only
    these collections (ids, names or ``scope.collection``; one alone or several).
    ``collections`` and ``batch_bytes`` are how a path or buffer is scanned (as for
    ``iter_batches``); ``threads`` (None: the cores idle now; at most ``MOST_THREADS``)
    read and scan the next batch ahead and decode the values. ``processes``: how many
    processes (at most the cores) share the vbuckets of a dump's path, each reading it
    whole (1: this process alone; see docs/state.md for when more pay). ``errors``: "strict" raises
    ``DcpFormatError`` at the first damaged or inconsistent frame and where the stream
    checks show lost frames; "skip" goes on, stops each vbucket's consistent seqno before
    the frames it lost, and lists the first problems and counts them all in the table's
    metadata (``state_errors``).
    Each vbucket's consistent seqno, and what its stream did not send: ``consistency``.
    """
    reading = dict(collections=scan_collections(collections),
                   batch_bytes=positive("batch_bytes", batch_bytes),
                   threads=None if threads is None else positive("threads", threads))
    builder = StateBuilder(at_seqno=at_seqno, at_time=at_time, include_deleted=include_deleted,
                           values=values, only_collections=only_collections, errors=errors,
                           history=history, threads=reading["threads"])
    split = state_processes(positive("processes", processes), source)
    if split > 1:
        options = dict(at_seqno=builder.at_seqno, at_time=builder.at_time,
                       include_deleted=builder.include_deleted, values=builder.values,
                       only_collections=builder.only_collections, errors=builder.mode,
                       history=builder.history)
        table = split_state(source, options, reading, split)
        if table is not None:
            return table
    with fed(builder, source, errors, reading) as again:
        return builder.table(again)
