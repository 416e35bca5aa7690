"""The machine-limit probe: ``probe.c``, compiled at run time with the platform's compiler.

It follows the body lengths through a corpus in memory and stores three header fields per
frame into arrays, which is about the least any scanner must do, so its frames/s is the
machine's limit for that corpus. It times itself (best of its own walks) and prints sums
of what it stored, which ``verify.verify_probe`` compares with the scan's columns.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

from .common import check

SOURCE = Path(__file__).with_name("probe.c")
FLAGS = ("-O2",)


def compile_probe(directory: Path) -> tuple[Path | None, str]:
    """The probe compiled in ``directory`` (``compiled``)."""
    return compiled(SOURCE, directory, FLAGS)


def compiled(source: Path, directory: Path, flags: tuple[str, ...]
             ) -> tuple[Path | None, str]:
    """The C program ``source`` compiled in ``directory`` with the platform's C compiler
    (``CC``, the interpreter's compiler, or ``cc``) and ``flags``, or None and why not;
    and the command used."""
    found = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    command = shlex.split(found)
    if not command or not shutil.which(command[0]):
        command = ["cc"]
    if not shutil.which(command[0]):
        return None, "no C compiler found (set CC)"
    exe = directory / source.stem
    command = [*command, *flags, "-o", str(exe), str(source)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{' '.join(command)}: {e}"
    if done.returncode:
        return None, f"{' '.join(command)} failed: {done.stderr.strip()[:300]}"
    return exe, " ".join([*command[:-3], "-o", exe.name, source.name])


def run_probe(exe: Path, path: Path, repeat: int) -> dict:
    """The probe's walk over the dump at ``path``: frames, best seconds of ``repeat``
    walks, and the sums of the opcodes, bytes 6-7 and body lengths it stored."""
    done = subprocess.run([str(exe), str(path), str(repeat)], capture_output=True, text=True,
                          timeout=600)
    check(done.returncode == 0, f"probe exited with {done.returncode}")
    return json.loads(done.stdout)
