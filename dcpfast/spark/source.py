"""The ``dcp`` Python data source and ``read_dcp``: DCP dumps as a Spark DataFrame.

* ``read_dcp(spark, path, method="datasource")``: the ``dcp`` Python data source reads
  the files itself (local paths or any pyarrow filesystem URI), packs small files into
  partitions and splits large ones into byte ranges (``io.ranges``).
* ``method="arrow"`` / ``"pandas"``: Spark's ``binaryFile`` source and ``mapInArrow``
  (``decode_arrow``) or ``mapInPandas`` (``decode_pandas``); files must be under 2 GiB.

pyspark is imported only by the functions that need it; the decoding itself runs on the
executors, which need dcpfast installed.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import weakref
from collections.abc import Iterator, Sequence

from .. import protocol as P
from ..batch import FrameBatch
from ..errors import DcpFormatError, checked_mode, text
from ..io.compression import codec_of
from ..io.dumps import is_capture, iter_batches, scan
from ..io.ranges import BATCH_BYTES, LEAD_IN_BYTES, PARTITION_BYTES, Piece, plan, range_batches
from ..options import SNIFF_BYTES, ScanOptions
from .convert import decode_arrow, decode_pandas, noted, reported, scanner_columns, to_record_batch
from .filters import condition, keep, wanted
from .schema import output_columns, spark_schema


def filesystem(uri: str):
    """The pyarrow filesystem and in-filesystem path of a local path or a URI."""
    from pyarrow import fs

    if uri.startswith("file:"):
        uri = "/" + uri[5:].lstrip("/")
    if "://" in uri:
        return fs.FileSystem.from_uri(uri)
    return fs.LocalFileSystem(), os.path.abspath(uri)


def source_name(uri: str) -> str:
    """How a file appears in ``source``: Spark's ``file:/...`` form for local files."""
    if uri.startswith("file:"):
        uri = "/" + uri[5:].lstrip("/")
    elif "://" in uri:
        return uri
    return "file:" + os.path.abspath(uri)


def list_files(paths: Sequence[str]) -> list[tuple[str, int]]:
    """``(uri, size)`` of every file under ``paths`` (directories are walked; names
    starting with ``.`` or ``_`` are skipped, as Spark's file sources do)."""
    from pyarrow import fs

    out = []
    for path in paths:
        store, where = filesystem(path)
        info = store.get_file_info(where)
        if info.type == fs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if info.type == fs.FileType.File:
            found = [info]
        else:
            found = [i for i in store.get_file_info(fs.FileSelector(where, recursive=True))
                     if i.type == fs.FileType.File
                     and not i.base_name.startswith((".", "_"))]
        prefix = path[:path.index("://") + 3] if "://" in path else ""
        for i in sorted(found, key=lambda i: i.path):
            uri = prefix + i.path if prefix and not i.path.startswith(prefix) else i.path
            out.append((uri if prefix else i.path, i.size))
    return out


def compressed(uri: str) -> bool:
    """Whether a file starts with a compression magic number (then it is read whole)."""
    store, where = filesystem(uri)
    with store.open_input_file(where) as f:
        return codec_of(bytes(f.read_at(64, 0))) is not None


def _sniff(f, size: int) -> bool:
    head = f.read_at(min(size, SNIFF_BYTES), 0)
    return scan(head, columns=("offset",), max_frames=0).collections


def piece_batches(piece: Piece, options: ScanOptions, *, batch_bytes: int = BATCH_BYTES,
                  lead_in: int = LEAD_IN_BYTES) -> Iterator[FrameBatch]:
    """The frames of one piece of a file as ``options`` ask (one thread: Spark runs a task
    per core): a whole file streamed (``iter_batches``), a byte range anchored
    (``range_batches``).

    A packet capture is refused with a ``DcpFormatError`` at byte 0 that says so, in
    either errors mode: skip mode would otherwise drop the whole file as damage.
    """
    store, where = filesystem(piece.uri)
    if piece.whole:
        if piece.size:
            with store.open_input_file(where) as f:
                _refuse_capture(f, piece)
        local = store.type_name == "local"  # a path: iter_batches reads it itself
        with contextlib.nullcontext(where) if local else \
                store.open_input_stream(where) as f:
            yield from iter_batches(f, batch_bytes, collections=options.collections,
                                    columns=options.columns, errors=options.errors,
                                    max_frame_size=options.max_frame_size, threads=1)
        return
    with store.open_input_file(where) as f:
        if piece.lo == 0:
            _refuse_capture(f, piece)
        if options.collections is None:
            options = options.but(collections=_sniff(f, piece.size))
        yield from range_batches(f, piece, options, batch_bytes=batch_bytes, lead_in=lead_in)


