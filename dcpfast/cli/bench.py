"""``dcpfast bench``: the benchmark suite of the source checkout this dcpfast runs from."""

from __future__ import annotations

import os
import sys

import click

from .app import main

#: The benchmark suite's runner in the source checkout this package sits in; an installed
#: dcpfast has none (the suite compiles a C probe and writes files, so it is not shipped).
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
BENCH_SCRIPT = os.path.join(_CHECKOUT, "benchmarks", "bench_scan.py")


class _InCheckout(click.Command):
    """A command listed in ``dcpfast --help`` only where it can run: in a source checkout
    (an installed dcpfast has no benchmark suite)."""

    @property
    def hidden(self) -> bool:
        return not os.path.isfile(BENCH_SCRIPT)

    @hidden.setter
    def hidden(self, value: bool) -> None:
        pass


@main.command(cls=_InCheckout)
@click.option("--quick", is_flag=True, help="A smoke run (about 100,000 mixed frames, no "
              "memory probe).")
@click.option("--items", type=click.IntRange(min=1), help="Document changes of the mixed "
              "corpus, the others in proportion (default 880,000: about 1,000,000 frames).")
@click.option("--repeat", type=click.IntRange(min=1), help="Timed runs after the warm-up.")
@click.option("--python-items", type=click.IntRange(min=1),
              help="Frames for the pure-Python twin and the struct baseline.")
@click.option("--corpus", "corpora", multiple=True,
              type=click.Choice(["mixed", "small", "large", "stream_ids"]),
              help="Run only this corpus (repeatable; default all).")
@click.option("--rss/--no-rss", default=None, help="Measure the peak RSS of iter_batches "
              "over a 2 GiB dump (default: on, off with --quick).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Also write the figures as JSON to this file.")
@click.option("--cache", type=click.Path(file_okay=False),
              help="Keep the generated corpora in this directory for later runs.")
@click.option("--readme", type=click.Path(dir_okay=False, exists=True),
              help="Rewrite the performance table between the benchmark markers of this "
              "file (docs/benchmarks.md in the source tree).")
def bench(quick, items, repeat, python_items, corpora, rss, json_path, cache, readme):
    """Check and time the scanner on synthetic corpora against baselines and a C probe,
    and print the table and the targets.

    Runs benchmarks/bench_scan.py of the source checkout dcpfast is used from.
    """
    if not os.path.isfile(BENCH_SCRIPT):
        raise click.ClickException(
            "the benchmark suite lives in the source tree's benchmarks/ (python "
            "benchmarks/bench_scan.py in a checkout of dcpfast); this dcpfast has none")
    args = ["--quick"] if quick else []
    for flag, value in (("--items", items), ("--repeat", repeat),
                        ("--python-items", python_items), ("--json", json_path),
                        ("--cache", cache), ("--readme", readme)):
        if value is not None:
            args.append(f"{flag}={value}")
    if cache is None:
        args.append("--no-cache")
    if rss is not None:
        args.append("--rss" if rss else "--no-rss")
    args += [f"--corpus={name}" for name in corpora]
    import runpy

    argv, sys.argv = sys.argv, [BENCH_SCRIPT, *args]
    try:                          # the script exits with its status
        runpy.run_path(BENCH_SCRIPT, run_name="__main__")
    finally:
        sys.argv = argv
