"""The dcpfast benchmark suite: scan speed on four synthetic corpora, against baselines and a
machine-limit probe, with the targets it is held to.

``run`` is what ``benchmarks/bench_scan.py`` (and ``dcpfast bench`` from a source checkout)
prints. The corpora are deterministic conversations written by ``dcpfast.testing``
(optionally cached in a directory): mixed document changes in frames of about 240 bytes,
small documents in frames of about 100 bytes, values of 64 KiB to 1 MiB, and a collection
stream with stream-ids. Before anything is timed, each decoded corpus is checked against
the generator's record of its frames, the two cores are checked to agree column for
column, and the probe's frames against the scan's; a failed check is the only way ``run``
returns non-zero besides a missing compiled core. Timings are reported and compared with
the targets, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from pathlib import Path

import dcpfast

from .common import CheckFailed, arguments, machine, print_machine, settle
from .corpora import CORPORA, CORPUS_NAMES, corpus_items, load_corpus, print_corpus
from .decoders import COMPILED
from .measure import measure, print_speed
from .memory import RSS_DUMP_BYTES, rss_probe, traced_memory
from .probe import compile_probe
from .table import check_target, update_table
from .targets import print_targets, targets

DEFAULTS = dict(items=880_000, repeat=9, python_items=100_000)   # ~1,000,000 mixed frames
QUICK = dict(items=88_000, repeat=3, python_items=20_000)        # ~100,000 mixed frames


def run(*, items: int = DEFAULTS["items"], repeat: int = DEFAULTS["repeat"],
        python_items: int = DEFAULTS["python_items"], corpora=CORPUS_NAMES, rss: bool = True,
        json_path: Path | None = None, cache: Path | None = None,
        table: Path | None = None) -> int:
    """Check, time and print; write the figures to ``json_path`` and the performance table
    into ``table`` if given. ``items`` sizes the mixed corpus, the others in proportion.
    Returns the exit status: 0, 1 when a check failed, 2 when the compiled core is not in
    use."""
    if COMPILED is None or dcpfast.IMPLEMENTATION != "cython":
        print("the compiled core is not in use: build it with `python setup.py build_ext "
              "--inplace` and unset DCPFAST_PUREPYTHON", file=sys.stderr)
        return 2
    unknown = set(corpora) - set(CORPUS_NAMES)
    if unknown:
        raise ValueError(f"unknown corpora {sorted(unknown)}; known: {CORPUS_NAMES}")
    report = {"machine": machine(), "repeat": repeat, "python_items": python_items,
              "items": items, "corpora": {}, "rss": None}
    print_machine(report["machine"])
    try:
        with tempfile.TemporaryDirectory(prefix="dcpfast-bench-") as tmp:
            measure_all(report, Path(tmp), corpora=corpora, items=items, repeat=repeat,
                        python_items=python_items, rss=rss, cache=cache)
    except CheckFailed as failure:
        print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
        return 1
    print("\nchecks passed: per corpus the Cython core against the generator (frame count, "
          "bytes,\n  opcode mix, sums of by_seqno, key_len and value_len); the projection, "
          "dcpfast.scan,\n  to_arrow's key/value bytes, values() rows and the probe's frames "
          "against it; the\n  pure-Python twin equals it on all columns of the first "
          f"{python_items:,} frames, and so\n  do the struct walk's opcodes")
    report["process_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  peak RSS of this process: {report['process_peak_rss_bytes'] / 2**20:,.0f} MiB")
    report["targets"] = targets(report)
    print_targets(report["targets"])
    if json_path:
        json_path = Path(json_path)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {json_path}")
    if table:
        update_table(table, report)
        print(f"performance table written into {table}")
    return 0


def measure_all(report: dict, tmp: Path, *, corpora, items: int, repeat: int,
                python_items: int, rss: bool, cache: Path | None) -> None:
    """Compile the probe in ``tmp``, check and time every corpus of ``corpora``, then the
    memory of the mixed one, printing as it goes and filling ``report``."""
    exe, how = compile_probe(tmp)
    report["probe"] = {"compiled": exe is not None, "command" if exe else "note": how}
    print(f"  probe    {how if exe else 'skipped: ' + how}")
    print(f"  timing   best of {repeat} runs after a warm-up, the measurements of a "
          "corpus taking turns, gc paused;\n           the probe times itself (best "
          "of 3 walks a run); 'of scan' is the time added to the scan")
    mixed = None
    for corpus in CORPORA:
        if corpus.name not in corpora:
            continue
        n = corpus_items(corpus, items)
        data, expected, origin = load_corpus(corpus, n, cache)
        print_corpus(corpus, n, expected, origin)
        part = measure(corpus, n, data, expected, repeat=repeat, python_items=python_items,
                       probe=exe, directory=tmp)
        part["origin"] = origin
        report["corpora"][corpus.name] = part
        print_speed(corpus.name, part)
        if corpus.name == "mixed":
            mixed = (data, expected)
            report["memory"] = m = traced_memory(memoryview(data))
            print(f"  Python's peak plus the core's mapped spans during one all-columns scan: "
                  f"{m['peak_bytes'] / 1e6:.1f} MB for {m['input_bytes'] / 1e6:.1f} MB "
                  f"of input and {m['columns_bytes'] / 1e6:.1f} MB of columns")
        del data
    if rss and mixed is not None:
        print(f"\niter_batches memory: a fresh interpreter reads the mixed corpus "
              f"repeated to {RSS_DUMP_BYTES / 2**30:.0f} GiB ...")
        report["rss"] = found = rss_probe(*mixed, tmp)
        for key in ("all_columns", "projection", "all_columns_mapped"):
            r = found[key]
            print(f"  {key.replace('_', ' ')}: baseline (after imports) "
                  f"{r['baseline_bytes'] / 2**20:,.0f} MiB, peak "
                  f"{r['peak_bytes'] / 2**20:,.0f} MiB, {r['frames']:,} frames from "
                  f"{found['dump_bytes'] / 1e9:.2f} GB in {r['seconds']:.1f} s")


def main(argv=None, *, cache: Path | None = None, json_default: Path | None = None,
         table_default: Path | None = None) -> int:
    """The suite's command line (``benchmarks/bench_scan.py``): corpora cached in ``cache``
    unless told otherwise, the JSON report and the performance table written on request."""
    parser = arguments(__doc__, DEFAULTS, QUICK, json_default,
                       items="document changes of the mixed corpus, the others in proportion")
    parser.add_argument("--python-items", type=int, help="frames for the pure-Python twin "
                        f"and the struct baseline (default {DEFAULTS['python_items']:,})")
    parser.add_argument("--corpus", action="append", choices=CORPUS_NAMES,
                        help="run only this corpus (repeatable; default all)")
    parser.add_argument("--rss", action=argparse.BooleanOptionalAction, default=None,
                        help="measure the peak RSS of iter_batches over a 2 GiB dump "
                        "(default: on, off with --quick)")
    parser.add_argument("--cache", type=Path, default=cache, metavar="DIR",
                        help=f"keep the generated corpora in this directory (default {cache})")
    parser.add_argument("--no-cache", dest="cache", action="store_const", const=None,
                        help="generate the corpora afresh and keep none")
    parser.add_argument("--readme", nargs="?", const=table_default, type=Path,
                        metavar="PATH", help="rewrite the performance table between the "
                        f"benchmark markers of this file (default {table_default})")
    parser.add_argument("--from-json", type=Path, metavar="PATH", help="measure nothing: "
                        "rewrite the performance table (--readme) from this JSON report")
    args = settle(parser, argv, DEFAULTS, QUICK)
    if args.from_json and not args.readme:
        parser.error("--from-json needs --readme")
    if args.readme:
        try:
            check_target(args.readme)          # before minutes of measuring, not after
        except ValueError as e:
            parser.exit(2, f"{parser.prog}: error: {e}\n")
    if args.from_json:
        update_table(args.readme, json.loads(args.from_json.read_text()))
        print(f"performance table written into {args.readme}")
        return 0
    return run(items=args.items, repeat=args.repeat, python_items=args.python_items,
               corpora=tuple(args.corpus or CORPUS_NAMES),
               rss=not args.quick if args.rss is None else args.rss,
               json_path=getattr(args, "json", None), cache=args.cache, table=args.readme)
