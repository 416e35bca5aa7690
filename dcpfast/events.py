"""Public path of ``dcpfast.content.events``: system events and scope/collection names."""

from .content.events import NEEDED, Manifest, event_schema, system_events

__all__ = ["NEEDED", "Manifest", "event_schema", "system_events"]
