"""Speed of ``dcpfast report`` on a dump next to ``dcpfast convert`` of the same dump to
Parquet, in the same run; and the report page's size and render time in a headless browser.

    python benchmarks/bench_report.py [--items N] [--repeat R] [--threads T] [--cache DIR]
    python benchmarks/bench_report.py --quick
    python benchmarks/bench_report.py --page [--renders N]

Writes the suite's mixed corpus (about a million frames) to a file and times, taking turns
(best of R after a warm-up, gc paused), the commands as a user runs them, in this process:
``convert FILE -o OUT.parquet``, ``report FILE --json OUT.json`` and ``report FILE -o
OUT.html`` (the page too), each with ``--threads T`` (default: the commands' own). It first checks
that the report counts every frame. ``--page`` times instead the render of report pages in
Debian's headless Chromium (``tests/browser.py``; ``apt-get install
chromium-headless-shell``): the bundled capture's page and the corpus' page, each loaded N
times in a fresh browser until every chart is drawn (``window.__reportReadyAt``). Timings
are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics
import sys
import tempfile
from pathlib import Path

import dcpfast
from dcpfast.cli import main as command
from dcpfast.testing import SAMPLE_PCAP

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite import common  # noqa: E402
from suite.common import arguments, settle  # noqa: E402
from suite.corpora import CORPORA, load_corpus, print_corpus  # noqa: E402
from suite.timing import Timing, take_turns  # noqa: E402

MIXED = CORPORA[0]
DEFAULTS = dict(items=MIXED.items, repeat=3)
QUICK = dict(items=20_000, repeat=1)


def run(*args) -> None:
    """One ``dcpfast`` command, in this process; its one line of output hidden."""
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            command([str(a) for a in args], standalone_mode=False)
        finally:
            sys.stdout = stdout


def speed(args, where: Path) -> int:
    data, expected, origin = load_corpus(MIXED, args.items, args.cache)
    print_corpus(MIXED, args.items, expected, origin)
    dump = where / "corpus.dcp"
    dump.write_bytes(data)
    del data
    threads = ["--threads", str(args.threads)] if args.threads else []
    figures = dcpfast.report(dump, threads=args.threads).figures
    if figures["frames"] != expected["frames"]:
        print(f"\nCHECK FAILED: the report counts {figures['frames']:,} frames of "
              f"{expected['frames']:,}", file=sys.stderr)
        return 1
    frames, size = expected["frames"], expected["bytes"]
    again = ["--force", *threads]          # each run replaces the last one's output
    runs = [("convert -o OUT.parquet", lambda: run("convert", "-q", dump, "-o",
                                                    where / "out.parquet", *again)),
            ("report --json OUT.json", lambda: run("report", dump, "--json",
                                                   where / "out.json", *again)),
            ("report -o OUT.html", lambda: run("report", dump, "-o", where / "out.html",
                                               *again))]
    timings = [Timing(label, frames, size) for label, _ in runs]
    take_turns(list(zip(timings, [fn for _, fn in runs])), args.repeat)
    base = timings[0].best
    print(f"\nspeed (best of {args.repeat} after a warm-up, taking turns, gc paused, threads "
          f"{args.threads or 'the default'}; x convert compares times)")
    print(f"{'command':<26} {'best':>9} {'M frames/s':>11} {'MB/s':>8} {'x convert':>10}")
    for t in timings:
        print(f"{t.label:<26} {t.best:>7.2f} s {t.frames_per_s / 1e6:>11.2f} "
              f"{t.gb_per_s * 1e3:>8.1f} {t.best / base:>10.2f}")
    print(f"\npage of the corpus: {(where / 'out.html').stat().st_size:,} bytes; JSON "
          f"{(where / 'out.json').stat().st_size:,} bytes")
    return 0


def renders(args, where: Path) -> int:
    sys.path.insert(0, str(HERE.parent))            # the tests' package, as tests.browser
    from tests.browser import find_browser, open_page

    if find_browser() is None:
        print("no headless Chromium: apt-get install chromium-headless-shell", file=sys.stderr)
        return 1
    data, _, _ = load_corpus(MIXED, args.items, args.cache)
    (where / "corpus.dcp").write_bytes(data)
    pages = {"bundled capture": (SAMPLE_PCAP, where / "sample.html"),
             "corpus dump": (where / "corpus.dcp", where / "corpus.html")}
    print(f"\nrender in {find_browser()} (median of {args.renders} fresh browsers; "
          "ms from navigation until every chart is drawn)")
    print(f"{'page':<18} {'bytes':>11} {'render ms':>10} {'min-max':>13} {'errors':>7}")
    for name, (source, page) in pages.items():
        dcpfast.report(source).to_html(page)
        times, errors = [], 0
        for _ in range(args.renders):
            with open_page(page) as opened:
                times.append(opened.evaluate("window.__reportReadyAt"))
                errors += len(opened.errors)
        print(f"{name:<18} {page.stat().st_size:>11,} {statistics.median(times):>10,.0f} "
              f"{min(times):>6,.0f}-{max(times):<6,.0f} {errors:>7}")
    return 0


def main(argv=None) -> int:
    parser = arguments(__doc__, DEFAULTS, QUICK)
    parser.add_argument("--threads", type=int, help="--threads of the commands (default: "
                        "the commands' own: the cores idle now)")
    parser.add_argument("--cache", type=Path, help="directory to keep the corpus in")
    parser.add_argument("--page", action="store_true", help="time the page's render instead")
    parser.add_argument("--renders", type=int, default=7, help="renders per page (--page)")
    args = settle(parser, argv, DEFAULTS, QUICK)
    common.print_machine(common.machine())
    with tempfile.TemporaryDirectory(prefix="bench-report-") as where:
        return (renders if args.page else speed)(args, Path(where))


if __name__ == "__main__":
    sys.exit(main())
