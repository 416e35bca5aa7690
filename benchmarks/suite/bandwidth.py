"""The memory-bandwidth probe: ``bandwidth.c``, compiled at run time with the platform's
compiler, as ``probe.c`` is.

For each thread count it times N threads each reading (summing) its 1/N of a resident
buffer, copying its 1/N into a resident destination (GB/s of the bytes read) and writing
its 1/N of a region mapped anew for each run (page faults included): what a threaded scan
of a buffer of that size could move at most, to read its figures against.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .probe import compiled

SOURCE = Path(__file__).with_name("bandwidth.c")
FLAGS = ("-O2", "-pthread")
#: The smallest buffer measured: well past any last-level cache.
LEAST = 256 << 20
#: The measures, in the probe's JSON and in the tables.
MEASURES = {"read": "read (sum of 64-bit words)",
            "copy": "copy (`memcpy`, GB/s of the bytes read)",
            "fresh": "writes to freshly mapped pages (page faults included)"}


def compile_bandwidth(directory: Path) -> tuple[Path | None, str]:
    """The probe compiled in ``directory`` (``probe.compiled``), or None and why not; and
    the command used."""
    return compiled(SOURCE, directory, FLAGS)


def run_bandwidth(exe: Path, nbytes: int, counts, repeat: int, timeout: float = 300
                  ) -> tuple[dict | None, str]:
    """GB/s of ``read``, ``copy`` and ``fresh`` for each thread count of ``counts`` over
    a buffer of ``nbytes`` (at least ``LEAST``), best of ``repeat`` runs taking turns;
    or None and why not (the probe failed, timed out or summed wrongly)."""
    nbytes = max(int(nbytes), LEAST)
    command = [str(exe), str(nbytes), str(repeat), *map(str, counts)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"bandwidth probe: {e}"
    if done.returncode:
        return None, f"bandwidth probe exited with {done.returncode}"
    found = json.loads(done.stdout)
    words = found["bytes"] // 8              # word i holds i * 0x9E37...: their sum
    if found["checksum"] != 0x9E3779B97F4A7C15 * (words * (words - 1) // 2) % 2**64:
        return None, "bandwidth probe: the sum read is wrong"
    found["transparent_hugepages"] = _hugepages()
    return found, ""


def _hugepages() -> str | None:
    """The transparent huge pages mode (it decides the cost of the fresh writes)."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    return next((word[1:-1] for word in text.split() if word.startswith("[")), text.strip())
