"""Encoders for tests and benchmarks: DCP frames, synthetic conversations, packet captures.

``frames`` writes every frame kind byte by byte from the wire reference (the test-suite's
independent oracle for the decoder), ``conversation`` builds realistic streams with the
record of what each frame decodes to, and ``capture`` wraps bytes in TCP/IP packets and
pcap/pcapng files; ``samples`` makes the samples bundled with dcpfast. Every builder is
available from ``dcpfast.testing`` itself.
"""

from .capture import *  # noqa: F403
from .capture import __all__ as _capture
from .conversation import *  # noqa: F403
from .conversation import __all__ as _conversation
from .frames import *  # noqa: F403
from .frames import __all__ as _frames
from .samples import *  # noqa: F403
from .samples import __all__ as _samples

__all__ = [*_frames, *_conversation, *_capture, *_samples]
