"""Threads: a buffer decoded by several threads over byte ranges equals one single-threaded
scan, for every cut; and the core pieces it rests on (``ScanRequest.stop``, ``Columns``)."""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import _core, pool, schema
from dcpfast import protocol as P
from dcpfast import testing as t
from dcpfast.batch import kinds_of
from dcpfast.io import threaded
from tests.cores import every
from tests.strategies import streams

NAMES = (None, ("offset", "opcode"), ("key", "value", "by_seqno"))


def request(data_len, **kw):
    args = dict(start=0, names=schema.resolve(None), collections=True, skip=False,
                max_frames=-1, max_frame_size=P.DEFAULT_MAX_FRAME_SIZE, base=0, final=False,
                unverified=False, view_bits=0)
    args.update(kw)
    return _core.ScanRequest(**args)


def assert_same_result(got, want):
    assert got.failure == want.failure
    if want.failure:
        return
    assert (got.frames, got.consumed, got.unverified) == (want.frames, want.consumed,
                                                         want.unverified)
    assert got.regions == want.regions
    np.testing.assert_array_equal(got.kinds, want.kinds)
    assert got.arrays.keys() == want.arrays.keys()
    for name in want.arrays:
        assert got.arrays[name].dtype == want.arrays[name].dtype
        np.testing.assert_array_equal(got.arrays[name], want.arrays[name], err_msg=name)
    assert (got.views is None) == (want.views is None)
    for name in want.views or ():
        np.testing.assert_array_equal(got.views[name], want.views[name], err_msg=name)


def assert_same_batch(got, want):
    assert (len(got), got.consumed, got.collections) == (len(want), want.consumed,
                                                         want.collections)
    assert got.errors == want.errors
    assert got.columns == want.columns
    np.testing.assert_array_equal(kinds_of(got), kinds_of(want))
    for name in want.columns:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


# -- damage of every sort, and values that hold frames -----------------------------------

INNER = t.synthetic_stream(20, seed=2, handshake=False)


def damaged(data: bytes, rng: random.Random, edits: int) -> bytes:
    """``data`` with ``edits`` random edits: bytes overwritten or cut, zeros or junk
    inserted, and mutations whose values are themselves valid DCP streams."""
    out = bytearray(data)
    for _ in range(edits):
        at = rng.randint(0, len(out))
        kind = rng.randrange(4)
        if kind == 0:
            out[at:at + rng.randint(0, 8)] = rng.randbytes(rng.randint(0, 8))
        elif kind == 1:
            out[at:at] = t.mutation(b"outer", INNER * rng.randint(1, 3), by_seqno=5)
        elif kind == 2:
            out[at:at] = bytes(rng.randint(1, 300))
        else:
            del out[at:at + rng.randint(1, 50)]
    return bytes(out)


BASE = t.synthetic_stream(1500, seed=1)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_threads_equal_one_scan_for_every_cut(data):
    """The threaded scan (here with tiny ranges, pieces and lead-ins, so that inputs of a
    few KiB are cut in many places, and rows reserved from none to far too many, so that
    ranges outgrow their slots or leave gaps) gives what one scan gives: columns, kinds,
    views, skipped regions, a strict scan's failure and the resume state."""
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    size = data.draw(st.sampled_from([0, 1, 23, 24, 500, 5000, len(BASE)]))
    buf = damaged(BASE[:size], rng, data.draw(st.integers(0, 4)))
    ask = request(len(buf), skip=data.draw(st.booleans()), final=data.draw(st.booleans()),
                  names=schema.resolve(data.draw(st.sampled_from(NAMES))),
                  start=data.draw(st.sampled_from([0, min(7, len(buf))])),
                  base=data.draw(st.sampled_from([0, 1 << 40])),
                  unverified=data.draw(st.booleans()),
                  view_bits=data.draw(st.sampled_from([0, 31])))
    view = memoryview(buf)
    want = _core.scan.scan_buffer(view, ask)
    for threads in (2, 3, 7):
        got = threaded.scan_result(
            view, ask, threads, range_bytes=data.draw(st.integers(1, 3000)), range_frames=1,
            lead_in=data.draw(st.sampled_from([1, 100, 5000])),
            piece_bytes=data.draw(st.integers(1, 2000)),
            rows=data.draw(st.sampled_from([None, None, 0, 1, 9, 200, 4000])))
        assert_same_result(got, want)


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("threads", [2, 3, 7])
def test_fewer_bytes_than_threads(threads, skip):
    """Cuts that would fall on the start (a 3-byte buffer of junk in 1-byte ranges) make
    fewer ranges, and the strict scan still fails at byte 0."""
    buf = memoryview(bytes.fromhex("89eb2f"))
    ask = request(len(buf), skip=skip, unverified=True)
    want = _core.scan.scan_buffer(buf, ask)
    assert (want.failure is None) == skip
    got = threaded.scan_result(buf, ask, threads, range_bytes=1, range_frames=1, lead_in=1,
                                piece_bytes=1)
    assert_same_result(got, want)


