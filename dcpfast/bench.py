"""Scan speed of dcpfast: the Cython core against its pure-Python twin, on one synthetic corpus.

``run`` is what ``dcpfast bench`` and ``benchmarks/bench_scan.py`` print. The corpus is a
deterministic collection-enabled DCP conversation from ``dcpfast.testing.synthetic_frames``,
optionally cached in a directory. Before anything is timed, the decoded corpus is checked
against the generator's own record of every frame, and the two cores are checked to agree
column for column; a failed check is the only way ``run`` returns non-zero besides a missing
compiled core. Timings are reported, never judged.
"""

from __future__ import annotations

import gc
import hashlib
import inspect
import json
import os
import platform
import struct
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _scan_py, protocol, schema, testing
from .batch import IMPLEMENTATION, FrameBatch, scan

try:
    from . import _scan
except ImportError:
    _scan = None

#: Generator settings: a collection stream with sync writes, frames of about 240 bytes.
CORPUS = dict(seed=0, vbuckets=4, collections=True, sync_writes=True, value_size=205)
DEFAULTS = dict(items=880_000, repeat=5, python_items=100_000)   # ~1,000,000 frames
QUICK = dict(items=88_000, repeat=3, python_items=20_000)        # ~100,000 frames
PROJECTION = schema.resolve(["offset", "opcode", "vbucket", "by_seqno", "key_len"])
ALL_COLUMNS = schema.resolve(None)
_HEADER = struct.Struct(">BBHBBHIIQ")


class CheckFailed(Exception):
    """The corpus or a core's output is not what it must be: no figures are reported."""


