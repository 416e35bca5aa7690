"""The samples bundled with dcpfast: ``dcpfast.testing.sample_files()`` makes them again,
byte for byte, each shows what the documentation's examples read from it (the server's
side, the client's requests, a capture of both directions), and the examples of the README
and of docs/streams.md and docs/captures.md, run on them, show something.

``python tests/testing/test_samples.py`` rewrites them after a change of the generators.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dcpfast
from dcpfast import streams
from dcpfast.pcap import read_pcap
from dcpfast.testing import SAMPLE, SAMPLE_CLIENT, SAMPLE_NAMES, SAMPLE_PCAP, sample_files

PATHS = {"sample.dcp": SAMPLE, "sample-client.dcp": SAMPLE_CLIENT,
         "sample.pcap": SAMPLE_PCAP}


def test_the_paths_name_every_sample():
    assert sorted(PATHS) == sorted(SAMPLE_NAMES)
    assert {p.parent for p in PATHS.values()} == {SAMPLE.parent}


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_the_samples_regenerate_byte_for_byte(name):
    made = sample_files()[name]
    assert PATHS[name].read_bytes() == made, \
        f"{name} differs from dcpfast.testing.sample_files(): python tests/testing/test_samples.py"


def test_the_server_side_is_a_clean_stream():
    batch = dcpfast.read(SAMPLE)
    assert batch.collections and not batch.errors
    assert len(streams.failover_logs(batch)) and len(streams.stream_ends(batch))
    assert not streams.summarize([batch]).anomalies


def test_the_client_side_holds_the_setup():
    batch = dcpfast.read(SAMPLE_CLIENT)
    assert not batch.errors
    assert len(streams.opens(batch)) == 1
    assert len(streams.controls(batch)) >= 3
    requested = streams.stream_requests(batch).column("vbucket").to_pylist()
    server = dcpfast.read(SAMPLE)
    assert sorted(requested) == sorted(set(server.only("mutation")["vbucket"].tolist()))


def test_the_capture_holds_both_sides():
    sides = {b.connection.direction: b for b in read_pcap(SAMPLE_PCAP)}
    assert set(sides) == {"client->server", "server->client"}
    client, server = sides["client->server"], sides["server->client"]
    assert client.to_arrow().select(dcpfast.read(SAMPLE_CLIENT).columns).equals(
        dcpfast.read(SAMPLE_CLIENT).to_arrow().select(client.columns))
    assert len(server) == len(dcpfast.read(SAMPLE))
    assert not client.errors and not server.errors


ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_starts_output_is_ignored():
    """What the README's quick start writes (``--out DIR``) is not for committing."""
    if not (ROOT / ".gitignore").is_file():
        pytest.skip("needs the source tree's .gitignore")
    outputs = re.findall(r"--out ([\w.-]+/)", (ROOT / "README.md").read_text())
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert outputs and all(out.rstrip("/") + "/" in ignored for out in outputs)


def test_the_docs_call_the_failover_column_vbucket_uuid():
    """The column is ``vbucket_uuid`` in every table that has one; no page says ``uuid``."""
    assert "vbucket_uuid" in streams.failover_logs(dcpfast.read(SAMPLE)).column_names
    assert "vbucket_uuid" in streams.stream_requests(dcpfast.read(SAMPLE_CLIENT)).column_names
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        if page.is_file():
            assert not re.search(r"(?<!\w)uuid\b", page.read_text()), page.name
#: The pages whose Python examples read the samples (the Spark ones run in
#: tests/spark/test_datasource.py).
EXAMPLES = ["README.md", "docs/streams.md", "docs/captures.md"]


def _python_blocks(page: Path) -> list[str]:
    blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(), re.M | re.S)
    return [b for b in blocks if "spark" not in b]


#: What an example's comment says when the samples hold nothing for it.
NONE_IN_THE_SAMPLE = "the sample has none"


def _empty(value) -> bool:
    """A table, batch, array, dict or list (or a tuple of them) that shows nothing."""
    if isinstance(value, tuple):
        return any(_empty(v) for v in value if not isinstance(v, list))   # errors may be []
    if isinstance(value, (pa.Table, dcpfast.FrameBatch, np.ndarray, dict, list)):
        return len(value) == 0
    return False


@pytest.mark.parametrize("page", EXAMPLES)
def test_the_examples_show_something_on_the_samples(page, tmp_path, monkeypatch):
    """Each block runs in turn in one namespace, in a folder of its own (what the
    examples write lands there); every expression statement and every name an assignment
    binds must show something (an empty table is a failing example), unless the comment
    after it says the samples hold none."""
    pytest.importorskip("duckdb")
    monkeypatch.chdir(tmp_path)
    path = ROOT / page
    if not path.is_file():
        pytest.skip(f"needs the source tree's {page}")
    scope: dict = {}
    for block in _python_blocks(path):
        lines = block.splitlines()
        for statement in ast.parse(block).body:
            code = ast.Module([statement], type_ignores=[])
            shown = []
            if isinstance(statement, ast.Expr):
                shown.append(eval(compile(ast.Expression(statement.value), page, "eval"), scope))
            else:
                exec(compile(code, page, "exec"), scope)
                if isinstance(statement, ast.Assign):
                    shown += [scope[t.id] for t in statement.targets if isinstance(t, ast.Name)]
            said = "\n".join(lines[statement.lineno - 1:statement.end_lineno + 1])
            if NONE_IN_THE_SAMPLE not in said:
                assert not any(_empty(v) for v in shown), \
                    f"{page}: {ast.get_source_segment(block, statement)} shows nothing"
    assert scope, f"{page} has no Python example"


if __name__ == "__main__":
    for name, data in sample_files().items():
        PATHS[name].write_bytes(data)
        print(f"{PATHS[name]}: {len(data):,} bytes")
    sys.exit(0)


def test_sample_is_a_clean_collections_stream():
    batch = dcpfast.read(SAMPLE)
    assert batch.collections and not batch.errors and len(batch) > 1000
    kinds = set(batch["opcode"].tolist())
    assert {0x56, 0x57, 0x58, 0x59, 0x5f, 0x60, 0x62, 0x63} <= kinds
