"""The ``dcp`` Python data source and ``read_dcp``: DCP dumps as a Spark DataFrame, read
once (``spark.read``) or as they grow (``spark.readStream``).

* ``read_dcp(spark, path, method="datasource")``: the ``dcp`` Python data source reads
  the files itself (local paths or any pyarrow filesystem URI), packs small files into
  partitions and splits large ones into byte ranges (``io.ranges``).
* ``method="arrow"`` / ``"pandas"``: Spark's ``binaryFile`` source and ``mapInArrow``
  (``decode_arrow``) or ``mapInPandas`` (``decode_pandas``); files must be under 2 GiB.
* ``spark.readStream.format("dcp")``: the stream reader of ``stream_reader``.

The data source's class (``dcp_source``) and its readers (``reader``, ``stream_reader``)
subclass pyspark's: ``register`` imports them, so that pyspark is imported only by the
functions that need it; the decoding itself runs on the executors, which need dcpfast
installed.
"""

from __future__ import annotations

import functools
import json
import os

from ..errors import checked_mode
from .convert import decode_arrow, decode_pandas
from .schema import output_columns, spark_schema
from .source import check_inputs, checked_joined, parallelism
from .workers import check_interpreter, identity, registered


def data_source():
    """The ``dcp`` data source class, for ``spark.dataSource.register`` (its module
    imports pyspark)."""
    from .dcp_source import DcpDataSource

    return DcpDataSource


def register(spark) -> None:
    """Make ``spark.read.format("dcp")`` and ``spark.readStream.format("dcp")`` available
    in this session (their Python workers run this dcpfast: ``workers``)."""
    registered(spark, data_source())


def _pushdown(spark) -> bool:
    """Whether the session lets Python data sources take filters (Spark 4.1 and later)."""
    try:
        return spark.conf.get(_PUSHDOWN, "false").strip().lower() == "true"
    except Exception:
        return False


_PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
_METHODS = ("datasource", "arrow", "pandas")


def read_dcp(spark, path, method: str = "datasource", *, columns=None, values: bool = False,
             errors: str = "strict", collections: bool | None = None,
             partition_bytes: int | None = None, joined: str = "files", **options):
    """A DataFrame of the frames in ``path`` (a file, a directory, or a list of them).

    ``method``: ``"datasource"`` (the ``dcp`` source: fastest, splits large files, any
    size), ``"arrow"`` (``binaryFile`` + ``mapInArrow``) or ``"pandas"`` (``binaryFile``
    + ``mapInPandas``); the binaryFile paths read what Spark's JVM can reach, files under
    2 GiB, as many files a batch as Spark's ``spark.sql.execution.arrow.maxBytesPerBatch``
    holds. ``columns``: a list or a comma-separated string of output columns, None for
    ``schema.DEFAULT``, ``"all"`` for every column. ``joined`` (the ``dcp`` source
    only): ``"files"`` (each file a dump of its own), ``"directories"`` (a directory's
    files one dump cut into pieces, joined in name order as ``dcpfast.read`` joins
    them: offsets are positions in the joined stream, ``source`` the file a frame starts
    in) or ``"all"`` (every file given is a piece of one dump, in the order given).
    Further ``options`` go to the ``dcp`` source.

    Local inputs are looked at here, as Spark's own readers do: a path that is not there,
    an unreadable file or a packet capture raises at once (``FileNotFoundError``,
    ``OSError``, ``ValueError``), not when an action runs.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, not {method!r}")
    checked_mode(errors)
    paths = [os.fspath(path)] if isinstance(path, (str, os.PathLike)) else \
        [os.fspath(p) for p in path]
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",")]
    check_inputs(paths)
    checked_joined(joined)
    if method == "datasource":
        register(spark)
        reader = spark.read.format("dcp").option("errors", errors).option("values", values)
        if joined != "files":
            reader = reader.option("joined", joined)
        if columns is not None:
            reader = reader.option("columns", ",".join(output_columns(columns, values)))
        if collections is not None:
            reader = reader.option("collections", collections)
        if partition_bytes is not None:
            reader = reader.option("partitionBytes", partition_bytes)
        if "parallelism" not in options:
            reader = reader.option("parallelism", parallelism(spark))
        if "filterPushdown" not in options:
            reader = reader.option("filterPushdown", _pushdown(spark))
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.option("dcpfast", identity()).option("paths", json.dumps(paths)).load()
    if options or joined != "files":
        given = sorted(options) + (["joined"] if joined != "files" else [])
        raise TypeError(f"options {given} apply to method='datasource' only")
    check_interpreter(spark)
    files = spark.read.format("binaryFile").load(paths).select("path", "content")
    decode = decode_arrow if method == "arrow" else decode_pandas
    func = functools.partial(decode, columns=columns, values=values, errors=errors,
                             collections=collections)
    schema = spark_schema(columns, values)
    if method == "arrow":
        return files.mapInArrow(func, schema)
    return files.mapInPandas(func, schema)
