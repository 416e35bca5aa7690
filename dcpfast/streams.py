"""Public path of ``dcpfast.content.streams``: stream setup, responses and health."""

from .content.streams import *  # noqa: F403
from .content.streams import __all__  # noqa: F401
