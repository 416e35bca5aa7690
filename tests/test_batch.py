"""FrameBatch: buffers it accepts, zero-copy views, selections and dataframe exports."""

from __future__ import annotations

import mmap
import sys
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import _core, buffers, schema
from dcpfast import batch as batch_module
from dcpfast import testing as t
from tests.strategies import streams

DATA = t.synthetic_stream(80, seed=21, stream_ids=True, marker_version=2)


@pytest.fixture(scope="module")
def batch():
    return dcpfast.scan(DATA)


def test_column_names_and_dtypes(batch):
    assert batch.columns == schema.NAMES
    for column in dcpfast.COLUMNS:
        assert batch[column.name].dtype == np.dtype(column.dtype)
        assert len(batch[column.name]) == len(batch)
    assert "by_seqno" in batch and "key" not in batch
    with pytest.raises(KeyError, match="was not scanned"):
        dcpfast.scan(DATA, columns=["opcode"])["by_seqno"]
    with pytest.raises(ValueError, match="unknown column"):
        dcpfast.scan(DATA, columns=["seqno"])


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview,
                                  lambda d: np.frombuffer(d, np.uint8),
                                  lambda d: np.frombuffer(d[:len(d) // 4 * 4], np.uint32),
                                  pa.py_buffer],
                         ids=["bytes", "bytearray", "memoryview", "numpy", "numpy-uint32",
                              "arrow"])
def test_buffer_types(wrap):
    data = wrap(DATA)
    batch = dcpfast.scan(data)
    assert batch.data is data
    expected = dcpfast.scan(DATA)
    np.testing.assert_array_equal(batch["by_seqno"], expected["by_seqno"][:len(batch)])


def test_read_only_mmap(tmp_path):
    path = tmp_path / "dump.dcp"
    path.write_bytes(DATA)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    batch = dcpfast.scan(mapped)
    assert batch.key(3) == dcpfast.scan(DATA).key(3)


def test_non_contiguous_buffer_is_refused():
    with pytest.raises(ValueError, match="contiguous"):
        dcpfast.scan(memoryview(DATA)[::2])


def test_keys_and_values_point_into_the_buffer(batch):
    view = memoryview(DATA)
    for i in range(len(batch)):
        frame = batch.frame(i)
        if "key" in frame:
            start = int(batch["key_offset"][i])
            assert bytes(view[start:start + frame["key_len"]]) == batch.key(i) == frame["key"]
        else:
            assert batch.key(i) is None
        if "value" in frame:
            start = int(batch["value_offset"][i])
            assert bytes(view[start:start + frame["value_len"]]) == batch.value(i)
    with pytest.raises(IndexError):
        batch.key(len(batch))
    assert batch.key(-1) == batch.key(len(batch) - 1)


def test_frame_record_is_readable(batch):
    i = int(np.flatnonzero(batch["opcode"] == dcpfast.Opcode.MUTATION)[0])
    frame = batch.frame(i)
    assert frame.kind == "mutation" and frame.opcode is dcpfast.Opcode.MUTATION
    assert frame.magic is dcpfast.Magic.ALT_CLIENT_REQUEST and frame.stream_id >= 1
    assert "status" not in frame and "snap_start" not in frame
    assert repr(frame).startswith("Frame(kind='mutation', offset=")
    with pytest.raises(AttributeError):
        frame.snap_start
    marker = batch.frame(int(np.flatnonzero(batch["opcode"] == 0x56)[0]))
    assert marker.marker_version == 2 and isinstance(marker.snap_flags, dcpfast.SnapshotFlag)


