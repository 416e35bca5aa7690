"""The output directory of the Parquet job (``dcpfast.spark.output``): what may be there
before a job in each mode, and what is never replaced."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

dspark = pytest.importorskip("dcpfast.spark")
from dcpfast.spark import output  # noqa: E402


def test_the_output_directory_rules(tmp_path):
    out = tmp_path / "out"
    assert output.check(str(out), "error") is False
    out.mkdir()
    assert output.check(str(out), "error") is True                   # empty: allowed
    (out / "vbucket=3").mkdir()
    (out / "vbucket=3" / "part-00003-0123456789abcdef-0.parquet").write_bytes(b"x")
    (out / "_SUCCESS").write_bytes(b"")
    with pytest.raises(FileExistsError, match="already exists"):
        output.check(str(out), "error")
    assert output.check(str(out), "overwrite") and output.check(str(out), "append")
    # a Parquet file dcpfast did not write (Spark's, or the user's own) is never replaced
    for theirs in ("part-00000-1b2c.c000.snappy.parquet", "mine.parquet"):
        (out / "vbucket=3" / theirs).write_bytes(b"x")
        with pytest.raises(FileExistsError, match=f"vbucket=3/{theirs}, which dcpfast did "
                                                  "not write: not replacing it"):
            output.check(str(out), "overwrite")
        (out / "vbucket=3" / theirs).unlink()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt, which is not part of a Parquet"):
        output.check(str(out), "overwrite")
    (out / "notes.txt").unlink()
    (out / "vbucket=3" / "dump.dcp").write_bytes(b"")
    with pytest.raises(FileExistsError, match="vbucket=3/dump.dcp"):
        output.check(str(out), "overwrite")
    with pytest.raises(ValueError, match="mode must be"):
        output.check(str(out), "ignore")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    for mode in ("error", "overwrite", "append"):
        with pytest.raises(FileExistsError, match=f"^{link}: a symbolic link to "
                                                  f"{tmp_path / 'nowhere'}, which does not"):
            output.check(str(link), mode)


def _gone() -> int:
    """The id of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def _staged(out, job: str, pid: int | None) -> None:
    """What job ``job`` stages: its owner (process ``pid`` on this host; None: none) and
    an attempt's Parquet file."""
    stage = out / output.STAGING / job
    (stage / "00001-0-7" / "vbucket=1").mkdir(parents=True)
    (stage / "00001-0-7" / "vbucket=1" / f"part-00001-{job}-0.parquet").write_bytes(b"x")
    if pid is not None:
        (stage / output.OWNER).write_text(json.dumps({"host": socket.gethostname(),
                                                      "pid": pid}))


def test_the_staging_a_killed_job_left_is_removed(tmp_path):
    """A job killed (its owner gone) leaves ``_temporary``: the next job at the place, in
    every mode, removes it; that of a job still running (or of an owner it cannot judge)
    is kept, and an output holding it is not empty."""
    out = tmp_path / "out"
    for mode in ("error", "overwrite", "append"):
        _staged(out, "a" * 16, _gone())
        (out / output.STAGING / ("b" * 16)).mkdir()            # killed before its owner
        assert output.check(str(out), mode) is True
        assert output.prepare(str(out), mode) is False
        assert os.listdir(out) == []
    _staged(out, "c" * 16, os.getpid())
    _staged(out, "d" * 16, None)
    with pytest.raises(FileExistsError, match="already exists"):
        output.check(str(out), "error")
    _staged(out, "a" * 16, _gone())
    assert output.prepare(str(out), "overwrite") is False
    assert sorted(os.listdir(out / output.STAGING)) == ["c" * 16, "d" * 16]
    job = output.start(str(out))
    assert json.loads((out / output.STAGING / job / output.OWNER).read_text()) == \
        {"host": socket.gethostname(), "pid": os.getpid()}


def test_a_job_given_up_is_removed_while_its_attempts_still_write(tmp_path):
    """Attempts of a cancelled job that go on writing (as Spark's Python workers do for a
    moment) do not keep its staging directory alive: ``abort`` deletes it whatever they
    make meanwhile (on a loaded machine they may finish their files before it wins), and
    once it is gone they cannot stage again: nothing of the job is left."""
    import threading

    from pyarrow import fs as pafs

    out = tmp_path / "out"
    out.mkdir()
    job = output.start(str(out))
    stage = output.staging(str(out), job)
    store = pafs.LocalFileSystem()
    began, failed = threading.Event(), []

    def attempt(n: int) -> None:
        """A task's files, one after the other, until its directory is gone."""
        try:
            for k in range(3000):
                where = f"{stage}/{n:05d}-0-{n}"
                for level in ("", f"/vbucket={k % 7}", f"/vbucket={k % 7}/opcode={k % 3}"):
                    if not store.get_file_info(where + level).type == pafs.FileType.Directory:
                        store.create_dir(where + level, recursive=False)
                with store.open_output_stream(f"{where}/vbucket={k % 7}/opcode={k % 3}/"
                                              f"part-{k}.parquet") as f:
                    f.write(b"x" * 64)
                began.set()
        except Exception as e:            # noqa: BLE001  (any kind, checked below)
            failed.append(e)

    writers = [threading.Thread(target=attempt, args=(n,)) for n in range(3)]
    for w in writers:
        w.start()
    assert began.wait(60)
    output.finish(str(out), job, created=True, committed=False)
    for w in writers:
        w.join(120)
    assert not any(w.is_alive() for w in writers)
    assert all(isinstance(e, OSError) for e in failed), failed    # stopped: nowhere to write
    assert not out.exists()
