"""``report`` on Spark (public as ``dcpfast.spark.report``; the module is not named for
the function, which would hide it): ``dcpfast.report`` of dump or capture sets beyond one
machine.

The driver lists the inputs and plans them into units as ``dcpfast.report`` does (a
client's dump read with its server's); each Spark task reads its units with the same
function a thread does (``reporting.inputs.read_unit``) into partial aggregates, and the
driver merges them in the inputs' order: the same figures as the single-process report
of the same files. A unit is the grain of the work (a file, or a client and server
pair), so the speed-up comes from many files. The files are local paths that every
executor reaches or pyarrow filesystem URIs.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Iterable, Iterator

import pyarrow as pa

from ..errors import text
from ..packets import DCP_PORT
from ..reporting import DEFAULT_STALL_SECONDS, Report
from ..reporting.inputs import Options, Unit, merged, plan, read_unit
from .source import filesystem, list_files
from .workers import identity, same_dcpfast, worker_python

_PARTIALS = "unit long, partial binary"


@contextlib.contextmanager
def _opened(uri: str) -> Iterator:
    """A file of any filesystem pyarrow reaches, for reading."""
    store, where = filesystem(uri)
    with store.open_input_stream(where) as f:
        yield f


def _partials(units: list[Unit], options: Options, driver: str):
    """The function each task maps its unit numbers with: each unit read into a pickled
    partial aggregate (by the dcpfast the driver runs, ``driver``: see ``workers``)."""
    def read(batches):
        same_dcpfast(driver)
        for batch in batches:
            for number in batch.column(0).to_pylist():
                found = read_unit(units[number], options, _opened)
                yield pa.RecordBatch.from_pydict(
                    {"unit": [number], "partial": [pickle.dumps(found, protocol=5)]},
                    schema=pa.schema([("unit", pa.int64()), ("partial", pa.binary())]))
    return read


def report(spark, inputs, *, stall_seconds: float = DEFAULT_STALL_SECONDS,
           errors: str = "strict", collections: bool | None = None,
           ports: int | Iterable[int] = DCP_PORT) -> Report:
    """``dcpfast.report`` of ``inputs`` (files, directories or URIs, as ``read_dcp``
    takes), each unit of them read in a Spark task; the options are ``dcpfast.report``'s.
    Returns the same ``Report``."""
    paths = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else \
        [os.fspath(p) for p in inputs]
    options = Options(stall_seconds=stall_seconds, errors=errors, collections=collections,
                      ports=(ports,) if isinstance(ports, int) else tuple(ports), threads=1)
    units = plan([uri for uri, _ in list_files(paths)], _opened, errors)
    if not units:
        raise ValueError(text("report_empty"))
    numbers = spark.range(0, len(units), 1, len(units))
    with worker_python(spark):          # the tasks run this dcpfast: see workers
        tasks = numbers.mapInArrow(_partials(units, options, identity()), _PARTIALS)
    rows = tasks.collect()
    partials = [pickle.loads(r["partial"]) for r in sorted(rows, key=lambda r: r["unit"])]
    return Report.of(merged(partials))