def test_filter_and_only(batch):
    docs = batch.only(dcpfast.Opcode.MUTATION, "deletion", 0x59)
    assert set(docs["opcode"]) <= {0x57, 0x58, 0x59} and len(docs) > 50
    assert docs.data is batch.data
    assert docs.key(0) == batch.key(int(np.flatnonzero(np.isin(batch["opcode"],
                                                                [0x57, 0x58, 0x59]))[0]))
    picked = batch.filter([2, 0])
    assert list(picked["offset"]) == [batch["offset"][2], batch["offset"][0]]
    with pytest.raises(ValueError):
        batch.filter(np.ones(3, bool))
    empty = batch.filter(np.zeros(len(batch), bool))
    assert len(empty) == 0 and empty.to_arrow().num_rows == 0


def test_to_arrow_is_zero_copy_for_numbers(batch):
    table = batch.to_arrow()
    assert table.num_rows == len(batch)
    assert table.schema == schema.arrow_schema()
    for name in ("offset", "by_seqno", "opcode"):
        chunk = table.column(name).chunk(0)
        assert chunk.buffers()[1].address == batch[name].ctypes.data
    table.validate(full=True)


def test_to_arrow_keys_values_and_nulls(batch):
    table = batch.to_arrow()
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    assert keys == [batch.key(i) for i in range(len(batch))]
    assert values == [batch.value(i) for i in range(len(batch))]
    by_seqno = table.column("by_seqno").to_pylist()
    for i in range(len(batch)):
        assert by_seqno[i] == batch.frame(i).get("by_seqno")


@pytest.mark.parametrize("collections", [True, False])
def test_arrow_nulls_are_the_frames_that_do_not_carry_a_column(collections):
    # hundreds of frames of many kinds (the validity bitmaps are made 64 rows at a time),
    # all columns, a projection and a selection
    data = (t.synthetic_stream(400, seed=5, collections=collections, marker_version=2,
                               sync_writes=True)
            + t.synthetic_stream(200, seed=6, collections=collections, stream_ids=True))
    whole = dcpfast.scan(data, collections=collections)
    assert len(whole) > 600 and len(set(whole._kinds.tolist())) > 8
    for batch in (whole, dcpfast.scan(data, collections=collections,
                                      columns=["opcode", "by_seqno", "snap_end", "value"]),
                  whole.filter(whole["opcode"] != dcpfast.Opcode.MUTATION)):
        for binary_view in (False, True):
            table = batch.to_arrow(binary_view=binary_view)
            for name in table.column_names:
                column = name if name in batch.columns else f"{name}_offset"
                valid = batch.validity(column)
                nulls = table.column(name).is_null().to_numpy(zero_copy_only=False)
                expected = np.zeros(len(batch), bool) if valid is None else ~valid
                np.testing.assert_array_equal(nulls, expected, err_msg=name)


def test_binary_view_is_zero_copy(batch):
    table = batch.to_arrow(binary_view=True)
    table.validate(full=True)
    assert table.column("value").type == pa.binary_view()
    assert table.column("value").to_pylist() == batch.to_arrow().column("value").to_pylist()
    data_buffer = table.column("value").chunk(0).buffers()[2]
    assert data_buffer.address == np.frombuffer(DATA, np.uint8).ctypes.data


def test_large_inputs_use_wide_offsets_and_view_windows(batch, monkeypatch):
    expected = batch.to_arrow()
    monkeypatch.setattr(buffers, "INT32_MAX", 1000)
    monkeypatch.setattr(buffers, "_WINDOW_BITS", 10)
    small = dcpfast.scan(t.synthetic_stream(60, seed=2, value_size=40))
    wide = small.to_arrow()
    assert wide.column("value").type == pa.large_binary()
    views = small.to_arrow(binary_view=True)
    views.validate(full=True)
    assert len(views.column("value").chunk(0).buffers()) > 4       # several data windows
    assert views.column("value").to_pylist() == wide.column("value").to_pylist()
    assert expected.column("value").type == pa.binary()
    early = dcpfast.scan(t.synthetic_stream(60, seed=2, value_size=40), binary_views=True)
    found = early.to_arrow(binary_view=True)                 # the scan's views use the windows
    found.validate(full=True)
    structs = [table.column("value").chunk(0).buffers()[1] for table in (found, views)]
    assert structs[0] == structs[1]


