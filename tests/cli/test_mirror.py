"""``dcpfast mirror``: one line per run, what waits said, errors in one line."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from dcpfast.testing import SAMPLE
from tests.cli.commands import ENV, command, run

deltalake = pytest.importorskip("deltalake")


def test_a_rollback_names_the_vbuckets_built_anew(tmp_path):
    from tests.mirror.test_tail import reconnected

    before, after = reconnected("rollback")
    dump, table = tmp_path / "d.dcp", tmp_path / "t.delta"
    dump.write_bytes(before)
    assert run("mirror", dump, "--to", table).exit_code == 0
    dump.write_bytes(before + after)
    result = run("mirror", dump, "--to", table)
    assert result.exit_code == 0, result.output
    assert "rolled back: vbuckets 5 built anew from the stream's start" in result.output


def test_runs_as_the_dump_grows(tmp_path):
    data = SAMPLE.read_bytes()
    dump, table = tmp_path / "d.dcp", tmp_path / "t.delta"
    dump.write_bytes(data[:len(data) // 2 + 5])
    result = run("mirror", dump, "--to", table)
    assert result.exit_code == 0, result.output
    assert "version 0 (run 1)" in result.output and "waiting" in result.output
    result = run("mirror", dump, "--to", table)
    assert result.exit_code == 0 and "nothing new since run 1" in result.output
    dump.write_bytes(data)
    result = run("mirror", dump, "--to", table)
    assert result.exit_code == 0 and "version 1 (run 2)" in result.output
    assert deltalake.DeltaTable(str(table)).to_pyarrow_table().num_rows == \
        int(result.output.split(" in the table")[0].rsplit(", ", 1)[1].replace(",", ""))
    result = run("mirror", "--sample", "--to", tmp_path / "s.delta", "--history",
                 tmp_path / "h.delta")
    assert result.exit_code == 0, result.output
    assert "h.delta: version 0 (run 1)" in result.output
    assert "__END_AT" in deltalake.DeltaTable(str(tmp_path / "h.delta")).schema().to_arrow() \
        .names


def test_errors_in_one_line(tmp_path):
    result = run("mirror", tmp_path / "none.dcp", "--to", tmp_path / "t")
    assert result.exit_code == 1 and "none.dcp" in result.output
    dump = tmp_path / "d.dcp"
    dump.write_bytes(SAMPLE.read_bytes())
    deltalake.write_deltalake(tmp_path / "plain", __import__("pyarrow").table({"x": [1]}))
    result = run("mirror", dump, "--to", tmp_path / "plain")
    assert result.exit_code == 1 and "no dcpfast mirror wrote" in result.output
    assert "Traceback" not in result.output


def _grown_after_a_run(where: Path) -> tuple[Path, Path, int, object]:
    """A dump cut in half, mirrored once, then grown whole: the dump, the table, its
    version and its rows."""
    data = SAMPLE.read_bytes()
    dump, table = where / "d.dcp", where / "t.delta"
    dump.write_bytes(data[:len(data) // 2])
    assert run("mirror", dump, "--to", table).exit_code == 0
    dump.write_bytes(data)
    held = deltalake.DeltaTable(str(table))
    return dump, table, held.version(), held.to_pyarrow_table()


def _unchanged(table: Path, version: int, rows) -> bool:
    now = deltalake.DeltaTable(str(table))
    return now.version() == version and now.to_pyarrow_table().equals(rows)


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs file size limits")
def test_a_write_that_fails_leaves_the_table_as_it_was(tmp_path):
    """A file size limit fails the run's writes as a full disk does: one line, nothing
    committed; the first run likewise, which leaves no table; without the limit the same
    runs then commit."""
    dump, table, version, rows = _grown_after_a_run(tmp_path)

    def limited():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # the write fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 10, 1 << 10))

    done = subprocess.run(command("mirror", dump, "--to", table), capture_output=True,
                          text=True, env=ENV, timeout=300, preexec_fn=limited)
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"Error: {table}: the run could not be written (")
    assert os.strerror(errno.EFBIG) in lines[0] and "nothing of it was committed" in lines[0]
    assert _unchanged(table, version, rows)
    first = tmp_path / "first.delta"
    done = subprocess.run(command("mirror", dump, "--to", first), capture_output=True,
                          text=True, env=ENV, timeout=300, preexec_fn=limited)
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"Error: {first}: the run could not be written (")
    with pytest.raises(deltalake.exceptions.TableNotFoundError):
        deltalake.DeltaTable(str(first))
    for target, number in ((table, "version 1 (run 2)"), (first, "version 0 (run 1)")):
        result = run("mirror", dump, "--to", target)
        assert result.exit_code == 0 and number in result.output, result.output


def test_a_table_it_may_not_write_is_refused_in_one_line():
    """Run by a user who may read the table but not write it: one line, the table as it
    was (as root, the run is made by the unprivileged user ``nobody``)."""
    root = os.geteuid() == 0
    if root and not shutil.which("setpriv"):
        pytest.skip("running as root, without setpriv to drop the privilege")
    drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if root else []
    reach = subprocess.run([*drop, sys.executable, "-c", "import deltalake, dcpfast.mirror"],
                           capture_output=True, env=ENV, timeout=120)
    if reach.returncode:
        pytest.skip("the unprivileged user cannot read this environment (a private checkout)")
    with tempfile.TemporaryDirectory() as where:        # a place the other user reaches
        os.chmod(where, 0o755)
        dump, table, version, rows = _grown_after_a_run(Path(where))
        if not root:
            for folder, _, _ in os.walk(table):
                os.chmod(folder, 0o555)
        done = subprocess.run([*drop, *command("mirror", dump, "--to", table)],
                              capture_output=True, text=True, env=ENV, timeout=300)
        if not root:
            for folder, _, _ in os.walk(table):
                os.chmod(folder, 0o755)
        lines = done.stderr.splitlines()
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert lines[0].startswith(f"Error: {table}: the run could not be written")
        assert os.strerror(errno.EACCES) in lines[0]
        assert _unchanged(table, version, rows)
