"""Public path of ``dcpfast.capture``: DCP traffic out of pcap/pcapng captures."""

from .capture import *  # noqa: F403
from .capture import __all__  # noqa: F401
