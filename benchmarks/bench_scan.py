"""Scan speed of dcpfast: the Cython core against its pure-Python twin, on one synthetic corpus.

    python benchmarks/bench_scan.py [--items N] [--repeat R] [--python-items M] [--json [PATH]]
    python benchmarks/bench_scan.py --quick

The measurement lives in ``dcpfast.bench`` (``dcpfast bench`` runs the same); this runner
caches the corpus in ``benchmarks/results/cache/``. Before anything is timed, the decoded
corpus is checked against the generator's own record of every frame, and the two cores are
checked to agree column for column; a failed check is the only way this script exits
non-zero. Timings are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
from pathlib import Path

from dcpfast import bench

HERE = Path(__file__).resolve().parent
CACHE = HERE / "results" / "cache"
DEFAULT_JSON = HERE / "results" / "bench_scan.json"


def parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, help="document changes to generate "
                        f"(default {bench.DEFAULTS['items']:,}: about 1,000,000 frames)")
    parser.add_argument("--repeat", type=int, help=f"timed runs after the warm-up, best kept "
                        f"(default {bench.DEFAULTS['repeat']})")
    parser.add_argument("--python-items", type=int, help="frames for the pure-Python twin and "
                        f"the struct baseline (default {bench.DEFAULTS['python_items']:,})")
    parser.add_argument("--json", nargs="?", const=DEFAULT_JSON, type=Path, metavar="PATH",
                        help=f"write the results as JSON (default path {DEFAULT_JSON})")
    parser.add_argument("--quick", action="store_true", help="smoke run: "
                        + ", ".join(f"{k}={v:,}" for k, v in bench.QUICK.items()))
    args = parser.parse_args(argv)
    for name, value in (bench.QUICK if args.quick else bench.DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in bench.DEFAULTS:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    return bench.run(items=args.items, repeat=args.repeat, python_items=args.python_items,
                     json_path=args.json, cache=CACHE)


if __name__ == "__main__":
    sys.exit(main())
