"""What the tests that build C probes (``tests/c``) against the cores' headers share: the
headers' folder and the C compiler Python was built with."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

#: The cores' source folder, with their C headers (absent from an installed package).
CORE = Path(__file__).resolve().parent.parent / "dcpfast" / "_core"
#: The probes' sources.
PROBES = Path(__file__).resolve().parent / "c"


def compiler() -> list[str] | None:
    """The command of the C compiler Python was built with, where it is installed."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    return cc if shutil.which(cc[0]) else None
