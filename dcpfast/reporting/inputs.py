"""What a report reads: inputs planned into units, and a unit read into a ``Partial``.

A unit is read by one thread or one Spark task, into one partial: a capture (every TCP
connection in it, both directions), a dump (the server's side of one connection), or a
client's dump with the server's dump next to it in the list of inputs (read client first,
so that the server's responses find the client's requests). Whether a dump holds a
client's or a server's side is told from its first MiB: a client sends DCP Open,
Controls, Stream Requests, Buffer Acknowledgements and NOOP responses; a server sends
responses, stream messages and NOOPs. The same function reads a unit on a thread and in
a Spark task (``dcpfast.spark.report``): one aggregation for both.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from .. import protocol as P
from ..errors import DcpFormatError, checked_mode
from ..io import DEFAULT_BATCH_BYTES, DecodedStream, open_stream
from ..io.dumps import iter_batches, scan
from ..io.files import FileChain, expand
from ..io.kinds import classify, rereadable
from ..io.opening import open_input
from ..packets import DCP_PORT
from ..pcap import CLIENT_TO_SERVER, read_pcap
from ..streams.frames import IS_MESSAGE, requests
from ..threads import read_ahead
from .clock import CAPTURE, CAS, cas_times
from .conversation import Conversation
from .partial import Partial

#: The default stall threshold: silence on an open stream longer than this is a stall.
DEFAULT_STALL_SECONDS = 5.0
#: The longest stall threshold: about 285 years, under the 2**63 ns a report's times hold.
MAX_STALL_SECONDS = 9e9
#: Bytes of a dump looked at to tell the client's side from the server's.
SNIFF_BYTES = 1 << 20
_CLIENT_REQUESTS = np.zeros(256, bool)
_CLIENT_REQUESTS[[P.Opcode.OPEN, P.Opcode.CONTROL, P.Opcode.STREAM_REQUEST,
                  P.Opcode.BUFFER_ACK, P.Opcode.CLOSE_STREAM, P.Opcode.GET_FAILOVER_LOG,
                  P.Opcode.ADD_STREAM]] = True


@dataclass(frozen=True)
class Options:
    """How inputs are read and judged (the same on every thread and task)."""

    stall_seconds: float = DEFAULT_STALL_SECONDS
    errors: str = "strict"
    collections: bool | None = None
    ports: tuple[int, ...] = (DCP_PORT,)
    batch_bytes: int = DEFAULT_BATCH_BYTES
    threads: int | None = None

    def __post_init__(self) -> None:
        checked_mode(self.errors)
        if not 0 < self.stall_seconds <= MAX_STALL_SECONDS:      # nan is neither
            raise ValueError(f"stall_seconds must be a number of seconds above 0 and at "
                             f"most {MAX_STALL_SECONDS:g}, not {self.stall_seconds!r}")


@dataclass(frozen=True)
class Unit:
    """Inputs read together: their names, what each is (``"capture"``, ``"client"``,
    ``"server"``), and the sources (paths, URIs or file objects)."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    sources: tuple[Any, ...]


#: Opens a source for reading: a path, URI or file object in, a binary file out.
Opener = Callable[[Any], contextlib.AbstractContextManager[IO[bytes]]]


@contextlib.contextmanager
def local(source) -> Iterator[IO[bytes]]:
    """A local path (``-``: standard input; a directory or a glob: its files read as one
    stream, ``io.files``) or a binary file object, for reading."""
    if _is_path(source):
        if os.fspath(source) == "-":
            yield sys.stdin.buffer
            return
        files = expand(source)
        if files is not None:
            with FileChain(files) as chain:
                yield chain                 # type: ignore[misc]  # a binary file too
            return
        with open(source, "rb") as f:
            yield f
    else:
        yield source


def name_of(source) -> str:
    """How a source is named in a report: its file name (bytes that are not UTF-8
    written ``\\xNN``, so that the page and the JSON can hold it)."""
    if _is_path(source):
        text = os.fsdecode(source)
        name = "<stdin>" if text == "-" else os.path.basename(text.rstrip("/")) or text
    else:
        given = getattr(source, "name", None)
        name = os.fsdecode(given) if isinstance(given, (str, bytes)) and given \
            else type(source).__name__
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:                 # a surrogate that escapes no byte
        raw = name.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


