"""How a state's builder is fed: the batches of a dump's path or buffer (read and scanned
here, the next batch ahead on another thread where more than one may be used), of a
capture (its client-to-server side to ``StateBuilder.client``), a batch or batches; and
whether a source can be read a second time."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable

from ..batch import FrameBatch
from ..errors import text
from ..io import is_capture
from ..io.dumps import iter_batches
from ..pcap import CLIENT_TO_SERVER, read_pcap
from ..pool import ahead
from .build import SCANNED, StateBuilder, state_threads


def feed(builder: StateBuilder, source, errors: str, reading: dict) -> None:
    """Feed ``builder`` the batches of ``source``: a capture's client-to-server batches to
    ``client``, the others to ``update``. Where a dump is scanned here and more than one
    core may be used, the next batch is read and scanned on another thread (``ahead``)
    while ``builder`` takes this one."""
    if state_threads(reading["threads"]) == 1 or not _scanned_here(source):
        for batch in _batches(source, errors, {**reading, "threads": 1}):
            _give(builder, batch)
        return
    stream = iter(_batches(source, errors, {**reading, "threads": 1}))
    pending: Callable | None = ahead(lambda: next(stream, None))
    try:
        while pending is not None:
            batch, pending = pending(), None
            if batch is None:
                return
            pending = ahead(lambda: next(stream, None))
            _give(builder, batch)
    finally:
        if pending is not None:       # a batch still being read when the builder raised
            with contextlib.suppress(BaseException):
                pending()


def _give(builder: StateBuilder, batch: FrameBatch) -> None:
    connection = getattr(batch, "connection", None)
    if connection is not None and connection.direction == CLIENT_TO_SERVER:
        builder.client(batch)
    else:
        builder.update(batch)


def _scanned_here(source) -> bool:
    """Whether ``state`` reads and scans ``source`` itself: a dump's path or buffer."""
    return (_is_buffer(source) or isinstance(source, (str, os.PathLike))) \
        and not isinstance(source, FrameBatch)


def again(source, errors: str, reading: dict) -> Callable[[StateBuilder], object] | None:
    """A function that feeds a builder ``source``'s batches once more, where ``source``
    can be read twice: a path, a buffer, a batch or a list or tuple of batches (not a
    file object or an iterator)."""
    if hasattr(source, "read") or not (isinstance(source, (str, os.PathLike, FrameBatch,
                                                            list, tuple))
                                       or _is_buffer(source)):
        return None
    return lambda builder: feed(builder, source, errors, reading)


def _is_buffer(source) -> bool:
    try:
        memoryview(source)
    except TypeError:
        return False
    return True


def _batches(source, errors: str, reading: dict) -> Iterable[FrameBatch]:
    """The batches of ``source``: a batch, a capture, a dump (path, file or buffer), or
    batches."""
    if isinstance(source, FrameBatch):
        return [source]
    if isinstance(source, (str, os.PathLike)) and is_capture_path(source):
        return read_pcap(source, collections=reading["collections"], errors=errors,
                         batch_bytes=reading["batch_bytes"], columns=SCANNED)
    if _is_buffer(source) or isinstance(source, (str, os.PathLike)) \
            or hasattr(source, "read") or not isinstance(source, Iterable):
        if _is_buffer(source) and is_capture(_head(source)):
            raise ValueError(text("state_capture_buffer"))
        return iter_batches(source, reading["batch_bytes"], errors=errors,
                            collections=reading["collections"], threads=reading["threads"],
                            columns=SCANNED)
    return source


def _head(buffer) -> bytes:
    """The first bytes of ``buffer``."""
    view = memoryview(buffer)
    return view.tobytes()[:8] if view.nbytes <= 8 or not view.c_contiguous \
        else bytes(view.cast("B")[:8])


def is_capture_path(path) -> bool:
    """Whether the file at ``path`` is a pcap or pcapng capture (an unreadable one is not:
    reading it says why)."""
    try:
        with open(path, "rb") as f:
            return is_capture(f.read(8))
    except OSError:
        return False
