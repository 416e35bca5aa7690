"""The fuzz harnesses still run: each one, with its seed corpus, executes every seed once
under libFuzzer (``-runs=0``) in its own process, as ``fuzz/run.py`` starts it. A harness
left behind by a change of the library's names fails here, not only in CI's fuzzing."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parent.parent / "fuzz"
TARGETS = sorted(p.stem.removeprefix("fuzz_") for p in FUZZ.glob("fuzz_*.py"))

pytestmark = [
    pytest.mark.skipif(not FUZZ.is_dir(), reason="no fuzz/ folder beside the tests"),
    pytest.mark.skipif(importlib.util.find_spec("atheris") is None,
                       reason="atheris is not installed (Linux x86_64 only)"),
    pytest.mark.skipif(bool(os.environ.get("DCPFAST_PUREPYTHON")),
                       reason="the harnesses run against the compiled cores"),
]


def test_every_target_has_a_harness_and_a_share():
    sys.path.insert(0, str(FUZZ))
    try:
        import run
    finally:
        sys.path.remove(str(FUZZ))
    assert TARGETS == sorted(run.SHARES)


@pytest.mark.parametrize("target", TARGETS)
def test_the_harness_runs_its_seeds(target, tmp_path):
    corpus = tmp_path / target
    corpus.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DCPFAST_PUREPYTHON"}
    seeded = subprocess.run([sys.executable, str(FUZZ / "make_corpus.py"), str(corpus),
                             target], cwd=FUZZ, env=env, capture_output=True, text=True,
                            timeout=300)
    assert seeded.returncode == 0, seeded.stderr[-3000:]
    seeds = len(list(corpus.iterdir()))
    assert seeds > 0
    done = subprocess.run([sys.executable, str(FUZZ / f"fuzz_{target}.py"), str(corpus),
                           "-runs=0", f"-artifact_prefix={tmp_path}/"], cwd=FUZZ, env=env,
                          capture_output=True, text=True, timeout=300)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "INITED" in log and "Done" in log, log[-3000:]
