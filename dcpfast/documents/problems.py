"""What a state's skip mode passed over, bounded: the first problems in stream order and
how many of each kind (as ``dcpfast info`` counts what it skips), so that the metadata of
a table stays small whatever the stream holds."""

from __future__ import annotations

#: Problems listed in a table's metadata; the others are only counted.
LISTED = 1000
#: The kinds of problem, by what found them.
KINDS = ("skipped_bytes", "capture_gap", "damaged_value", "damaged_event", "lost_frames",
         "seqno_backwards", "commit_without_prepare", "unplaced_rollback", "malformed_response")


class Problems:
    """The first ``limit`` problems, in the order they were added (stream order), and
    how many of each kind there were in all."""

    def __init__(self, limit: int = LISTED):
        self.limit = limit
        self.first: list[tuple] = []
        self.counts: dict[str, int] = {}
        self.total = 0

    def add(self, problems) -> None:
        """Add ``problems``, ``(region, kind)`` each in stream order: the region
        ``(offset, length, reason)`` (on Spark ``(file, offset, length, reason)``), its
        kind one of ``KINDS``."""
        for region, kind in problems:
            assert kind in KINDS, kind
            if len(self.first) < self.limit:
                self.first.append(tuple(region))
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.total += 1

    def metadata(self) -> dict:
        """The ``errors``, ``error_counts`` and ``errors_total`` of a table's metadata."""
        return {"errors": [list(e) for e in self.first],
                "error_counts": dict(sorted(self.counts.items())),
                "errors_total": self.total}
