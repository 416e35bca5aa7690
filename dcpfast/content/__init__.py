"""What frames carry, decoded in bulk: document values, system events, stream setup and health.

``values`` (bodies, xattrs, JSON flags), ``events`` (system events and the ``Manifest`` of
scope and collection names) and ``streams`` (connection setup, responses matched to their
requests, per-stream summaries and anomalies). They read a ``FrameBatch`` and add tables.
"""
