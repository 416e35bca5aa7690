"""A state split by vbucket among processes, so that a big dump uses every core: vbuckets
are independent, but one process's engine holds the GIL for most of its work.

The dump's frames are counted per vbucket (a scan of two columns), and the vbuckets cut
into contiguous ranges of about as many frames each. Each range is one share: this
process builds one, worker processes (``python -c``, not ``multiprocessing``: nothing of
the caller's ``__main__`` is run again) the others. Every share reads the whole dump, keeps
the documents and streams of its vbuckets (``StateBuilder.share``) and gives its table back
as an Arrow IPC file, which this process maps without copying. The tables in vbucket
order are the state's rows (the table is ordered by vbucket first); their metadata add up
to the one-process metadata: the consistent seqnos of disjoint vbuckets, the first
problems in stream order and their counts (the problems of the whole stream, which every
share finds, counted by one). A strict error is the one the stream meets first: a share's
error while reading before one found at the end, then the lowest offset.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import DcpFormatError
from ..io.dumps import iter_batches
from ..io.kinds import Kind, classify
from ..streams.frames import requests
from ..threads import shares, threads_of
from .builder import StateBuilder
from .feeding import fed
from .output import METADATA_KEY, metadata
from .problems import LISTED

_VBUCKETS = 1 << 16
#: The sources whose vbuckets processes share: a dump's path, a directory's, a glob's.
_SPLIT = frozenset({Kind.PATH, Kind.DIRECTORY, Kind.GLOB})


def state_processes(processes: int, source) -> int:
    """How many processes build the state of ``source``: ``processes`` (at most the cores)
    for a dump's path (a file, a directory or a glob), one for anything else (a capture,
    a buffer, batches, and a path that cannot be read twice: a pipe's, a FIFO's)."""
    if processes == 1 or not classify(source, sniff=False).repeated \
            or classify(source).kind not in _SPLIT:
        return 1
    return threads_of(processes)


def vbucket_ranges(weights: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Contiguous ranges ``[low, high)`` of vbucket ids covering them all, at most
    ``parts``, each with about as much of ``weights`` (frames per vbucket id, the cuts of
    ``threads.shares``) and none without any."""
    ends = np.cumsum(weights)
    total = int(ends[-1]) if len(ends) else 0
    bounds, before = [0], 0
    for cut in shares(weights, parts)[1:-1]:
        now = int(ends[cut - 1]) if cut else 0      # the frames below the cut
        if before < now < total:                     # frames on either side, new ones below
            bounds.append(cut)
            before = now
    return list(zip(bounds, [*bounds[1:], _VBUCKETS]))


def _frames_per_vbucket(path, reading: dict) -> np.ndarray:
    """How many frames of the dump at ``path`` each vbucket id has (requests: the stream's
    messages; damage skipped)."""
    counts = np.zeros(_VBUCKETS, np.int64)
    for batch in iter_batches(path, reading["batch_bytes"], errors="skip",
                              collections=reading["collections"], threads=1,
                              columns=("magic", "vbucket")):
        counts += np.bincount(batch["vbucket"][requests(batch)], minlength=_VBUCKETS)
    return counts


def split_state(path, options: dict, reading: dict, processes: int) -> pa.Table | None:
    """The state of the dump at ``path`` (``options``: a ``StateBuilder``'s, checked;
    ``reading``: how it is scanned) built in up to ``processes`` shares; None where its
    frames are all of one share (the caller builds it in one)."""
    workers: list[_Worker] = []
    folder = tempfile.mkdtemp(prefix="dcpfast-state-")
    try:
        workers = [_Worker(Path(folder) / f"{i}.arrow") for i in range(1, processes)]
        ranges = vbucket_ranges(_frames_per_vbucket(path, reading), processes)
        if len(ranges) < 2:
            return None
        for worker, (low, high) in zip(workers, ranges[1:]):
            worker.send(dict(path=os.fspath(path), options=options, reading=reading,
                             low=low, high=high))
        outcomes = [_share(path, options, reading, *ranges[0], lead=True)]
        outcomes += [w.outcome() for w in workers[:len(ranges) - 1]]
        return _joined(outcomes)
    finally:
        for worker in workers:
            worker.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _share(path, options: dict, reading: dict, low: int, high: int, *,
           lead: bool) -> tuple:
    """The table of the vbuckets ``[low, high)`` of the dump at ``path``, as (table, None),
    or (None, (phase, the error)): 0 met while reading the batches, 1 at the end."""
    vbuckets = np.zeros(_VBUCKETS, bool)
    vbuckets[low:high] = True
    reading = {**reading, "threads": 1}
    phase = 0
    try:
        builder = StateBuilder(**options, threads=1).share(vbuckets, lead=lead)
        with fed(builder, path, options["errors"], reading) as again:
            phase = 1
            return builder.table(again), None
    except Exception as e:          # the one raised is chosen among the shares' errors
        return None, (phase, e)


def first_error(errors: list[tuple[int, Exception]]) -> Exception:
    """The error of the shares' that the stream meets first: while reading before at the
    end, another error before a ``DcpFormatError``, then the lowest offset."""
    return min(errors, key=lambda pe: (pe[0], isinstance(pe[1], DcpFormatError),
                                       getattr(pe[1], "offset", 0)))[1]


