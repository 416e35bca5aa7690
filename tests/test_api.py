"""The public API as pyarrow, polars and pandas users expect it: a ``FrameBatch`` indexed,
sliced, iterated, measured and pickled like a table of frames; the dataframe libraries
take one as it is; mistakes are answered with the way to what was meant; the public
functions and methods say what they return."""

from __future__ import annotations

import gzip
import inspect
import pickle
import sys

import numpy as np
import pyarrow as pa
import pytest

import dcpfast
import dcpfast.events
import dcpfast.io
import dcpfast.pcap
import dcpfast.streams
import dcpfast.values
from dcpfast import testing as t
from dcpfast.pcap import read_pcap
from dcpfast.testing import SAMPLE, SAMPLE_PCAP


@pytest.fixture(scope="module")
def batch():
    return dcpfast.read(SAMPLE)


# -- rows, columns, slices --------------------------------------------------------------------


def test_an_index_is_a_frame_and_a_name_a_column(batch):
    assert batch[0] == batch.frame(0) and batch[-1] == batch.frame(len(batch) - 1)
    assert batch[np.int64(3)] == batch.frame(3)
    assert batch["opcode"] is batch.to_dict()["opcode"]
    with pytest.raises(IndexError):
        batch[len(batch)]
    with pytest.raises(KeyError, match="'mutaton' was not scanned; scanned: offset, magic"):
        batch["mutaton"]
    with pytest.raises(TypeError, match="column name, a frame index or a slice, not float"):
        batch[1.5]


@pytest.mark.parametrize("cut", [slice(None, 5), slice(100, 110), slice(-3, None),
                                 slice(None, None, 100), slice(5, 5), slice(None, None, -1)])
def test_a_slice_is_a_batch_of_those_frames(batch, cut):
    part = batch[cut]
    assert type(part) is dcpfast.FrameBatch
    rows = np.arange(len(batch))[cut]
    assert len(part) == len(rows)
    for name in batch.columns:
        assert np.array_equal(part[name], batch[name][rows])
    assert part.to_arrow().equals(batch.to_arrow().take(pa.array(rows, pa.int64())))


def test_iteration_yields_the_frames(batch):
    frames = list(batch[:20])
    assert frames == [batch.frame(i) for i in range(20)]
    assert "opcode" in batch and "mutation" not in batch     # ``in`` asks for a column
    assert list(dcpfast.scan(b"")) == []


def test_the_arrow_shape_and_schema(batch):
    table = batch.to_arrow()
    assert batch.num_rows == len(batch) == table.num_rows
    assert batch.schema == table.schema
    assert batch.column_names == table.column_names
    assert batch.num_columns == table.num_columns and batch.shape == table.shape
    part = dcpfast.read(SAMPLE, columns=["opcode", "key"])
    assert part.column_names == ["opcode", "key_offset", "key_len", "key"]
    assert part.schema == part.to_arrow().schema
    capture = next(iter(read_pcap(SAMPLE_PCAP)))
    assert capture.schema == capture.to_arrow().schema and "timestamp" in capture.column_names


def test_dataframe_libraries_take_a_batch(batch):
    pd = pytest.importorskip("pandas")
    frames = pd.DataFrame(batch[:50])                 # a row per frame, from the records
    assert len(frames) == 50 and frames["kind"].iloc[0] == "response"
    assert frames["by_seqno"].dropna().astype(int).tolist() == \
        batch[:50].to_pandas()["by_seqno"].dropna().tolist()
    assert pa.table(batch).equals(batch.to_arrow())
    exchanged = pd.api.interchange.from_dataframe(batch)
    assert exchanged.shape == batch.shape
    pl = pytest.importorskip("polars")
    assert pl.DataFrame(batch).shape == batch.shape


# -- pickling ----------------------------------------------------------------------------------


def _same(a, b):
    assert type(a) is type(b)
    assert a.to_arrow().equals(b.to_arrow())
    assert (a.errors, a.mode, a.collections) == (b.errors, b.mode, b.collections)
    for i in range(len(a)):
        assert a.frame(i) == b.frame(i)


def test_a_batch_pickles_by_value(batch):
    for part in (batch, batch[100:110], batch[::50], batch.only("mutation")[:7],
                 dcpfast.scan(b"")):
        copy = pickle.loads(pickle.dumps(part))
        _same(copy, part)
        assert isinstance(copy.data, bytes)
    # only the bytes the frames cover travel, and their offsets are kept
    few = batch[100:110]
    copy = pickle.loads(pickle.dumps(few))
    assert len(copy.data) == int(few["offset"][-1] + 24 + few["body_len"][-1] - few["offset"][0])
    assert copy.base_offset == int(few["offset"][0])
    assert copy.values().equals(few.values())


