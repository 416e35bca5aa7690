"""Real pipes and FIFOs for the tests, every wait bounded: a FIFO with a writer thread, a
pipe's ``/dev/fd/N`` path (what ``<(cat dump)`` gives a command) with a writer thread,
and a call that fails rather than waits for ever."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

#: The most seconds a writer, a reader or a command may take.
WAIT = 60


class _Writer(threading.Thread):
    """Writes ``data`` to what ``opener`` opens, then closes it; a reader that leaves
    early ends the write (``EPIPE``), which the test's assertions then catch."""

    def __init__(self, opener, data: bytes):
        super().__init__(daemon=True)
        self._opener, self._data = opener, data
        self.left_early = False

    def run(self) -> None:
        try:
            with self._opener() as f:
                f.write(self._data)
        except BrokenPipeError:
            self.left_early = True


@contextlib.contextmanager
def fifo(folder, data: bytes, name: str = "input.fifo") -> Iterator[str]:
    """The path of a FIFO in ``folder`` whose writer (a thread) writes ``data`` once to the
    first reader that opens it. A writer still waiting when the test ends is let go (a
    reader opened without blocking takes what is left), so nothing hangs; a reader still
    waiting for a second writer is let go likewise (a writer opened and closed)."""
    path = os.path.join(folder, name)
    os.mkfifo(path)
    writer = _Writer(lambda: open(path, "wb"), data)
    writer.start()
    try:
        yield path
    finally:
        _let_go(path, writer)


def _let_go(path: str, writer: _Writer) -> None:
    deadline = time.monotonic() + WAIT
    while writer.is_alive() and time.monotonic() < deadline:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # the writer's open returns
        try:
            while writer.is_alive() and time.monotonic() < deadline:
                try:
                    if not os.read(fd, 1 << 16):
                        writer.join(0.05)
                except BlockingIOError:
                    writer.join(0.05)
        finally:
            os.close(fd)
    assert not writer.is_alive(), "the FIFO's writer did not end"
    with contextlib.suppress(OSError):       # a reader waiting for a writer: one comes
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@contextlib.contextmanager
def pipe(data: bytes) -> Iterator[tuple[str, int]]:
    """A pipe that a thread writes ``data`` into: the path of its read end
    (``/dev/fd/N``, as ``<(cat dump)`` names one) and the descriptor (``pass_fds`` hands
    it to a child process). Closed at the end, which ends a writer the reader left."""
    read_end, write_end = os.pipe()
    writer = _Writer(lambda: open(write_end, "wb"), data)
    writer.start()
    try:
        yield f"/dev/fd/{read_end}", read_end
    finally:
        os.close(read_end)
        writer.join(WAIT)
        assert not writer.is_alive(), "the pipe's writer did not end"


def bounded(call, *args, **kwargs):
    """``call(*args, **kwargs)`` on a thread, its result or its exception; an
    ``AssertionError`` when it takes more than ``WAIT`` seconds (it waits on an input
    read already: the FIFO's ending lets it go)."""
    out: dict = {}

    def task() -> None:
        try:
            out["result"] = call(*args, **kwargs)
        except BaseException as e:                   # handed to the caller
            out["error"] = e
    thread = threading.Thread(target=task, daemon=True)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive(), f"{getattr(call, '__name__', call)} did not end"
    if "error" in out:
        raise out["error"]
    return out["result"]

