"""Portability of the compiled cores' C layer: the headers of ``dcpfast._core`` (the span
cache's mapping primitives, byte order, the bitmap kernel) built and run on their own in
every mode this machine can build (POSIX mappings, the allocator with ``-DDCP_NO_MMAP``),
cross-compiled for Windows, macOS and Linux on arm64 where ``ziglang`` is installed; and no
core reaches for a POSIX-only module outside those guards."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.c_probes import CORE, PROBES, compiler

PROBE = PROBES / "platform_probe.c"
WARNINGS = ["-Wall", "-Werror", "-Wno-unused-function"]
#: Targets whose wheels are built elsewhere: compiled and linked here, not run.
CROSS = ["x86_64-windows-gnu", "aarch64-windows-gnu", "x86_64-macos", "aarch64-macos",
         "aarch64-linux-gnu"]

pytestmark = pytest.mark.skipif(not (CORE / "spans.h").is_file(),
                                reason="needs the source tree's dcpfast/_core")


@pytest.mark.parametrize("mode", [[], ["-DDCP_NO_MMAP"]], ids=["mapped", "allocator"])
def test_the_headers_work_in_every_mode(mode, tmp_path):
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "probe"
    subprocess.run([*cc, *WARNINGS, "-O2", *mode, f"-I{CORE}", str(PROBE), "-o", str(exe)],
                   check=True, capture_output=True)
    found = subprocess.run([str(exe)], capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.startswith("ok"), found.stdout
    if mode:                          # the allocator neither grows, trims nor splits
        assert "grow=0 trim=0 split=0" in found.stdout and f"kept={1 << 22}" in found.stdout
    elif sys.platform == "linux":     # mremap, munmap of a tail or a part, MADV_HUGEPAGE
        assert "grow=1 trim=1 split=1 huge=1" in found.stdout


@pytest.mark.parametrize("target", CROSS)
def test_the_headers_cross_compile(target, tmp_path):
    pytest.importorskip("ziglang")
    built = subprocess.run(
        [sys.executable, "-m", "ziglang", "cc", "-target", target, *WARNINGS, "-O2",
         f"-I{CORE}", str(PROBE), "-o", str(tmp_path / "probe")],
        capture_output=True, text=True, cwd=tmp_path)
    assert built.returncode == 0, built.stderr


def test_the_cores_cimport_nothing_posix_only():
    """``posix.*`` declarations would include POSIX headers into the generated C on every
    platform (Windows has no ``sys/mman.h``): the platform layer is ``spans.h``."""
    offenders = [p.name for suffix in ("*.pyx", "*.pxi", "*.pxd") for p in CORE.glob(suffix)
                 if re.search(r"^\s*(from\s+posix|cimport\s+posix)", p.read_text(), re.M)]
    assert not offenders
