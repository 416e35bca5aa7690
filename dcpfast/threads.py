"""Worker threads that never wait for ever: ``run`` (tasks at once, results in order),
``beside`` (calls in turn on one thread kept for the process), ``ahead`` (the same on
another such thread, for work done in advance) and ``read_ahead`` (the items of an
iterator, the next one read on that thread while the caller works); how many threads a
call gets (``threads_of``); and whether a process of this host still runs
(``process_runs``), for what a killed process left behind.

The workers are started once, at most one fewer than the cores, and kept for the
process, so that no thread ends while it runs; a waiter checks every 0.2 s whether the
thread it waits on still lives: a thread lost while running a task (out of memory even
for an exception) makes that task fail with MemoryError instead of a wait for ever.
Where no thread can be started, the work runs in the calling thread.

A thread that ends (one of dcpfast's, or any other of the process) unwinds its stack
with libgcc_s, which the C library loads on the first such end; when memory is short
then, loading it fails and the C library aborts the process ("libgcc_s.so.1 must be
installed for pthread_exit to work"). It is loaded here, once, while memory is there.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import ctypes.util
import numbers
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import numpy as np

_POLL_SECONDS = 0.2         # how often a wait looks whether its worker thread still lives
_START_SECONDS = 10.0       # how long a thread started may take to come up
#: The most threads the default (``threads=None``) takes: on a 16-core machine every
#: threaded path was fastest at 8, and a scan on 16 no faster than on one
#: (docs/benchmarks.md, "Batch sizes and threads").
DEFAULT_MOST = 8

_workers: _Workers | None = None        # the workers of run
_lanes: dict[str, _Workers] = {}        # the one thread each of beside and ahead
_lock = threading.Lock()
_T = TypeVar("_T")


def _keep_unwinder() -> None:
    """Load the C library's unwinder now (see the module's docstring); glibc only."""
    if sys.platform.startswith("linux"):
        name = ctypes.util.find_library("gcc_s") or "libgcc_s.so.1"
        try:
            ctypes.CDLL(name)
        except OSError:                 # not glibc's layout: nothing to keep
            pass


_keep_unwinder()


def default_threads() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def idle_threads() -> int:
    """The cores of ``default_threads`` that are idle now, this thread's own counted as
    idle (at least 1, at most ``DEFAULT_MOST``): those not taken by the runnable threads
    of the machine (``/proc/loadavg``'s running count, at this instant) or, where the
    system has no such count, by its load over the last minute. A machine busy with other
    work then gets no more threads than it can run at once: extra threads would only wait
    for a core and hold up the ones that have one."""
    cores = default_threads()
    machine = os.cpu_count() or cores
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0]) - 1    # but this thread
    except (OSError, ValueError, IndexError):
        try:
            running = int(os.getloadavg()[0])
        except (AttributeError, OSError):
            return min(cores, DEFAULT_MOST)
    return max(1, min(cores, machine - running, DEFAULT_MOST))


def threads_of(threads) -> int:
    """How many threads a call gets: ``threads`` checked (an integer of at least 1) and no
    more than the cores (``default_threads``); None: the cores idle now, at most
    ``DEFAULT_MOST`` (``idle_threads``)."""
    if threads is None:
        return idle_threads()
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ValueError(f"threads must be None or an integer of at least 1, not {threads!r}")
    return min(int(threads), default_threads())


class _Task:
    """One call handed to another thread, and what became of it. ``outcome`` stays None
    until the call has run: a thread that ended while running it (out of memory even for
    an exception) leaves it so, and the waiting thread then raises MemoryError instead
    of waiting for ever.

    ``done`` is a plain lock, held from the start until the call has run, never a
    ``threading.Event``: an interrupt (a signal handler raising) that lands inside an
    Event's wait can leave its inner lock taken, and the next wait (a cleanup waiting for
    the write to finish) would then hang; a plain lock the waiter acquires is at worst
    left held once the call is over, which ``finished`` then says."""

    __slots__ = ("call", "outcome", "done", "finished", "worker")

    def __init__(self, call):
        self.call = call
        self.outcome: tuple[object, BaseException | None] | None = None
        self.done = threading.Lock()
        self.done.acquire()
        self.finished = False
        self.worker: _Thread | None = None

    def run(self, worker: _Thread | None = None) -> None:
        """Run the call (on ``worker``, or None: in the thread that handed it)."""
        self.worker = worker
        try:
            self.outcome = _outcome(self.call)
        finally:
            self.finished = True
            self.done.release()

    def wait(self, lost) -> tuple[object, BaseException | None]:
        """The call's outcome, or MemoryError once ``lost()`` says that it will not come."""
        while not self.finished and not self.done.acquire(timeout=_POLL_SECONDS) \
                and not lost():
            pass
        if self.outcome is None:
            return None, MemoryError("a thread ended without finishing its work")
        return self.outcome