def _joined(outcomes: list[tuple]) -> pa.Table:
    """The shares' tables, in vbucket order, as one table with their metadata as one."""
    errors = [e for _, e in outcomes if e is not None]
    if errors:
        raise first_error(errors)
    tables = [t for t, _ in outcomes]
    parts = [metadata(t) for t in tables]
    joined = pa.concat_tables([t.replace_schema_metadata(None) for t in tables])
    return joined.replace_schema_metadata({METADATA_KEY: json.dumps(_merged(parts)).encode()})


def _merged(parts: list[dict]) -> dict:
    """The metadata of the shares' tables as the metadata of one."""
    out = dict(parts[0])
    out["consistency"] = sorted(p for m in parts for p in m["consistency"])
    out["errors"] = list(heapq.merge(*(m["errors"] for m in parts),
                                     key=lambda e: e[0]))[:LISTED]
    counts: dict[str, int] = {}
    for m in parts:
        for kind, n in m["error_counts"].items():
            counts[kind] = counts.get(kind, 0) + n
    out["error_counts"] = dict(sorted(counts.items()))
    out["errors_total"] = sum(m["errors_total"] for m in parts)
    out["unrestored"] = sorted({v for m in parts for v in m["unrestored"]})
    out["lost"] = sorted({v for m in parts for v in m["lost"]})
    out["lacks"] = {**parts[0]["lacks"],
                    "history": sorted(p for m in parts for p in m["lacks"]["history"])}
    return out


#: A worker's program, run with this process's ``sys.path`` (``{path}``), so that it
#: imports the same dcpfast. It keeps pandas out (``_NoPandas``): pyarrow imports it on its
#: first array where it is installed (much of a worker's start), and a share never uses it.
_WORKER = ("import sys; sys.path[:] = {path}; "
           "from dcpfast.documents.processes import work; work()")


class _NoPandas:
    """An import finder that refuses pandas (a worker's own ``sys.meta_path``)."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("a state worker does without pandas")
        return None


class WorkerDied(RuntimeError):
    """A worker process ended without saying how its share went: killed (SIGKILL, the
    out-of-memory killer) or crashed."""


class _Worker:
    """A worker process that builds one share and writes its table to ``out``."""

    def __init__(self, out: Path):
        self.out = out
        self.vbuckets = ""                         # the share it was given, as text
        self._log = open(out.with_suffix(".log"), "w+b")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER.format(path=repr([str(p) for p in sys.path]))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)

    def send(self, spec: dict) -> None:
        """Give the worker its share (it has been importing meanwhile)."""
        assert self.process.stdin is not None
        self.vbuckets = f"{spec['low']}..{spec['high'] - 1}"
        with contextlib.suppress(BrokenPipeError):   # it ended: ``outcome`` says why
            self.process.stdin.write(json.dumps({**spec, "out": str(self.out)}).encode())
            self.process.stdin.close()

    def outcome(self) -> tuple:
        """(its table, None) or (None, the error it met)."""
        assert self.process.stdout is not None
        out = self.process.stdout.read()
        self.process.wait()
        try:
            result = json.loads(out)
        except ValueError:
            return None, (0, self._died())
        if "error" in result:
            return None, _error(result)
        with pa.memory_map(str(self.out)) as source:
            table = pa.ipc.open_file(source).read_all()
        self.out.unlink()                    # the mapping keeps the pages
        return table, None

    def _died(self) -> WorkerDied:
        """What became of a worker that gave no result: its share, its process, how it
        ended and the last lines it wrote."""
        self._log.seek(0)
        tail = self._log.read().decode(errors="replace").strip().splitlines()[-3:]
        code = self.process.returncode
        try:
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else \
                f"ended with exit code {code}"
        except ValueError:
            how = f"was killed by signal {-code}"
        return WorkerDied(f"the state worker process for vbuckets {self.vbuckets} (pid "
                          f"{self.process.pid}) {how}" + (f": {' '.join(tail)}" if tail
                                                          else ""))

    def stop(self) -> None:
        """End the process where it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log.close()


_ERRORS = (DcpFormatError, ValueError, TypeError, OSError, MemoryError, RuntimeError)


def _error(result: dict) -> tuple[int, Exception]:
    """The phase and exception a worker reported."""
    if result["error"] == "DcpFormatError":
        return result["phase"], DcpFormatError(result["offset"], result["reason"])
    kind = next(e for e in _ERRORS[1:] if e.__name__ == result["error"])
    return result["phase"], kind(result["message"])


def work() -> None:
    """A worker process: build the share read from standard input, write its table to the
    file it names and say on standard output how it went."""
    sys.meta_path.insert(0, _NoPandas())
    spec = json.loads(sys.stdin.buffer.read())
    options = spec["options"]
    if isinstance(options["at_seqno"], dict):
        options["at_seqno"] = {int(k): v for k, v in options["at_seqno"].items()}
    table, failed = _share(spec["path"], options, spec["reading"], spec["low"], spec["high"],
                           lead=False)
    result: dict = {}
    if failed is None:
        with pa.OSFile(spec["out"], "wb") as sink, \
                pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    else:
        phase, e = failed
        kind = next((k for k in _ERRORS if isinstance(e, k)), RuntimeError)  # first: the
        # most precise (a DcpFormatError is a ValueError)
        result = {"error": kind.__name__, "phase": phase, "message": str(e),
                  "offset": getattr(e, "offset", 0), "reason": getattr(e, "reason", "")}
    sys.stdout.write(json.dumps(result))