def _refuse_capture(f, piece: Piece) -> None:
    if is_capture(bytes(f.read_at(min(piece.size, 4), 0))):
        raise DcpFormatError(0, text("capture_on_spark"))


def where_in(piece: Piece) -> str:
    """How messages name a piece: the file, and the byte range when it is one."""
    return piece.uri if piece.whole else f"{piece.uri} (bytes {piece.lo} to {piece.hi})"


def read_piece(piece: Piece, schema, *, collections: bool | None, errors: str,
               batch_bytes: int = BATCH_BYTES, lead_in: int = LEAD_IN_BYTES,
               max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE, conditions=()):
    """Record batches of ``schema`` for the frames of one piece of a file that pass the
    ``conditions`` (``filters.Condition``) taken from Spark's filters."""
    source = source_name(piece.uri)
    names = scanner_columns([*schema.names, *wanted(conditions)])
    with noted(where_in(piece)):
        options = ScanOptions.of(collections=collections, columns=names, errors=errors,
                                 max_frame_size=max_frame_size)
        batches = piece_batches(piece, options, batch_bytes=batch_bytes, lead_in=lead_in)
        for fb in reported(batches, where_in(piece)):
            if conditions:
                fb = fb.filter(keep(fb, conditions))
            if len(fb):
                yield to_record_batch(fb, source, schema, errors=errors)


def _option(options, name, default, kind=str):
    value = options.get(name.lower(), options.get(name))
    if value is None:
        return default
    if kind is bool:
        text = str(value).strip().lower()
        if text in ("auto", "none", ""):
            return None
        if text not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"option {name}: expected true/false, not {value!r}")
        return text in ("true", "1", "yes")
    return kind(value)


def _byte_size(value) -> int:
    """An int, or a size such as ``256m``/``1g``/``64k``."""
    text = str(value).strip().lower().rstrip("b")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _paths(options) -> list[str]:
    paths = options.get("paths")
    if paths:
        return list(json.loads(paths)) if paths.lstrip().startswith("[") else [paths]
    if options.get("path"):
        return [options["path"]]
    raise ValueError("the dcp data source needs a path: spark.read.format('dcp').load(path)")


