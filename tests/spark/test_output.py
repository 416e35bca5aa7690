"""The output directory of the Parquet job (``dcpfast.spark.output``): what may be there
before a job in each mode, and what is never replaced."""

from __future__ import annotations

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
