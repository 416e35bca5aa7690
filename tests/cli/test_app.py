"""The dcpfast command on the bundled sample, on synthetic, compressed and captured
inputs, on damaged files and on bad arguments."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import cli
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.cli.inventory import Inventory
from dcpfast.protocol import Opcode
from dcpfast.testing import SAMPLE

#: The frames of the bundled sample, as the command counts them.
SAMPLE_FRAMES = f"{len(dcpfast.read(SAMPLE)):,}"


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def test_info_on_the_sample():
    result = run("info", "--sample")
    assert result.exit_code == 0, result.output
    batch = dcpfast.read(SAMPLE)
    assert f"{len(batch):,} frames" in result.output and "collections on" in result.output
    mutations = int((batch["opcode"] == dcpfast.Opcode.MUTATION).sum())
    assert re.search(rf"MUTATION\s+{mutations:,}\n", result.output)
    for vb in set(batch["vbucket"][batch.validity("vbucket")].tolist()) - {0}:
        assert re.search(rf"\n\s+{vb}\s+\d", result.output)


def test_sample_is_a_clean_collections_stream():
    batch = dcpfast.read(SAMPLE)
    assert batch.collections and not batch.errors and len(batch) > 1000
    kinds = set(batch["opcode"].tolist())
    assert {0x56, 0x57, 0x58, 0x59, 0x5f, 0x60, 0x62, 0x63} <= kinds


def test_damaged_file(tmp_path):
    path = tmp_path / "cut.dcp"
    path.write_bytes(SAMPLE.read_bytes()[:1000])
    result = run("info", str(path))
    assert result.exit_code == 1
    assert "truncated frame" in result.output and "Traceback" not in result.output
    result = run("info", "--errors", "skip", str(path))
    assert result.exit_code == 0 and "1 skipped regions" in result.output


def test_bad_arguments():
    assert run("info").exit_code == 2
    assert run("info", "/no/such/file").exit_code == 1      # a bad file, not a bad usage
    assert run("info", "--errors", "ignore", "--sample").exit_code == 2


def _inventory(batches) -> Inventory:
    found = Inventory()
    for batch in batches:
        found.update(batch)
    return found


def test_inventory_counts_from_first_principles():
    """The counts of ``Inventory`` over many batches of a damaged stream equal the same
    counts taken frame by frame in plain Python from the decoded columns."""
    data = t.synthetic_stream(3000, seed=5, vbuckets=7, collections=True, sync_writes=True)
    cut = len(data) // 3
    damaged = data[:cut] + b"\x00" * 50 + data[cut:]
    chunks = [damaged[i:i + 50_000] for i in range(0, len(damaged), 50_000)]
    batches = list(dcpfast.iter_batches(chunks, 64 << 10, collections=True, errors="skip",
                                        columns=[*Inventory.COLUMNS, "magic"]))
    assert len(batches) > 5 and sum(len(b.errors) for b in batches) >= 1
    found = _inventory(batches)

    documents = {Opcode.MUTATION, Opcode.DELETION, Opcode.EXPIRATION, Opcode.PREPARE,
                 Opcode.COMMIT, Opcode.ABORT}
    frames = size = 0
    opcodes, collections, vbuckets = Counter(), Counter(), {}
    for b in batches:
        for op, vb, seqno, cid, body, magic in zip(
                b["opcode"].tolist(), b["vbucket"].tolist(), b["by_seqno"].tolist(),
                b["collection_id"].tolist(), b["body_len"].tolist(), b["magic"].tolist()):
            frames += 1
            size += 24 + body
            opcodes[op] += 1
            # a vbucket's frames: its requests, not the connection's (NOOP, Open, Control)
            if magic not in (0x80, 0x08) or op in (0x1F, 0x50, 0x5C, 0x5D, 0x5E):
                continue
            entry = vbuckets.setdefault(vb, [0, 0, []])
            entry[0] += 1
            if op in documents:
                entry[1] += 1
                entry[2].append(seqno)
                collections[cid] += 1
    assert found.frames == frames and found.bytes == size and found.collections_on
    assert {op: n for op, n in enumerate(found.opcodes.tolist()) if n} == dict(opcodes)
    assert found.collections == collections and len(collections) > 1
    assert {vb: (v.frames, v.documents, v.first_seqno, v.last_seqno)
            for vb, v in found.vbuckets.items()} == \
        {vb: (n, docs, min(s) if s else None, max(s) if s else None)
         for vb, (n, docs, s) in vbuckets.items()}
    assert len(vbuckets) == 7 and 0 not in found.vbuckets
    assert found.skipped == [r for b in batches for r in b.errors]
    assert not found.connections

    plain = _inventory(dcpfast.iter_batches([damaged], errors="skip", collections=False))
    assert plain.frames == frames and not plain.collections and not plain.collections_on
    empty = Inventory()
    assert empty.frames == 0 and empty.collections_on is None and not empty.vbuckets


# -- inputs of every kind ------------------------------------------------------------------

def _zstd(data):
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    return zstd.compress(data[:3000]) + zstd.compress(data[3000:])


def _lz4(data):
    import lz4.frame
    return lz4.frame.compress(data[:3000]) + lz4.frame.compress(data[3000:])


PACK = {"gz": lambda d: gzip.compress(d[:3000]) + gzip.compress(d[3000:]), "zst": _zstd,
        "lz4": _lz4}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """The sample raw and in every codec, plus damaged files."""
    root = tmp_path_factory.mktemp("dumps")
    data = SAMPLE.read_bytes()
    paths = {"raw": root / "sample.dcp"}
    paths["raw"].write_bytes(data)
    for ext, pack in PACK.items():
        paths[ext] = root / f"sample.dcp.{ext}"
        paths[ext].write_bytes(pack(data))
    for name, content in (("garbage", os.urandom(3000)), ("empty", b""),
                          ("truncated", data[:1000]), ("cut-gz", gzip.compress(data)[:-20])):
        paths[name] = root / name
        paths[name].write_bytes(content)
    return paths


def _clean(result, code):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_info_json_matches_the_scan(dumps):
    batch = dcpfast.read(SAMPLE)
    result = run("info", "--json", dumps["raw"])
    _clean(result, 0)
    [summary] = json.loads(result.output)
    assert summary["frames"] == len(batch) and summary["errors"] == []
    assert summary["bytes"] == len(SAMPLE.read_bytes())
    assert summary["opcodes"]["MUTATION"] == int((batch["opcode"] == 0x57).sum())
    for vb, entry in summary["vbuckets"].items():
        mine = batch["vbucket"] == int(vb)
        assert entry["frames"] == int((mine & batch.validity("vbucket")).sum())
    mutations = batch.only("mutation", "deletion", "expiration", "prepare", "commit", "abort")
    assert sum(summary["documents_by_collection"].values()) == len(mutations)
    assert {int(c, 16) for c in summary["documents_by_collection"]} == \
        set(mutations["collection_id"].tolist())


@pytest.mark.parametrize("kind", sorted(PACK))
def test_compressed_inputs_give_the_raw_results(dumps, kind):
    raw = run("info", "--json", dumps["raw"])
    packed = run("info", "--json", dumps[kind])
    _clean(packed, 0)
    [a], [b] = json.loads(raw.output), json.loads(packed.output)
    assert b.pop("compression") == {"gz": "gzip", "zst": "zstd", "lz4": "lz4"}[kind]
    a.pop("compression"), a.pop("file"), b.pop("file")
    assert a == b
    head_raw = run("head", "-n", 50, dumps["raw"]).output
    assert run("head", "-n", 50, dumps[kind]).output == head_raw
    assert run("head", "-n", 50, "-", input=dumps[kind].read_bytes()).output == head_raw


def test_stdin(dumps):
    result = run("info", "-", input=SAMPLE.read_bytes())
    _clean(result, 0)
    assert result.output.startswith(f"<stdin>: {SAMPLE_FRAMES} frames")


def test_head_lines_follow_the_frames(dumps):
    batch = dcpfast.read(SAMPLE)
    result = run("head", dumps["raw"])
    _clean(result, 0)
    title, *lines = result.output.splitlines()
    assert title.split() == ["offset", "opcode", "vb", "seqno", "key", "value", "datatype"]
    assert len(lines) == 20
    assert [int(line.split()[0]) for line in lines] == batch["offset"][:20].tolist()
    vb = int(batch.only("mutation")["vbucket"][-1])
    lines = run("head", "-n", 5, "--opcode", "mutation", "--opcode", "0x5a", "--vbucket",
                vb, dumps["raw"]).output.splitlines()[1:]
    wanted = np.flatnonzero(np.isin(batch["opcode"], [0x57, 0x5a]) &
                            (batch["vbucket"] == vb))[:5]
    assert [int(line.split()[0]) for line in lines] == batch["offset"][wanted].tolist()
    i = int(wanted[0])
    frame = batch.frame(i)
    key = batch.key(i).decode()
    assert re.search(rf"MUTATION\s+{vb}\s+{frame.by_seqno} rev {frame.rev_seqno}\s+"
                     rf"\[0x{frame.collection_id:x}\] {re.escape(key)}\s+"
                     rf"{len(batch.value(i)):,}\s+", lines[0])
    assert run("head", "-n", 0, dumps["raw"]).output == ""


def test_head_escapes_and_truncates_keys(tmp_path):
    path = tmp_path / "keys.dcp"
    path.write_bytes(t.mutation(b"\x00tab\there" + b"x" * 60, b"{}", by_seqno=9,
                                datatype=1, vbucket=5))
    result = run("head", "--no-collections", path)
    _clean(result, 0)
    line = result.output.splitlines()[1]
    assert "\\x00tab\\there" in line and "..." in line and line.endswith("json")


def test_bad_files(dumps):
    for name in ("garbage", "truncated", "cut-gz"):
        for command in (["info"], ["head"], ["convert", "-o", dumps["raw"].parent / "x.parquet"]):
            result = run(*command, dumps[name])
            _clean(result, 1)
            last = result.output.splitlines()[-1]        # head lists the frames before it
            assert last.startswith("Error: ") and str(dumps[name]) in last
            assert command == ["head"] or result.output.startswith("Error: ")
            assert not (dumps["raw"].parent / "x.parquet").exists()
    result = run("info", "--errors", "skip", dumps["garbage"])
    _clean(result, 0)
    assert "skipped" in result.output
    result = run("info", "--json", "--errors", "skip", dumps["cut-gz"])
    _clean(result, 0)
    assert "damaged gzip data" in json.loads(result.output)[0]["errors"][-1]["reason"]
    result = run("info", dumps["empty"])
    _clean(result, 0)
    assert "0 frames" in result.output
    result = run("info", dumps["garbage"], dumps["raw"])        # one bad file of two
    _clean(result, 1)
    assert f"{SAMPLE_FRAMES} frames" in result.output


def test_bad_command_arguments(dumps, tmp_path):
    for args in (["head", "--opcode", "nonsense", dumps["raw"]],
                 ["head", "--opcode", "300", dumps["raw"]],
                 ["head", "-n", "-1", dumps["raw"]],
                 ["head", "--vbucket", "70000", dumps["raw"]],
                 ["head", tmp_path],
                 ["convert", dumps["raw"], "-o", tmp_path / "out.xlsx"],
                 ["convert", dumps["raw"], "-o", tmp_path / "out.csv", "--columns", "nope"],
                 ["convert", dumps["raw"]],
                 ["convert", "-o", tmp_path / "out.csv"],
                 ["bench", "--items", "0"],
                 ["nosuchcommand"]):
        _clean(run(*args), 2)
    result = run("convert", dumps["raw"], "-o", tmp_path / "no" / "dir" / "out.parquet")
    _clean(result, 1)
    assert "out.parquet" in result.output


# -- convert ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ext", ["parquet", "arrow", "feather"])
def test_convert_reads_back_as_the_scan(dumps, tmp_path, ext):
    out = tmp_path / f"out.{ext}"
    _clean(run("convert", dumps["zst"], "-o", out), 0)
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
    _clean(run("convert", dumps["raw"], dumps["lz4"], "-o", out, "-q",
               "--columns", "offset,opcode", "--columns", "key"), 0)
    table = pq.read_table(out)
    one = dcpfast.read(SAMPLE, columns=["offset", "opcode", "key"]).to_arrow()
    assert table.column_names == ["offset", "opcode", "opcode_name", "key_offset", "key_len", "key"]
    assert table.drop_columns(["opcode_name"]).equals(pa.concat_tables([one, one]))


def test_convert_csv(dumps, tmp_path):
    out = tmp_path / "out.csv"
    _clean(run("convert", dumps["raw"], "-o", out, "--columns", "offset,vbucket,key"), 0)
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
    _clean(run("convert", dumps["empty"], "-o", out, "--columns", "offset,key"), 0)
    table = pq.read_table(out)
    assert table.num_rows == 0 and table.schema.equals(dcpfast.arrow_schema(["offset", "key"]))


def test_convert_values(dumps, tmp_path):
    out = tmp_path / "values.parquet"
    _clean(run("convert", dumps["gz"], "-o", out, "--columns", "offset,opcode", "--values"), 0)
    table = pq.read_table(out)
    batch = dcpfast.read(SAMPLE)
    found = batch.values()
    assert table.column_names == ["offset", "opcode", "opcode_name", "body", "xattrs",
                                  "is_json"]
    rows = np.asarray(found.column("index"))
    assert table.column("body").take(pa.array(rows)).equals(found.column("body"))
    others = np.setdiff1d(np.arange(len(batch)), rows)
    assert table.column("body").take(pa.array(others)).null_count == len(others)


# -- captures --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    pytest.importorskip("dcpfast.pcap")
    client = t.synthetic_stream(30, seed=1)
    server = t.synthetic_stream(10, seed=2, handshake=False)
    segments = t.tcp_conversation(client, server, sizes=(700, 1448), seed=3)
    data = t.pcap_file(t.tcp_packets(segments))
    root = tmp_path_factory.mktemp("capture")
    (root / "cap.pcap").write_bytes(data)
    (root / "cap.pcap.gz").write_bytes(gzip.compress(data))
    return root / "cap.pcap", client, server


def test_capture_commands(capture, tmp_path):
    path, client, server = capture
    found = _inventory(dcpfast.pcap.read_pcap(path))
    assert sorted(found.connections.values()) == sorted(
        [len(dcpfast.scan(client)), len(dcpfast.scan(server))])
    assert found.frames == sum(found.connections.values())
    result = run("info", "--json", path)
    _clean(result, 0)
    [summary] = json.loads(result.output)
    assert summary["capture"] and summary["frames"] == len(dcpfast.scan(client)) + \
        len(dcpfast.scan(server))
    assert sorted(c["frames"] for c in summary["connections"]) == sorted(
        [len(dcpfast.scan(client)), len(dcpfast.scan(server))])
    packed = json.loads(run("info", "--json", f"{path}.gz").output)[0]
    assert packed.pop("compression") == "gzip" and packed.pop("file") != summary.pop("file")
    summary.pop("compression")
    assert packed == summary
    lines = run("head", "-n", 3, path).output.splitlines()
    assert lines[1].startswith("# 10.0.0.") and len(lines) == 5
    out = tmp_path / "cap.parquet"
    mixed = run("convert", path, SAMPLE, "-o", out)
    _clean(mixed, 1)
    assert "cannot write these inputs together" in mixed.output and not out.exists()
    _clean(run("convert", path, "-o", out, "--columns", "offset,opcode"), 0)
    table = pq.read_table(out)
    assert {"offset", "opcode", "timestamp", "src", "direction"} <= set(table.column_names)
    assert table.num_rows == summary["frames"]


# -- bench and the installed command ---------------------------------------------------------

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def suite(monkeypatch):
    """``benchmarks/suite`` of the source tree (skipped where the tests run without it)."""
    if not (BENCHMARKS / "suite" / "__init__.py").is_file():
        pytest.skip("the benchmark suite lives in the source tree's benchmarks/")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import suite.corpora
    import suite.scan
    import suite.table
    return suite


def test_bench_prints_its_table(suite, tmp_path):
    from dcpfast.cli.bench import BENCH_SCRIPT
    from tests.cores import COMPILED
    if not os.path.isfile(BENCH_SCRIPT):
        pytest.skip("dcpfast bench runs the suite of the checkout dcpfast is installed from")
    if not COMPILED or dcpfast.IMPLEMENTATION != "cython":
        result = run("bench", "--quick")
        assert result.exit_code == 2
        return
    table = suite.table
    readme = tmp_path / "benchmarks.md"
    readme.write_text(f"# speed\n{table.BEGIN}\nold table\n{table.END}\nafter\n")
    small = ("--items", 2000, "--python-items", 500, "--repeat", 1, "--no-rss")
    result = run("bench", *small, "--json", tmp_path / "b.json", "--cache", tmp_path,
                 "--readme", readme)
    _clean(result, 0)
    assert "checks passed" in result.output
    assert f"scan, all {len(dcpfast.COLUMNS)} columns" in result.output
    report = json.loads((tmp_path / "b.json").read_text())
    assert list(report["corpora"]) == list(suite.corpora.CORPUS_NAMES)
    assert report["corpora"]["mixed"]["items"] == 2000
    assert {t["met"] for t in report["targets"]} <= {True, False, None}
    text = readme.read_text()
    assert "old table" not in text and text.endswith(f"{table.END}\nafter\n")
    assert f"| `scan`, all {len(dcpfast.COLUMNS)} columns |" in text
    again = run("bench", *small, "--corpus", "small", "--cache", tmp_path)
    assert "corpus small" in again.output and "corpus mixed" not in again.output
    assert "(cache " in again.output
    # the table rewritten from the JSON report alone is the one the run wrote
    copy = tmp_path / "copy.md"
    copy.write_text(f"{table.BEGIN}\n{table.END}\n")
    assert suite.scan.main(["--readme", str(copy), "--from-json", str(tmp_path / "b.json")]) == 0
    assert copy.read_text() == text[len("# speed\n"):-len("after\n")]


def test_bench_table_needs_a_marked_file(suite, tmp_path, capfd):
    report = tmp_path / "report.json"
    report.write_text("{}")
    unmarked = tmp_path / "unmarked.md"
    unmarked.write_text("# no markers\n")
    for target, why in ((tmp_path / "missing.md", "does not exist"),
                        (unmarked, "has no benchmark markers")):
        with pytest.raises(SystemExit) as stopped:
            suite.scan.main(["--readme", str(target), "--from-json", str(report)])
        assert stopped.value.code == 2
        assert why in capfd.readouterr().err
    assert unmarked.read_text() == "# no markers\n"


def test_bench_corpus_choices_are_the_suites(suite):
    option = next(p for p in cli.bench.bench.params if p.name == "corpora")
    assert tuple(option.type.choices) == suite.corpora.CORPUS_NAMES


def test_bench_outside_a_source_tree(monkeypatch, tmp_path):
    """An installed dcpfast (no benchmark suite beside it) does not list ``bench``, and
    says in one line where the suite lives if asked for it anyway."""
    script = tmp_path / "checkout" / "benchmarks" / "bench_scan.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    monkeypatch.setattr(cli.bench, "BENCH_SCRIPT", str(script))    # a checkout's suite
    assert "bench" in run("--help").output.split("Commands:")[1]
    monkeypatch.setattr(cli.bench, "BENCH_SCRIPT", str(tmp_path / "benchmarks" / "bench_scan.py"))
    assert "bench" not in run("--help").output.split("Commands:")[1]
    result = run("bench", "--quick")
    _clean(result, 1)
    assert result.output.startswith("Error: ") and len(result.output.splitlines()) == 1
    assert "benchmarks/" in result.output


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("bench_*.py")))
def test_benchmark_scripts_start(suite, script, tmp_path):
    """Every benchmark script finds the suite next to it, from any directory, even with
    the script's directory left off ``sys.path`` (``python -P``)."""
    if script == "bench_spark.py":
        pytest.importorskip("pyspark")
    done = subprocess.run([sys.executable, "-P", str(BENCHMARKS / script), "--help"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


def _command():
    found = shutil.which("dcpfast", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "dcpfast"]


def test_the_command_in_a_process(dumps):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([*_command(), "info", dumps["zst"]], capture_output=True, env=env,
                          timeout=120)
    assert done.returncode == 0 and f"{SAMPLE_FRAMES} frames".encode() in done.stdout, \
        done.stderr
    done = subprocess.run([*_command(), "head", dumps["garbage"]], capture_output=True,
                          env=env, timeout=120)
    assert done.returncode == 1 and done.stderr.startswith(b"Error: ")
    assert b"Traceback" not in done.stderr
    # a reader that stops early: no traceback, no "Exception ignored"
    head = subprocess.Popen([*_command(), "head", "-n", "2000", dumps["raw"]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    head.stdout.readline()
    head.stdout.close()
    err = head.stderr.read()
    head.wait(timeout=120)
    assert head.returncode != 0 and b"Traceback" not in err and b"Exception" not in err, err
