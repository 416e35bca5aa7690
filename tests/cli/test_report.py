"""``dcpfast report``: the page and the JSON, options, one-line errors, signals."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast.cli import main
from dcpfast.testing import SAMPLE, SAMPLE_CLIENT, SAMPLE_PCAP
from tests.report_scenarios import known

has_bokeh = importlib.util.find_spec("bokeh") is not None


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.mark.skipif(not has_bokeh, reason="the page needs the report extra")
def test_report_on_the_sample(tmp_path):
    page, figures = tmp_path / "r.html", tmp_path / "r.json"
    result = run("report", "--sample", "-o", page, "--json", figures)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {figures} (")
    assert "1,190 frames, 1 connections, 4 streams, 1 stalls, 0 anomalies" in result.output
    written = json.loads(figures.read_text())
    want = dcpfast.report(SAMPLE_PCAP).figures
    assert {k: v for k, v in written.items() if k != "inputs"} == \
        {k: v for k, v in want.items() if k != "inputs"}
    assert "vb 848 stalled 12.5 s" in page.read_text()


def test_report_json_of_dumps_with_options(tmp_path):
    out = tmp_path / "r.json"
    result = run("report", SAMPLE, SAMPLE_CLIENT, "--json", out, "--stall-seconds", "0.5",
                 "--threads", "2")
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert figures["time"]["clock"] == "cas" and figures["stall_seconds"] == 0.5
    assert [c["name"] for c in figures["connections"]] == ["sample.dcp + sample-client.dcp"]
    assert sum(s["requests"] for s in figures["streams"]) == 4


def test_report_of_standard_input(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["report", "-", "--json", str(out)],
                                input=SAMPLE_PCAP.read_bytes())
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert figures["inputs"][0]["name"] == "<stdin>" and len(figures["stalls"]) == 1


def test_report_ports_and_usage(tmp_path):
    out = tmp_path / "r.json"
    assert run("report", SAMPLE_PCAP, "--port", "11211", "--json", out).exit_code == 0
    assert json.loads(out.read_text())["frames"] == 0           # no traffic on that port
    assert run("report").exit_code == 2
    assert run("report", SAMPLE_PCAP).exit_code == 2            # no output named
    assert run("report", SAMPLE_PCAP, "--json", out, "--stall-seconds", "0").exit_code == 2
    wrong = run("report", SAMPLE_PCAP, "-o", tmp_path / "r.json")     # a page named .json
    assert wrong.exit_code == 2 and "unknown extension; use one of .html, .htm" in wrong.output
    assert "written to files" in run("report", SAMPLE_PCAP, "--json", "-").output
    wrong = run("report", SAMPLE_PCAP, "--json", tmp_path / "r.html")
    assert wrong.exit_code == 2 and "Invalid value for '--json'" in wrong.output
    assert not (tmp_path / "r.html").exists()


def test_report_errors_are_one_line(tmp_path):
    out = tmp_path / "r.json"
    assert "No such file" in _one_line_error(run("report", tmp_path / "none.dcp", "--json", out))
    assert not out.exists()
    script = known()
    server, _ = script.dumps()
    damaged = bytearray(server)
    at = int(dcpfast.scan(server)["offset"][40])
    damaged[at] = 0x42
    path = tmp_path / "damaged.dcp"
    path.write_bytes(bytes(damaged))
    line = _one_line_error(run("report", path, "--json", out))
    assert line.startswith(f"Error: {path}: at byte {at}") and "--errors skip" in line
    assert not out.exists()                              # nothing half-written is left
    assert run("report", path, "--json", out, "--errors", "skip").exit_code == 0
    assert json.loads(out.read_text())["anomaly_counts"]["damaged_bytes"] >= 1
    assert "already exists" in _one_line_error(run("report", path, "--json", out))
    assert run("report", path, "--json", out, "--errors", "skip", "--force").exit_code == 0
    assert "report them apart" in _one_line_error(run("report", SAMPLE, SAMPLE_PCAP, "--json",
                                                      tmp_path / "mixed.json"))
    named = tmp_path / "dump.json"                       # an input the output would destroy
    named.write_bytes(bytes(damaged))
    assert "also an input" in _one_line_error(run("report", named, "--json", named, "--force"))
    assert "No such file" in _one_line_error(run("report", SAMPLE, "--json",
                                                 tmp_path / "no" / "r.json"))


def test_report_without_the_extra_says_how_to_get_it(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "bokeh" else real(name, *a))
    line = _one_line_error(run("report", SAMPLE_PCAP, "-o", tmp_path / "r.html"))
    assert "pip install 'dcpfast[report]'" in line
    assert run("report", SAMPLE_PCAP, "--json", tmp_path / "r.json").exit_code == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_report_reads_leaves_nothing(tmp_path, signum):
    """``report`` ended by a signal while it waits for more input ends by that signal,
    with no traceback and no output left."""
    page, figures = tmp_path / "r.html", tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "dcpfast", "report", "-", "-o", str(page),
                             "--json", str(figures)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        data = SAMPLE_PCAP.read_bytes()
        proc.stdin.write(data[:len(data) // 2])
        proc.stdin.flush()
        time.sleep(3)                           # it has read that half and waits for more
        proc.send_signal(signum)
        _, said = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signum, said
    assert b"Traceback" not in said and b"Aborted" not in said, said
    assert not page.exists() and not figures.exists()


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e300", "0", "-1"])
def test_the_stall_threshold_is_a_finite_number_above_0(tmp_path, value):
    out = tmp_path / "r.json"
    result = run("report", SAMPLE_PCAP, "--json", out, "--stall-seconds", value)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--stall-seconds'" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_an_input_named_in_bytes_that_are_not_utf8(tmp_path):
    """The name is shown with the bytes that are not UTF-8 escaped (``\\xe9``): the page is
    written and the JSON is valid UTF-8."""
    name = os.path.join(os.fsencode(tmp_path), b"caf\xe9.pcap")
    with open(name, "wb") as f:
        f.write(SAMPLE_PCAP.read_bytes())
    page, out = tmp_path / "r.html", tmp_path / "r.json"
    args = [os.fsdecode(name), "--json", out] + (["-o", page] if has_bokeh else [])
    result = run("report", *args)
    assert result.exit_code == 0, result.output
    text = out.read_bytes().decode("utf-8")
    assert json.loads(text)["inputs"][0]["name"] == "caf\\xe9.pcap"
    assert "\\udc" not in text
    if has_bokeh:
        assert "caf\\xe9.pcap" in page.read_bytes().decode("utf-8")
