"""Scan by batch size, threads 1..N, and ``dcpfast convert`` with threads, on the mixed
corpus of the suite.

    python benchmarks/bench_threads.py                  # 1..cores threads
    python benchmarks/bench_threads.py --quick          # smoke run
    python benchmarks/bench_threads.py --threads 1 2 4 --wait-quiet 600 --readme

The batch-size table scans about 300,000 frames (``--items``) on one thread: the whole
buffer at once, then ``iter_batches`` over the same buffer in batches of 64 KiB to 64 MiB,
against the C probe of the suite. The threads table times, on the full mixed corpus (about
1,000,000 frames, ``--thread-items``), the scan of the buffer, the same buffer cut into
slices that threads scan apart without making one batch (the ceiling: no anchors, no
stitching), ``read`` and ``iter_batches`` of it as a file (in the page cache) and
``values()``, next to the machine's memory bandwidth at each thread count (a C probe over
a buffer the corpus's size, at least 256 MiB: threads reading, copying, and writing to
freshly mapped pages), and gives each path's input GB/s as a share of that read bandwidth;
the default table times ``scan`` and ``read`` with the default thread count
against one thread, as the machine is and with a CPU-bound process on every core (the
default must never lose); the convert table runs ``dcpfast convert`` to Parquet in this
process with each thread count. Every path is checked against one single-threaded scan before it is
timed. ``--wait-quiet SECONDS`` waits for idle CPUs before measuring (a shared machine's
load shows in thread figures first); ``--readme`` rewrites the section between the threads
markers of docs/benchmarks.md. Timings are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import threads as T  # noqa: E402
from suite.bandwidth import compile_bandwidth, run_bandwidth  # noqa: E402
from suite.common import CheckFailed, arguments, machine, print_machine, settle  # noqa: E402
from suite.corpora import CORPORA, load_corpus  # noqa: E402
from suite.probe import compile_probe  # noqa: E402

import dcpfast  # noqa: E402

CACHE = HERE / "results" / "cache"
DEFAULT_JSON = HERE / "results" / "bench_threads.json"
DOCS = HERE.parent / "docs" / "benchmarks.md"
DEFAULTS = dict(items=265_000, thread_items=880_000, repeat=9)
QUICK = dict(items=30_000, thread_items=120_000, repeat=3)


def main(argv=None) -> int:
    parser = arguments(__doc__, DEFAULTS, QUICK, DEFAULT_JSON,
                       items="document changes of the batch-size corpus")
    parser.add_argument("--thread-items", type=int, help="document changes of the threads "
                        f"corpus (default {DEFAULTS['thread_items']:,})")
    parser.add_argument("--threads", type=int, nargs="+", metavar="N",
                        help="thread counts (default 1 to the usable cores, at least 1 2)")
    parser.add_argument("--wait-quiet", type=float, default=0, metavar="SECONDS",
                        help="wait up to this long for idle CPUs before measuring")
    parser.add_argument("--readme", nargs="?", const=DOCS, type=Path, metavar="PATH",
                        help=f"rewrite the threads section of this file (default {DOCS})")
    args = settle(parser, argv, DEFAULTS, QUICK)
    counts = args.threads or list(range(1, max(len(os.sched_getaffinity(0)), 2) + 1))
    if args.wait_quiet:
        idle = T.wait_quiet(args.wait_quiet)
        print(f"idle CPUs: {'never, measuring anyway' if idle is None else f'{idle:.0%}'}")
    report = {"machine": machine(), "repeat": args.repeat}
    print_machine(report["machine"])
    try:
        with tempfile.TemporaryDirectory(prefix="dcpfast-threads-") as tmp:
            tmp = Path(tmp)
            exe, how = compile_probe(tmp)
            print(f"  probe    {how if exe else 'skipped: ' + how}")
            bandwidth_exe, bandwidth_how = compile_bandwidth(tmp)
            print(f"  memory   {bandwidth_how if bandwidth_exe else 'skipped: ' + bandwidth_how}")
            data, _, origin = load_corpus(CORPORA[0], args.items, CACHE)
            print(f"batch-size corpus ({origin}): {len(data):,} bytes")
            path = tmp / "sizes.dcp"
            path.write_bytes(data)
            report["batch_sizes"] = T.batch_sizes(data, args.repeat, exe, path)
            del data
            data, _, origin = load_corpus(CORPORA[0], args.thread_items, CACHE)
            print(f"threads corpus ({origin}): {len(data):,} bytes")
            path = tmp / "threads.dcp"
            path.write_bytes(data)
            report["threads"] = T.thread_counts(data, path, counts, args.repeat)
            if bandwidth_exe:      # the same thread counts, over as many bytes (or more)
                found, why = run_bandwidth(bandwidth_exe, len(data), counts, args.repeat)
            else:
                found, why = None, bandwidth_how
            report["bandwidth"] = found or {"skipped": why}
            print(f"memory bandwidth: {json.dumps(found) if found else 'skipped: ' + why}")
            part = tmp / "default.dcp"             # 75 MB of the corpus
            head = memoryview(data)[:75_000_000]   # its whole frames: a strict read
            part.write_bytes(head[:dcpfast.scan(head, collections=True).consumed])
            report["default"] = T.default_threads(part.read_bytes(), part, args.repeat)
            del data
            report["convert"] = T.convert(path, tmp, counts, max(args.repeat // 3, 3))
    except CheckFailed as failure:
        print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
        return 1
    report["load_after"] = T.load_after()
    T.print_report(report)
    if getattr(args, "json", None):
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(f"\nresults written to {args.json}")
    if args.readme:
        T.update_section(args.readme, report)
        print(f"threads section written into {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