@settings(max_examples=40, deadline=None)
@given(streams(min_frames=1, max_frames=30), st.data())
def test_threads_equal_one_scan_on_random_frames(stream, data):
    collections, raw, _ = stream
    buf = raw * data.draw(st.integers(1, 4))
    ask = request(len(buf), collections=collections, skip=data.draw(st.booleans()),
                  final=True)
    want = _core.scan.scan_buffer(buf, ask)
    got = threaded.scan_result(memoryview(buf), ask, data.draw(st.integers(2, 6)),
                               range_bytes=data.draw(st.integers(1, 400)), range_frames=1,
                               lead_in=64,
                               piece_bytes=data.draw(st.integers(1, 400)),
                               rows=data.draw(st.sampled_from([None, 0, 3, 50])))
    assert_same_result(got, want)


def test_a_value_holding_frames_across_every_cut():
    """A mutation whose value is a long valid stream: anchors inside the value find a
    chain that is not the stream's, and the range after them is walked again."""
    outer = t.mutation(b"outer", INNER * 40, by_seqno=5)
    buf = t.synthetic_stream(50, seed=3) + outer + t.synthetic_stream(50, seed=4,
                                                                      handshake=False)
    for skip in (False, True):
        ask = request(len(buf), skip=skip, final=True)
        want = _core.scan.scan_buffer(buf, ask)
        assert want.frames == 50 + 1 + 50 + 1 or want.frames > 0
        for range_bytes in (200, 997, 5000):
            got = threaded.scan_result(memoryview(buf), ask, 5, range_bytes=range_bytes,
                                       range_frames=1, lead_in=16, piece_bytes=300)
            assert_same_result(got, want)


def test_scans_sharing_the_pool_at_once_all_end():
    """Several callers scanning with many threads at once share one pool: a thread never
    waits for a range whose task is still queued (behind the waiting tasks of another
    scan), so every scan ends, each with the frames of one thread."""
    import threading

    buf = t.synthetic_stream(400, seed=11)
    ask = request(len(buf), final=True)
    want = _core.scan.scan_buffer(buf, ask)
    got: list = []

    def caller():
        for _ in range(5):
            got.append(threaded.scan_result(memoryview(buf), ask, 6, range_bytes=256,
                                            range_frames=1, lead_in=64, piece_bytes=64))

    callers = [threading.Thread(target=caller, daemon=True) for _ in range(4)]
    for c in callers:
        c.start()
    for c in callers:
        c.join(120)
    assert not any(c.is_alive() for c in callers), "a scan sharing the pool never ended"
    assert len(got) == 20
    for result in got:
        assert_same_result(result, want)


