"""The batch readers of the ``dcp`` data source (``spark.read.format("dcp")``): the
partitions of the inputs' pieces, and a partition's frames as record batches. They
subclass pyspark's ``DataSourceReader``, so this module imports pyspark: only
``dcp_source`` imports it, when ``register`` asks for the data source.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .filters import condition
from .joined import planned
from .source import ReadOptions, read_piece
from .workers import same_dcpfast


class DcpReader(DataSourceReader):
    """The reader of a batch query: the inputs' pieces packed into partitions (large files,
    and large joined streams, split into byte ranges), each read in a task."""

    def __init__(self, options, schema):
        self.options = ReadOptions(options, schema)
        self.conditions: list = []

    def partitions(self):
        same_dcpfast(self.options.dcpfast)
        parts = planned(self.options.paths, self.options.joined,
                        self.options.partition_bytes, self.options.parallelism)
        return [InputPartition(tuple(p)) for p in parts] or [InputPartition(())]

    def read(self, partition):
        same_dcpfast(self.options.dcpfast)
        o = self.options
        for piece in partition.value:
            yield from read_piece(piece, o.schema, collections=o.collections,
                                  errors=o.errors, batch_bytes=o.batch_bytes,
                                  lead_in=o.lead_in, max_frame_size=o.max_frame_size,
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