class Once:
    """The opener of a report's local inputs (``local``), but each path that cannot be
    read twice (a pipe's, a FIFO's, ``-``) opened once, up front (``io.opening``), its
    stream handed out each time the path is asked for: first to ``kind_of``, which peeks
    at it, then to ``read_unit``, which reads it all. ``close`` closes them."""

    def __init__(self, sources: Sequence, errors: str):
        self._streams: dict[Any, DecodedStream] = {}
        with contextlib.ExitStack() as held:      # closed again if one fails to open
            for source in sources:
                if _is_path(source) and not rereadable(source):
                    raw = held.enter_context(local(source))
                    opened = held.enter_context(open_input(raw, errors=errors))
                    self._streams[os.fspath(source)] = opened.stream
            self._held = held.pop_all()

    def holds(self, source) -> bool:
        """Whether ``source`` is a path opened here."""
        return _is_path(source) and os.fspath(source) in self._streams

    @contextlib.contextmanager
    def __call__(self, source) -> Iterator[IO[bytes]]:
        if self.holds(source):
            yield self._streams[os.fspath(source)]      # type: ignore[misc]
        else:
            with local(source) as f:
                yield f

    def close(self) -> None:
        self._held.close()


def kind_of(source, opener: Opener, errors: str) -> str:
    """``"capture"``, or for a dump ``"client"`` or ``"server"`` (see the module); an
    opened stream (``Once``) is peeked at, not read."""
    with opener(source) as f:
        stream: DecodedStream = f if isinstance(f, DecodedStream) \
            else open_stream(f, errors="skip")
        if classify(stream).kind.capture:
            return "capture"
        head = stream.peek(SNIFF_BYTES)
    batch = scan(head, errors="skip")
    if not len(batch):
        return "server"
    op, req = batch["opcode"], requests(batch)
    client = int((req & _CLIENT_REQUESTS[op]).sum() + (~req & (op == P.Opcode.NOOP)).sum())
    server = int((req & (IS_MESSAGE[op] | (op == P.Opcode.NOOP))).sum()
                 + (~req & (op != P.Opcode.NOOP)).sum())
    return "client" if client > server else "server"


def plan(sources: Sequence, opener: Opener = local, errors: str = "strict") -> list[Unit]:
    """The units of ``sources``: each capture and dump alone, but a client's dump next to
    a server's dump (either first) read with it. A source that cannot be looked at
    twice and that ``opener`` did not open once (``Once``; a file object) is read alone,
    as a server's side unless it is a capture."""
    names = [name_of(s) for s in sources]
    kinds = [kind_of(s, opener, errors) if _looked_at(s, opener) else None for s in sources]
    units, i = [], 0
    while i < len(sources):
        pair = i + 1 < len(sources) and {kinds[i], kinds[i + 1]} == {"client", "server"}
        if pair:
            first, second = (i, i + 1) if kinds[i] == "client" else (i + 1, i)
            units.append(Unit((names[first], names[second]), ("client", "server"),
                              (sources[first], sources[second])))
            i += 2
            continue
        units.append(Unit((names[i],), (kinds[i] or "unknown",), (sources[i],)))
        i += 1
    return units


def _looked_at(source, opener: Opener) -> bool:
    """Whether ``source`` can be looked at before it is read: a path that can be read
    twice, or one ``opener`` holds open (``Once``)."""
    return _is_path(source) and (rereadable(source) or isinstance(opener, Once)
                                 and opener.holds(source))


def _is_path(source) -> bool:
    """Whether ``source`` is named by a path (or a URI: nothing is opened here)."""
    return classify(source, sniff=False).kind.path


