"""Point-in-time document state rebuilt from a DCP stream: ``dcpfast.state`` gives one row
per document (or per version, with ``history``) as of the end of the dump, a seqno or a
time; ``StateBuilder`` builds it batch by batch.

``api`` holds ``state``, ``builder`` ``StateBuilder``, ``feeding`` how a builder is fed from
a source, ``processes`` the split of a dump's vbuckets among processes; ``options`` checks
their options;
``rows`` turns batches into the rows the engine reads, ``restarts`` places Stream Request
responses on their streams, ``walk`` follows each stream (the stream checks, restart
points, seqno order, cut points, snapshots), ``versions`` holds the documents' versions,
``engine`` ties them together, ``problems`` keeps what skip mode passed over and
``output`` builds the table and reads its metadata (``consistency``, ``state_errors``).
"""

from .builder import StateBuilder
from .options import nanoseconds
from .output import METADATA_KEY, consistency, state_errors, state_schema

__all__ = ["METADATA_KEY", "StateBuilder", "consistency", "nanoseconds", "state_errors",
           "state_schema"]
