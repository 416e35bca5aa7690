"""One task of the Parquet job: decode pieces of dumps and write their frames as Parquet
files, partitioned Hive-style (``vbucket=12/part-....parquet``), into a directory of the
task's own. Needs pyarrow, not Spark.

Frames are ordered by their partition values batch by batch (before their rows are
built, so the sort costs a permutation of the numpy columns) and held until about
``FLUSH_BYTES`` of Arrow data; then each partition value's frames go into one file, one
file open at a time. A task of ``PARTITION_BYTES`` of input usually flushes once: one
file per partition value per task, as Spark's own writer makes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import protocol as P
from .. import schema as S
from ..errors import text
from ..io.ranges import BATCH_BYTES, LEAD_IN_BYTES, Piece
from ..options import ScanOptions
from .convert import Skipped, noted, scanner_columns, to_record_batch
from .source import sourced_batches, where_in

#: Arrow bytes a task holds before it writes them out.
FLUSH_BYTES = 256 << 20
#: The partition value of frames that do not carry the partition column (responses have
#: no vbucket): a number no frame carries, which every reader takes as an integer.
NULL_PARTITION = -1


def partition_columns(partition_by: Sequence[str], names: Sequence[str]) -> tuple[str, ...]:
    """``partition_by`` checked: output columns holding integers of 32 bits or fewer
    (a uint64 column reads as signed in Spark, where -1 would be a value)."""
    partition_by = tuple(partition_by)
    for name in partition_by:
        if name not in names:
            raise ValueError(f"cannot partition by {name!r}: not among the output columns")
        if name not in S.DTYPES or S.DTYPES[name].itemsize > 4:
            raise ValueError(f"cannot partition by {name!r}: only by integer columns of up "
                             f"to 32 bits (vbucket, opcode, collection_id...)")
    if len(set(partition_by)) != len(partition_by) or len(partition_by) == len(names):
        raise ValueError("partition columns must differ and leave a column in the files")
    return partition_by


class _Partitions:
    """The frames of a task by partition value, held until they are written."""

    def __init__(self, columns: tuple[str, ...]):
        self.columns = columns
        self.held: dict[tuple[int, ...], list[pa.RecordBatch]] = {}
        self.bytes = 0

    def order(self, batch):
        """``batch``'s frames ordered by partition value (stably), and the value of each
        run of them: ``(frames, [(value, start, stop), ...])``."""
        if not self.columns:
            return batch, [((), 0, len(batch))]
        keys = []
        for name in self.columns:
            column = batch[name].astype(np.int64)
            carried = batch.validity(name)
            keys.append(column if carried is None else
                        np.where(carried, column, NULL_PARTITION))
        order = np.lexsort(keys[::-1])
        keys = [k[order] for k in keys]
        change = np.zeros(len(order), dtype=bool)
        change[0] = True
        for k in keys:
            change[1:] |= k[1:] != k[:-1]
        starts = np.flatnonzero(change).tolist()
        runs = [(tuple(int(k[i]) for k in keys), i, j)
                for i, j in zip(starts, starts[1:] + [len(order)])]
        return batch.filter(order), runs

    def hold(self, rb: pa.RecordBatch, runs) -> None:
        rb = rb.drop_columns(list(self.columns))
        for value, start, stop in runs:
            self.held.setdefault(value, []).append(rb.slice(start, stop - start))
        self.bytes += rb.nbytes


class TaskWriter:
    """Decodes pieces and writes their frames under ``directory`` (a path of ``store``, a
    pyarrow filesystem, in a directory that exists); ``result()`` is what the task reports
    to the job's commit.

    File names start with ``prefix`` (unique to the task in its job) so that committed
    files of different tasks and jobs never collide. ``null_folder``: the folder value of
    frames without a partition value (None: ``NULL_PARTITION``).
    """

    def __init__(self, store, directory: str, prefix: str, schema: pa.Schema,
                 partition_by: Sequence[str], *, collections: bool | None, errors: str,
                 batch_bytes: int = BATCH_BYTES, lead_in: int = LEAD_IN_BYTES,
                 max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE,
                 flush_bytes: int = FLUSH_BYTES, compression: str = "snappy",
                 null_folder: str | None = None):
        self.store, self.directory, self.prefix, self.schema = store, directory, prefix, schema
        self.columns = partition_columns(partition_by, schema.names)
        self.errors = errors
        self.options = ScanOptions.of(collections=collections, errors=errors,
                                      max_frame_size=max_frame_size)
        self.batch_bytes, self.lead_in = batch_bytes, lead_in
        self.flush_bytes, self.compression = flush_bytes, compression
        self.null_folder = null_folder
        self.partitions = _Partitions(self.columns)
        self.files: list[tuple[str, int, int]] = []
        self.rows: dict[str, int] = {}
        self.skipped: list[dict] = []
        self.input_bytes = 0
        self._flushes = 0
        self._made: set[str] = set()
        self._began = time.perf_counter()

    def write(self, piece: Piece) -> None:
        """Decode one piece of a file (or of a joined stream) into the task's files."""
        names = scanner_columns([*self.schema.names, *self.columns])
        skipped = Skipped()
        with noted(where_in(piece)):
            for batch, sourced in self._frames(piece, names):
                skipped.add(batch)
                for fb, source in sourced:          # by the file the frames start in
                    if not len(fb):
                        continue
                    fb, runs = self.partitions.order(fb)
                    rb = to_record_batch(fb, source, self.schema, errors=self.errors)
                    self.partitions.hold(rb, runs)
                    if self.partitions.bytes >= self.flush_bytes:
                        self.flush()
        self.input_bytes += piece.hi - piece.lo
        if skipped.regions:
            self.skipped.append({"where": where_in(piece), "uri": piece.uri, "lo": piece.lo,
                                 "regions": skipped.regions, "bytes": skipped.bytes,
                                 "first": skipped.first})

    def _frames(self, piece: Piece, names):
        """The piece's frames, with their runs by file (``sourced_batches``); a file that
        cannot be read fails the task with the reason, whatever the errors mode (skip
        mode steps over damaged bytes, not over files it cannot open)."""
        try:
            yield from sourced_batches(piece, self.options.but(columns=S.resolve(names)),
                                       batch_bytes=self.batch_bytes, lead_in=self.lead_in)
        except OSError as e:
            raise OSError(text("unreadable", source=piece.uri,
                               reason=e.strerror or e)) from e

    def flush(self) -> None:
        """Write every partition value's held frames into a file of its own."""
        held, self.partitions.held, self.partitions.bytes = self.partitions.held, {}, 0
        for value in sorted(held):
            table = pa.Table.from_batches(held.pop(value))
            folder = "/".join(f"{c}={self._value(v)}" for c, v in zip(self.columns, value))
            name = f"{self.prefix}-{self._flushes}.parquet"
            relative = f"{folder}/{name}" if folder else name
            where = self._folder(folder)
            pq.write_table(table, f"{where}/{name}", filesystem=self.store,
                           compression=self.compression,
                           use_dictionary=S.dictionary_columns(table.column_names))
            size = self.store.get_file_info(f"{where}/{name}").size
            self.files.append((relative, table.num_rows, size))
            self.rows[folder] = self.rows.get(folder, 0) + table.num_rows
        self._flushes += 1

    def _value(self, value: int) -> str | int:
        if value == NULL_PARTITION and self.null_folder is not None:
            return self.null_folder
        return value

    def _folder(self, folder: str) -> str:
        """The task's directory for a partition folder, made one level at a time, never
        its parents: once the job has ended and its staging directory is gone, an attempt
        still running (one Spark gave up on) fails rather than stage files again."""
        paths = [self.directory]
        for level in folder.split("/") if folder else ():
            paths.append(f"{paths[-1]}/{level}")
        for path in paths:
            if path not in self._made:
                self.store.create_dir(path, recursive=False)
                self._made.add(path)
        return paths[-1]

    def result(self) -> dict:
        """What the task wrote: files (path relative to the task directory, rows, bytes),
        frames, rows per partition folder, input bytes, the damage skipped and the
        seconds it took."""
        self.flush()
        return {"files": self.files, "frames": sum(n for _, n, _ in self.files),
                "rows": self.rows, "input_bytes": self.input_bytes,
                "skipped": self.skipped, "seconds": time.perf_counter() - self._began}