def read_unit(unit: Unit, options: Options, opener: Opener = local) -> Partial:
    """The partial of one unit: every batch of its inputs aggregated, every connection
    closed."""
    partial: Partial | None = None
    conversation: Conversation | None = None
    for name, kind, source in zip(unit.names, unit.kinds, unit.sources):
        try:
            partial, conversation = _read_input(name, kind, source, unit, options, opener,
                                                partial, conversation)
        except DcpFormatError as e:
            e.source = source if _is_path(source) else name  # type: ignore[attr-defined]
            raise
    assert partial is not None
    for c in partial.conversations:
        c.close(partial)
    return partial


def _read_input(name: str, kind: str, source, unit: Unit, options: Options, opener: Opener,
                partial: Partial | None, conversation: Conversation | None):
    """Read one input of a unit into ``partial`` (made for the first input)."""
    with opener(source) as f, (f if isinstance(f, DecodedStream)
                               else open_stream(f, errors=options.errors)) as stream:
        capture = classify(stream).kind.capture
        if partial is None:
            partial = Partial(CAPTURE if capture else CAS, options.stall_seconds)
        partial.inputs.append({"name": name, "kind": "capture" if capture else "dump",
                               "side": "both" if capture else
                               ("client" if kind == "client" else "server"),
                               "compression": stream.codec})
        if capture:
            _read_capture(name, stream, options, partial)
            return partial, conversation
        if conversation is None:
            conversation = _conversation(partial, " + ".join(reversed(unit.names)))
        _read_dump(stream, kind == "client", options, partial, conversation)
    return partial, conversation


def _read_dump(stream, client: bool, options: Options, partial: Partial,
               conversation: Conversation) -> None:
    batches = iter_batches(stream, options.batch_bytes, collections=options.collections,
                           errors=options.errors, threads=options.threads)
    with read_ahead(batches, threaded=(options.threads or 1) > 1) as stream_batches:
        for batch in stream_batches:
            if client:
                conversation.client(batch, np.zeros(len(batch), np.int64), partial)
            else:
                conversation.server(batch, np.zeros(len(batch), np.int64), cas_times(batch),
                                    partial)
    if stream.damage is not None:
        conversation.damage.append((int(client), stream.damage.offset, stream.damage.length,
                                    stream.damage.reason, 0))


def _read_capture(name: str, stream, options: Options, partial: Partial) -> None:
    reader = read_pcap(stream, options.ports, collections=options.collections,
                       errors=options.errors)
    by_connection: dict[tuple, Conversation] = {}
    for batch in reader:
        c = batch.connection
        to_server = c.direction == CLIENT_TO_SERVER
        client, server = ((c.src, c.src_port), (c.dst, c.dst_port)) if to_server \
            else ((c.dst, c.dst_port), (c.src, c.src_port))
        conversation = by_connection.get((client, server))
        if conversation is None:
            conversation = by_connection[(client, server)] = _conversation(
                partial, f"{_endpoint(*client)} -> {_endpoint(*server)}")
        if to_server:
            conversation.client(batch, batch.timestamps, partial)
        else:
            conversation.server(batch, batch.timestamps, cas_times(batch), partial)
    for problem in reader.problems:
        partial.problem(name, problem.offset, problem.length, problem.reason)
    partial.more_problems += reader.problems_not_listed


def _conversation(partial: Partial, name: str) -> Conversation:
    """A new connection of ``partial``."""
    found = Conversation(name, len(partial.conversations), partial.clock, partial.stall_ns)
    partial.conversations.append(found)
    return found


def _endpoint(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def read_all(units: Sequence[Unit], options: Options, opener: Opener = local,
             run: Callable[[list], list] | None = None) -> Partial:
    """Every unit read (``run`` runs the readers, in order; default one after another)
    and merged, in the order of ``units``."""
    tasks = [lambda unit=unit: read_unit(unit, options, opener) for unit in units]
    partials = run(tasks) if run is not None else [task() for task in tasks]
    return merged(partials)


def merged(partials: Sequence[Partial]) -> Partial:
    """The partials merged in order into the first."""
    first, *rest = partials
    for other in rest:
        first.merge(other)
    return first
