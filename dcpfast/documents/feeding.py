"""How a state's builder is fed: the batches of one stream in order, a capture's
client-to-server side to ``StateBuilder.client`` (``feed_batches``: the one loop every
feeder runs, the next batch read ahead on another thread where asked); the batches a
source holds (a dump's path or buffer read and scanned here, a capture's path read, a
batch, batches), each path opened once; and the same batches once more for a second
pass (``fed``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from ..batch import FrameBatch
from ..errors import DcpFormatError, text
from ..io.dumps import iter_batches
from ..io.kinds import Kind, classify
from ..io.opening import open_input
from ..pcap import CLIENT_TO_SERVER, read_pcap
from ..threads import read_ahead
from .builder import SCANNED, StateBuilder, state_threads


class Builder(Protocol):
    """What takes a stream's batches: a ``StateBuilder``, or a builder of the same kind
    (``dcpfast.changes.ChangesBuilder``)."""

    def update(self, batch: FrameBatch) -> object:
        """Take the next batch of the stream's server side."""

    def client(self, batch: FrameBatch) -> object:
        """Take a batch of a capture's client side."""


@contextlib.contextmanager
def fed(builder: Builder, source, errors: str, reading: dict, *,
        again: bool = True) -> Iterator[Callable[[StateBuilder], object] | None]:
    """Feed ``builder`` the batches of ``source``; the context is the function that feeds a
    builder the same batches once more (``StateBuilder.table``'s ``again``), or None where
    they cannot be had again (an iterator of batches) or ``again`` says no second pass
    will be asked for.

    A dump's or a capture's path and a file object are opened once (``open_input``): with
    ``again``, a pipe's, a FIFO's or a file object's bytes are kept in a temporary file as
    they are read, for the second pass; a regular file is opened again for it."""
    found = classify(source, sniff=False)
    if found.kind not in (Kind.PATH, Kind.FILE):
        kind = classify(source).kind              # a buffer's first bytes looked at
        feed(builder, source, kind, errors, reading)
        yield (lambda other: feed(other, source, kind, errors, reading)) \
            if found.repeated and again else None
        return
    with open_input(source, errors=errors, again=again) as opened:
        kind = Kind.CAPTURE_FILE if opened.capture else Kind.FILE
        feed(builder, opened.stream, kind, errors, reading)

        def second(builder: StateBuilder) -> None:
            with opened.again() as stream:
                feed(builder, stream, kind, errors, reading)
        yield second if again else None


def feed(builder: Builder, source, kind: Kind, errors: str, reading: dict) -> None:
    """Feed ``builder`` the batches of ``source`` (of ``kind``). Where a dump is scanned
    here and more than one core may be used, the next batch is read and scanned on
    another thread while ``builder`` takes this one."""
    feed_batches(builder, _batches(source, kind, errors, {**reading, "threads": 1}),
                 threaded=state_threads(reading["threads"]) > 1
                 and (kind.path or kind.buffer or kind in (Kind.FILE, Kind.CAPTURE_FILE)))


def feed_batches(builder: Builder, batches: Iterable[FrameBatch], *,
                 threaded: bool = False, located: bool = False) -> None:
    """Feed ``builder`` ``batches``, those of one stream in order: a capture's
    client-to-server batches to ``client``, the others to ``update``. ``threaded``: the
    next batch is read on another thread while ``builder`` takes this one
    (``threads.read_ahead``). ``located``: a strict error met in a capture's batch says which
    TCP stream its offset is a position in."""
    with read_ahead(batches, threaded=threaded) as stream:
        for batch in stream:
            connection = getattr(batch, "connection", None)
            if connection is not None and connection.direction == CLIENT_TO_SERVER:
                builder.client(batch)
            elif connection is not None and located:
                with _in_stream(connection):
                    builder.update(batch)
            else:
                builder.update(batch)


@contextlib.contextmanager
def _in_stream(connection):
    """A capture's error says that its offset is a position in a TCP stream, and which."""
    try:
        yield
    except DcpFormatError as e:
        where = text("in_tcp_stream", src=f"{connection.src}:{connection.src_port}",
                     dst=f"{connection.dst}:{connection.dst_port}",
                     direction=connection.direction)
        raise DcpFormatError(e.offset, f"{where}: {e.reason}") from None


def _batches(source, kind: Kind, errors: str, reading: dict) -> Iterable[FrameBatch]:
    """The batches of ``source`` (of ``kind``): a batch, a capture (path or opened
    stream), batches, or a dump (path, directory, glob, buffer or file object; anything
    else is refused by ``iter_batches``)."""
    if kind is Kind.BATCH:
        return [source]
    if kind in (Kind.CAPTURE_PATH, Kind.CAPTURE_FILE):
        return read_pcap(source, collections=reading["collections"], errors=errors,
                         batch_bytes=reading["batch_bytes"], columns=SCANNED)
    if kind is Kind.CAPTURE_BUFFER:
        raise ValueError(text("state_capture_buffer"))
    if kind is Kind.ITERABLE:
        return source
    return iter_batches(source, reading["batch_bytes"], errors=errors,
                        collections=reading["collections"], threads=reading["threads"],
                        columns=SCANNED)
