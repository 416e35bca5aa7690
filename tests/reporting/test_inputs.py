"""What a report reads and how it names it: names of any bytes shown readably, options
checked before anything is read."""

from __future__ import annotations

import io
import math
import os

import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.reporting.inputs import MAX_STALL_SECONDS, Options, name_of


def test_names_that_are_not_utf8_are_shown_escaped(tmp_path):
    name = os.path.join(os.fsencode(tmp_path), b"caf\xe9 \xff.dcp")
    with open(name, "wb") as f:
        f.write(t.SAMPLE.read_bytes())
    assert name_of(os.fsdecode(name)) == "caf\\xe9 \\xff.dcp"
    with open(name, "rb") as f:              # a file object named by its path, in bytes
        assert name_of(f).endswith("/caf\\xe9 \\xff.dcp")
        figures = dcpfast.report(f).figures
    assert figures["inputs"][0]["name"] == name_of(f)
    assert name_of("-") == "<stdin>" and name_of(io.BytesIO()) == "BytesIO"
    assert name_of("lone \ud800 surrogate.dcp") == "lone \\ud800 surrogate.dcp"


@pytest.mark.parametrize("seconds", [math.inf, -math.inf, math.nan, 0, -1, 1e300,
                                     MAX_STALL_SECONDS * 2])
def test_the_stall_threshold_is_finite_and_above_0(seconds):
    with pytest.raises(ValueError, match="stall_seconds"):
        Options(stall_seconds=seconds)
    with pytest.raises(ValueError, match="stall_seconds"):
        dcpfast.report(t.SAMPLE_PCAP, stall_seconds=seconds)


def test_the_longest_stall_threshold_is_taken():
    assert dcpfast.report(t.SAMPLE_PCAP, stall_seconds=MAX_STALL_SECONDS).figures["stalls"] \
        == []