def _datasource_classes():
    """The ``dcp`` data source classes (built on demand: they subclass pyspark's)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class DcpDataSource(DataSource):
        """``spark.read.format("dcp").options(...).load(path)``: DCP dumps as frame rows.

        Options: ``columns`` (comma-separated projection, reaching the scanner;
        ``all``; default ``schema.DEFAULT``), ``values`` (add ``content``/``xattrs``),
        ``errors`` (strict/skip), ``filterPushdown`` (true: take Spark's filters on
        frame columns; only while ``spark.sql.python.filterPushdown.enabled`` is true,
        which ``read_dcp`` reads),
        ``collections`` (true/false/auto), ``partitionBytes`` (default 128m; files above
        it are split into byte ranges), ``parallelism`` (the partition count is made a
        multiple of it; ``read_dcp`` passes the session's), ``leadInBytes``,
        ``batchBytes``, ``maxFrameSize``. ``load`` takes a file, a directory or a list of
        them, local or any URI pyarrow's filesystems open (s3://, gs://, hdfs://...).
        """

        @classmethod
        def name(cls):
            return "dcp"

        def schema(self):
            return spark_schema(self.options.get("columns"),
                                bool(_option(self.options, "values", False, bool)))

        def reader(self, schema):
            pushdown = _option(self.options, "filterPushdown", False, bool)
            return (FilteringReader if pushdown else DcpReader)(self.options, schema)

    class DcpReader(DataSourceReader):
        def __init__(self, options, schema):
            from pyspark.sql.pandas.types import to_arrow_schema

            self.paths = _paths(options)
            self.schema = to_arrow_schema(schema, timezone="UTC")
            self.errors = _option(options, "errors", "strict")
            checked_mode(self.errors, name="option errors")
            self.collections = _option(options, "collections", None, bool)
            self.partition_bytes = _byte_size(_option(options, "partitionBytes",
                                                      PARTITION_BYTES))
            self.parallelism = _option(options, "parallelism", 1, int)
            self.lead_in = _byte_size(_option(options, "leadInBytes", LEAD_IN_BYTES))
            self.batch_bytes = _byte_size(_option(options, "batchBytes", BATCH_BYTES))
            self.max_frame_size = _byte_size(_option(options, "maxFrameSize",
                                                     P.DEFAULT_MAX_FRAME_SIZE))
            self.conditions: list = []

        def partitions(self):
            files = list_files(self.paths)
            parts = plan(files, self.partition_bytes, self.parallelism,
                         splittable=lambda u: not compressed(u))
            return [InputPartition(tuple(p)) for p in parts] or [InputPartition(())]

        def read(self, partition):
            for piece in partition.value:
                yield from read_piece(piece, self.schema, collections=self.collections,
                                      errors=self.errors, batch_bytes=self.batch_bytes,
                                      lead_in=self.lead_in,
                                      max_frame_size=self.max_frame_size,
                                      conditions=self.conditions)

    class FilteringReader(DcpReader):
        """The reader that takes filters: Spark refuses a reader that could take them
        while ``spark.sql.python.filterPushdown.enabled`` is false."""

        def pushFilters(self, filters):
            """Take the comparisons of frame columns with integers (``filters``); Spark
            evaluates the others."""
            for spark_filter in filters:
                taken = condition(spark_filter)
                if taken is None:
                    yield spark_filter
                else:
                    self.conditions.append(taken)

    return DcpDataSource


@functools.cache
def data_source():
    """The ``dcp`` data source class, for ``spark.dataSource.register``."""
    return _datasource_classes()


#: The data sources registered in each session, by name (registering again logs a warning).
_REGISTERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def registered(spark, source) -> None:
    """Register the data source class ``source`` in ``spark`` unless it is already."""
    names = _REGISTERED.setdefault(spark, set())
    if source.name() not in names:
        spark.dataSource.register(source)
        names.add(source.name())


def register(spark) -> None:
    """Make ``spark.read.format("dcp")`` available in this session."""
    registered(spark, data_source())


def parallelism(spark) -> int:
    """The session's default parallelism (1 where it cannot be asked, as on Connect)."""
    try:
        return max(int(spark.sparkContext.defaultParallelism), 1)
    except Exception:
        return 1


def _pushdown(spark) -> bool:
    """Whether the session lets Python data sources take filters (Spark 4.1 and later)."""
    try:
        return spark.conf.get(_PUSHDOWN, "false").strip().lower() == "true"
    except Exception:
        return False


_PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


# -- one entry point ------------------------------------------------------------------------------

_METHODS = ("datasource", "arrow", "pandas")


def read_dcp(spark, path, method: str = "datasource", *, columns=None, values: bool = False,
             errors: str = "strict", collections: bool | None = None,
             partition_bytes: int | None = None, **options):
    """A DataFrame of the frames in ``path`` (a file, a directory, or a list of them).

    ``method``: ``"datasource"`` (the ``dcp`` source: fastest, splits large files, any
    size), ``"arrow"`` (``binaryFile`` + ``mapInArrow``) or ``"pandas"`` (``binaryFile``
    + ``mapInPandas``); the binaryFile paths read what Spark's JVM can reach, files under
    2 GiB, as many files a batch as Spark's ``spark.sql.execution.arrow.maxBytesPerBatch``
    holds. ``columns``: a list or a comma-separated string of output columns, None for
    ``schema.DEFAULT``, ``"all"`` for every column. Further ``options`` go to the ``dcp``
    source.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, not {method!r}")
    checked_mode(errors)
    paths = [os.fspath(path)] if isinstance(path, (str, os.PathLike)) else \
        [os.fspath(p) for p in path]
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",")]
    if method == "datasource":
        register(spark)
        reader = spark.read.format("dcp").option("errors", errors).option("values", values)
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
        return reader.option("paths", json.dumps(paths)).load()
    if options:
        raise TypeError(f"options {sorted(options)} apply to method='datasource' only")
    files = spark.read.format("binaryFile").load(paths).select("path", "content")
    decode = decode_arrow if method == "arrow" else decode_pandas
    func = functools.partial(decode, columns=columns, values=values, errors=errors,
                             collections=collections)
    schema = spark_schema(columns, values)
    if method == "arrow":
        return files.mapInArrow(func, schema)
    return files.mapInPandas(func, schema)