def check(ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


# -- machine and corpus --------------------------------------------------------------------


def _version() -> str:
    from . import __version__
    return __version__


def machine() -> dict:
    """CPU, cores and the versions that shape the figures."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "platform": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "pyarrow": pa.__version__, "dcpfast": _version(),
            "implementation": IMPLEMENTATION}


def corpus_key(items: int) -> dict:
    """Everything the corpus bytes depend on, the generator's source included."""
    source = inspect.getsource(testing).encode()
    return {"items": items, **CORPUS, "generator": hashlib.sha256(source).hexdigest()[:16]}


def generate(key: dict) -> tuple[bytes, dict]:
    """The corpus bytes, and the generator's record of them to check the decoders against."""
    params = {k: v for k, v in key.items() if k != "generator"}
    frames = testing.synthetic_frames(params.pop("items"), **params)
    data = b"".join(f.data for f in frames)
    opcodes = Counter(f.fields["opcode"] for f in frames)
    expected = {
        "frames": len(frames), "bytes": len(data),
        "opcodes": {str(op): n for op, n in sorted(opcodes.items())},
        "by_seqno_sum": sum(f.fields.get("by_seqno", 0) for f in frames),
        "key_len_sum": sum(len(f.fields.get("key", b"")) for f in frames),
        "value_len_sum": sum(len(f.fields.get("value", b"")) for f in frames),
    }
    return data, expected


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_corpus(items: int, cache: Path | None = None) -> tuple[bytes, dict, str]:
    """The corpus for these parameters: read from ``cache`` when it is there, else
    generated (and written to ``cache`` when one is given)."""
    key = corpus_key(items)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    if cache is not None:
        path = Path(cache) / f"corpus-{items}-{digest}.dcp"
        meta = path.with_suffix(".json")
        if path.exists() and meta.exists():
            record = json.loads(meta.read_text())
            data = path.read_bytes()
            if record.get("key") == key and len(data) == record["expected"]["bytes"]:
                return data, record["expected"], f"cache {_shown(path)}"
    start = time.perf_counter()
    data, expected = generate(key)
    elapsed = time.perf_counter() - start
    if cache is None:
        return data, expected, f"generated in {elapsed:.1f} s"
    path.parent.mkdir(parents=True, exist_ok=True)
    for target, content in ((path, data),
                            (meta, json.dumps({"key": key, "expected": expected}).encode())):
        partial = target.with_suffix(target.suffix + ".partial")
        partial.write_bytes(content)
        os.replace(partial, target)
    return data, expected, f"generated in {elapsed:.1f} s, cached in {_shown(path)}"


def opcode_name(code: int) -> str:
    try:
        return protocol.Opcode(code).name
    except ValueError:
        return f"0x{code:02x}"


# -- what is timed ---------------------------------------------------------------------------


def core_scan(core, view, names):
    """One ``scan_buffer`` call as ``dcpfast.read`` makes it: collections on, strict, no
    frame limit, the buffer is the whole stream."""
    return core.scan_buffer(view, 0, names, True, False, -1, protocol.DEFAULT_MAX_FRAME_SIZE,
                            0, True)


def header_walk(view) -> tuple[list, list, list, list, list]:
    """Baseline: follow the body lengths with ``struct`` and list a few header fields."""
    unpack = _HEADER.unpack_from
    opcodes, vbuckets, bodies, opaques, cas_values = [], [], [], [], []
    pos, end = 0, len(view)
    while end - pos >= 24:
        _, opcode, _, _, _, vbucket, body, opaque, cas = unpack(view, pos)
        opcodes.append(opcode)
        vbuckets.append(vbucket)
        bodies.append(body)
        opaques.append(opaque)
        cas_values.append(cas)
        pos += 24 + body
    return opcodes, vbuckets, bodies, opaques, cas_values


@dataclass
class Timing:
    label: str
    frames: int
    nbytes: int
    times: list[float] = field(default_factory=list)
    ratio: float | None = None

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.best

    @property
    def gb_per_s(self) -> float:
        return self.nbytes / self.best / 1e9


def timed(label: str, frames: int, nbytes: int, fn, repeat: int) -> Timing:
    """Best of ``repeat`` runs of ``fn`` after one warm-up run."""
    fn()
    timing = Timing(label, frames, nbytes)
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        timing.times.append(time.perf_counter() - start)
    return timing


# -- checks ------------------------------------------------------------------------------------


def same_columns(a: dict, b: dict, names, what: str) -> None:
    for name in names:
        check(np.array_equal(a[name], b[name]), f"{what}: column {name} differs")


def verify(view, expected: dict, subset_frames: int) -> tuple[FrameBatch, int]:
    """Check both cores, the projection, the facade and the baseline; return the reference
    batch and the byte length of the first ``subset_frames`` frames."""
    result, failure = core_scan(_scan, view, ALL_COLUMNS)
    check(failure is None, f"Cython core: strict scan failed at {failure}")
    count, consumed, columns, kinds, regions, _ = result
    check(count == expected["frames"], f"Cython core: {count} frames, "
          f"the generator wrote {expected['frames']}")
    check(consumed == len(view) and not regions,
          f"Cython core: consumed {consumed} of {len(view)} bytes, {len(regions)} skipped")
    opcodes = {str(op): int(n) for op, n in enumerate(np.bincount(columns["opcode"])) if n}
    check(opcodes == expected["opcodes"], "Cython core: opcode mix differs from the generator's")
    for name in ("by_seqno", "key_len", "value_len"):
        total = int(columns[name].sum(dtype=np.uint64))
        check(total == expected[f"{name}_sum"],
              f"Cython core: sum of {name} {total}, generator {expected[f'{name}_sum']}")

    result, failure = core_scan(_scan, view, PROJECTION)
    check(failure is None and tuple(result[2]) == PROJECTION, "Cython projection failed")
    same_columns(result[2], columns, PROJECTION, "Cython projection")

    batch = scan(view, collections=True)
    for auto in (batch, scan(view)):
        check(auto.collections and len(auto) == count, "dcpfast.scan: wrong frames or mode")
        same_columns(auto.to_dict(), columns, ALL_COLUMNS, "dcpfast.scan")
    table = batch.to_arrow()
    check(table.num_rows == count, "to_arrow: wrong row count")
    for name in ("key", "value"):
        total = pc.sum(pc.binary_length(table[name])).as_py() or 0
        check(total == expected[f"{name}_len_sum"], f"to_arrow: {name} bytes {total}")

    end = int(columns["offset"][subset_frames]) if subset_frames < count else len(view)
    result, failure = core_scan(_scan_py, view[:end], ALL_COLUMNS)
    check(failure is None, f"pure-Python twin: strict scan failed at {failure}")
    check(result[0] == subset_frames and result[1] == end,
          f"pure-Python twin: {result[0]} frames over {result[1]} bytes")
    check(np.array_equal(result[3], kinds[:subset_frames]), "pure-Python twin: kinds differ")
    same_columns(result[2], {n: c[:subset_frames] for n, c in columns.items()}, ALL_COLUMNS,
                 "pure-Python twin vs Cython core")

    walked = header_walk(view[:end])
    check(walked[0] == columns["opcode"][:subset_frames].tolist(),
          "header walk: opcodes differ from the scan")
    return batch, end


# -- report ------------------------------------------------------------------------------------


def rate(x: float) -> str:
    return f"{x / 1e6:7.2f} M" if x >= 1e6 else f"{x / 1e3:7.1f} k"


def print_table(rows: list[Timing]) -> None:
    print(f"{'measurement':<46} {'frames':>10} {'best':>10} {'frames/s':>10} {'GB/s':>7}"
          f" {'x twin':>8}")
    for t in rows:
        ratio = f"{t.ratio:7.1f}x" if t.ratio is not None else f"{'-':>8}"
        print(f"{t.label:<46} {t.frames:>10,} {t.best * 1e3:>7.1f} ms {rate(t.frames_per_s):>10}"
              f" {t.gb_per_s:>7.3f} {ratio}")


def memory(view) -> dict:
    """Peak traced allocation during one all-columns ``dcpfast.scan``, with the input and
    output sizes it is to be compared with."""
    gc.collect()
    tracemalloc.start()
    batch = scan(view, collections=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    columns = sum(a.nbytes for a in batch.to_dict().values())
    return {"input_bytes": len(view), "columns_bytes": columns, "peak_bytes": peak,
            "peak_over_columns": peak / columns, "peak_over_input": peak / len(view)}


def run(*, items: int = DEFAULTS["items"], repeat: int = DEFAULTS["repeat"],
        python_items: int = DEFAULTS["python_items"], json_path: Path | None = None,
        cache: Path | None = None) -> int:
    """Check, time and print; write the figures to ``json_path`` if given. Returns the exit
    status: 0, 1 when a check failed, 2 when the compiled core is not in use."""
    if _scan is None or IMPLEMENTATION != "cython":
        print("the compiled core is not in use: build it with `python setup.py build_ext "
              "--inplace` and unset DCPFAST_PUREPYTHON", file=sys.stderr)
        return 2
    info = machine()
    print("machine")
    print(f"  cpu      {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable)")
    print(f"  python   {info['python']}  numpy {info['numpy']}  pyarrow {info['pyarrow']}  "
          f"dcpfast {info['dcpfast']} ({info['implementation']} core)")

    data, expected, origin = load_corpus(items, cache)
    view = memoryview(data)
    frames, size = expected["frames"], len(data)
    print(f"\ncorpus ({origin})")
    print(f"  {items:,} document changes: {frames:,} frames, {size:,} bytes, "
          f"mean frame {size / frames:.1f} bytes")
    print("  " + ", ".join(f"{k}={v}" for k, v in CORPUS.items()))
    mix = sorted(((n, int(op)) for op, n in expected["opcodes"].items()), reverse=True)
    cells = [f"{opcode_name(op):<16}{n:>9,} {100 * n / frames:4.1f}%" for n, op in mix]
    print("  opcodes")
    for at in range(0, len(cells), 3):
        print("    " + "  ".join(cells[at:at + 3]))

    subset = min(python_items, frames)
    try:
        batch, subset_bytes = verify(view, expected, subset)
    except CheckFailed as failure:
        print(f"\nCHECK FAILED: {failure}", file=sys.stderr)
        return 1
    print("\nchecks passed")
    print("  Cython core against the generator: frame count, bytes consumed, opcode mix, sums "
          "of by_seqno,\n  key_len and value_len; the projection, both dcpfast.scan calls and "
          "to_arrow's key/value bytes\n  against the Cython core; the pure-Python twin equals "
          f"the Cython core on all {len(ALL_COLUMNS)} columns\n  of the first {subset:,} frames, "
          "and so do the struct walk's opcodes")

    r = repeat
    sub = view[:subset_bytes]
    core_all = timed("Cython scan_buffer, all columns", frames, size,
                     lambda: core_scan(_scan, view, ALL_COLUMNS), r)
    core_projection = timed(f"Cython scan_buffer, {len(PROJECTION)} columns", frames, size,
                            lambda: core_scan(_scan, view, PROJECTION), r)
    facade = timed("dcpfast.scan(collections=True)", frames, size,
                   lambda: scan(view, collections=True), r)
    auto = timed("dcpfast.scan(collections=None), auto-detect", frames, size,
                 lambda: scan(view), r)
    to_arrow = timed("batch.to_arrow() (on top of the scan)", frames, size, batch.to_arrow, r)
    both = Timing("dcpfast.scan + to_arrow() (sum of bests)", frames, size,
                  [facade.best + to_arrow.best])
    twin = timed("pure-Python twin scan_buffer, all columns", subset, subset_bytes,
                 lambda: core_scan(_scan_py, sub, ALL_COLUMNS), r)
    walk = timed("struct.unpack_from header walk", subset, subset_bytes,
                 lambda: header_walk(sub), r)
    rows = [core_all, core_projection, facade, auto, to_arrow, both, twin, walk]
    for t in rows:
        if t is not to_arrow:
            t.ratio = t.frames_per_s / twin.frames_per_s
    del batch

    print(f"\nspeed (best of {r} after a warm-up; the twin and the struct walk run on the first\n"
          f"{subset:,} frames, {subset_bytes:,} bytes; x twin compares frames/s)")
    print_table(rows)

    mem = memory(view)
    print("\nmemory (tracemalloc peak during one all-columns dcpfast.scan)")
    print(f"  input {mem['input_bytes'] / 1e6:.1f} MB, output columns "
          f"{mem['columns_bytes'] / 1e6:.1f} MB, peak {mem['peak_bytes'] / 1e6:.1f} MB: "
          f"peak / columns = {mem['peak_over_columns']:.2f}, "
          f"peak / input = {mem['peak_over_input']:.2f}")

    if json_path:
        json_path = Path(json_path)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "machine": info,
            "corpus": {**corpus_key(items), "frames": frames, "bytes": size,
                       "mean_frame_bytes": size / frames,
                       "opcodes": {opcode_name(op): n for n, op in mix}},
            "repeat": r, "python_frames": subset, "python_bytes": subset_bytes,
            "timings": [{**asdict(t), "best": t.best, "frames_per_s": t.frames_per_s,
                         "gb_per_s": t.gb_per_s} for t in rows],
            "memory": mem,
        }
        json_path.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {json_path}")
    return 0
