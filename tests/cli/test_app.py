"""The dcpfast command as a whole (``dcpfast.cli.app``): inputs of every kind (compressed,
standard input, captures), damaged files and bad arguments, and the command in a process
of its own."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.cli.app import printable
from dcpfast.testing import SAMPLE
from tests.cli.commands import PACK, SAMPLE_FRAMES, clean, run
from tests.cli.test_inventory import inventory_of


def test_bad_arguments():
    assert run("info").exit_code == 2
    assert run("info", "/no/such/file").exit_code == 1      # a bad file, not a bad usage
    assert run("info", "--errors", "ignore", "--sample").exit_code == 2


# -- inputs of every kind ------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(PACK))
def test_compressed_inputs_give_the_raw_results(dumps, kind):
    raw = run("info", "--json", dumps["raw"])
    packed = run("info", "--json", dumps[kind])
    clean(packed, 0)
    [a], [b] = json.loads(raw.output), json.loads(packed.output)
    assert b.pop("compression") == {"gz": "gzip", "zst": "zstd", "lz4": "lz4"}[kind]
    a.pop("compression"), a.pop("file"), b.pop("file")
    assert a == b
    head_raw = run("head", "-n", 50, dumps["raw"]).output
    assert run("head", "-n", 50, dumps[kind]).output == head_raw
    assert run("head", "-n", 50, "-", input=dumps[kind].read_bytes()).output == head_raw


def test_stdin(dumps):
    result = run("info", "-", input=SAMPLE.read_bytes())
    clean(result, 0)
    assert result.output.startswith(f"<stdin>: {SAMPLE_FRAMES} frames")


def test_bad_files(dumps):
    for name in ("garbage", "truncated", "cut-gz"):
        for command in (["info"], ["head"], ["convert", "-o", dumps["raw"].parent / "x.parquet"]):
            result = run(*command, dumps[name])
            clean(result, 1)
            last = result.output.splitlines()[-1]        # head lists the frames before it
            assert last.startswith("Error: ") and str(dumps[name]) in last
            assert command == ["head"] or result.output.startswith("Error: ")
            assert not (dumps["raw"].parent / "x.parquet").exists()
    result = run("info", "--errors", "skip", dumps["garbage"])      # no frame at all
    clean(result, 1)
    assert "no DCP frame in the input: all of its 3,000 bytes were skipped" in result.output
    result = run("info", "--json", "--errors", "skip", dumps["cut-gz"])
    clean(result, 0)
    assert "damaged gzip data" in json.loads(result.output)[0]["errors"][-1]["reason"]
    result = run("info", dumps["empty"])
    clean(result, 0)
    assert "0 frames" in result.output
    result = run("info", dumps["garbage"], dumps["raw"])        # one bad file of two
    clean(result, 1)
    assert f"{SAMPLE_FRAMES} frames" in result.output


def test_bad_command_arguments(dumps, tmp_path):
    for args in (["head", "--opcode", "nonsense", dumps["raw"]],
                 ["head", "--opcode", "300", dumps["raw"]],
                 ["head", "-n", "-1", dumps["raw"]],
                 ["head", "--vbucket", "70000", dumps["raw"]],
                 ["convert", dumps["raw"], "-o", tmp_path / "out.xlsx"],
                 ["convert", dumps["raw"], "-o", tmp_path / "out.csv", "--columns", "nope"],
                 ["convert", dumps["raw"]],
                 ["convert", "-o", tmp_path / "out.csv"],
                 ["bench", "--items", "0"],
                 ["nosuchcommand"]):
        clean(run(*args), 2)
    result = run("head", tmp_path)              # a directory with no dump in it
    clean(result, 1)
    assert "no dump files in" in result.output
    result = run("convert", dumps["raw"], "-o", tmp_path / "no" / "dir" / "out.parquet")
    clean(result, 1)
    assert "out.parquet" in result.output


def test_a_vbucket_given_twice_to_at_seqno_is_a_usage_error(tmp_path):
    for args in (["state", SAMPLE, "-o", tmp_path / "s.parquet"], ["diff", SAMPLE, SAMPLE]):
        result = run(*args, "--at-seqno", "5:5,7:1,5:6")
        clean(result, 2)
        assert "vbucket 5 is given twice" in result.output
        assert not (tmp_path / "s.parquet").exists()


# -- text from a dump, shown -------------------------------------------------------------------


def test_printable_escapes_what_a_terminal_would_act_on():
    assert printable("plain caf\u00e9, \u65e5\u672c") == "plain caf\u00e9, \u65e5\u672c"
    assert printable("a\x1b[31mb\x1b]0;title\x07") == "a\\x1b[31mb\\x1b]0;title\\x07"
    assert printable("\u009b\u0085\x7f\u2028\u202e\t\n\r") == \
        "\\x9b\\x85\\x7f\\u2028\\u202e\\t\\n\\r"
    assert printable(b"ok\xff\xc3 \xe2\x82") == "ok\\xff\\xc3 \\xe2\\x82"    # not UTF-8
    assert printable(os.fsdecode(b"caf\xe9")) == "caf\\xe9"        # a name's odd bytes
    assert printable("a\\x1b") == "a\\\\x1b"               # a backslash is not an escape
    assert printable(b"") == "" and printable("\ud800") == "\\ud800"


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
    found = inventory_of(dcpfast.pcap.read_pcap(path))
    assert sorted(found.connections.values()) == sorted(
        [len(dcpfast.scan(client)), len(dcpfast.scan(server))])
    assert found.frames == sum(found.connections.values())
    result = run("info", "--json", path)
    clean(result, 0)
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
    clean(mixed, 1)
    assert "cannot write these inputs together" in mixed.output and not out.exists()
    clean(run("convert", path, "-o", out, "--columns", "offset,opcode"), 0)
    table = pq.read_table(out)
    assert {"offset", "opcode", "timestamp", "src", "direction"} <= set(table.column_names)
    assert table.num_rows == summary["frames"]


# -- the installed command -----------------------------------------------------------------


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
