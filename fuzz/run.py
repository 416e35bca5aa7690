"""Run every fuzz target for a bounded time; exit non-zero if any of them finds a crash,
a hang, too much memory or an exception its harness does not allow.

    python fuzz/run.py [--seconds 60] [--corpus DIR] [--targets scan,values,...]

The seconds are shared out among the targets, which run one after another, each in its
own process (libFuzzer under atheris). Each target's corpus is ``DIR/<target>``, seeded
by ``make_corpus.py`` when empty; without ``--corpus`` it lives in a temporary directory.
Failing inputs are written to the artifacts directory (``--artifacts``, or that
temporary directory, which is then kept) and replay with
``python fuzz/fuzz_<target>.py <input>``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import make_corpus

HERE = Path(__file__).resolve().parent
#: Each target's share of the fuzzing time.
SHARES = {"scan": 0.25, "values": 0.15, "events": 0.15, "pcap": 0.15, "files": 0.15,
          "reassembly": 0.15}
_STATS = re.compile(r"cov: (\d+) ft: (\d+) corp: (\d+)")
_RUNS = re.compile(r"stat::number_of_executed_units: (\d+)")


def run_target(target: str, seconds: int, corpus: Path, artifacts: Path, *, timeout: int,
               rss_limit_mb: int) -> bool:
    """Fuzz one target for ``seconds``; print its executions and coverage; True if clean."""
    if not any(corpus.iterdir()):
        make_corpus.write(corpus, target)
    log = artifacts / f"{target}.log"
    env = {k: v for k, v in os.environ.items() if k != "DCPFAST_PUREPYTHON"}
    command = [sys.executable, str(HERE / f"fuzz_{target}.py"), str(corpus),
               f"-max_total_time={seconds}", f"-timeout={timeout}",
               f"-rss_limit_mb={rss_limit_mb}", f"-artifact_prefix={artifacts}/{target}-",
               "-print_final_stats=1"]
    began = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    text = log.read_text(errors="replace")
    stats = _STATS.findall(text)
    runs = _RUNS.findall(text)
    cov, ft, corp = stats[-1] if stats else ("?", "?", "?")
    print(f"{target:7} {'ok' if code == 0 else f'FAILED (exit {code})'}: "
          f"{runs[-1] if runs else '?'} executions in {time.monotonic() - began:.0f} s, "
          f"coverage {cov} edges / {ft} features, corpus {corp} inputs", flush=True)
    if code:
        print("".join(text.splitlines(keepends=True)[-60:]), end="")
        print(f"-- full log: {log}; failing input: {artifacts}/{target}-*", flush=True)
    return code == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60,
                        help="fuzzing time shared by all targets (default 60)")
    parser.add_argument("--targets", default=",".join(SHARES),
                        help=f"comma-separated subset of {', '.join(SHARES)}")
    parser.add_argument("--corpus", type=Path, help="keep each target's corpus in DIR/<target>")
    parser.add_argument("--artifacts", type=Path, help="where logs and failing inputs go")
    parser.add_argument("--timeout", type=int, default=10,
                        help="seconds one input may take before it counts as a hang")
    parser.add_argument("--rss-limit-mb", type=int, default=2048)
    args = parser.parse_args(argv)
    targets = args.targets.split(",")
    unknown = set(targets) - set(SHARES)
    if unknown:
        parser.error(f"unknown targets: {', '.join(sorted(unknown))}")
    scratch = Path(tempfile.mkdtemp(prefix="dcpfast-fuzz-"))
    artifacts = (args.artifacts or scratch / "artifacts").resolve()
    artifacts.mkdir(parents=True, exist_ok=True)
    total = sum(SHARES[t] for t in targets)
    clean = True
    for target in targets:
        corpus = (args.corpus or scratch / "corpus") / target
        corpus.mkdir(parents=True, exist_ok=True)
        seconds = max(1, round(args.seconds * SHARES[target] / total))
        clean &= run_target(target, seconds, corpus, artifacts, timeout=args.timeout,
                            rss_limit_mb=args.rss_limit_mb)
    if clean:
        shutil.rmtree(scratch)
        print("fuzzing clean")
        return 0
    print(f"fuzzing found problems; logs and inputs kept in {artifacts}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
