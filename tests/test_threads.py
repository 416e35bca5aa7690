"""Worker threads (``dcpfast.threads``): how many (checked, capped by the cores, one on a busy
machine, no storm when thousands are asked, the calling thread where none can start),
``run`` with results in order and the first error, ``beside`` and ``ahead``'s lanes, and
workers after a fork."""

from __future__ import annotations

import os
import sys

import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast import threads
from dcpfast.io import threaded
from tests.io.test_threaded import assert_same_batch


@pytest.mark.parametrize("asked", [0, -1, 1.5, True, "2", float("nan")])
def test_threads_are_checked(asked):
    with pytest.raises(ValueError, match="threads"):
        dcpfast.scan(t.noop(), threads=asked)
    with pytest.raises(ValueError, match="threads"):
        list(dcpfast.iter_batches(t.noop(), threads=asked))


def test_threads_are_capped_by_the_cores_and_default_to_the_idle_ones():
    cores = len(os.sched_getaffinity(0))
    assert 1 <= threads.threads_of(None) <= min(cores, threads.DEFAULT_MOST)
    assert 1 <= threads.idle_threads() <= min(cores, threads.DEFAULT_MOST)
    assert threads.threads_of(3) == min(3, cores)
    assert threads.threads_of(10_000) == cores
    least = threaded.RANGE_BYTES
    assert threads.parts_for(2 * least - 1, 8, least) == 1     # small: one thread
    assert threads.parts_for(5 * least, 8, least) == 5
    assert threads.parts_for(100 * least, 8, least) == 8


