"""Two buckets compared offline: ``dcpfast.diff`` matches the documents of two states by
scope, collection and key and returns what differs; this module holds what reads its
result and names what it compares.

``api`` holds ``diff``; ``sides`` builds each side's state and tells which documents a
side can vouch for (up to its consistent seqno), ``rules`` says what "the same" means,
``match`` matches and judges the documents, ``fields`` finds the fields that differ and
``output`` builds the table and reads its metadata (``summary``, ``diff_errors``).
"""

from .output import METADATA_KEY, diff_errors, diff_schema, summary, summary_schema
from .rules import DEFAULT_FIELDS, FIELDS, KINDS

__all__ = ["DEFAULT_FIELDS", "FIELDS", "KINDS", "METADATA_KEY", "diff_errors",
           "diff_schema", "summary", "summary_schema"]
