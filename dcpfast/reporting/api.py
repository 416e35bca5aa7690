"""``report`` (public as ``dcpfast.report``): what happened on the wire, from captures or
dumps, as figures, JSON and one self-contained page (docs/report.md).

The inputs are planned into units (``inputs.plan``), each read on a thread of its own into
a partial aggregate, and the partials merged in the inputs' order; ``dcpfast.spark.report``
reads the same units in Spark's tasks with the same function.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import replace
from importlib import metadata
from typing import Any

import pyarrow as pa

from ..errors import text
from ..io import DEFAULT_BATCH_BYTES
from ..packets import DCP_PORT
from ..threads import run, threads_of
from .figures import build
from .inputs import DEFAULT_STALL_SECONDS, Once, Options, plan, read_all
from .page import page
from .partial import Partial

#: The lists of the figures that ``Report.table`` gives as Arrow tables.
TABLES = ("connections", "streams", "stalls", "flow_control", "anomalies", "inputs")


def generator() -> str:
    """What made a report: ``dcpfast`` and its version."""
    try:
        return f"dcpfast {metadata.version('dcpfast')}"
    except metadata.PackageNotFoundError:
        return "dcpfast"


class Report:
    """A report's figures (``figures``: the JSON object of docs/report.md, plain Python),
    its tables as Arrow (``table``), its JSON (``to_json``) and its page (``to_html``)."""

    def __init__(self, figures: dict[str, Any]):
        #: Every figure of the report, as ``to_json`` writes it.
        self.figures = figures

    @classmethod
    def of(cls, partial: Partial) -> Report:
        """The report of a merged partial aggregate."""
        return cls(build(partial, generator()))

    def table(self, name: str) -> pa.Table:
        """One of the figures' lists (``TABLES``) as a ``pyarrow.Table``."""
        if name not in TABLES:
            raise ValueError(f"no table {name!r}; the tables: {', '.join(TABLES)}")
        rows = self.figures[name]
        return pa.Table.from_pylist(rows) if rows else pa.table({})

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The figures as JSON text, also written to ``path`` when given."""
        out = json.dumps(self.figures, indent=1, allow_nan=False)
        if path is not None:
            _write(path, out)
        return out

    def to_html(self, path: str | os.PathLike | None = None) -> str:
        """The page (needs the ``dcpfast[report]`` extra), also written to ``path``."""
        out = page(self.figures)
        if path is not None:
            _write(path, out)
        return out

    def __repr__(self) -> str:
        f = self.figures
        return (f"<Report {f['frames']:,} frames, {len(f['connections'])} connections, "
                f"{len(f['streams'])} streams, {len(f['stalls'])} stalls, "
                f"{sum(f['anomaly_counts'].values())} anomalies, clock {f['time']['clock']}>")


def _write(path, data: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(data)


def report(source, *, stall_seconds: float = DEFAULT_STALL_SECONDS, errors: str = "strict",
           collections: bool | None = None, ports: int | Iterable[int] = DCP_PORT,
           threads: int | None = None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Report:
    """What happened on the wire in ``source``: captures (pcap, pcapng: every connection,
    both directions) or DCP dumps (raw or compressed; a client's dump next to its
    server's in the list is read with it), one path, file object or a list of them.

    ``stall_seconds``: silence on an open stream longer than this is a stall (above 0, at
    most ``MAX_STALL_SECONDS``, about 285 years). ``errors``,
    ``collections`` as for ``dcpfast.scan``; under ``errors="skip"`` damage shows among
    the anomalies. ``ports``: the DCP ports of captures. ``threads``: inputs read at once
    (and threads decoding a dump; default: every core). ``batch_bytes``: a dump is read
    so much at a time (memory is a few batches). Captures and dumps cannot be mixed: their
    clocks differ (docs/report.md).
    """
    sources = [source] if isinstance(source, (str, os.PathLike)) or hasattr(source, "read") \
        else list(source)
    if not sources:
        raise ValueError(text("report_empty"))
    ports = (ports,) if isinstance(ports, int) else tuple(ports)
    threads = threads_of(threads)
    options = Options(stall_seconds=stall_seconds, errors=errors, collections=collections,
                      ports=ports, batch_bytes=batch_bytes)
    opener = Once(sources, errors)                # a pipe's path opened once, up front
    try:
        units = plan(sources, opener, errors)
        at_once = min(threads, len(units))
        options = replace(options, threads=max(1, threads // at_once))
        return Report.of(read_all(units, options, opener,
                                  run=lambda tasks: run(tasks, at_once)))
    finally:
        opener.close()
