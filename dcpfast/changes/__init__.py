"""The change feed of a DCP stream: every change of every document in stream order, with
the changes that undo what rollbacks and collection drops took back (``changes``); the
shapes its consumers read (Debezium, the Couchbase Kafka connector's records, a table
for Spark's Auto CDC: ``formatted``, ``json_lines``); and the audit of what a connector
delivered against the captured stream (``audit``)."""

from .api import METADATA_KEY, ChangesBuilder, changes, changes_schema, feed_metadata
from .delivery import audit, audit_schema, audit_summary
from .formats import FORMATS, formatted
from .lines import json_lines

__all__ = ["FORMATS", "METADATA_KEY", "ChangesBuilder", "audit", "audit_schema",
           "audit_summary", "changes", "changes_schema", "feed_metadata", "formatted",
           "json_lines"]
