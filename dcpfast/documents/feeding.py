"""How a state's builder is fed: the batches of one stream in order, a capture's
client-to-server side to ``StateBuilder.client`` (``feed_batches``: the one loop every
feeder runs, the next batch read ahead on another thread where asked); the batches a
source holds (a dump's path or buffer read and scanned here, a capture's path read, a
batch, batches); and whether a source can be read a second time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

from ..batch import FrameBatch
from ..errors import DcpFormatError, text
from ..io.dumps import iter_batches
from ..io.kinds import Kind, classify
from ..pcap import CLIENT_TO_SERVER, read_pcap
from ..threads import read_ahead
from .builder import SCANNED, StateBuilder, state_threads


def feed(builder: StateBuilder, source, errors: str, reading: dict) -> None:
    """Feed ``builder`` the batches of ``source``. Where a dump is scanned here (a path or
    a buffer) and more than one core may be used, the next batch is read and scanned on
    another thread while ``builder`` takes this one."""
    kind = classify(source).kind
    feed_batches(builder, _batches(source, kind, errors, {**reading, "threads": 1}),
                 threaded=state_threads(reading["threads"]) > 1 and (kind.path or kind.buffer))


def feed_batches(builder: StateBuilder, batches: Iterable[FrameBatch], *,
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


def again(source, errors: str, reading: dict) -> Callable[[StateBuilder], object] | None:
    """A function that feeds a builder ``source``'s batches once more, where ``source``
    can be read twice: a path, a buffer, a batch or a list or tuple of batches (not a
    file object or an iterator)."""
    if not classify(source, sniff=False).repeated:
        return None
    return lambda builder: feed(builder, source, errors, reading)


def _batches(source, kind: Kind, errors: str, reading: dict) -> Iterable[FrameBatch]:
    """The batches of ``source`` (of ``kind``): a batch, a capture's path, batches, or a
    dump (path, directory, glob, buffer or file object; anything else is refused by
    ``iter_batches``)."""
    if kind is Kind.BATCH:
        return [source]
    if kind is Kind.CAPTURE_PATH:
        return read_pcap(source, collections=reading["collections"], errors=errors,
                         batch_bytes=reading["batch_bytes"], columns=SCANNED)
    if kind is Kind.CAPTURE_BUFFER:
        raise ValueError(text("state_capture_buffer"))
    if kind is Kind.ITERABLE:
        return source
    return iter_batches(source, reading["batch_bytes"], errors=errors,
                        collections=reading["collections"], threads=reading["threads"],
                        columns=SCANNED)