def test_pickled_batches_of_every_kind():
    data = t.synthetic_stream(300, seed=3, stream_ids=True)
    damaged = data[:500] + b"\xff" * 40 + data[500:]
    for part in (dcpfast.scan(damaged, errors="skip"),
                 dcpfast.scan(data, columns=["opcode", "key"])[40:60],
                 dcpfast.scan(data, binary_views=True)[10:20],
                 list(dcpfast.iter_batches(data, 4096, collections=True))[3]):
        _same(pickle.loads(pickle.dumps(part)), part)
    capture = list(read_pcap(SAMPLE_PCAP))[1][5:9]
    copy = pickle.loads(pickle.dumps(capture))
    _same(copy, capture)
    assert copy.connection == capture.connection
    assert np.array_equal(copy.timestamps, capture.timestamps)


# -- mistakes answered with the way ------------------------------------------------------------


def test_reading_a_capture_as_a_dump_points_to_read_pcap(tmp_path):
    for path, kind in ((SAMPLE_PCAP, "pcap"), (tmp_path / "x.pcapng", "pcapng"),
                       (tmp_path / "x.pcap.gz", "pcap")):
        if kind == "pcapng":
            path.write_bytes(t.pcapng_file([]))
        elif path.suffix == ".gz":
            path.write_bytes(gzip.compress(SAMPLE_PCAP.read_bytes()))
        for errors in ("strict", "skip"):
            with pytest.raises(dcpfast.DcpFormatError, match=f"a {kind} capture, not a DCP "
                               r"dump: read it with dcpfast.pcap.read_pcap\(path\)") as e:
                dcpfast.read(path, errors=errors)
            assert e.value.offset == 0


def test_scanning_a_path_points_to_read():
    for path in ("dump.dcp", SAMPLE):
        with pytest.raises(TypeError, match=r"got the path .*dcpfast.read\(path\) reads"):
            dcpfast.scan(path)


def test_read_pcap_takes_one_port():
    one = [len(b) for b in read_pcap(SAMPLE_PCAP, ports=11210)]
    assert one == [len(b) for b in read_pcap(SAMPLE_PCAP, ports=[11210])] == [19, 1171]


def test_an_unknown_opcode_name_lists_the_names(batch):
    with pytest.raises(ValueError, match=r"no opcode named 'mutaton' \(did you mean "
                       r"'mutation'\?\); the names: hello, .*, mutation, deletion"):
        batch.only("mutaton")
    with pytest.raises(ValueError, match="no opcode named 'xyzzy'; the names"):
        batch.only("xyzzy")
    assert len(batch.only("MUTATION", 0x58)) == len(batch.only("mutation", "deletion"))


@pytest.mark.parametrize("method, module", [("to_pandas", "pandas"), ("to_polars", "polars")])
def test_a_missing_optional_library_names_its_extra(batch, monkeypatch, method, module):
    monkeypatch.setitem(sys.modules, module, None)         # as if it were not installed
    with pytest.raises(ImportError, match=rf"{method}\(\) needs {module}: "
                       rf"pip install 'dcpfast\[{module}\]'"):
        getattr(batch, method)()


# -- annotations -------------------------------------------------------------------------------


def _public_callables():
    for module in (dcpfast, dcpfast.streams, dcpfast.values, dcpfast.events, dcpfast.pcap,
                   dcpfast.compare, dcpfast.reporting, dcpfast.memory):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj
            elif inspect.isclass(obj) and obj.__module__.startswith("dcpfast"):
                for attr, member in vars(obj).items():
                    if isinstance(member, property):
                        member = member.fget
                    if inspect.isfunction(member) and not attr.startswith("_"):
                        yield f"{module.__name__}.{name}.{attr}", member


def test_the_public_api_says_what_it_returns():
    missing = sorted({name for name, f in _public_callables()
                      if inspect.signature(f).return_annotation is inspect.Signature.empty})
    assert not missing
    assert inspect.signature(dcpfast.FrameBatch.to_arrow).return_annotation == "pa.Table"
    assert inspect.signature(dcpfast.FrameBatch.to_pandas).return_annotation == "pd.DataFrame"


def test_a_newcomers_mistakes_point_the_way():
    """read() of bytes points to scan; a mistyped column gets a suggestion; the repr of a
    slice shows its frames' bytes, not the whole buffer's."""
    data = SAMPLE.read_bytes()
    with pytest.raises(TypeError, match=r"not from bytes: dcpfast.scan\(data\) decodes"):
        dcpfast.read(data)
    with pytest.raises(ValueError, match="did you mean 'by_seqno'"):
        dcpfast.scan(data, columns=["by_seqo"])
    batch = dcpfast.read(SAMPLE)
    part = batch[100:105]
    first = int(batch["offset"][100])
    end = int(batch["offset"][104]) + 24 + int(batch["body_len"][104])
    assert repr(part) == f"<FrameBatch 5 frames, bytes {first}..{end}, collections=True, " \
        "0 skipped regions>"
