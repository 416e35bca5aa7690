"""A Delta table of a bucket's documents kept current as its dumps grow (``mirror``): one
commit per run, equal to the state of everything read at each vbucket's consistent
seqno, never twice."""

from .api import MirrorRun, mirror
from .inputs import InputsChanged
from .table import AnotherWriter, NotAMirror, WriteFailed

__all__ = ["AnotherWriter", "InputsChanged", "MirrorRun", "NotAMirror", "WriteFailed", "mirror"]
