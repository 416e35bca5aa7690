"""The dcpfast benchmark suite: scan speed on four synthetic corpora, against baselines and a
machine-limit probe, with the targets it is held to.

``run`` is what ``dcpfast bench`` and ``benchmarks/bench_scan.py`` print. The corpora are
deterministic conversations written by ``dcpfast.testing`` (optionally cached in a
directory): mixed document changes in frames of about 240 bytes, small documents in frames
of about 100 bytes, values of 64 KiB to 1 MiB, and a collection stream with stream-ids.
Before anything is timed, each decoded corpus is checked against the generator's record of
its frames, the two cores are checked to agree column for column, and the probe's frames
against the scan's; a failed check is the only way ``run`` returns non-zero besides a
missing compiled core. Timings are reported and compared with the targets, never asserted.

The probe is a C loop compiled at run time with the platform's compiler: it follows the
body lengths through the corpus in memory and stores three header fields per frame into
arrays, which is about the least any scanner must do, so its frames/s is the machine's
limit for this corpus.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import inspect
import json
import os
import platform
import random
import re
import resource
import shlex
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _core, protocol, schema, testing
from .batch import IMPLEMENTATION, FrameBatch, scan
from .io import DEFAULT_BATCH_BYTES, iter_batches

_scan_py = _core.twins()["scan"]
_scan = (_core.compiled() or {}).get("scan")

PROJECTION = schema.resolve(["offset", "opcode", "vbucket", "by_seqno", "key_len"])
ALL_COLUMNS = schema.resolve(None)
DEFAULTS = dict(items=880_000, repeat=9, python_items=100_000)   # ~1,000,000 mixed frames
QUICK = dict(items=88_000, repeat=3, python_items=20_000)        # ~100,000 mixed frames
#: The ``iter_batches`` memory probe reads a dump of at least this many bytes.
RSS_DUMP_BYTES = 2**31
_HEADER = struct.Struct(">BBHBBHIIQ")
_DOCUMENTS = (protocol.Opcode.MUTATION, protocol.Opcode.DELETION, protocol.Opcode.EXPIRATION,
              protocol.Opcode.PREPARE)


class CheckFailed(Exception):
    """A corpus or a decoder's output is not what it must be: no figures are reported."""


def check(ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


# -- machine ---------------------------------------------------------------------------------


def _version() -> str:
    from . import __version__
    return __version__


def machine() -> dict:
    """CPU, cores, memory and the versions that shape the figures."""
    cpu = platform.processor() or platform.machine()
    memory = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "memory_bytes": memory, "load_average": list(os.getloadavg()),
            "platform": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "pyarrow": pa.__version__, "dcpfast": _version(),
            "implementation": IMPLEMENTATION}


def print_machine(info: dict) -> None:
    print("machine")
    memory = f", {info['memory_bytes'] / 2**30:.0f} GiB" if info.get("memory_bytes") else ""
    print(f"  cpu      {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable)"
          f"{memory}, load {' '.join(f'{x:.1f}' for x in info['load_average'])}")
    print(f"  python   {info['python']}  numpy {info['numpy']}  pyarrow {info['pyarrow']}  "
          f"dcpfast {info['dcpfast']} ({info['implementation']} core)")


# -- corpora ---------------------------------------------------------------------------------