def test_public_entry_points_take_threads(tmp_path):
    """scan, read and iter_batches with threads give the batches of one thread (inputs
    large enough to be cut: at least twice threaded.RANGE_BYTES)."""
    unit = t.synthetic_stream(3000, seed=8)
    data = unit * (5 * threaded.RANGE_BYTES // len(unit))
    bad = bytearray(data)
    for at in range(1000, len(bad), len(bad) // 7):
        bad[at:at + 3] = b"\xff\x00\xff"
    for buf, errors in ((data, "strict"), (bytes(bad), "skip")):
        one = dcpfast.scan(buf, errors=errors, final=True, threads=1)
        for threads in (2, 4):
            assert_same_batch(dcpfast.scan(buf, errors=errors, final=True, threads=threads),
                              one)
        path = tmp_path / "dump.dcp"
        path.write_bytes(buf)
        assert_same_batch(dcpfast.read(path, errors=errors, threads=3), one)
        size = 2 * threaded.RANGE_BYTES + 1000       # batches large enough to be cut
        split = list(dcpfast.iter_batches(path, size, errors=errors, threads=2))
        alone = list(dcpfast.iter_batches(path, size, errors=errors, threads=1))
        assert len(split) == len(alone) > 1
        for a, b in zip(split, alone):
            assert_same_batch(a, b)
    with pytest.raises(dcpfast.DcpFormatError) as strict:
        dcpfast.scan(bytes(bad), threads=1)
    with pytest.raises(dcpfast.DcpFormatError) as spread:
        dcpfast.scan(bytes(bad), threads=4)
    assert str(spread.value) == str(strict.value)


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2", float("nan")])
def test_threads_are_checked(threads):
    with pytest.raises(ValueError, match="threads"):
        dcpfast.scan(t.noop(), threads=threads)
    with pytest.raises(ValueError, match="threads"):
        list(dcpfast.iter_batches(t.noop(), threads=threads))


def test_threads_are_capped_by_the_cores_and_default_to_the_idle_ones():
    cores = len(os.sched_getaffinity(0))
    assert 1 <= pool.threads_of(None) <= min(cores, pool.DEFAULT_MOST)
    assert 1 <= pool.idle_threads() <= min(cores, pool.DEFAULT_MOST)
    assert pool.threads_of(3) == min(3, cores)
    assert pool.threads_of(10_000) == cores
    least = threaded.RANGE_BYTES
    assert pool.parts_for(2 * least - 1, 8, least) == 1     # small: one thread
    assert pool.parts_for(5 * least, 8, least) == 5
    assert pool.parts_for(100 * least, 8, least) == 8


def test_a_buffer_of_few_large_frames_is_walked_by_one_thread(monkeypatch):
    """The walk reads headers, so threads follow the frames: 12 MiB in 24 frames of
    512 KiB is one range (no anchor is looked for), the same bytes in small frames are
    cut, and both give the frames of one scan."""
    cuts: list[int] = []
    real = threaded.anchor

    def counted(view, cut, *args, **kwargs):
        cuts.append(cut)
        return real(view, cut, *args, **kwargs)
    monkeypatch.setattr(threaded, "anchor", counted)
    large = b"".join(t.mutation(b"k%d" % i, bytes(512 << 10), by_seqno=i + 1)
                     for i in range(24))
    ask = request(len(large), final=True)
    assert_same_result(threaded.scan_result(memoryview(large), ask, 4),
                       _core.scan.scan_buffer(large, ask))
    assert cuts == []
    unit = t.synthetic_stream(3000, seed=8)
    small = unit * (len(large) // len(unit))
    ask = request(len(small), final=True)
    assert_same_result(threaded.scan_result(memoryview(small), ask, 4),
                       _core.scan.scan_buffer(small, ask))
    assert cuts                                    # ranges of at least RANGE_BYTES


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
    assert pool.run([lambda k=k: k * k for k in range(5)], 3) == [0, 1, 4, 9, 16]
    ran = []

    def fails(k):
        def task():
            ran.append(k)
            raise KeyError(k)
        return task
    with pytest.raises(KeyError) as e:
        pool.run([lambda: ran.append(0), fails(1), fails(2)], 3)
    assert e.value.args == (1,) and sorted(ran) == [0, 1, 2]    # every task ran first


def test_a_worker_that_ends_mid_task_fails_the_task_instead_of_hanging(monkeypatch):
    """A worker thread ends when even recording its task's outcome fails (out of memory):
    the task fails with MemoryError, and the next run starts workers afresh."""
    real = pool._outcome
    doomed = []

    def recording(call):
        if call in doomed:
            raise SystemExit                 # escapes the worker's task, as a failed record
        return real(call)

    def doomed_task():
        return "never recorded"
    doomed.append(doomed_task)
    monkeypatch.setattr(pool, "_outcome", recording)
    with pytest.raises(MemoryError):
        pool.run([lambda: 1, doomed_task], 2)
    workers = pool._pool
    assert workers is None or all(thread.is_alive() for thread in workers.threads)
    assert pool.run([lambda: 1, lambda: 2, lambda: 3], 3) == [1, 2, 3]


def test_beside_runs_calls_in_turn_on_one_thread_of_its_own():
    import threading

    waits = [pool.beside(threading.current_thread) for _ in range(3)]
    threads = {wait() for wait in waits}
    assert len(threads) == 1 and threading.current_thread() not in threads
    failing = pool.beside(lambda: {}["missing"])
    with pytest.raises(KeyError):
        failing()
    assert pool.beside(threading.current_thread)() in threads   # kept after a failure


def test_a_lane_called_from_its_own_thread_runs_the_call_there():
    """``beside`` inside ``beside`` runs in place (no wait on itself); ``ahead`` has a
    thread of its own."""
    import threading

    own = pool.beside(threading.current_thread)()
    nested = pool.beside(lambda: pool.beside(threading.current_thread)())
    assert nested() is own
    assert pool.ahead(threading.current_thread)() not in (own, threading.current_thread())


def test_two_states_at_once_each_reading_ahead_finish():
    """A state built on ``beside``'s thread while another is built here (as ``diff``
    builds its two sides), both reading their next batches ahead, ends: within a minute,
    with the one-thread state's rows."""
    import threading

    data = t.synthetic_stream(3000, seed=4, vbuckets=4, collections=False)
    want = dcpfast.state(data, batch_bytes=1 << 16, threads=1)
    out: dict = {}

    def both():
        other = pool.beside(lambda: dcpfast.state(data, batch_bytes=1 << 16, threads=2))
        out["here"] = dcpfast.state(data, batch_bytes=1 << 16, threads=2)
        out["beside"] = other()
    worker = threading.Thread(target=both, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the two states did not finish"
    assert out["here"].equals(want) and out["beside"].equals(want)


# -- the core pieces: stop, and output memory filled by the caller -----------------------

@settings(max_examples=60, deadline=None)
@given(streams(min_frames=1, max_frames=12), st.data())
def test_a_walk_ended_at_stop_and_resumed_there_is_the_whole_walk(stream, data):
    """Both cores: a walk ended at ``stop`` and a second one from where it ended give the
    frames, regions and state of one walk; the cores agree."""
    collections, raw, _ = stream
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    buf = damaged(raw, rng, data.draw(st.integers(0, 2)))
    skip, final = data.draw(st.booleans()), data.draw(st.booleans())
    stop = data.draw(st.integers(0, len(buf) + 5))
    for core in every("scan"):
        ask = request(len(buf), collections=collections, skip=skip, final=final)
        whole = core.scan_buffer(buf, ask)
        head = core.scan_buffer(buf, ask._replace(stop=stop))
        if head.failure:
            assert head.failure == whole.failure
            continue
        assert head.consumed >= min(stop, len(buf)) or head.consumed == whole.consumed \
            or head.unverified == whole.unverified
        if head.consumed < stop or head.unverified:   # the walk ended where one walk ends
            assert_same_result(head, whole)
            continue
        rest = core.scan_buffer(buf, ask._replace(start=head.consumed))
        assert rest.failure == whole.failure
        if whole.failure:
            continue
        assert head.frames + rest.frames == whole.frames
        assert head.regions + rest.regions == whole.regions
        assert (rest.consumed, rest.unverified) == (whole.consumed, whole.unverified)
        for name in whole.arrays:
            np.testing.assert_array_equal(
                np.concatenate([head.arrays[name], rest.arrays[name]]), whole.arrays[name])


@pytest.mark.parametrize("core", every("scan"), ids=lambda c: c.__name__.split(".")[-1])
def test_columns_filled_by_the_caller_grow_and_put(core):
    data = t.synthetic_stream(200, seed=9)
    names = schema.resolve(None)
    viewed = ("key", "value")
    ask = request(len(data), view_bits=31)
    want = core.scan_buffer(data, ask)
    out = core.Columns(names, 3, viewed)                   # far too few rows: it grows
    got = core.scan_buffer(data, ask, out)
    assert out.rows >= want.frames
    assert_same_result(got, want)
    twice = core.Columns(names, 2 * want.frames, viewed)
    twice.put(0, out, 0, want.frames)
    twice.put(want.frames, out, 0, want.frames)
    arrays, kinds, views = twice.finish(2 * want.frames)
    for name in names:
        np.testing.assert_array_equal(arrays[name], np.tile(want.arrays[name], 2))
    np.testing.assert_array_equal(kinds, np.tile(want.kinds, 2))
    np.testing.assert_array_equal(views["value"], np.tile(want.views["value"], (2, 1)))
    with pytest.raises(ValueError):
        twice.put(2 * want.frames - 1, out, 0, 2)         # past the end
    with pytest.raises(ValueError):
        twice.put(0, core.Columns(("offset",), 10), 0, 1)  # other columns
    with pytest.raises(ValueError):
        core.scan_buffer(data, ask, core.Columns(("offset",), 10))


@pytest.mark.parametrize("core", every("scan"), ids=lambda c: c.__name__.split(".")[-1])
def test_a_scan_from_a_given_row_keeps_the_rows_before_and_a_fitting_limit_never_grows(
        core):
    """``first``: rows before it are left as they are (grown or not); with a frame limit
    that fits, the Columns keeps its memory (another thread may be writing past it); rows
    of one Columns moved onto rows that overlap them arrive intact."""
    data = t.synthetic_stream(120, seed=10)
    names = schema.resolve(None)
    want = core.scan_buffer(data, request(len(data)))
    n = want.frames
    out = core.Columns(names, 2 * n + 5)
    head = core.scan_buffer(data, request(len(data), max_frames=7), out)
    rows = out.rows
    got = core.scan_buffer(data, request(len(data), start=head.consumed, max_frames=n - 7),
                           out, 12)
    assert out.rows == rows and got.frames == n - 7 and got.consumed == want.consumed
    for name in names:
        np.testing.assert_array_equal(got.arrays[name], want.arrays[name][7:], err_msg=name)
    out.put(7, out, 12, n - 7)                     # down by 5 rows: they overlap
    arrays, kinds, _ = out.finish(n)
    np.testing.assert_array_equal(kinds, want.kinds)
    for name in names:
        np.testing.assert_array_equal(arrays[name], want.arrays[name], err_msg=name)
    small = core.Columns(names, 3)
    grown = core.scan_buffer(data, request(len(data), start=head.consumed), small, 2)
    assert small.rows >= n - 7 + 2 and grown.frames == n - 7
    with pytest.raises(ValueError):
        core.scan_buffer(data, request(len(data)), None, 1)
    with pytest.raises(ValueError):
        core.scan_buffer(data, request(len(data)), core.Columns(names, 4), 5)


@pytest.mark.parametrize("core", every("scan"), ids=lambda c: c.__name__.split(".")[-1])
def test_offsets_past_2_to_the_64_are_refused(core):
    data = t.synthetic_stream(20, seed=5)
    with pytest.raises(ValueError, match="base"):
        core.scan_buffer(data, request(len(data), base=2**64 - 100))
    last = 2**64 - 1 - len(data)
    assert core.scan_buffer(data, request(len(data), base=last)).frames > 0


def test_scan_refuses_a_base_offset_that_wraps():
    data = t.synthetic_stream(20, seed=5)
    with pytest.raises(ValueError, match="base_offset"):
        dcpfast.scan(data, base_offset=2**64 - 100)
    with pytest.raises(ValueError, match="base_offset"):
        dcpfast.scan(data, base_offset=-1)
    batch = dcpfast.scan(data, base_offset=2**64 - 1 - len(data))
    assert int(batch["offset"][-1]) < 2**64 - 1
    assert batch.key(len(batch) - 1) == dcpfast.scan(data).key(len(batch) - 1)


# -- values: runs of values decoded by several threads, Snappy inflated without the GIL --

def snappy_blocks():
    """Raw Snappy blocks: sound ones of every element kind (literals of every length
    encoding, copies of 1, 2 and 4 offset bytes, copies that overlap what they make) and
    the same damaged (bytes changed, cut, added)."""
    import cramjam
    sound = st.one_of(
        st.binary(max_size=300),
        st.builds(lambda a, n: a * n, st.binary(min_size=1, max_size=9), st.integers(1, 400)),
        st.builds(lambda a, b: a + bytes(b), st.binary(max_size=70_000),
                  st.integers(0, 70_000)),
    ).map(lambda raw: bytes(cramjam.snappy.compress_raw(raw)))

    @st.composite
    def damaged_block(draw):
        block = bytearray(draw(sound))
        for _ in range(draw(st.integers(1, 3))):
            edit = draw(st.integers(0, 2))
            at = draw(st.integers(0, len(block)))
            if edit == 0 and at < len(block):
                block[at] = draw(st.integers(0, 255))
            elif edit == 1:
                del block[at:]
            else:
                block[at:at] = draw(st.binary(min_size=1, max_size=4))
        return bytes(block)
    return st.one_of(sound, damaged_block(), st.binary(max_size=40))


@pytest.mark.skipif(_core.compiled() is None, reason="compiled core not built")
@settings(max_examples=300, deadline=None)
@given(st.lists(snappy_blocks(), max_size=6))
# a block the compiled loop inflates further than the library before both give up
@example([b"\x80\x01\x00\x00\x00\x00\x00\x01\x04\x00\x00\x02\x01\x00\x02\x01\x00~\x06\x00"
          b"\x01\x01"])
def test_the_compiled_inflate_equals_the_library(blocks):
    """The compiled core inflates sound blocks itself, without the GIL, and hands the
    others to the library: slots and problems are the library's own (the twin's), and a
    block that fails leaves its slot zeros whatever either wrote of it first."""
    import cramjam
    compiled, twin = _core.compiled()["values"], _core.twins()["values"]
    data = b"".join(blocks)
    lengths = np.array([len(b) for b in blocks], np.int64)
    starts = np.cumsum(lengths) - lengths
    buf = np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8)
    declared = np.empty(len(blocks), np.int64)
    twin.snappy_lengths(buf, starts, lengths, declared)
    sound = declared >= 0
    bounds = np.concatenate([[0], np.cumsum(declared[sound])]).astype(np.int64)
    got = []
    for core in (compiled, twin):
        out = np.zeros(int(bounds[-1]), np.uint8)
        problems = core.inflate(buf, starts[sound], lengths[sound], out, bounds,
                                cramjam.snappy.decompress_raw_into)
        got.append((problems, out.tobytes()))
    assert got[0] == got[1]


def test_values_with_threads_equal_one_thread():
    frames = t.synthetic_frames(20_000, seed=31, snappy_ratio=0.6, xattr_ratio=0.4,
                                value_size=400)
    data = b"".join(f.data for f in frames)
    bad = bytearray(data)
    snappy_at = [f for f in frames if f.fields.get("datatype", 0) & 2]
    assert snappy_at
    for at in range(len(data) // 5, len(data), len(data) // 5):    # some blocks broken
        bad[at:at + 4] = b"\xff\xff\xff\xff"
    for buf, errors in ((data, "strict"), (bytes(bad), "skip")):
        batch = dcpfast.scan(buf, collections=True, errors=errors, final=True)
        scanned = list(batch.errors)
        one = batch.values(threads=1)
        listed = list(batch.errors)
        assert len(listed) > len(scanned) or errors == "strict"
        for threads in (2, 5):
            batch.errors[:] = scanned
            got = batch.values(threads=threads)
            assert got.equals(one) and got.schema == one.schema
            assert batch.errors == listed
            batch.values(threads=threads)                          # listed once only
            assert batch.errors == listed
    batch = dcpfast.scan(bytes(bad), collections=True, errors="skip", final=True)
    raised = []
    for threads in (1, 2, 5):
        with pytest.raises(dcpfast.DcpFormatError) as e:
            batch.values(errors="strict", threads=threads)
        raised.append(str(e.value))
    assert raised[0] == raised[1] == raised[2]


def test_values_pieces_with_threads_keep_their_bound_and_order():
    """With threads, each piece of iter_values is cut again into one a thread: the pieces
    stay within piece_bytes, come in stream order, and damage is listed as with one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dcpfast import values as V
    frames = t.synthetic_frames(20_000, seed=32, snappy_ratio=0.6, xattr_ratio=0.4,
                                value_size=400)
    data = bytearray(b"".join(f.data for f in frames))
    for at in range(len(data) // 7, len(data), len(data) // 7):
        data[at:at + 4] = b"\xff\xff\xff\xff"
    got = {}
    for threads in (1, 3):
        batch = dcpfast.scan(bytes(data), collections=True, errors="skip", final=True)
        pieces = list(V.iter_values(batch, piece_bytes=3 << 20, threads=threads))
        assert all(pc.sum(pc.binary_length(p["body"])).as_py() <= 3 << 20 for p in pieces)
        got[threads] = (pieces, batch.errors)
    (one, one_errors), (many, many_errors) = got[1], got[3]
    assert len(many) > len(one) > 1
    assert pa.concat_tables(many).equals(pa.concat_tables(one))
    assert many_errors == one_errors and len(one_errors) > len(dcpfast.scan(
        bytes(data), collections=True, errors="skip", final=True).errors)


def test_convert_takes_threads(tmp_path):
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from dcpfast.cli import main
    unit = t.synthetic_stream(3000, seed=8)
    path = tmp_path / "dump.dcp"
    path.write_bytes(unit * (5 * threaded.RANGE_BYTES // len(unit)))
    tables = []
    for threads in ("1", "3"):
        out = tmp_path / f"out{threads}.parquet"
        done = CliRunner().invoke(main, ["convert", str(path), "-o", str(out), "--values",
                                         "-q", "--threads", threads])
        assert done.exit_code == 0, done.output
        tables.append(pq.read_table(out))
    assert tables[0].equals(tables[1])
    done = CliRunner().invoke(main, ["convert", str(path), "-o", str(tmp_path / "x.parquet"),
                                     "--threads", "0"])
    assert done.exit_code == 2 and "threads" in done.output


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
        seen = [pool.idle_threads() for _ in range(5)]
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
