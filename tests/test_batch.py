"""FrameBatch: buffers it accepts, zero-copy views, selections and dataframe exports."""

from __future__ import annotations

import mmap

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import buffers, schema
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


def test_values_and_events_leave_the_batch_errors_as_they_are():
    """``values()``, ``iter_values`` and ``system_events()`` list what they skip in their
    tables' metadata: the batch's ``errors`` (the scan's, shared by its selections) stay
    the same list with the same regions, however often they are called."""
    from dcpfast import values as V
    from dcpfast.events import Manifest, system_events

    value = t.mutation(b"k", b"\xff" * 6, by_seqno=2, datatype=2, vbucket=1)
    event = t.system_event(0, by_seqno=3, key=b"c", value=bytes(3), vbucket=1)
    data = t.mutation(b"a", b"x", by_seqno=1, vbucket=1) + value + b"\x99" * 30 + event
    batch = dcpfast.scan(data, collections=False, errors="skip", final=True)
    errors, scanned = batch.errors, list(batch.errors)
    assert len(scanned) == 1
    listed = [batch.values(), batch.values(threads=2), V.values(batch),
              *V.iter_values(batch), batch.system_events(), system_events(batch),
              batch.with_names(Manifest()), batch.filter(np.ones(len(batch), bool)).values()]
    assert batch.errors is errors and batch.errors == scanned
    assert [len(dcpfast.skipped_regions(table)) for table in listed] == [1] * len(listed)
    with pytest.raises(dcpfast.DcpFormatError):
        batch.values(errors="strict")
    assert batch.errors == scanned