def _scan_cores():
    from tests.cores import every
    return every("scan")


@pytest.mark.parametrize("bits", [31, 4])
def test_view_structs_of_short_slices_up_to_the_end_of_the_buffer(bits):
    data = np.frombuffer(bytes(range(1, 41)), np.uint8)
    ranges = [(start, size) for start in range(len(data) + 1)
              for size in range(min(15, len(data) - start) + 1)]
    starts = np.array([r[0] for r in ranges], np.uint64)
    lengths = np.array([r[1] for r in ranges], np.int64)
    # two rows walked together, the second one reversed
    starts2, lengths2 = np.stack([starts, starts[::-1]]), np.stack([lengths, lengths[::-1]])
    found = []
    for core in _scan_cores():
        out = np.full((2, 16 * len(ranges)), 0xEE, np.uint8)
        core.views(data, starts2, lengths2, out, bits)
        windows = [pa.py_buffer(data[lo:lo + 2 * (1 << bits)])
                   for lo in range(0, len(data), 1 << bits)]
        for row in range(2):
            array = pa.Array.from_buffers(pa.binary_view(), len(ranges),
                                          [None, pa.py_buffer(out[row]), *windows])
            array.validate(full=True)
            pairs = zip(starts2[row].tolist(), lengths2[row].tolist())
            assert array.to_pylist() == [data[s:s + n].tobytes() for s, n in pairs]
        inline = out.reshape(2, -1, 16)[lengths2 <= 12]
        sizes = lengths2[lengths2 <= 12]
        for struct, size in zip(inline, sizes):         # inline bytes are zero-padded
            assert not struct[4 + size:].any()
        one = np.empty(16 * len(ranges), np.uint8)      # 1-D arrays: one row
        core.views(data, starts, lengths, one, bits)
        assert (one == out[0]).all()
        found.append(out)
    assert all((out == found[0]).all() for out in found)


def test_view_structs_check_every_row():
    data = np.zeros(40, np.uint8)
    for core in _scan_cores():
        for starts, lengths, message in (([[0, 8], [30, 38]], [[4, 4], [4, 4]], "range 1 outside"),
                                         ([[0, 8], [30, 8]], [[4, 4], [4, -1]], "range 1 outside"),
                                         ([[0, 8], [0, 8]], [[4, 4], [20, 4]], "longer than")):
            with pytest.raises(ValueError, match=message):
                core.views(data, np.array(starts, np.uint64), np.array(lengths, np.int64),
                           np.empty((2, 32), np.uint8), 4)
        with pytest.raises(ValueError, match="sizes"):
            core.views(data, np.zeros((2, 2), np.uint64), np.zeros((2, 2), np.int64),
                       np.empty((2, 16), np.uint8), 31)


def test_pandas(batch):
    frame = batch.to_pandas()
    assert len(frame) == len(batch)
    assert str(frame["by_seqno"].dtype) == "uint64[pyarrow]"
    assert frame["status"].isna().sum() == int((batch["magic"] & 1 == 0).sum())
    plain = batch.to_pandas(arrow_dtypes=False)
    assert plain["key"].iloc[-1] == batch.key(len(batch) - 1)


def test_polars_and_duckdb_take_the_batch_directly(batch):
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame(batch)
    assert frame.height == len(batch)
    assert frame["by_seqno"].dtype == pl.UInt64
    assert batch.to_polars()["key"].to_list() == [batch.key(i) for i in range(len(batch))]
    duckdb = pytest.importorskip("duckdb")
    count = duckdb.sql("select count(*) from batch where opcode = 87").fetchall()[0][0]
    assert count == int((batch["opcode"] == 0x57).sum())


def test_arrow_c_stream(batch):
    reader = pa.RecordBatchReader.from_stream(batch)
    assert reader.read_all().equals(batch.to_arrow())


def test_projection_reaches_arrow():
    table = dcpfast.scan(DATA, columns=["opcode", "key"]).to_arrow()
    assert table.column_names == ["opcode", "key_offset", "key_len", "key"]


