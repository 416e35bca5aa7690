"""The compiled cores and their pure-Python twins: the one place that picks between them.

Four cores do the per-frame, per-value and per-row work: ``scan`` (DCP frames into
columns), ``pcap`` (capture records into TCP segments), ``values`` (Snappy and xattr
loops) and ``state`` (the stream checks, the document state's walk, document ids); a
fifth, ``memory``, keeps the large memory of the scan and the state in recycled spans.
Each is a Cython module (``cscan``, ``cpcap``, ``cvalues``, ``cstate``, ``cmemory``) with
a pure-Python twin of the same names and signatures (``pyscan``, ``pypcap``,
``pyvalues``, ``pystate``, ``pymemory``).
``DCPFAST_PUREPYTHON=1`` selects the twins; without it the compiled modules are used,
and where none was built (an interpreter without a wheel, a build that failed) the twins
stand in. A build that has some compiled cores but not all is refused rather than mixed.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from .contract import FIRST_ROWS, MIN_MEAN, ScanRequest, ScanResult

__all__ = ["FIRST_ROWS", "IMPLEMENTATION", "MIN_MEAN", "ScanRequest", "ScanResult", "compiled",
           "memory", "pcap", "scan", "state", "twins", "values"]

#: The cores by role, as (compiled module, twin module).
CORES = {"memory": ("cmemory", "pymemory"), "scan": ("cscan", "pyscan"),
         "pcap": ("cpcap", "pypcap"), "values": ("cvalues", "pyvalues"),
         "state": ("cstate", "pystate")}


def _load(names: dict[str, str]) -> dict[str, ModuleType]:
    return {role: importlib.import_module(f"{__name__}.{name}") for role, name in names.items()}


def twins() -> dict[str, ModuleType]:
    """The pure-Python twin of every core, by role."""
    return _load({role: pair[1] for role, pair in CORES.items()})


def compiled() -> dict[str, ModuleType] | None:
    """The compiled module of every core, by role; None when none was built.

    Raises ``ImportError`` for a partial build (some cores compiled, others not), which
    would otherwise mix compiled and pure-Python cores in one process.
    """
    found, missing = {}, []
    for role, (name, _) in CORES.items():
        try:
            found[role] = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            missing.append(name)
    if not found:
        return None
    if missing:
        built = ", ".join(m.__name__ for m in found.values())
        raise ImportError(f"dcpfast was built without the compiled core(s) "
                          f"{', '.join(missing)} but with {built}: rebuild it "
                          "(pip install --force-reinstall) or set DCPFAST_PUREPYTHON=1")
    return found


def _select() -> tuple[dict[str, ModuleType], str]:
    if os.environ.get("DCPFAST_PUREPYTHON", "") not in ("", "0"):
        return twins(), "python"
    cores = compiled()
    if cores is None:          # no compiled core for this interpreter: the twins do the work
        return twins(), "python"
    return cores, "cython"


_cores, IMPLEMENTATION = _select()
#: The selected cores.
memory: ModuleType = _cores["memory"]
scan: ModuleType = _cores["scan"]
pcap: ModuleType = _cores["pcap"]
values: ModuleType = _cores["values"]
state: ModuleType = _cores["state"]
