"""The ``dcp`` data source's class, which ``register`` adds to a session (``datasource``):
its schema, and its batch and stream readers (``reader``, ``stream_reader``). It
subclasses pyspark's ``DataSource``, so this module imports pyspark: only
``datasource.data_source`` imports it. Spark's Python workers unpickle the class, and the
readers it makes, by this module's path.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from .reader import DcpReader, FilteringReader
from .schema import spark_schema
from .source import option
from .stream_reader import DcpStreamReader


class DcpDataSource(DataSource):
    """``spark.read.format("dcp").options(...).load(path)``: DCP dumps as frame rows;
    ``spark.readStream.format("dcp")``: the same, as the dumps grow.

    Options: ``columns`` (comma-separated projection, reaching the scanner;
    ``all``; default ``schema.DEFAULT``), ``values`` (add ``content``/``xattrs``),
    ``errors`` (strict/skip), ``filterPushdown`` (true: take Spark's filters on
    frame columns; only while ``spark.sql.python.filterPushdown.enabled`` is true,
    which ``read_dcp`` reads), ``collections`` (true/false/auto), ``partitionBytes``
    (default 128m; files above it are split into byte ranges), ``parallelism`` (the
    partition count is made a multiple of it; ``read_dcp`` passes the session's),
    ``leadInBytes``, ``batchBytes``, ``maxFrameSize``, ``joined`` (``files``: each
    file a dump of its own; ``directories``: a directory's files one dump cut into
    pieces, joined in name order; ``all``: every file one dump; batch reads only);
    streaming:
    ``maxBytesPerTrigger``, ``maxFilesPerTrigger``. ``load`` takes a file, a
    directory or a list of them, local or any URI pyarrow's filesystems open (s3://,
    gs://, hdfs://...).
    """

    @classmethod
    def name(cls):
        return "dcp"

    def schema(self):
        return spark_schema(self.options.get("columns"),
                            bool(option(self.options, "values", False, bool)))

    def reader(self, schema):
        pushdown = option(self.options, "filterPushdown", False, bool)
        return (FilteringReader if pushdown else DcpReader)(self.options, schema)

    def streamReader(self, schema):
        return DcpStreamReader(self.options, schema)
