"""The dcpfast benchmark suite, in one command: scan, iter_batches, to_arrow and values() on
four synthetic corpora, against the pure-Python twin, a struct loop and a C probe.

    python benchmarks/bench_scan.py                 # full run, about 1,000,000 mixed frames
    python benchmarks/bench_scan.py --quick         # smoke run, no 2 GiB memory probe
    python benchmarks/bench_scan.py --json --readme # also write the JSON and the docs table
    python benchmarks/bench_scan.py --readme --from-json benchmarks/results/bench_scan.json

The suite lives in ``benchmarks/suite/`` (``dcpfast bench`` runs this script from a source
checkout); this runner caches the corpora in ``benchmarks/results/cache/`` (``--cache DIR``,
``--no-cache``) and ``--readme`` rewrites the table in ``docs/benchmarks.md``. Before
anything is timed, each decoded corpus is checked against the generator's own record of its
frames, and the two cores are checked to agree column for column; a failed check, a
missing compiled core or a ``--readme`` file without the markers make this script exit
non-zero. Timings are reported and compared with the targets, never asserted.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import scan  # noqa: E402


def main(argv=None) -> int:
    return scan.main(argv, cache=HERE / "results" / "cache",
                     json_default=HERE / "results" / "bench_scan.json",
                     table_default=HERE.parent / "docs" / "benchmarks.md")


if __name__ == "__main__":
    sys.exit(main())
