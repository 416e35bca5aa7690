"""Reading dumps on Spark: the files under the inputs, their pieces (whole files and byte
ranges), a piece's frames as the record batches Spark takes, and the options of the
``dcp`` data source's readers (``reader``, ``stream_reader``). Needs pyspark only in
``ReadOptions``.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import io
import json
import os
from collections.abc import Iterator, Sequence

import numpy as np
from pyarrow import fs

from .. import protocol as P
from ..batch import FrameBatch
from ..errors import DcpFormatError, checked_mode, text
from ..io.compression import codec_of
from ..io.dumps import iter_batches, scan
from ..io.files import FileChain
from ..io.kinds import is_capture
from ..io.ranges import BATCH_BYTES, LEAD_IN_BYTES, PARTITION_BYTES, Piece, range_batches
from ..options import SNIFF_BYTES, ScanOptions
from .convert import noted, reported, scanner_columns, to_record_batch
from .filters import keep, wanted


def filesystem(uri: str):
    """The pyarrow filesystem and in-filesystem path of a local path or a URI."""
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


#: Files a listing of dumps passes over: the Parquet files of a job's output (an output
#: directory inside an input directory must never be read as dumps).
SKIPPED_SUFFIXES = (".parquet",)


def list_files(paths: Sequence[str], *, exclude: Sequence[str] = ()
               ) -> list[tuple[str, int]]:
    """``(uri, size)`` of every file under ``paths`` (directories are walked; names
    starting with ``.`` or ``_`` and Parquet files are skipped, and so is everything
    under ``exclude``, a job's own output).

    A path that is not there raises ``FileNotFoundError``; a dangling symbolic link (one
    named or one inside a directory) and what is neither a file nor a directory (a FIFO,
    a device) raise with their reason, never skipped without a word.
    """
    out = []
    fenced = [filesystem(x)[1].rstrip("/") + "/" for x in exclude]
    for path in paths:
        store, where = filesystem(path)
        info = store.get_file_info(where)
        if info.type == fs.FileType.NotFound:
            _missing(store, where, path)
        if info.type == fs.FileType.File:
            found = [info]
        elif info.type == fs.FileType.Directory:
            if store.type_name == "local":
                _dangling(where)
            found = []
            for i in store.get_file_info(fs.FileSelector(where, recursive=True)):
                inside = i.path[len(where):].lstrip("/").split("/")
                if any(part.startswith((".", "_")) for part in inside) or \
                        i.path.endswith(SKIPPED_SUFFIXES) or \
                        any((i.path + "/").startswith(f) for f in fenced):
                    continue
                if i.type == fs.FileType.File:
                    found.append(i)
                elif i.type == fs.FileType.NotFound:
                    _missing(store, i.path, i.path)
                elif i.type != fs.FileType.Directory:
                    _not_a_file(store, i.path)
        else:
            _not_a_file(store, where)
        prefix = path[:path.index("://") + 3] if "://" in path else ""
        for i in sorted(found, key=lambda i: i.path):
            uri = prefix + i.path if prefix and not i.path.startswith(prefix) else i.path
            out.append((uri if prefix else i.path, i.size))
    return out


def _dangling(where: str) -> None:
    """Raise for the first dangling symbolic link under a local directory (a listing
    through pyarrow passes over them without a word), hidden names left out."""
    for folder, dirs, files in os.walk(where):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in sorted(dirs + files):
            path = os.path.join(folder, name)
            if not name.startswith((".", "_")) and os.path.islink(path) and \
                    not os.path.exists(path):
                raise FileNotFoundError(errno.ENOENT, text("dangling_link",
                                                           target=os.readlink(path)), path)


def _missing(store, where: str, path: str):
    if store.type_name == "local" and os.path.islink(where):
        raise FileNotFoundError(errno.ENOENT, text("dangling_link",
                                                   target=os.readlink(where)), where)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def _not_a_file(store, where: str):
    import stat

    kind = "special file"
    if store.type_name == "local":
        mode = os.stat(where).st_mode
        kind = next((k for test, k in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))
                     if test(mode)), kind)
    raise ValueError(text("not_a_file", source=where, kind=kind))


def check_inputs(inputs: Sequence[str], *, exclude: Sequence[str] = ()
                 ) -> list[tuple[str, int]]:
    """The files under ``inputs`` (``list_files``), each local one opened and looked at
    first, so that a missing or unreadable file or a packet capture fails at once, with
    its reason, before any Spark job (remote files are checked by the tasks)."""
    files = list_files(inputs, exclude=exclude)
    for uri, _ in files:
        store, where = filesystem(uri)
        if store.type_name != "local":
            continue
        try:
            with open(where, "rb") as f:
                head = f.read(4)
        except OSError as e:
            raise OSError(text("unreadable", source=uri, reason=e.strerror or e)) from None
        if is_capture(head):
            raise ValueError(f"{uri}: {text('capture_on_spark')}")
    return files


def head_of(uri: str) -> bytes:
    """The first 64 bytes of a file (its compression or capture magic number)."""
    store, where = filesystem(uri)
    with store.open_input_file(where) as f:
        return bytes(f.read_at(64, 0))


def splittable(uri: str) -> bool:
    """Whether a file may be cut into byte ranges: not compressed (those are read whole).
    A packet capture raises ``ValueError`` here, on the driver, before any task runs."""
    head = head_of(uri)
    if is_capture(head[:4]):
        raise ValueError(f"{uri}: {text('capture_on_spark')}")
    return codec_of(head) is None


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


def sourced_batches(piece: Piece, options: ScanOptions, *, batch_bytes: int = BATCH_BYTES,
                    lead_in: int = LEAD_IN_BYTES
                    ) -> Iterator[tuple[FrameBatch, list[tuple[FrameBatch, str]]]]:
    """The frames of one piece (``piece_batches``; of a joined stream, ``Piece.files``,
    through ``joined_stream``), each batch with its runs of frames by the file they
    start in, and that file's ``source`` name."""
    if not piece.files:
        source = source_name(piece.uri)
        for fb in piece_batches(piece, options, batch_bytes=batch_bytes, lead_in=lead_in):
            yield fb, [(fb, source)]
        return
    options = options.with_columns("offset")
    with joined_stream(piece, options.errors) as (f, starts):
        batches: Iterator[FrameBatch]
        if piece.whole:
            batches = iter_batches(f, batch_bytes, collections=options.collections,
                                   columns=options.columns, errors=options.errors,
                                   max_frame_size=options.max_frame_size, threads=1)
        else:
            if options.collections is None:
                options = options.but(collections=_sniff(f, piece.size))
            batches = range_batches(f, piece, options, batch_bytes=batch_bytes,
                                    lead_in=lead_in)
        for fb in batches:
            yield fb, by_file(fb, starts, piece.files)


def read_piece(piece: Piece, schema, *, collections: bool | None, errors: str,
               batch_bytes: int = BATCH_BYTES, lead_in: int = LEAD_IN_BYTES,
               max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE, conditions=()):
    """Record batches of ``schema`` for the frames of one piece of a file (or of a joined
    stream) that pass the ``conditions`` (``filters.Condition``) taken from Spark's
    filters."""
    names = scanner_columns([*schema.names, *wanted(conditions)])
    runs: list[tuple[FrameBatch, str]] = []

    def batches(found):
        for fb, sourced in found:
            runs[:] = sourced
            yield fb

    with noted(where_in(piece)):
        options = ScanOptions.of(collections=collections, columns=names, errors=errors,
                                 max_frame_size=max_frame_size)
        found = sourced_batches(piece, options, batch_bytes=batch_bytes, lead_in=lead_in)
        for _ in reported(batches(found), where_in(piece)):
            for fb, source in runs:
                if conditions:
                    fb = fb.filter(keep(fb, conditions))
                if len(fb):
                    yield to_record_batch(fb, source, schema, errors=errors)


class JoinedFile(io.RawIOBase):
    """The plain files ``files`` (``(uri, size)``) as one seekable binary file, read at
    any position (``seek``, ``readinto``, ``read_at``), each file opened when first read."""

    def __init__(self, files: Sequence[tuple[str, int]]):
        self.files = list(files)
        self.starts = [0]
        for _, size in self.files:
            self.starts.append(self.starts[-1] + size)
        self.size = self.starts.pop()
        self._pos = 0
        self._opened: dict[int, object] = {}

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(base + pos, 0)
        return self._pos

    def readinto(self, b) -> int:
        """Bytes from the current position, up to the end of the file it lies in."""
        view = memoryview(b).cast("B")
        if self._pos >= self.size or not len(view):
            return 0
        k = bisect.bisect_right(self.starts, self._pos) - 1
        at = self._pos - self.starts[k]
        n = min(len(view), self.files[k][1] - at)
        got = self._file(k).read_at(n, at)
        view[:len(got)] = got
        self._pos += len(got)
        return len(got)

    def read_at(self, n: int, pos: int) -> bytes:
        """Up to ``n`` bytes from ``pos``."""
        self.seek(pos)
        out = bytearray(n)
        got = 0
        while got < n:
            read = self.readinto(memoryview(out)[got:])
            if not read:
                break
            got += read
        return bytes(out[:got])

    def _file(self, k: int):
        if k not in self._opened:
            store, where = filesystem(self.files[k][0])
            self._opened[k] = store.open_input_file(where)
        return self._opened[k]

    def close(self) -> None:
        for f in self._opened.values():
            f.close()                                       # type: ignore[attr-defined]
        self._opened.clear()
        super().close()


@contextlib.contextmanager
def joined_stream(piece: Piece, errors: str) -> Iterator[tuple[object, list[int]]]:
    """The joined stream of ``piece``'s files and the stream position where each file
    starts (a compressed stream's grow as it is read): a ``JoinedFile`` where every file
    is plain, else a ``FileChain`` of the local files, decompressed, for a whole read."""
    plain = all(splittable(uri) for uri, _ in piece.files)
    if plain:
        with JoinedFile(piece.files) as f:
            yield f, f.starts
        return
    local = []
    for uri, _ in piece.files:
        store, where = filesystem(uri)
        if store.type_name != "local":
            raise ValueError(f"{piece.uri}: compressed pieces of one dump are read from "
                             "local paths only")
        local.append(where)
    with FileChain(local, errors) as chain:
        yield chain, chain.starts


def by_file(batch: FrameBatch, starts: list[int], files: Sequence[tuple[str, int]]
            ) -> list[tuple[FrameBatch, str]]:
    """``batch`` (of a joined stream whose files start at ``starts``; its ``offset``
    scanned) in runs of frames that start in one file, each with that file's ``source``
    name."""
    offsets = batch["offset"]
    if not len(offsets):
        return [(batch, source_name(files[0][0]))]
    which = np.searchsorted(np.asarray(starts, np.int64), offsets.astype(np.int64),
                            side="right") - 1
    cuts = [0, *(np.flatnonzero(np.diff(which)) + 1).tolist(), len(offsets)]
    if len(cuts) == 2:
        return [(batch, source_name(files[int(which[0])][0]))]
    return [(batch[lo:hi], source_name(files[int(which[lo])][0]))
            for lo, hi in zip(cuts, cuts[1:])]


#: How the files under the paths of a read or a job make streams (``joined``): each file
#: a dump of its own (``files``), a directory's files one dump (``directories``), every
#: file one dump (``all``: the paths are its pieces, in the order given).
JOINED = ("files", "directories", "all")


def checked_joined(joined: str, *, name: str = "joined") -> str:
    """``joined``, one of ``JOINED``; else ``ValueError``."""
    if joined not in JOINED:
        raise ValueError(f"{name} must be one of {JOINED}, not {joined!r}")
    return joined


def option(options, name, default, kind=str):
    """A data source option (names are case-insensitive), or ``default``."""
    value = options.get(name.lower(), options.get(name))
    if value is None:
        return default
    if kind is bool:
        said = str(value).strip().lower()
        if said in ("auto", "none", ""):
            return None
        if said not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"option {name}: expected true/false, not {value!r}")
        return said in ("true", "1", "yes")
    return kind(value)