def large_frames(items: int, *, seed: int, vbuckets: int, min_value: int, max_value: int,
                 snapshot_size: int = 8) -> list[testing.SyntheticFrame]:
    """Mutations of binary values of ``min_value`` to ``max_value`` bytes (uniform) on a
    collection stream, in snapshots of ``snapshot_size`` per vbucket, round robin."""
    rng = random.Random(seed)
    ids = sorted(rng.sample(range(1024), vbuckets))
    seqnos = dict.fromkeys(ids, 0)
    out = []
    for start in range(0, items, snapshot_size):
        vbucket = ids[(start // snapshot_size) % vbuckets]
        count = min(snapshot_size, items - start)
        first = seqnos[vbucket] + 1
        out.append(testing.SyntheticFrame(
            testing.snapshot_marker(first, first + count - 1, vbucket=vbucket),
            {"opcode": protocol.Opcode.SNAPSHOT_MARKER}))
        for seqno in range(first, first + count):
            key = b"blob::%08d" % rng.randrange(10**8)
            value = rng.randbytes(rng.randint(min_value, max_value))
            data = testing.mutation(key, value, by_seqno=seqno, collection_id=8,
                                    vbucket=vbucket, cas=rng.getrandbits(63))
            out.append(testing.SyntheticFrame(
                data, {"opcode": protocol.Opcode.MUTATION, "by_seqno": seqno, "key": key,
                       "value": value}, body=value))
        seqnos[vbucket] = first + count - 1
    return out


@dataclass(frozen=True)
class Corpus:
    """A benchmark corpus: ``build(items, **params)`` gives its frames."""

    name: str
    title: str
    params: dict
    items: int                     # document changes in the full-size run
    build: Callable = testing.synthetic_frames


CORPORA = (
    Corpus("mixed", "mixed document changes, frames of ~240 bytes",
           dict(seed=0, vbuckets=4, collections=True, sync_writes=True, value_size=205),
           880_000),
    Corpus("small", "small binary documents, frames of ~100 bytes",
           dict(seed=1, vbuckets=4, collections=True, sync_writes=True, value_size=28,
                json_ratio=0.0, xattr_ratio=0.0), 880_000),
    Corpus("large", "values of 64 KiB to 1 MiB",
           dict(seed=2, vbuckets=2, min_value=64 << 10, max_value=1 << 20), 480, large_frames),
    Corpus("stream_ids", "collections with stream-ids, frames of ~250 bytes",
           dict(seed=3, vbuckets=4, collections=True, stream_ids=True, value_size=205),
           440_000),
)
CORPUS_NAMES = tuple(c.name for c in CORPORA)


def corpus_items(corpus: Corpus, items: int) -> int:
    """Document changes of ``corpus`` when the mixed corpus has ``items``."""
    return max(1, round(corpus.items * items / DEFAULTS["items"]))


def corpus_key(corpus: Corpus, items: int) -> dict:
    """Everything the corpus bytes depend on, the generator's source included."""
    source = inspect.getsource(testing)
    if corpus.build is not testing.synthetic_frames:
        source += inspect.getsource(corpus.build)
    return {"items": items, **corpus.params,
            "generator": hashlib.sha256(source.encode()).hexdigest()[:16]}


def generate(corpus: Corpus, items: int) -> tuple[bytes, dict]:
    """The corpus bytes, and the generator's record of them to check the decoders against."""
    frames = corpus.build(items, **corpus.params)
    data = b"".join(f.data for f in frames)
    opcodes = Counter(int(f.fields["opcode"]) for f in frames)
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


def load_corpus(corpus: Corpus, items: int, cache: Path | None = None) -> tuple[bytes, dict, str]:
    """The corpus with ``items`` document changes: read from ``cache`` when it is there,
    else generated (and written to ``cache`` when one is given); returns the bytes, the
    generator's record and where they came from."""
    key = corpus_key(corpus, items)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    if cache is not None:
        path = Path(cache) / f"{corpus.name}-{items}-{digest}.dcp"
        meta = path.with_suffix(".json")
        if path.exists() and meta.exists():
            record = json.loads(meta.read_text())
            data = path.read_bytes()
            if record.get("key") == key and len(data) == record["expected"]["bytes"]:
                return data, record["expected"], f"cache {_shown(path)}"
    start = time.perf_counter()
    data, expected = generate(corpus, items)
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


def print_corpus(corpus: Corpus, items: int, expected: dict, origin: str) -> None:
    frames, size = expected["frames"], expected["bytes"]
    print(f"\ncorpus {corpus.name}: {corpus.title} ({origin})")
    print(f"  {items:,} document changes: {frames:,} frames, {size:,} bytes, "
          f"mean frame {size / frames:,.1f} bytes")
    print("  " + ", ".join(f"{k}={v}" for k, v in corpus.params.items()))
    mix = sorted(((n, int(op)) for op, n in expected["opcodes"].items()), reverse=True)
    cells = [f"{opcode_name(op):<16}{n:>9,} {100 * n / frames:5.1f}%" for n, op in mix[:6]]
    for at in range(0, len(cells), 3):
        print("    " + "  ".join(cells[at:at + 3]))
    if len(mix) > 6:
        print(f"    and {len(mix) - 6} more opcodes, {sum(n for n, _ in mix[6:]):,} frames")


# -- timing ----------------------------------------------------------------------------------


@dataclass
class Timing:
    label: str
    frames: int
    nbytes: int
    times: list[float] = field(default_factory=list)

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
    timing = Timing(label, frames, nbytes)
    take_turns([(timing, fn)], repeat)
    return timing


def best(fn, repeat: int) -> float:
    """Seconds of the best of ``repeat`` runs of ``fn`` after one warm-up run."""
    return timed("", 0, 0, fn, repeat).best


def take_turns(runs: list[tuple[Timing, Callable]], repeat: int) -> None:
    """Time each ``(timing, fn)`` ``repeat`` times after one warm-up run each, taking turns
    (a load change on a shared machine then hits every measurement alike), with the
    garbage collector paused as ``timeit`` does."""
    for _, fn in runs:
        fn()
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for timing, fn in runs:
                start = time.perf_counter()
                fn()
                timing.times.append(time.perf_counter() - start)
    finally:
        if enabled:
            gc.enable()


# -- what is timed ---------------------------------------------------------------------------


def core_scan(core, view, names):
    """One ``scan_buffer`` call as ``dcpfast.read`` makes it: collections on, strict, no
    frame limit, the buffer is the whole stream."""
    result = core.scan_buffer(view, _core.ScanRequest(
        0, names, True, False, -1, protocol.DEFAULT_MAX_FRAME_SIZE, 0, True))
    return result, result.failure


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


def file_scan(path, columns=None) -> int:
    """Frames of ``iter_batches`` over a file (64 MiB batches, collections on)."""
    return sum(len(b) for b in iter_batches(path, collections=True, columns=columns))


# -- the machine-limit probe -----------------------------------------------------------------

PROBE_SOURCE = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Follow the body lengths through n bytes, storing opcode, vbucket and body length. */
static size_t walk(const uint8_t *p, size_t n, uint8_t *op, uint16_t *vb, uint32_t *body)
{
    size_t pos = 0, i = 0;
    while (n - pos >= 24) {
        const uint8_t *h = p + pos;
        uint32_t len = (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11];
        if (len > n - pos - 24)
            break;
        op[i] = h[1];
        vb[i] = (uint16_t)(h[6] << 8 | h[7]);
        body[i] = len;
        i++;
        pos += 24 + (size_t)len;
    }
    return i;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    FILE *f = fopen(argv[1], "rb");
    int repeat = atoi(argv[2]);
    if (!f || fseek(f, 0, SEEK_END))
        return 2;
    long n = ftell(f);
    rewind(f);
    uint8_t *p = malloc(n + 1);
    size_t cap = n / 24 + 1;
    uint8_t *op = malloc(cap);
    uint16_t *vb = malloc(2 * cap);
    uint32_t *body = malloc(4 * cap);
    if (!p || !op || !vb || !body || fread(p, 1, n, f) != (size_t)n)
        return 2;
    size_t frames = walk(p, n, op, vb, body), i;
    double best = 1e300;
    for (int r = 0; r < repeat; r++) {
        double start = now();
        size_t k = walk(p, n, op, vb, body);
        double elapsed = now() - start;
        if (k != frames)
            return 3;
        if (elapsed < best)
            best = elapsed;
    }
    unsigned long long ops = 0, vbs = 0, bodies = 0;
    for (i = 0; i < frames; i++) {
        ops += op[i];
        vbs += vb[i];
        bodies += body[i];
    }
    printf("{\"frames\": %zu, \"best\": %.9f, \"opcode_sum\": %llu, \"bytes67_sum\": %llu, "
           "\"body_len_sum\": %llu}\n", frames, best, ops, vbs, bodies);
    return 0;
}
"""
PROBE_FLAGS = ("-O2",)


def compile_probe(directory: Path) -> tuple[Path | None, str]:
    """The probe compiled in ``directory`` with the platform's C compiler (``CC``, the
    interpreter's compiler, or ``cc``), or None and why not; and the command used."""
    found = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    command = shlex.split(found)
    if not command or not shutil.which(command[0]):
        command = ["cc"]
    if not shutil.which(command[0]):
        return None, "no C compiler found (set CC)"
    source, exe = directory / "probe.c", directory / "probe"
    source.write_text(PROBE_SOURCE)
    command = [*command, *PROBE_FLAGS, "-o", str(exe), str(source)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{' '.join(command)}: {e}"
    if done.returncode:
        return None, f"{' '.join(command)} failed: {done.stderr.strip()[:300]}"
    return exe, " ".join(command[:-3] + [command[-2].rsplit("/", 1)[-1], "probe.c"])


def run_probe(exe: Path, path: Path, repeat: int) -> dict:
    done = subprocess.run([str(exe), str(path), str(repeat)], capture_output=True, text=True,
                          timeout=600)
    check(done.returncode == 0, f"probe exited with {done.returncode}")
    return json.loads(done.stdout)


# -- checks ----------------------------------------------------------------------------------


def same_columns(a: dict, b: dict, names, what: str) -> None:
    for name in names:
        check(np.array_equal(a[name], b[name]), f"{what}: column {name} differs")


def verify(name: str, view, expected: dict, subset_frames: int) -> tuple[FrameBatch, int]:
    """Check the Cython core against the generator, the projection, the facade, Arrow and
    ``values()``, the twin and the struct walk against the core; return the reference
    batch and the byte length of the first ``subset_frames`` frames."""
    what = f"{name}: Cython core"
    result, failure = core_scan(_scan, view, ALL_COLUMNS)
    check(failure is None, f"{what}: strict scan failed at {failure}")
    count, consumed, columns, kinds, regions = result[:5]
    check(count == expected["frames"], f"{what}: {count} frames, the generator wrote "
          f"{expected['frames']}")
    check(consumed == len(view) and not regions,
          f"{what}: consumed {consumed} of {len(view)} bytes, {len(regions)} skipped")
    opcodes = {str(op): int(n) for op, n in enumerate(np.bincount(columns["opcode"])) if n}
    check(opcodes == expected["opcodes"], f"{what}: opcode mix differs from the generator's")
    for column in ("by_seqno", "key_len", "value_len"):
        total = int(columns[column].sum(dtype=np.uint64))
        check(total == expected[f"{column}_sum"],
              f"{what}: sum of {column} {total}, generator {expected[f'{column}_sum']}")

    result, failure = core_scan(_scan, view, PROJECTION)
    check(failure is None and tuple(result[2]) == PROJECTION, f"{name}: projection failed")
    same_columns(result[2], columns, PROJECTION, f"{name}: projection")

    batch = scan(view, collections=True)
    check(batch.collections and len(batch) == count, f"{name}: dcpfast.scan: wrong frames")
    same_columns(batch.to_dict(), columns, ALL_COLUMNS, f"{name}: dcpfast.scan")
    for binary_view in (False, True):
        table = batch.to_arrow(binary_view=binary_view)
        check(table.num_rows == count, f"{name}: to_arrow: wrong row count")
        for column in ("key", "value"):
            values = table[column].cast(pa.large_binary())
            total = pc.sum(pc.binary_length(values)).as_py() or 0
            check(total == expected[f"{column}_len_sum"],
                  f"{name}: to_arrow(binary_view={binary_view}): {column} bytes {total}")
    documents = sum(n for op, n in expected["opcodes"].items() if int(op) in _DOCUMENTS)
    rows = batch.values().num_rows
    check(rows == documents, f"{name}: values(): {rows} rows, {documents} document changes")

    end = int(columns["offset"][subset_frames]) if subset_frames < count else len(view)
    result, failure = core_scan(_scan_py, view[:end], ALL_COLUMNS)
    check(failure is None, f"{name}: pure-Python twin: strict scan failed at {failure}")
    check(result[0] == subset_frames and result[1] == end,
          f"{name}: pure-Python twin: {result[0]} frames over {result[1]} bytes")
    check(np.array_equal(result[3], kinds[:subset_frames]), f"{name}: twin: kinds differ")
    same_columns(result[2], {n: c[:subset_frames] for n, c in columns.items()}, ALL_COLUMNS,
                 f"{name}: pure-Python twin vs Cython core")

    walked = header_walk(view[:end])
    check(walked[0] == columns["opcode"][:subset_frames].tolist(),
          f"{name}: header walk: opcodes differ from the scan")
    return batch, end


def verify_probe(name: str, found: dict, batch: FrameBatch) -> None:
    """The probe saw the scan's frames: count, opcodes, bytes 6-7 and body lengths."""
    want = {"frames": len(batch),
            "opcode_sum": int(batch["opcode"].sum(dtype=np.uint64)),
            "bytes67_sum": int(batch["vbucket"].sum(dtype=np.uint64))
            + int(batch["status"].sum(dtype=np.uint64)),
            "body_len_sum": int(batch["body_len"].sum(dtype=np.uint64))}
    for key, value in want.items():
        check(found[key] == value, f"{name}: probe {key} {found[key]}, the scan's {value}")


# -- memory ----------------------------------------------------------------------------------


def traced_memory(view) -> dict:
    """Allocation during one all-columns ``dcpfast.scan``: Python's peak (tracemalloc)
    plus the most the core held at once in its mapped spans (where large columns live)
    and in pyarrow's pool, with the input and output sizes it is to be compared with."""
    gc.collect()
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    mapped = _core.scan.mapped
    live = mapped(reset=True)[0]
    tracemalloc.start()
    try:
        batch = scan(view, collections=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    peak += pool.bytes_allocated() - before + mapped()[1] - live
    columns = sum(a.nbytes for a in batch.to_dict().values())
    return {"input_bytes": len(view), "columns_bytes": columns, "peak_bytes": peak,
            "peak_over_columns": peak / columns, "peak_over_input": peak / len(view)}


_RSS_CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import dcpfast

    def peak():
        # VmHWM is this process's own high-water mark; ru_maxrss also counts the
        # parent's RSS at the fork on Linux, so it is only the fallback
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    path, batch_bytes = sys.argv[1], int(sys.argv[2])
    columns = sys.argv[3].split(",") if len(sys.argv) > 3 else None
    base = peak()
    frames = seqnos = 0
    for batch in dcpfast.iter_batches(path, batch_bytes, collections=True, columns=columns):
        frames += len(batch)
        seqnos = (seqnos + int(batch["by_seqno"].sum(dtype=np.uint64))) % 2**64
    print(json.dumps({"baseline_bytes": base, "peak_bytes": peak(), "frames": frames,
                      "by_seqno_sum": seqnos}))
""")


def rss_probe(data: bytes, expected: dict, directory: Path,
              batch_bytes: int = DEFAULT_BATCH_BYTES) -> dict:
    """Peak RSS of a fresh interpreter that imports dcpfast and then runs ``iter_batches``
    over a dump of ``data`` repeated to at least ``RSS_DUMP_BYTES``, above its peak after
    the imports: with all columns, and with the 5-column projection."""
    repeats = -(-RSS_DUMP_BYTES // len(data))
    path = directory / "rss.dcp"
    with open(path, "wb") as f:
        for _ in range(repeats):
            f.write(data)
    report = {"dump_bytes": repeats * len(data), "batch_bytes": batch_bytes}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        for key, columns in (("all_columns", ()), ("projection", (",".join(PROJECTION),))):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(path),
                                   str(batch_bytes), *columns],
                                  capture_output=True, text=True, timeout=1800, env=env)
            elapsed = time.perf_counter() - start
            check(done.returncode == 0, f"iter_batches memory probe failed: "
                  f"{done.stderr[-500:]}")
            found = json.loads(done.stdout)
            check(found["frames"] == repeats * expected["frames"], f"memory probe: "
                  f"{found['frames']} frames, expected {repeats * expected['frames']}")
            check(found["by_seqno_sum"] == repeats * expected["by_seqno_sum"] % 2**64,
                  "memory probe: by_seqno sum differs")
            growth = found["peak_bytes"] - found["baseline_bytes"]
            report[key] = {**found, "growth_bytes": growth,
                           "growth_over_batch": growth / batch_bytes, "seconds": elapsed}
    finally:
        path.unlink()
    return report


# -- report ----------------------------------------------------------------------------------


def rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    return f"{x / 1e3:.1f} k" if x >= 1e3 else f"{x:.0f}"


def _times(x: float | None) -> str:
    return "" if x is None else f"{x:,.1f}x" if x < 1000 else f"{x:,.0f}x"


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
        check(file_scan(path) == frames, f"{corpus.name}: iter_batches: frame count differs")
        early = scan(view, collections=True, binary_views=True)
        check(early.to_arrow(binary_view=True).equals(batch.to_arrow(binary_view=True)),
              f"{corpus.name}: the views written by the scan differ from to_arrow's")
        rows = {
            "scan": Timing("scan, all 39 columns", frames, size),
            "scan5": Timing(f"scan, {len(PROJECTION)} columns", frames, size),
            "iter_batches": Timing("iter_batches(file), all columns", frames, size),
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
            (rows["scan"], lambda: scan(view, collections=True)),
            (rows["scan5"], lambda: scan(view, collections=True, columns=PROJECTION)),
            (rows["iter_batches"], lambda: file_scan(path)),
            (rows["to_arrow"], batch.to_arrow),
            (rows["to_arrow_view"], lambda: batch.to_arrow(binary_view=True)),
            (rows["scan_views"], lambda: scan(view, collections=True, binary_views=True)),
            (rows["to_arrow_early"], lambda: early.to_arrow(binary_view=True)),
            (rows["values"], batch.values),
        ]
        if probe is not None:      # in turn with the others; its own clock, best of 3 walks
            runs.append((Timing("", 0, 0), lambda: probe_bests.append(
                run_probe(probe, path, 3)["best"])))
        take_turns(runs, repeat)
        take_turns([(rows["twin"], lambda: core_scan(_scan_py, sub, ALL_COLUMNS)),
                    (rows["struct"], lambda: header_walk(sub))], repeat)
    finally:
        path.unlink()
    if found is not None:
        rows["probe"] = Timing("C probe: body lengths + 3 fields", frames, size,
                               probe_bests[1:])
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
    return {"title": corpus.title, "params": corpus.params, "items": items, "frames": frames,
            "bytes": size, "mean_frame_bytes": size / frames, "python_frames": subset,
            "python_bytes": subset_bytes, "probe": found,
            "opcodes": {opcode_name(int(op)): n for op, n in expected["opcodes"].items()},
            "timings": timings}


ROW_ORDER = ("probe", "scan", "scan5", "iter_batches", "to_arrow", "to_arrow_view", "values",
             "scan_views", "to_arrow_early", "twin", "struct")


def print_speed(name: str, part: dict) -> None:
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


def targets(report: dict) -> list[dict]:
    """The targets of the suite (on the mixed corpus), each with the measured value and
    whether it is met (None: not judged or not measured)."""
    mixed = report["corpora"].get("mixed")
    out = []

    def target(name, goal, measured, shown, met, note=""):
        out.append({"target": name, "goal": goal, "measured": measured, "shown": shown,
                    "met": met, "note": note})

    if mixed is not None:
        t = mixed["timings"]
        for key, goal, what in (("scan", 0.5, "all columns"), ("scan5", 0.75, "5 columns")):
            name = f"scan, {what}: >= {goal:.0%} of the probe's frames/s"
            if "of_probe" in t[key]:
                value = t[key]["of_probe"]
                target(name, goal, value, f"{value:.0%}", value >= goal)
            else:
                target(name, goal, None, "no probe", None, report["probe"]["note"])
        # Arrow output with keys and values as views, by the faster of two ways: a plain
        # scan and to_arrow(binary_view=True), or scan(binary_views=True) and the same
        after = t["to_arrow_view"]["over_scan"]
        early = (t["scan_views"]["best"] + t["to_arrow_early"]["best"]) / t["scan"]["best"] - 1
        value = min(after, early)
        target("to_arrow(binary_view=True) adds <= 20% to the scan time", 0.2, value,
               f"+{value:.0%}", value <= 0.2, "judged here, over a plain scan: "
               f"+{after:.0%} after it, +{early:.0%} when scan(binary_views=True) wrote the "
               f"views (that scan +{t['scan_views']['best'] / t['scan']['best'] - 1:.0%}, "
               f"the conversion then +{t['to_arrow_early']['over_scan']:.0%} of it)")
        value = t["to_arrow"]["over_scan"]
        target("to_arrow() adds <= 20% to the scan time", 0.2, value, f"+{value:.0%}", None,
               "for information: the gather copies every key and value byte")
        value = t["iter_batches"]["frames_per_s"] / t["scan"]["frames_per_s"]
        target("iter_batches(file): >= 80% of the in-memory scan's frames/s", 0.8, value,
               f"{value:.0%}", value >= 0.8, "all columns, page cache warm")
    rss = report.get("rss")
    name = "iter_batches over a 2 GB dump: peak RSS <= 3 x batch_bytes above the baseline"
    if rss:
        mib = rss["batch_bytes"] >> 20
        for key, what in (("all_columns", "all columns"), ("projection", "5 columns")):
            value = rss[key]["growth_over_batch"]
            target(f"{name}, {what}", 3.0, value, f"{rss[key]['growth_bytes'] / 2**20:,.0f} "
                   f"MiB = {value:.2f} x {mib} MiB", value <= 3.0 if key == "all_columns"
                   else None, f"{'judged here' if key == 'all_columns' else 'for information'}"
                   f": {rss['dump_bytes'] / 1e9:.2f} GB, the previous batch is alive while "
                   "the next is read")
    else:
        target(name, 3.0, None, "not measured", None, "run without --quick, or with --rss")
    return out


def _verdict(met) -> str:
    return "MET" if met else "-" if met is None else "NOT MET"


def print_targets(found: list[dict]) -> None:
    print("\ntargets (mixed corpus)")
    for t in found:
        note = f" ({t['note']})" if t["note"] else ""
        print(f"  {_verdict(t['met']):<8} {t['target']}: {t['shown']}{note}")


# -- README table ----------------------------------------------------------------------------

README_BEGIN = "<!-- benchmark: begin (generated by benchmarks/bench_scan.py --readme) -->"
README_END = "<!-- benchmark: end -->"
_README_ROWS = (("scan", "`scan`, all 39 columns"),
                ("scan5", "`scan`, 5 columns (`offset, opcode, vbucket, by_seqno, key_len`)"),
                ("iter_batches", "`iter_batches(path)`, all columns, 64 MiB batches"),
                ("scan_views", "`scan(binary_views=True)`, all columns"),
                ("probe", "C probe: follows body lengths, stores 3 fields per frame"),
                ("twin", "pure-Python twin, all columns"),
                ("struct", "plain `struct.unpack_from` header walk in Python"))


def readme_section(report: dict) -> str:
    """The README's performance section (between the markers) for a report."""
    info, corpora = report["machine"], report["corpora"]
    lines = [README_BEGIN, "", *textwrap.wrap(
             f"Measured on {info['cpu']} ({info['usable_cores']} usable cores, load "
             f"{info['load_average'][0]:.1f} at the start), Python {info['python']}, numpy "
             f"{info['numpy']}, pyarrow {info['pyarrow']}, best of {report['repeat']} after "
             f"a warm-up. Corpora:", 92), ""]
    for name, part in corpora.items():
        lines.append(f"- {name}: {part['title']}; {part['frames']:,} frames, "
                     f"{part['bytes'] / 1e6:,.1f} MB, mean frame "
                     f"{part['mean_frame_bytes']:,.0f} bytes")
    names = list(corpora)
    lines += ["", "| frames/s (GB/s) | " + " | ".join(names) + " |",
              "|" + "---|" * (len(names) + 1)]
    for key, label in _README_ROWS:
        cells = []
        for name in names:
            t = corpora[name]["timings"].get(key)
            cells.append("" if t is None else f"{rate(t['frames_per_s'])} ({t['gb_per_s']:.2f})")
        if any(cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for key, label in (("to_arrow", "`to_arrow()` (keys, values gathered), time added to "
                        "the scan"),
                       ("to_arrow_view", "`to_arrow(binary_view=True)`, time added to the scan"),
                       ("to_arrow_early", "the same after `scan(binary_views=True)`, time added "
                        "to that scan"),
                       ("values", "`values()`, time added to the scan")):
        cells = [f"+{corpora[n]['timings'][key]['over_scan']:.0%}" for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for key, label in (("scan", "`scan`, all columns, x the twin / % of the probe"),
                       ("scan5", "`scan`, 5 columns, x the twin / % of the probe")):
        cells = []
        for name in names:
            t = corpora[name]["timings"][key]
            probe = f" / {t['of_probe']:.0%}" if "of_probe" in t else ""
            cells.append(f"{t['x_twin']:,.0f}x{probe}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", *textwrap.wrap(
        "GB/s is the corpus size over the time; the scan and the probe read only the headers "
        "of large frames, so on the large corpus theirs is not a memory rate.", 92)]
    memory = report.get("memory")
    if memory:
        lines += ["", *textwrap.wrap(
            f"The scan copies nothing of its input: one all-columns scan of the mixed corpus "
            f"allocated {memory['peak_bytes'] / 1e6:.1f} MB (Python's peak plus what the batch "
            f"holds in the core's mapped spans) for {memory['columns_bytes'] / 1e6:.1f} MB of "
            f"output columns and {memory['input_bytes'] / 1e6:.1f} MB of input.", 92)]
    lines += ["", "Targets (mixed corpus):", "", "| target | measured | verdict |",
              "|---|---|---|"]
    for t in report["targets"]:
        note = f" ({t['note']})" if t["note"] else ""
        lines.append(f"| {t['target']}{note} | {t['shown']} | {_verdict(t['met'])} |")
    lines += ["", README_END]
    return "\n".join(lines)


def update_readme(readme: Path, report: dict) -> None:
    """Replace the text between the benchmark markers of ``readme`` by the report's table."""
    text = Path(readme).read_text()
    pattern = re.compile(re.escape(README_BEGIN) + ".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{readme} has no benchmark markers ({README_BEGIN} ... {README_END})")
    Path(readme).write_text(pattern.sub(lambda _: readme_section(report), text, count=1))


# -- the run ---------------------------------------------------------------------------------


def run(*, items: int = DEFAULTS["items"], repeat: int = DEFAULTS["repeat"],
        python_items: int = DEFAULTS["python_items"], corpora=CORPUS_NAMES, rss: bool = True,
        json_path: Path | None = None, cache: Path | None = None,
        readme: Path | None = None) -> int:
    """Check, time and print; write the figures to ``json_path`` and the table into
    ``readme`` if given. ``items`` sizes the mixed corpus, the others in proportion.
    Returns the exit status: 0, 1 when a check failed, 2 when the compiled core is not in
    use."""
    if _scan is None or IMPLEMENTATION != "cython":
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
            tmp = Path(tmp)
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
                part = measure(corpus, n, data, expected, repeat=repeat,
                               python_items=python_items, probe=exe, directory=tmp)
                part["origin"] = origin
                report["corpora"][corpus.name] = part
                print_speed(corpus.name, part)
                if corpus.name == "mixed":
                    mixed = (data, expected)
                    report["memory"] = traced_memory(memoryview(data))
                    m = report["memory"]
                    print(f"  Python's peak plus the core's mapped spans during one all-columns scan: "
                          f"{m['peak_bytes'] / 1e6:.1f} MB for {m['input_bytes'] / 1e6:.1f} MB "
                          f"of input and {m['columns_bytes'] / 1e6:.1f} MB of columns")
                del data
            if rss and mixed is not None:
                print(f"\niter_batches memory: a fresh interpreter reads the mixed corpus "
                      f"repeated to {RSS_DUMP_BYTES / 2**30:.0f} GiB ...")
                report["rss"] = rss_probe(*mixed, tmp)
                for key in ("all_columns", "projection"):
                    r = report["rss"][key]
                    print(f"  {key.replace('_', ' ')}: baseline (after imports) "
                          f"{r['baseline_bytes'] / 2**20:,.0f} MiB, peak "
                          f"{r['peak_bytes'] / 2**20:,.0f} MiB, {r['frames']:,} frames from "
                          f"{report['rss']['dump_bytes'] / 1e9:.2f} GB in "
                          f"{r['seconds']:.1f} s")
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
    if readme:
        update_readme(readme, report)
        print(f"performance table written into {readme}")
    return 0


# -- command-line boilerplate of the benchmark scripts ---------------------------------------


def arguments(doc: str, defaults: dict, quick: dict, json_default: Path | None = None, *,
              items: str = "document changes to generate") -> argparse.ArgumentParser:
    """A parser with ``--items``, ``--repeat``, ``--quick`` (and ``--json`` when a default
    path is given) for a benchmark script whose docstring is ``doc``."""
    parser = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
    parser.add_argument("--items", type=int, help=f"{items} (default {defaults['items']:,})")
    parser.add_argument("--repeat", type=int, help="timed runs after the warm-up, best kept "
                        f"(default {defaults['repeat']})")
    if json_default is not None:
        parser.add_argument("--json", nargs="?", const=json_default, type=Path,
                            metavar="PATH", help="write the results as JSON (default path "
                            f"{json_default})")
    parser.add_argument("--quick", action="store_true", help="smoke run: "
                        + ", ".join(f"{k}={v:,}" for k, v in quick.items()))
    return parser


def settle(parser: argparse.ArgumentParser, argv, defaults: dict, quick: dict
           ) -> argparse.Namespace:
    """Parse ``argv``, fill what was not given from ``quick`` or ``defaults``, and refuse
    counts below 1."""
    args = parser.parse_args(argv)
    for name, value in (quick if args.quick else defaults).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in defaults:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv=None, *, cache: Path | None = None, json_default: Path | None = None,
         readme_default: Path | None = None) -> int:
    """The suite's command line (``benchmarks/bench_scan.py``)."""
    parser = arguments(__doc__, DEFAULTS, QUICK, json_default,
                       items="document changes of the mixed corpus, the others in proportion")
    parser.add_argument("--python-items", type=int, help="frames for the pure-Python twin "
                        f"and the struct baseline (default {DEFAULTS['python_items']:,})")
    parser.add_argument("--corpus", action="append", choices=CORPUS_NAMES,
                        help="run only this corpus (repeatable; default all)")
    parser.add_argument("--rss", action=argparse.BooleanOptionalAction, default=None,
                        help="measure the peak RSS of iter_batches over a 2 GiB dump "
                        "(default: on, off with --quick)")
    parser.add_argument("--readme", nargs="?", const=readme_default, type=Path,
                        metavar="PATH", help="rewrite the performance table in this README "
                        f"(default {readme_default})")
    parser.add_argument("--from-json", type=Path, metavar="PATH", help="measure nothing: "
                        "rewrite the README table (--readme) from this JSON report")
    args = settle(parser, argv, DEFAULTS, QUICK)
    if args.from_json:
        if not args.readme:
            parser.error("--from-json needs --readme")
        update_readme(args.readme, json.loads(args.from_json.read_text()))
        print(f"performance table written into {args.readme}")
        return 0
    return run(items=args.items, repeat=args.repeat, python_items=args.python_items,
               corpora=tuple(args.corpus or CORPUS_NAMES),
               rss=not args.quick if args.rss is None else args.rss,
               json_path=getattr(args, "json", None), cache=cache, readme=args.readme)