def test_repr(batch):
    assert repr(batch).startswith(f"<FrameBatch {len(batch)} frames, bytes 0..{len(DATA)}")


@pytest.mark.skipif(batch_module.IMPLEMENTATION != "cython", reason="the twin uses numpy's memory")
def test_recycled_column_memory_never_reaches_a_live_batch():
    """Large columns live in spans the core hands to the next scan once their arrays are
    dropped: a batch still alive keeps its values, whatever is scanned after it."""
    unit = t.synthetic_stream(2000, seed=5)
    kept = dcpfast.scan(unit * 80)                   # ~180,000 frames: columns of >1 MiB
    before = {name: kept[name].copy() for name in kept.columns}
    for reps in (80, 79, 81, 40):                   # same, smaller and larger sizes
        dropped = dcpfast.scan(unit * reps)
        assert len(dropped) == reps * len(dcpfast.scan(unit))
        del dropped
    other = dcpfast.scan(t.synthetic_stream(3000, seed=6) * 60, columns=["by_seqno"])
    other["by_seqno"][:] = 0xAB                     # columns are writable arrays
    again = dcpfast.scan(unit * 80)
    for name in kept.columns:
        assert np.array_equal(kept[name], before[name]), name
        assert np.array_equal(again[name], before[name]), name
    assert (other["by_seqno"] == 0xAB).all()


@pytest.mark.skipif(batch_module.IMPLEMENTATION != "cython", reason="the twin uses numpy's memory")
def test_a_scan_that_reserved_far_too_many_rows_gives_the_rest_back():
    """Rows are reserved from the first frames' mean length: small frames followed by
    large ones make the scan reserve far more than it fills, and the finished columns
    keep only what they hold."""
    data = t.noop() * 256 + b"".join(
        t.mutation(b"k%d" % i, bytes(1 << 20), by_seqno=i + 1) for i in range(20))
    live = _core.scan.mapped()[0]
    found = dcpfast.scan(data, collections=False, columns=["offset", "by_seqno"])
    assert len(found) == 276
    assert list(found["by_seqno"][256:]) == list(range(1, 21))
    assert _core.scan.mapped()[0] - live <= 2 * 4096


@pytest.mark.skipif(batch_module.IMPLEMENTATION != "cython", reason="the twin uses numpy's memory")
def test_column_memory_kept_for_reuse_is_bounded_in_time():
    unit = t.synthetic_stream(2000, seed=5)
    dropped = dcpfast.scan(unit * 60)
    del dropped
    assert _core.scan.mapped()[2] > 0       # kept for the next scan
    time.sleep(2.2)
    dcpfast.scan(unit * 60, columns=["opcode"])     # any request looks at the clock
    kept = _core.scan.mapped()[2]
    assert kept <= 2 << 20                          # just the opcode span, given back


@pytest.mark.skipif(batch_module.IMPLEMENTATION != "cython", reason="the twin uses numpy's memory")
def test_small_column_memory_takes_a_kept_span_and_keeps_its_tail_apart():
    """A scan far smaller than every kept span takes the smallest one's head: its pages are
    resident, and in use and kept together stay within the most in use at once (the last,
    small batch of iter_batches adds no fresh pages to a cache full of larger spans). The
    tail stays kept as a span of its own where mappings split (POSIX), so that the next
    scan writes into its resident pages too; elsewhere it is given back."""
    unit = t.synthetic_stream(2000, seed=6)
    large = dcpfast.scan(unit * 60)
    start = large["offset"].__array_interface__["data"][0]     # the span's first part
    del large
    before = _core.scan.mapped(reset=True)[2]
    assert before > 8 << 20                       # kept for the next scan
    small = dcpfast.scan(unit * 2)                # columns far smaller than the kept span
    live, peak, kept = _core.scan.mapped()
    assert small["offset"].__array_interface__["data"][0] == start
    assert 0 < live < 2 << 20 and peak < 2 << 20 and live + kept <= before
    assert len(small) == 2 * len(dcpfast.scan(unit))
    if sys.platform == "win32":
        assert kept == 0
        return
    assert kept > before - (4 << 20)              # the tail, whole pages kept apart
    again = dcpfast.scan(unit * 2)                # while the first one is in use
    assert start < again["offset"].__array_interface__["data"][0] < start + before
    assert sum(_core.scan.mapped()[:1]) + _core.scan.mapped()[2] <= before


