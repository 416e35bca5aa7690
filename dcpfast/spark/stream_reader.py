"""The stream reader of the ``dcp`` data source: DCP dumps read as they grow, by Spark's
Structured Streaming (``spark.readStream.format("dcp").load(path)``, PySpark 4.2 and
later).

An offset is, per file, the stream position after its last complete frame, kept as
the file's ``io.positions.Position`` (``position``: the offset, the file's size,
modification time and inode, checksums of its first bytes and of those before the
offset), with what the file's scan decided (``collections``; ``unverified`` in skip
mode): ``{"files": {uri: {...}}}``. Each trigger the driver lists the files, checks each
known one against its position, and walks the frames of every file from there (the
scan core, offsets only: ``stream.walk``), so a micro-batch always ends on frame
boundaries: a frame cut at the end of a growing file waits for the next trigger (a
warning says so once it has waited long: ``stream.Waiting``), new files and bytes
appended to known files are read, and a restart from a checkpoint reads
each frame exactly once. ``maxBytesPerTrigger`` (``ReadMaxBytes``) and
``maxFilesPerTrigger`` (``ReadMaxFiles``) bound a micro-batch; ``Trigger.AvailableNow``
reads what was there when it started. A file that shrinks, is replaced (renamed over,
even by a dump of the same first bytes) or is rewritten, a packet capture and a
compressed file fail the query in one line naming them: a stream reads a file that only
grows.

The reader subclasses pyspark's ``DataSourceStreamReader`` and
``SupportsTriggerAvailableNow``, so this module imports pyspark: only ``dcp_source``
imports it, when ``register`` asks for the data source.
"""

from __future__ import annotations

import os

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from ..errors import text
from ..io.compression import HEAD_BYTES, codec_of
from ..io.kinds import is_capture
from ..io.positions import Position, Stat
from ..options import ScanOptions
from .convert import noted
from .source import ReadOptions, byte_size, filesystem, list_files, option
from .stream import Waiting, read_range, walk
from .workers import same_dcpfast


def _end(entry: dict | None) -> int:
    """The offset a file's entry has read it to (0: not read yet)."""
    return entry["position"]["offset"] if entry else 0


def _stat(store, where: str) -> Stat:
    """The file's ``Stat``: a local file's from ``os.stat``, with its inode, another
    filesystem's from its listing (size and modification time)."""
    if store.type_name == "local":
        return Stat.of(os.stat(where))
    info = store.get_file_info(where)
    return Stat(info.size, info.mtime_ns)


def _reading(f):
    """The ``io.positions.Reader`` of an open pyarrow file."""
    return lambda offset, n: bytes(f.read_at(n, offset))


def _limits(limit) -> tuple[int | None, int | None]:
    """``(bytes, files)`` of a pyspark ``ReadLimit`` (None: no bound)."""
    kind = type(limit).__name__
    if kind == "ReadMaxBytes":
        return int(limit.max_bytes), None
    if kind == "ReadMaxFiles":
        return None, int(limit.max_files)
    return None, None


class DcpStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The reader of a streaming query: offsets at frame boundaries over growing dumps,
    each micro-batch's ranges read in tasks."""

    def __init__(self, options, schema):
        self.options = ReadOptions(options, schema)
        self.max_bytes = option(options, "maxBytesPerTrigger", None, str)
        self.max_files = option(options, "maxFilesPerTrigger", None, int)
        if self.max_bytes is not None and self.max_files is not None:
            raise ValueError("give maxBytesPerTrigger or maxFilesPerTrigger, not both")
        if self.options.joined != "files":
            raise ValueError("option joined: a stream reads each growing file as a dump "
                             "of its own")
        self.target: dict[str, int] | None = None
        self.bounds: dict[tuple[str, int, int], list] = {}
        self.waiting = Waiting()

    def initialOffset(self):
        return {"files": {}}

    def getDefaultReadLimit(self):
        if self.max_bytes is not None:
            return ReadMaxBytes(byte_size(self.max_bytes))
        if self.max_files is not None:
            return ReadMaxFiles(self.max_files)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        self.target = dict(list_files(self.options.paths))

    def latestOffset(self, start, limit):
        same_dcpfast(self.options.dcpfast)
        budget, files_left = _limits(limit)
        known = dict(start.get("files", {}))
        found = dict(list_files(self.options.paths))
        if self.target is not None:
            found = {u: min(s, self.target[u]) for u, s in found.items()
                     if u in self.target}
        out = {}
        moved_any = False
        for uri in sorted(set(found) | set(known)):
            before = known.get(uri)
            if uri not in found:                  # gone: what was read stays read
                out[uri] = before
                continue
            entry = before
            if (budget is None or budget > 0) and (files_left is None or files_left > 0):
                entry = self._advance(uri, before, found[uri], budget,
                                      progress=not moved_any)
            else:
                self._check(uri, before)
            if entry is None:
                continue
            if entry != before:
                moved_any = True
                if budget is not None:
                    budget -= _end(entry) - _end(before)
                if files_left is not None:
                    files_left -= 1
            out[uri] = entry
        return {"files": out}

    def _check(self, uri, before) -> None:
        """A known file must be the one read, grown or not (``Position.check``: else
        ``FileChanged``, one line naming it)."""
        if not before:
            return
        store, where = filesystem(uri)
        with store.open_input_file(where) as f:
            Position.from_json(before["position"]).check(_stat(store, where), _reading(f))

    def _advance(self, uri, before, size, budget, *, progress):
        """The file's entry after the frames that ``budget`` bytes admit."""
        self._check(uri, before)
        lo = _end(before)
        if size - lo < 24:               # not even a frame header yet
            return before
        store, where = filesystem(uri)
        o = self.options
        with store.open_input_file(where) as f:
            if before is None:
                head = bytes(f.read_at(HEAD_BYTES, 0))
                if is_capture(head[:4]):
                    raise ValueError(text("stream_capture", source=uri,
                                          reason=text("capture_on_spark")))
                if codec_of(head) is not None:
                    raise ValueError(text("stream_compressed", source=uri,
                                          codec=codec_of(head)))
            collections = before.get("collections") if before else o.collections
            options = ScanOptions.of(collections=collections, errors=o.errors,
                                     max_frame_size=o.max_frame_size)
            limit = size if budget is None else min(size, lo + budget)
            with noted(uri):
                bounds, decided = walk(f, lo, limit, size, options,
                                       unverified=bool(before and before.get("unverified")),
                                       batch_bytes=o.batch_bytes, progress=progress)
            end, unverified = bounds[-1]
            if end == lo:
                self.waiting.look(uri, f, lo, size)
                return before
            self.bounds[(uri, lo, end)] = bounds
            position = Position.taken(uri, end, _stat(store, where), _reading(f))
            entry = {"position": position.to_json(), "collections": bool(decided)}
            if unverified:
                entry["unverified"] = True
            return entry

    def partitions(self, start, end):
        same_dcpfast(self.options.dcpfast)
        pieces = []
        known = start.get("files", {})
        for uri, entry in end.get("files", {}).items():
            before = known.get(uri) or {}
            lo = _end(before)
            if _end(entry) <= lo:
                continue
            bounds = self.bounds.pop((uri, lo, _end(entry)), None) or \
                self._bounds(uri, before, entry)
            for (a, u), (b, _) in zip(bounds, bounds[1:]):
                pieces.append((uri, a, b, entry["collections"], u))
        return [InputPartition(tuple(p)) for p in _pack(pieces, self.options)]

    def _bounds(self, uri, before, entry):
        """The boundaries of ``[before's end, entry's end)`` walked again (a restart
        from a checkpoint plans a batch this reader did not)."""
        store, where = filesystem(uri)
        options = ScanOptions.of(collections=entry["collections"],
                                 errors=self.options.errors,
                                 max_frame_size=self.options.max_frame_size)
        with store.open_input_file(where) as f:
            bounds, _ = walk(f, _end(before), _end(entry), _end(entry), options,
                             unverified=bool(before.get("unverified")),
                             batch_bytes=self.options.batch_bytes, progress=False)
        return bounds

    def read(self, partition):
        same_dcpfast(self.options.dcpfast)
        for piece in partition.value:
            yield from read_range(*piece, self.options)


def _pack(pieces: list, options: ReadOptions) -> list[list]:
    """Consecutive pieces (each a scanned buffer of a file) merged into partitions of about
    ``partitionBytes``, as many as a multiple of ``parallelism`` where the bytes allow."""
    total = sum(p[2] - p[1] for p in pieces)
    if not total:
        return []
    count = -(-max(-(-total // options.partition_bytes), 1) // options.parallelism) * \
        options.parallelism
    target = max(-(-total // count), 1)
    parts: list[list] = [[]]
    held = 0
    for piece in pieces:
        last = parts[-1][-1] if parts[-1] else None
        if held >= target:
            parts.append([])
            held, last = 0, None
        if last is not None and last[0] == piece[0] and last[2] == piece[1]:
            parts[-1][-1] = (last[0], last[1], piece[2], last[3], last[4])
        else:
            parts[-1].append(piece)
        held += piece[2] - piece[1]
    return parts
