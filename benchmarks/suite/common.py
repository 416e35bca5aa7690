"""What every benchmark script shares: checks that stop a run, the machine it ran on, and
the ``--items``/``--repeat``/``--quick`` options."""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import numpy as np
import pyarrow as pa

import dcpfast


class CheckFailed(Exception):
    """A corpus or a decoder's output is not what it must be: no figures are reported."""


def check(ok: bool, message: str) -> None:
    """Raise ``CheckFailed(message)`` unless ``ok``."""
    if not ok:
        raise CheckFailed(message)


def machine() -> dict:
    """CPU, cores, memory and the versions that shape the figures."""
    cpu = platform.processor() or platform.machine()
    memory = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "memory_bytes": memory, "load_average": list(os.getloadavg()),
            "platform": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "pyarrow": pa.__version__, "dcpfast": dcpfast.__version__,
            "implementation": dcpfast.IMPLEMENTATION}


def print_machine(info: dict) -> None:
    """The two ``machine`` lines every report starts with."""
    print("machine")
    memory = f", {info['memory_bytes'] / 2**30:.0f} GiB" if info.get("memory_bytes") else ""
    print(f"  cpu      {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable)"
          f"{memory}, load {' '.join(f'{x:.1f}' for x in info['load_average'])}")
    print(f"  python   {info['python']}  numpy {info['numpy']}  pyarrow {info['pyarrow']}  "
          f"dcpfast {info['dcpfast']} ({info['implementation']} core)")


def arguments(doc: str, defaults: dict, quick: dict, json_default: Path | None = None, *,
              items: str = "document changes to generate") -> argparse.ArgumentParser:
    """A parser with ``--items``, ``--repeat``, ``--quick`` (and ``--json`` when a default
    path is given) for a benchmark script whose docstring is ``doc``."""
    parser = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
    parser.add_argument("--items", type=int, help=f"{items} (default {defaults['items']:,})")
    parser.add_argument("--repeat", type=int, help="timed runs after the warm-up, best kept "
                        f"(default {defaults['repeat']})")
    if json_default is not None:
        parser.add_argument("--json", nargs="?", const=json_default, type=Path,
                            metavar="PATH", help="write the results as JSON (default path "
                            f"{json_default})")
    parser.add_argument("--quick", action="store_true", help="smoke run: "
                        + ", ".join(f"{k}={v:,}" for k, v in quick.items()))
    return parser


def settle(parser: argparse.ArgumentParser, argv, defaults: dict, quick: dict
           ) -> argparse.Namespace:
    """Parse ``argv``, fill what was not given from ``quick`` or ``defaults``, and refuse
    counts below 1."""
    args = parser.parse_args(argv)
    for name, value in (quick if args.quick else defaults).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in defaults:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args