class _Thread:
    """A thread running ``target(self, *args)``, started without ``threading.Thread``:
    its ``start`` waits without bound for a thread that dies in its bootstrap, as one
    does when memory runs out there (CPython gh-140746). One that has not come up within
    ``_START_SECONDS`` counts as not started (``RuntimeError``) and returns at once if it
    comes up later. Alive while it runs ``target`` (``is_alive``); the process does not
    wait for it at exit, as for a daemon thread."""

    def __init__(self, target: Callable, *args):
        self.ident: int | None = None
        self._life = _thread.allocate_lock()      # held while it runs
        self._state = _thread.allocate_lock()     # guards ident and _given_up
        self._ready = _thread.allocate_lock()
        self._ready.acquire()
        self._given_up = False
        _thread.start_new_thread(self._run, (target, args))
        if not self._ready.acquire(timeout=_START_SECONDS):
            with self._state:
                if self.ident is None:
                    self._given_up = True
                    raise RuntimeError("a thread started did not come up")

    def _run(self, target: Callable, args: tuple) -> None:
        with self._life:
            with self._state:
                if self._given_up:
                    return
                self.ident = _thread.get_ident()
            self._ready.release()
            target(self, *args)

    def is_alive(self) -> bool:
        """Whether it still runs its target."""
        return self._life.locked()


class _Workers:
    """Up to ``size`` daemon worker threads taking ``_Task``s from a queue (as many as
    could be started: ``RuntimeError`` when none could); they end when this object is
    collected (another caller may be handing it tasks until then)."""

    def __init__(self, size: int):
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.threads: list[_Thread] = []
        for _ in range(size):
            try:
                thread = _Thread(_work, self.queue)
            except (RuntimeError, MemoryError):     # a limit: work with those there are
                break
            self.threads.append(thread)
        if not self.threads:
            raise RuntimeError("no thread could be started")
        self.size = len(self.threads)

    def lost(self, task: _Task) -> bool:
        """Whether ``task`` will not finish: its worker ended, or, before any took it, a
        worker ended (it may have taken it from the queue)."""
        if task.worker is not None:
            return not task.worker.is_alive()
        return not all(thread.is_alive() for thread in self.threads)

    def __del__(self):
        for _ in self.threads:
            self.queue.put(None)


def _work(me: _Thread, tasks: queue.SimpleQueue) -> None:
    """A worker: runs tasks until told to end (``None``). Whatever escapes a task (only
    a failure to record its outcome can) ends the worker quietly: its waiter sees that."""
    try:
        while (task := tasks.get()) is not None:
            task.run(me)
            del task
    except BaseException:
        pass


def _after_fork() -> None:
    """In a forked child the parent's workers, and whoever held the lock, do not exist."""
    global _workers, _lanes, _lock
    _workers, _lanes, _lock = None, {}, threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def beside(call):
    """Start ``call`` on the thread that runs such calls one after another; returns a
    function that waits for it and returns its result or raises its exception
    (MemoryError if the thread ended without finishing it). One thread for the process,
    started on first use and kept, like the workers of ``run``: what the calls allocate
    stays in one allocator arena (a new thread a call spread a convert's row groups over
    up to one arena each). Where no thread can be started, or the caller is that thread,
    the call runs here and now."""
    return _on_lane("beside", call)


def ahead(call):
    """``beside``, on a thread of its own for work done in advance of its use (the next
    batch of a stream, a batch's document ids): a call of ``beside`` may wait on it, never
    the other way round."""
    return _on_lane("ahead", call)


_END = object()                 # what ``ReadAhead``'s read gives at the end of its items


