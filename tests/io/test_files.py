"""Dumps named by a directory or a glob (``dcpfast.io.files``): one stream of their files in
name order, and damage in one of them named."""

from __future__ import annotations

import pytest

import dcpfast
from dcpfast import testing as t


def test_a_directory_or_a_glob_is_one_stream_of_its_files(tmp_path):
    """Rotated pieces of one dump, cut mid-frame, one of them compressed: read, in name
    order, as one stream; names starting with "." or "_" are passed over."""
    import gzip

    data = t.synthetic_stream(3000, seed=42)
    cuts = [0, len(data) // 3 + 7, 2 * len(data) // 3 - 5, len(data)]   # inside frames
    pieces = tmp_path / "dumps"
    (pieces / "sub").mkdir(parents=True)
    (pieces / "dump.000").write_bytes(data[cuts[0]:cuts[1]])
    (pieces / "sub" / "dump.001.gz").write_bytes(gzip.compress(data[cuts[1]:cuts[2]]))
    (pieces / "sub" / "dump.002").write_bytes(data[cuts[2]:])
    (pieces / "_SUCCESS").write_bytes(b"not a dump")
    (pieces / ".hidden").write_bytes(b"not a dump")
    whole = dcpfast.scan(data, final=True)
    for source in (pieces, str(pieces), f"{pieces}/**/dump.*"):
        read = dcpfast.read(source)
        assert read["offset"].tolist() == whole["offset"].tolist() and not read.errors
        batches = list(dcpfast.iter_batches(source, 20_000, collections=True))
        assert len(batches) > 2
        assert [o for b in batches for o in b["offset"].tolist()] == whole["offset"].tolist()
    with pytest.raises(FileNotFoundError, match="no dump files"):
        dcpfast.read(tmp_path / "nothing-*.dcp")


def test_damage_in_a_file_of_a_directory_names_it(tmp_path):
    import gzip

    data = t.synthetic_stream(400, seed=43)
    pieces = tmp_path / "dumps"
    pieces.mkdir()
    (pieces / "a.dcp").write_bytes(data)
    (pieces / "b.dcp.gz").write_bytes(gzip.compress(data)[:-30])        # cut short
    (pieces / "c.dcp").write_bytes(data)
    with pytest.raises(dcpfast.DcpFormatError) as failure:
        dcpfast.read(pieces)
    assert failure.value.offset >= len(data)
    assert any("b.dcp.gz" in note for note in failure.value.__notes__)
    kept = dcpfast.read(pieces, errors="skip")
    assert len(kept) > 2 * len(dcpfast.scan(data, final=True)) - 5
    assert any("damaged gzip" in e.reason for e in kept.errors)