def test_a_forked_child_scans_with_threads():
    unit = t.synthetic_stream(3000, seed=8)
    data = unit * (2 * threaded.RANGE_BYTES // len(unit) + 2)
    want = len(dcpfast.scan(data, threads=2))      # the parent's workers exist now
    pid = os.fork()
    if pid == 0:                                   # the child has none of them
        os._exit(0 if len(dcpfast.scan(data, threads=2)) == want else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_run_gives_results_in_order_and_the_first_error():
    assert threads.run([lambda k=k: k * k for k in range(5)], 3) == [0, 1, 4, 9, 16]
    ran = []

    def fails(k):
        def task():
            ran.append(k)
            raise KeyError(k)
        return task
    with pytest.raises(KeyError) as e:
        threads.run([lambda: ran.append(0), fails(1), fails(2)], 3)
    assert e.value.args == (1,) and sorted(ran) == [0, 1, 2]    # every task ran first


def test_a_worker_that_ends_mid_task_fails_the_task_instead_of_hanging(monkeypatch):
    """A worker thread ends when even recording its task's outcome fails (out of memory):
    the task fails with MemoryError, and the next run starts workers afresh."""
    real = threads._outcome
    doomed = []

    def recording(call):
        if call in doomed:
            raise SystemExit                 # escapes the worker's task, as a failed record
        return real(call)

    def doomed_task():
        return "never recorded"
    doomed.append(doomed_task)
    monkeypatch.setattr(threads, "_outcome", recording)
    with pytest.raises(MemoryError):
        threads.run([lambda: 1, doomed_task], 2)
    workers = threads._workers
    assert workers is None or all(thread.is_alive() for thread in workers.threads)
    assert threads.run([lambda: 1, lambda: 2, lambda: 3], 3) == [1, 2, 3]


def test_a_thread_that_dies_in_its_bootstrap_is_not_waited_for(monkeypatch):
    """A thread the system started that never runs Python code (it died in its bootstrap,
    out of memory: CPython gh-140746, where ``Thread.start`` waits for ever) counts as not
    started: the tasks run in the calling thread."""
    monkeypatch.setattr(threads, "_START_SECONDS", 0.2)
    monkeypatch.setattr(threads, "_workers", None)
    monkeypatch.setattr(threads._thread, "start_new_thread", lambda call, args: 1)
    assert threads.run([lambda: 1, lambda: 2, lambda: 3], 3) == [1, 2, 3]
    assert threads._workers is None


def test_a_thread_that_comes_up_too_late_runs_nothing(monkeypatch):
    import _thread
    import time

    real, ran = _thread.start_new_thread, []

    def late(call, args):
        return real(lambda: (time.sleep(0.5), call(*args)), ())
    monkeypatch.setattr(threads, "_START_SECONDS", 0.1)
    monkeypatch.setattr(threads._thread, "start_new_thread", late)
    with pytest.raises(RuntimeError, match="did not come up"):
        threads._Thread(lambda me: ran.append(me))
    monkeypatch.undo()
    time.sleep(1.0)
    assert ran == []
    import threading

    done = threading.Event()
    started = threads._Thread(lambda me: (ran.append(me.is_alive()), done.set()))
    assert done.wait(30) and ran == [True]
    deadline = time.monotonic() + 30
    while started.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not started.is_alive()


def test_beside_runs_calls_in_turn_on_one_thread_of_its_own():
    import threading

    waits = [threads.beside(threading.current_thread) for _ in range(3)]
    seen = {wait() for wait in waits}
    assert len(seen) == 1 and threading.current_thread() not in seen
    failing = threads.beside(lambda: {}["missing"])
    with pytest.raises(KeyError):
        failing()
    assert threads.beside(threading.current_thread)() in seen      # kept after a failure


def test_a_lane_called_from_its_own_thread_runs_the_call_there():
    """``beside`` inside ``beside`` runs in place (no wait on itself); ``ahead`` has a
    thread of its own."""
    import threading

    own = threads.beside(threading.current_thread)()
    nested = threads.beside(lambda: threads.beside(threading.current_thread)())
    assert nested() is own
    assert threads.ahead(threading.current_thread)() not in (own, threading.current_thread())


# -- read_ahead: an iterator's next item read on another thread ------------------------


def _slow_items(n: int, log: list, *, fail_at: int | None = None, pause: float = 0.0):
    """``0..n-1``, each read logged as (its number, the thread, whether it finished)."""
    import threading
    import time

    for k in range(n):
        entry = [k, threading.current_thread(), False]
        log.append(entry)
        time.sleep(pause)
        if k == fail_at:
            entry[2] = True
            raise KeyError(k)
        entry[2] = True
        yield k


def test_read_ahead_keeps_the_order_on_another_thread():
    import threading

    log: list = []
    assert list(threads.read_ahead(_slow_items(50, log))) == list(range(50))
    assert {thread for _, thread, _ in log} == {threads.ahead(threading.current_thread)()}
    log.clear()
    assert list(threads.read_ahead(_slow_items(5, log), threaded=False)) == list(range(5))
    assert {thread for _, thread, _ in log} == {threading.current_thread()}
    assert list(threads.read_ahead([])) == []


@pytest.mark.parametrize("threaded", [True, False])
def test_read_ahead_raises_the_readers_exception_where_its_item_would_come(threaded):
    log: list = []
    items = threads.read_ahead(_slow_items(5, log, fail_at=3), threaded=threaded)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(KeyError):
        next(items)
    assert list(items) == []                       # ended: nothing more is read
    assert len(log) == 4


def test_read_ahead_leaves_no_read_running_when_the_caller_stops_early():
    import time

    log: list = []
    with threads.read_ahead(_slow_items(10, log, pause=0.05)) as items:
        for k in items:
            if k == 2:
                break
    assert len(log) == 4 and all(done for _, _, done in log)   # the read of 3 waited for
    time.sleep(0.2)
    assert len(log) == 4                                        # and nothing after it
    log.clear()
    items = threads.read_ahead(_slow_items(10, log, pause=0.05))
    next(items)
    del items                                   # dropped without close: the same
    assert len(log) == 2 and all(done for _, _, done in log)


def test_read_ahead_leaves_no_read_running_when_the_caller_raises():
    import time

    log: list = []
    with pytest.raises(ValueError), threads.read_ahead(_slow_items(10, log, pause=0.05)) as items:
        for k in items:
            if k == 1:
                raise ValueError(k)
    assert len(log) == 3 and all(done for _, _, done in log)
    time.sleep(0.2)
    assert len(log) == 3


def test_two_states_at_once_each_reading_ahead_finish():
    """A state built on ``beside``'s thread while another is built here (as ``diff``
    builds its two sides), both reading their next batches ahead, ends: within a minute,
    with the one-thread state's rows."""
    import threading

    data = t.synthetic_stream(3000, seed=4, vbuckets=4, collections=False)
    want = dcpfast.state(data, batch_bytes=1 << 16, threads=1)
    out: dict = {}

    def both():
        other = threads.beside(lambda: dcpfast.state(data, batch_bytes=1 << 16, threads=2))
        out["here"] = dcpfast.state(data, batch_bytes=1 << 16, threads=2)
        out["beside"] = other()
    worker = threading.Thread(target=both, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the two states did not finish"
    assert out["here"].equals(want) and out["beside"].equals(want)


def test_a_busy_machine_gets_one_thread_by_default():
    """With every core taken by another process's work, the default is one thread: more
    would only wait for a core (a scan with two threads then ran 15-22% slower than one)."""
    import subprocess
    import sys

    cores = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(cores)]
    try:
        import time
        time.sleep(0.5)                             # running, each on a core
        seen = [threads.idle_threads() for _ in range(5)]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert min(seen) == 1, seen


def test_many_threads_asked_start_no_more_than_the_cores():
    """threads=10000 on a large buffer: the batch of one thread, and no thread storm."""
    import threading

    unit = t.synthetic_stream(3000, seed=8)
    data = unit * (3 * threaded.RANGE_BYTES // len(unit))
    before = threading.active_count()
    assert_same_batch(dcpfast.scan(data, threads=10_000), dcpfast.scan(data, threads=1))
    assert threading.active_count() - before <= len(os.sched_getaffinity(0))


_LIMITED_SCAN = """
import resource, sys
import dcpfast
from dcpfast import testing as t
data = t.synthetic_stream(3000, seed=8) * 20
size = [l for l in open('/proc/self/status') if l.startswith('VmSize')][0]
size = int(size.split()[1]) * 1024 + (200 << 20)
resource.setrlimit(resource.RLIMIT_AS, (size, resource.RLIM_INFINITY))
print(len(dcpfast.scan(data, threads=1000)), len(dcpfast.scan(data, threads=1)))
"""


@pytest.mark.skipif(sys.platform != "linux" or "libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="address-space limits as Linux has them")
def test_many_threads_under_a_memory_limit_decode_as_one():
    """Under an address-space limit, threads=1000 neither fails nor raises MemoryError (a
    thousand thread stacks would not fit): the threads are the cores', and where not even
    those can start, the work runs in the calling thread."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _LIMITED_SCAN], capture_output=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    threaded_frames, single = done.stdout.split()
    assert threaded_frames == single
