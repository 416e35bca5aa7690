"""The dcpfast benchmark suite, in one command: scan, iter_batches, to_arrow and values() on
four synthetic corpora, against the pure-Python twin, a struct loop and a C probe.

    python benchmarks/bench_scan.py                 # full run, about 1,000,000 mixed frames
    python benchmarks/bench_scan.py --quick         # smoke run, no 2 GiB memory probe
    python benchmarks/bench_scan.py --json --readme # also write the JSON and the README table
    python benchmarks/bench_scan.py --readme --from-json benchmarks/results/bench_scan.json

The measurement lives in ``dcpfast.bench`` (``dcpfast bench`` runs the same); this runner
caches the corpora in ``benchmarks/results/cache/``. Before anything is timed, each decoded
corpus is checked against the generator's own record of its frames, and the two cores are
checked to agree column for column; a failed check is the only way this script exits
non-zero. Timings are reported and compared with the targets, never asserted.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
from pathlib import Path

from dcpfast import bench

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    return bench.main(argv, cache=HERE / "results" / "cache",
                      json_default=HERE / "results" / "bench_scan.json",
                      readme_default=HERE.parent / "README.md")


if __name__ == "__main__":
    sys.exit(main())