def byte_size(value) -> int:
    """An int, or a size such as ``256m``/``1g``/``64k``."""
    said = str(value).strip().lower().rstrip("b")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(said[-1:], 1)
    return int(float(said[:-1] if scale > 1 else said) * scale)


def paths_of(options) -> list[str]:
    """The paths a data source was loaded with."""
    paths = options.get("paths")
    if paths:
        return list(json.loads(paths)) if paths.lstrip().startswith("[") else [paths]
    if options.get("path"):
        return [options["path"]]
    raise ValueError("the dcp data source needs a path: spark.read.format('dcp').load(path)")


class ReadOptions:
    """The reading options of the ``dcp`` source, batch and streaming alike."""

    def __init__(self, options, schema):
        from pyspark.sql.pandas.types import to_arrow_schema

        self.paths = paths_of(options)
        self.joined = checked_joined(option(options, "joined", "files"), name="option joined")
        self.schema = to_arrow_schema(schema, timezone="UTC")
        self.errors = option(options, "errors", "strict")
        checked_mode(self.errors, name="option errors")
        self.collections = option(options, "collections", None, bool)
        self.partition_bytes = byte_size(option(options, "partitionBytes", PARTITION_BYTES))
        self.parallelism = option(options, "parallelism", 1, int)
        self.lead_in = byte_size(option(options, "leadInBytes", LEAD_IN_BYTES))
        self.batch_bytes = byte_size(option(options, "batchBytes", BATCH_BYTES))
        self.max_frame_size = byte_size(option(options, "maxFrameSize",
                                               P.DEFAULT_MAX_FRAME_SIZE))
        #: The driver's dcpfast (``workers.identity``), which every task must run.
        self.dcpfast = options.get("dcpfast")


def parallelism(spark) -> int:
    """The session's default parallelism (1 where it cannot be asked, as on Connect)."""
    try:
        return max(int(spark.sparkContext.defaultParallelism), 1)
    except Exception:
        return 1
