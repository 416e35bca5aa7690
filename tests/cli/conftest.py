"""Fixtures of the command's tests."""

from __future__ import annotations

import gzip
import random

import pytest

from dcpfast.testing import SAMPLE
from tests.cli.commands import PACK


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
    noise = random.Random(7).randbytes(3000)          # no frame in it, whatever the mode
    for name, content in (("garbage", noise), ("empty", b""),
                          ("truncated", data[:1000]), ("cut-gz", gzip.compress(data)[:-20])):
        paths[name] = root / name
        paths[name].write_bytes(content)
    return paths
