"""Stream setup, responses and stream health: what was asked, what was answered, what ran."""

from .summary import (StreamTracker, Summary, controls, failover_logs, opens, rollbacks,
                      stream_ends, stream_requests, summarize)

__all__ = ["StreamTracker", "Summary", "controls", "failover_logs", "opens", "rollbacks",
           "stream_ends", "stream_requests", "summarize"]
