"""Reading compressed dumps: ``iter_batches`` over gzip, zstd and lz4 files against the raw file.

    python benchmarks/bench_io.py [--items N] [--repeat R]
    python benchmarks/bench_io.py --quick

The corpus is the mixed one of ``bench_scan.py`` (cached in ``benchmarks/results/cache/``),
written raw and in each codec to a temporary directory. Before anything is timed, every
compressed file must decode to the raw file's frames, column for column. For each file
the table gives the best of R runs (after a warm-up) of ``iter_batches`` (64 MiB batches,
collections on, five columns) and of the codec's own streaming reader alone, in MB of
decompressed DCP stream per second. Timings are reported, never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gzip
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dcpfast

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite.common import arguments, machine, settle  # noqa: E402
from suite.corpora import CORPORA, load_corpus  # noqa: E402
from suite.timing import best  # noqa: E402

CACHE = HERE / "results" / "cache"
COLUMNS = ["offset", "opcode", "vbucket", "by_seqno", "key_len"]
DEFAULTS = dict(items=880_000, repeat=3)
QUICK = dict(items=88_000, repeat=3)


def codecs():
    """Writer and streaming reader of each codec, at the levels their command lines default to."""
    import lz4.frame
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    return {
        "gzip": (lambda d: gzip.compress(d, 6), gzip.open, ".gz"),
        "zstd": (lambda d: zstd.compress(d, 3), zstd.open, ".zst"),
        "lz4": (lambda d: lz4.frame.compress(d), lz4.frame.open, ".lz4"),
    }


def scan_file(path) -> tuple[int, int]:
    frames = size = 0
    for batch in dcpfast.iter_batches(path, collections=True, columns=COLUMNS):
        frames += len(batch)
        size += batch.consumed
    return frames, size


def read_alone(opener, path) -> int:
    size = 0
    with opener(path, "rb") as f:
        while chunk := f.read(1 << 20):
            size += len(chunk)
    return size


def main(argv=None) -> int:
    args = settle(arguments(__doc__, DEFAULTS, QUICK), argv, DEFAULTS, QUICK)

    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores; python {info['python']}, "
          f"dcpfast {info['dcpfast']} ({info['implementation']} core)")
    data, expected, origin = load_corpus(CORPORA[0], args.items, CACHE)
    print(f"corpus ({origin}): {expected['frames']:,} frames, {len(data):,} bytes")
    whole = dcpfast.scan(data, collections=True, columns=COLUMNS)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "corpus.dcp"
        raw.write_bytes(data)
        files = [("raw", raw, None, len(data))]
        for name, (write, opener, ext) in codecs().items():
            start = time.perf_counter()
            packed = write(data)
            elapsed = time.perf_counter() - start
            path = raw.with_suffix(ext)
            path.write_bytes(packed)
            print(f"  {name}: {len(packed):,} bytes ({len(packed) / len(data):.1%}), "
                  f"written in {elapsed:.1f} s")
            files.append((name, path, opener, len(packed)))
        del data

        for name, path, _, _ in files:            # check before timing
            batches = list(dcpfast.iter_batches(path, collections=True, columns=COLUMNS))
            for column in COLUMNS:
                if not np.array_equal(np.concatenate([b[column] for b in batches]),
                                      whole[column]):
                    print(f"CHECK FAILED: {name}: column {column} differs from the raw scan",
                          file=sys.stderr)
                    return 1
        print("checks passed: every file decodes to the raw file's frames, column for column")

        frames, size = len(whole), len(raw.read_bytes())
        for name, path, opener, nbytes in files:
            t_scan = best(lambda: scan_file(path), args.repeat)
            t_alone = best(lambda: read_alone(opener, path), args.repeat) \
                if opener else None
            rows.append((name, nbytes, t_alone, t_scan))

    print(f"\nbest of {args.repeat}; MB/s of decompressed DCP stream ({size / 1e6:.1f} MB)")
    print(f"{'input':<6} {'file bytes':>13} {'codec alone':>12} {'iter_batches':>13} "
          f"{'frames/s':>10} {'vs codec':>9}")
    for name, nbytes, t_alone, t_scan in rows:
        alone = f"{size / t_alone / 1e6:8.0f} MB/s" if t_alone else f"{'-':>12}"
        ratio = f"{t_alone / t_scan:8.2f}x" if t_alone else f"{'-':>9}"
        print(f"{name:<6} {nbytes:>13,} {alone:>12} {size / t_scan / 1e6:8.0f} MB/s "
              f"{frames / t_scan / 1e6:8.2f} M {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
