"""Stream setup, responses and stream health: what was asked, what was answered, what ran.

``tables`` (one row per setup frame or response), ``matching`` (responses placed on the
request they answer; ``StreamTracker``), ``summary`` (per-stream health: ``Summary``,
``summarize``); ``frames`` (rows, bytes and single-frame decoders) and ``checks`` (the
numpy checks behind the summary) serve them.
"""

from .matching import StreamTracker
from .summary import Summary, summarize
from .tables import (
    controls,
    failover_logs,
    high_seqnos,
    opens,
    rollbacks,
    stream_ends,
    stream_requests,
)

__all__ = ["StreamTracker", "Summary", "controls", "failover_logs", "high_seqnos", "opens",
           "rollbacks", "stream_ends", "stream_requests", "summarize"]