class ReadAhead(Iterator[_T]):
    """The items of an iterator, in order, the next one read on the ``ahead`` thread while
    the caller works with this one (``read_ahead``). The reader's exception is raised
    where its item would have come. ``close()``, or the end of a ``with`` block, waits for
    a read still under way, so that nothing reads the iterator once the caller stopped
    early or raised (the iterator itself is left open: it is the caller's)."""

    def __init__(self, items: Iterable[_T], threaded: bool = True):
        source = iter(items)
        # the read holds the iterator, not this object: no cycle keeps this object once
        # dropped, so that it is closed (``__del__``) as soon as its caller lets it go
        self._read: Callable[[], object] = lambda: next(source, _END)
        self._threaded = threaded
        self._coming: Callable[[], object] | None = None
        self._done = False
        if threaded:
            self._coming = ahead(self._read)

    def __iter__(self) -> ReadAhead[_T]:
        return self

    def __next__(self) -> _T:
        if self._done:
            raise StopIteration
        if not self._threaded:
            item = self._read()
        else:
            coming, self._coming = self._coming, None
            try:
                item = coming() if coming is not None else _END
            except BaseException:
                self._done = True
                raise
            if item is not _END:
                self._coming = ahead(self._read)
        if item is _END:
            self._done = True
            raise StopIteration
        return item  # type: ignore[return-value]

    def close(self) -> None:
        """Stop: wait for a read still under way (its item, or its error, is dropped)."""
        self._done = True
        coming, self._coming = self._coming, None
        if coming is not None:
            with contextlib.suppress(BaseException):
                coming()

    def __enter__(self) -> ReadAhead[_T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()


def read_ahead(items: Iterable[_T], *, threaded: bool = True) -> ReadAhead[_T]:
    """The items of ``items``, the next one read on another thread (``ahead``'s) while the
    caller works with this one: a dump's next batch read and scanned while the last is
    used. Use it in a ``with`` block (or ``close`` it) where the caller may stop early or
    raise: no read runs on after it. ``threaded=False``: each item read when asked for,
    in the caller's thread (one core)."""
    return ReadAhead(items, threaded)


def _on_lane(lane: str, call):
    task = _Task(call)
    workers: _Workers | None = None
    try:
        with _lock:
            if lane not in _lanes:
                _lanes[lane] = _Workers(1)
            workers = _lanes[lane]
    except (RuntimeError, MemoryError):       # no thread could be started
        task.run()
    else:
        if _thread.get_ident() in [t.ident for t in workers.threads]:
            task.run()                        # from the lane's own thread: no wait on it
        else:
            workers.queue.put(task)

    def result():
        value, error = task.wait(lambda: workers is None or workers.lost(task))
        if task.outcome is None:              # its thread ended: start afresh next time
            _drop(workers)
        if error is not None:
            raise error
        return value
    return result


def _drop(workers: _Workers | None) -> None:
    """Forget ``workers`` (a worker of it ended), so that the next call starts afresh."""
    global _workers
    with _lock:
        if _workers is workers:
            _workers = None
        for lane, kept in list(_lanes.items()):
            if kept is workers:
                del _lanes[lane]


def run(tasks, threads: int) -> list:
    """The results of ``tasks`` (functions of no argument), in order: the first in this
    thread, the others on the workers (one fewer than the cores, started on first use and
    kept), or all in this thread for ``threads`` below 2. Callers hand over no more tasks
    than ``threads``, which ``threads_of`` keeps within the cores. Every
    task ends before anything is raised: then the first failing task's exception, in
    the order of ``tasks``. Where no worker thread can be started (a memory limit), the
    tasks run one after another in this thread; a worker that ends without finishing its
    task (out of memory) makes its task fail with MemoryError, never a wait for ever."""
    global _workers
    if len(tasks) == 1 or threads < 2 or default_threads() < 2:
        return [task() for task in tasks]
    try:
        with _lock:
            if _workers is None:
                _workers = _Workers(default_threads() - 1)
            workers = _workers
    except (RuntimeError, MemoryError):       # no thread could be started
        return [task() for task in tasks]
    handed = [_Task(task) for task in tasks[1:]]
    for task in handed:
        workers.queue.put(task)
    outcomes = [_outcome(tasks[0])]
    for task in handed:
        outcomes.append(task.wait(lambda task=task: workers.lost(task)))
        if task.outcome is None:                 # a worker ended: start afresh next time
            _drop(workers)
    for _, error in outcomes:
        if error is not None:
            raise error
    return [value for value, _ in outcomes]


def _outcome(call) -> tuple[object, BaseException | None]:
    """``(call(), None)``, or ``(None, the exception it raised)``."""
    try:
        return call(), None
    except BaseException as e:               # raised again by run, in task order
        return None, e


def shares(weights, parts: int) -> list[int]:
    """Cuts ``0 = c0 <= c1 <= ... <= c_parts = len(weights)`` of ``weights`` (numbers
    of work per item) into ``parts`` runs of about equal work."""
    if parts == 1:
        return [0, len(weights)]
    total = np.cumsum(weights, dtype=np.float64)
    if not len(total) or total[-1] <= 0:
        return [len(weights) * k // parts for k in range(parts + 1)]
    goals = total[-1] * np.arange(1, parts) / parts
    return [0, *np.searchsorted(total, goals, side="right").tolist(), len(weights)]


def parts_for(size: int, threads: int, least: int) -> int:
    """How many parts ``size`` units of work are cut into for ``threads`` threads, each
    part at least ``least`` units (one part when there are fewer than two such)."""
    return max(1, min(threads, size // least))


def process_runs(pid: int) -> bool:
    """Whether the process ``pid`` of this host runs (where that cannot be told: as if it
    did): whether what it left (a temporary output, a job's staging) is still its own."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