@settings(max_examples=60, deadline=None)
@given(streams(max_frames=10), st.integers(0, 2**40), st.binary(max_size=30), st.data())
def test_views_written_by_the_scan_equal_the_ones_to_arrow_makes(stream, base, junk, data):
    collections, raw, _ = stream
    errors = data.draw(st.sampled_from(["strict", "skip"]))
    columns = data.draw(st.sampled_from([None, ["key", "value"], ["value", "opcode"],
                                         ["key_len"]]))
    # junk before the stream (skipped by ``start``, or resynchronised over) and, in skip
    # mode, after it
    trailing = junk[:data.draw(st.integers(0, len(junk)))] if errors == "skip" else b""
    buf = bytes(junk) + raw + bytes(trailing)
    start = len(junk) if errors == "strict" else data.draw(st.sampled_from([0, len(junk)]))
    kw = dict(collections=collections, columns=columns, errors=errors, base_offset=base,
              final=True)
    plain = dcpfast.scan(buf, start=start, **kw)
    early = dcpfast.scan(buf, start=start, binary_views=True, **kw)
    assert plain._views is None
    assert early._views.keys() == {n for n in ("key", "value") if columns is None or n in columns}
    expected = plain.to_arrow(binary_view=True)
    found = early.to_arrow(binary_view=True)
    found.validate(full=True)
    assert found.equals(expected)
    for name in ("key", "value"):
        if name in expected.column_names:       # the very structs, not only equal values
            assert (found.column(name).chunk(0).buffers()[1]
                    == expected.column(name).chunk(0).buffers()[1])
    mask = np.arange(len(plain)) % 2 == 0
    assert early.filter(mask).to_arrow(binary_view=True).equals(
        plain.filter(mask).to_arrow(binary_view=True))


@pytest.mark.parametrize("first", [0, 700])
def test_views_written_by_the_scan_over_many_blocks_and_a_regrown_reservation(first):
    # large frames first: the scan's first reservation is far too small for the rest
    data = (t.synthetic_stream(300, seed=1, value_size=5000)
            + t.synthetic_stream(3000, seed=2, value_size=3, stream_ids=True))
    start = int(dcpfast.scan(data, columns=["offset"])["offset"][first])
    for base in (0, 2**33 + 5):
        plain = dcpfast.scan(data, start=start, base_offset=base)
        early = dcpfast.scan(data, start=start, base_offset=base, binary_views=True)
        assert len(plain) > 5 * 512
        expected, found = plain.to_arrow(binary_view=True), early.to_arrow(binary_view=True)
        assert found.equals(expected)
        for name in ("key", "value"):
            assert (found.column(name).chunk(0).buffers()[1]
                    == expected.column(name).chunk(0).buffers()[1])


def test_views_written_by_the_scan_reach_polars_and_iter_batches():
    pytest.importorskip("polars")
    expected = dcpfast.scan(DATA).to_arrow(binary_view=True)
    chunks = [DATA[i:i + 3000] for i in range(0, len(DATA), 3000)]
    batches = list(dcpfast.iter_batches(chunks, 4096, collections=True, binary_views=True))
    assert len(batches) > 1 and all(b._views is not None for b in batches)
    assert pa.concat_tables(b.to_arrow(binary_view=True) for b in batches).equals(expected)
    frame = dcpfast.scan(DATA, binary_views=True).to_polars()
    assert frame["value"].to_list() == expected.column("value").to_pylist()
