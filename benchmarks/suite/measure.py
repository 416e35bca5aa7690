"""One corpus checked and timed: the scan with all columns and with five, ``iter_batches``
over a file, the Arrow conversions, ``values()``, the probe, the twin and the ``struct``
walk, all on one thread (threads: ``bench_threads.py``); and the lines that print its
figures."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from dcpfast import COLUMNS, read, scan

from .common import check
from .corpora import Corpus, opcode_name
from .decoders import ALL_COLUMNS, PROJECTION, TWIN, core_scan, file_scan, header_walk
from .probe import run_probe
from .timing import Timing, take_turns
from .verify import verify, verify_probe

#: The order of the rows of ``print_speed``.
ROW_ORDER = ("probe", "scan", "scan5", "iter_batches", "iter_batches_mapped", "read",
             "read_mapped", "to_arrow", "to_arrow_view", "values", "scan_views",
             "to_arrow_early", "twin", "struct")


def measure(corpus: Corpus, items: int, data: bytes, expected: dict, *, repeat: int,
            python_items: int, probe: Path | None, directory: Path) -> dict:
    """Check one corpus and time everything on it; returns its part of the report."""
    view = memoryview(data)
    frames, size = expected["frames"], len(data)
    subset = min(python_items, frames)
    batch, subset_bytes = verify(corpus.name, view, expected, subset)
    path = directory / f"{corpus.name}.dcp"
    path.write_bytes(data)
    try:
        found, probe_bests = None, []
        if probe is not None:
            found = run_probe(probe, path, 1)
            verify_probe(corpus.name, found, batch)
        check(file_scan(path) == frames == file_scan(path, memory_map=True),
              f"{corpus.name}: iter_batches: frame count differs")
        check(len(read(path, collections=True, threads=1)) == frames,
              f"{corpus.name}: read: frame count differs")
        early = scan(view, collections=True, binary_views=True, threads=1)
        check(early.to_arrow(binary_view=True).equals(batch.to_arrow(binary_view=True)),
              f"{corpus.name}: the views written by the scan differ from to_arrow's")
        rows = {
            "scan": Timing(f"scan, all {len(COLUMNS)} columns", frames, size),
            "scan5": Timing(f"scan, {len(PROJECTION)} columns", frames, size),
            "iter_batches": Timing("iter_batches(file), all columns", frames, size),
            "iter_batches_mapped": Timing("the same, memory_map=True", frames, size),
            "read": Timing("read(file), all columns", frames, size),
            "read_mapped": Timing("the same, memory_map=True", frames, size),
            "to_arrow": Timing("to_arrow() alone: binary, gathered", frames, size),
            "to_arrow_view": Timing("to_arrow(binary_view=True) alone", frames, size),
            "scan_views": Timing("scan(binary_views=True), all columns", frames, size),
            "to_arrow_early": Timing("to_arrow(binary_view=True) after it", frames, size),
            "values": Timing("values() alone", frames, size),
            "twin": Timing("pure-Python twin, all columns", subset, subset_bytes),
            "struct": Timing("struct.unpack_from header walk", subset, subset_bytes),
        }
        sub = view[:subset_bytes]
        runs = [
            (rows["scan"], lambda: scan(view, collections=True, threads=1)),
            (rows["scan5"], lambda: scan(view, collections=True, columns=PROJECTION,
                                         threads=1)),
            (rows["iter_batches"], lambda: file_scan(path)),
            (rows["iter_batches_mapped"], lambda: file_scan(path, memory_map=True)),
            (rows["read"], lambda: read(path, collections=True, threads=1)),
            (rows["read_mapped"], lambda: read(path, collections=True, threads=1,
                                               memory_map=True)),
            (rows["to_arrow"], batch.to_arrow),
            (rows["to_arrow_view"], lambda: batch.to_arrow(binary_view=True)),
            (rows["scan_views"], lambda: scan(view, collections=True, binary_views=True,
                                              threads=1)),
            (rows["to_arrow_early"], lambda: early.to_arrow(binary_view=True)),
            (rows["values"], lambda: batch.values(threads=1)),
        ]
        if probe is not None:      # in turn with the others; its own clock, best of 3 walks
            runs.append((Timing("", 0, 0), lambda: probe_bests.append(
                run_probe(probe, path, 3)["best"])))
        take_turns(runs, repeat)
        take_turns([(rows["twin"], lambda: core_scan(TWIN, sub, ALL_COLUMNS)),
                    (rows["struct"], lambda: header_walk(sub))], repeat)
    finally:
        path.unlink()
    if found is not None:
        rows["probe"] = Timing("C probe: body lengths + 3 fields", frames, size,
                               probe_bests[1:])
    return {"title": corpus.title, "params": corpus.params, "items": items, "frames": frames,
            "bytes": size, "mean_frame_bytes": size / frames, "python_frames": subset,
            "python_bytes": subset_bytes, "probe": found,
            "opcodes": {opcode_name(int(op)): n for op, n in expected["opcodes"].items()},
            "timings": compared(rows)}


def compared(rows: dict[str, Timing]) -> dict[str, dict]:
    """Each timing with its rates, and compared with the others: the time a conversion
    adds to its scan (``over_scan``), or how many times the twin's and the struct walk's
    frames/s a scan reaches and which share of the probe's (``x_twin``, ``of_probe``)."""
    scan_best = rows["scan"].best
    timings = {}
    for key, t in rows.items():
        entry = {**asdict(t), "best": t.best, "frames_per_s": t.frames_per_s,
                 "gb_per_s": t.gb_per_s}
        if key == "to_arrow_early":
            entry["over_scan"] = t.best / rows["scan_views"].best
        elif key in ("to_arrow", "to_arrow_view", "values"):
            entry["over_scan"] = t.best / scan_best
        else:
            entry["x_twin"] = t.frames_per_s / rows["twin"].frames_per_s
            entry["x_struct"] = t.frames_per_s / rows["struct"].frames_per_s
            if "probe" in rows:
                entry["of_probe"] = t.frames_per_s / rows["probe"].frames_per_s
        timings[key] = entry
    return timings


def rate(x: float) -> str:
    """A rate with a k or M suffix."""
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    return f"{x / 1e3:.1f} k" if x >= 1e3 else f"{x:.0f}"


def _times(x: float | None) -> str:
    return "" if x is None else f"{x:,.1f}x" if x < 1000 else f"{x:,.0f}x"


def print_speed(name: str, part: dict) -> None:
    """The table of one corpus's timings."""
    print(f"\n{name}: {part['frames']:,} frames, {part['bytes'] / 1e6:,.1f} MB "
          f"(the twin and the struct walk: the first {part['python_frames']:,} frames)")
    print(f"  {'measurement':<38} {'best':>10} {'frames/s':>9} {'GB/s':>6} {'x twin':>8}"
          f" {'x struct':>8} {'of probe':>8} {'of scan':>8}")
    for key in ROW_ORDER:
        t = part["timings"].get(key)
        if t is None:
            continue
        of_probe = f"{t['of_probe']:.0%}" if "of_probe" in t else ""
        over = f"+{t['over_scan']:.0%}" if "over_scan" in t else ""
        print(f"  {t['label']:<38} {t['best'] * 1e3:>7.1f} ms {rate(t['frames_per_s']):>9}"
              f" {t['gb_per_s']:>6.2f} {_times(t.get('x_twin')):>8}"
              f" {_times(t.get('x_struct')):>8} {of_probe:>8} {over:>8}")
