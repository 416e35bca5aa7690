"""``dcpfast convert``: Parquet, Arrow IPC and CSV that read back as the scan, several inputs
and columns, empty input, values, threads."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.io import threaded
from dcpfast.protocol import Opcode
from dcpfast.testing import SAMPLE
from tests.cli.commands import clean, run


@pytest.mark.parametrize("ext", ["parquet", "arrow", "feather"])
def test_convert_reads_back_as_the_scan(dumps, tmp_path, ext):
    out = tmp_path / f"out.{ext}"
    clean(run("convert", dumps["zst"], "-o", out), 0)
    table = pq.read_table(out) if ext == "parquet" else feather.read_table(out)
    frames = dcpfast.read(SAMPLE).to_arrow()
    assert named(table, frames)
    assert table.drop_columns(["opcode_name"]).equals(frames)


def named(table, frames) -> bool:
    """Whether ``table``'s ``opcode_name`` (right after ``opcode``) names each frame's
    opcode as ``Opcode`` does, in lower case."""
    names = table.column("opcode_name").cast(pa.string()).to_pylist()
    opcodes = frames.column("opcode").to_pylist()
    at = table.column_names.index("opcode")
    return table.column_names[at + 1] == "opcode_name" and names == [
        Opcode(op).name.lower() if op in set(Opcode) else f"0x{op:02x}" for op in opcodes]


def test_convert_several_inputs_and_columns(dumps, tmp_path):
    out = tmp_path / "out.parquet"
    clean(run("convert", dumps["raw"], dumps["lz4"], "-o", out, "-q",
               "--columns", "offset,opcode", "--columns", "key"), 0)
    table = pq.read_table(out)
    one = dcpfast.read(SAMPLE, columns=["offset", "opcode", "key"]).to_arrow()
    assert table.column_names == ["offset", "opcode", "opcode_name", "key_offset", "key_len",
                                  "key", "file"]
    assert table.drop_columns(["opcode_name", "file"]).equals(pa.concat_tables([one, one]))


def test_convert_csv(dumps, tmp_path):
    out = tmp_path / "out.csv"
    clean(run("convert", dumps["raw"], "-o", out, "--columns", "offset,vbucket,key"), 0)
    table = pcsv.read_csv(out, convert_options=pcsv.ConvertOptions(
        column_types={"key": pa.string()}, strings_can_be_null=False))
    batch = dcpfast.read(SAMPLE)
    assert table.column("offset").to_pylist() == batch["offset"].tolist()
    assert table.column("key").to_pylist() == [
        "" if k is None else k.decode() for k in (batch.key(i) for i in range(len(batch)))]
    vbuckets = table.column("vbucket").to_pylist()
    assert [v for v, ok in zip(vbuckets, batch.validity("vbucket")) if not ok] == \
        [None] * int((~batch.validity("vbucket")).sum())


def test_convert_empty_input(dumps, tmp_path):
    out = tmp_path / "empty.parquet"
    clean(run("convert", dumps["empty"], "-o", out, "--columns", "offset,key"), 0)
    table = pq.read_table(out)
    assert table.num_rows == 0 and table.schema.equals(dcpfast.arrow_schema(["offset", "key"]))


def test_convert_values(dumps, tmp_path):
    out = tmp_path / "values.parquet"
    clean(run("convert", dumps["gz"], "-o", out, "--columns", "offset,opcode", "--values"), 0)
    table = pq.read_table(out)
    batch = dcpfast.read(SAMPLE)
    found = batch.values()
    assert table.column_names == ["offset", "opcode", "opcode_name", "body", "xattrs",
                                  "is_json"]
    rows = np.asarray(found.column("index"))
    assert table.column("body").take(pa.array(rows)).equals(found.column("body"))
    others = np.setdiff1d(np.arange(len(batch)), rows)
    assert table.column("body").take(pa.array(others)).null_count == len(others)


def test_convert_takes_threads(tmp_path):
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


@pytest.mark.parametrize("ext", ["parquet", "arrow", "csv"])
def test_convert_names_the_file_of_each_row(dumps, tmp_path, ext, monkeypatch):
    """Several FILES: a last column ``file``, the path as given, dictionary-encoded where
    the format keeps dictionaries; the same dictionary in every record batch or row
    group (written in groups of a few frames here)."""
    from dcpfast.cli import convert as command

    monkeypatch.setattr(command._Writer, "GROUP_BYTES", 50_000)
    out = tmp_path / f"out.{ext}"
    given = [str(dumps["raw"]), str(dumps["lz4"]), str(dumps["raw"])]
    clean(run("convert", *given, "-o", out, "-q", "--columns", "offset,opcode"), 0)
    if ext == "csv":
        table = pcsv.read_csv(out)
    else:
        table = pq.read_table(out) if ext == "parquet" else feather.read_table(out)
        assert table.schema.field("file").type == pa.dictionary(pa.int32(), pa.string())
        assert table.column("file").num_chunks >= 3           # a group per input at least
    n = len(dcpfast.read(SAMPLE))
    assert table.column_names == ["offset", "opcode", "opcode_name", "file"]
    assert table.column("file").to_pylist() == [name for name in given for _ in range(n)]
    assert table.column("offset").to_pylist()[n - 1:n + 1] == \
        [int(dcpfast.read(SAMPLE)["offset"][-1]), 0]


def test_convert_adds_no_file_column_for_one_dump(dumps, tmp_path):
    """One FILE, a directory or --pieces: one dump, and no ``file`` column."""
    folder = tmp_path / "pieces"
    folder.mkdir()
    data = SAMPLE.read_bytes()
    (folder / "a").write_bytes(data[:777])
    (folder / "b").write_bytes(data[777:])
    for name, args in (("one", [dumps["raw"]]), ("folder", [folder]),
                       ("pieces", ["--pieces", folder / "a", folder / "b"])):
        clean(run("convert", *args, "-o", tmp_path / f"{name}.parquet", "-q"), 0)
        table = pq.read_table(tmp_path / f"{name}.parquet")
        assert "file" not in table.column_names
        assert table.drop_columns(["opcode_name"]).equals(dcpfast.read(SAMPLE).to_arrow())


def test_convert_names_files_whose_names_are_not_utf8(dumps, tmp_path):
    odd = tmp_path / "d\udcff.dcp"                  # the byte 0xff, as click gives it
    odd.write_bytes(SAMPLE.read_bytes())
    out = tmp_path / "out.parquet"
    clean(run("convert", dumps["raw"], odd, "-o", out, "-q", "--columns", "offset"), 0)
    names = set(pq.read_table(out).column("file").to_pylist())
    assert names == {str(dumps["raw"]), str(tmp_path / "d\\xff.dcp")}


def test_convert_names_the_sample_and_an_empty_input(dumps, tmp_path):
    out = tmp_path / "out.parquet"
    clean(run("convert", dumps["empty"], dumps["empty"], "-o", out, "--columns", "offset"), 0)
    table = pq.read_table(out)
    assert table.num_rows == 0 and table.column_names == ["offset", "file"]
    clean(run("convert", dumps["empty"], "--sample", "-o", out, "--force", "-q"), 0)
    assert set(pq.read_table(out).column("file").to_pylist()) == {str(SAMPLE)}
