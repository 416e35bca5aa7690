"""The errors-mode reporter and the words of every reason."""

from __future__ import annotations

import pickle
import sys

import pytest

from dcpfast import errors
from dcpfast.errors import CaptureFormatError, DcpFormatError, Reporter, SkippedRegion
from dcpfast.packets import CaptureProblem
from dcpfast.protocol import Problem, ValueProblem


def test_strict_raises_with_offset_and_reason():
    regions = []
    with pytest.raises(DcpFormatError) as info:
        Reporter("strict", regions).report(120, 30, "broken")
    assert (info.value.offset, info.value.reason) == (120, "broken")
    assert str(info.value) == "at byte 120: broken"
    assert regions == []


def test_strict_raises_the_error_class_it_is_given():
    with pytest.raises(CaptureFormatError) as info:
        Reporter("strict", [], CaptureFormatError).report(8, 0, "bad block")
    assert info.value.offset == 8
    assert pickle.loads(pickle.dumps(info.value)).reason == "bad block"


def test_skip_lists_regions_in_stream_order():
    regions = [SkippedRegion(10, 5, "scan"), SkippedRegion(90, 5, "scan")]
    reporter = Reporter("skip", regions)
    for offset in (50, 5, 120, 70):
        reporter.report(offset, 2, "content")
    assert [r.offset for r in regions] == [5, 10, 50, 70, 90, 120]
    assert regions[2] == SkippedRegion(50, 2, "content")


def test_skip_lists_a_region_once():
    regions = [SkippedRegion(10, 5, "scan")]
    reporter = Reporter("skip", regions)
    reporter.report(40, 8, "content")
    reporter.report(40, 8, "content")
    reporter.report(10, 5, "scan")                 # listed before this reporter existed
    Reporter("skip", regions).report(40, 8, "content")     # a second pass over the list
    assert regions == [SkippedRegion(10, 5, "scan"), SkippedRegion(40, 8, "content")]
    reporter.report(40, 8, "other reason")         # same bytes, another reason: listed
    assert len(regions) == 3


def test_the_list_is_the_one_given():
    shared = []
    Reporter("skip", shared).report(3, 1, "x")
    assert shared == [SkippedRegion(3, 1, "x")]


@pytest.mark.parametrize("enum", [Problem, ValueProblem, CaptureProblem])
def test_every_problem_code_has_words(enum):
    for code in enum:
        reason = errors.describe(code, 1, 2)
        assert reason and "{" not in reason


def test_scan_codes_are_described_from_plain_ints():
    assert errors.describe(int(Problem.BAD_MAGIC), 0x42) == "unknown magic 0x42"
    assert errors.describe(Problem.BAD_MAGIC, 0x42) == "unknown magic 0x42"


def test_codes_of_different_problems_do_not_mix():
    assert int(ValueProblem.SNAPPY_PREAMBLE) == int(Problem.BAD_MAGIC)
    assert errors.describe(ValueProblem.SNAPPY_PREAMBLE) == \
        "Snappy value: no valid length preamble"
    assert errors.describe(CaptureProblem.BLOCK_LENGTH) == "pcapng block of impossible length"


def test_named_reasons_take_their_fields():
    assert errors.text("capture_gap", length=7) == \
        "capture gap: 7 bytes of the TCP stream are not in the capture"
    assert errors.text("stream_request_sid", sid="x") == \
        "stream request sid 'x' is not in 1..65535"
    assert errors.text("fb_field", name="uid", field=4, table_size=8) == \
        "FlatBuffers field uid at 4 outside its 8-byte table"
    assert errors.text("range_overlaps", uri="f", lo=0, hi=10, anchor=12) == \
        "byte-range split of f at 0..10: the range after byte 10 starts before this one (at 12)"


def test_an_optional_module_missing_names_its_extra(monkeypatch, tmp_path):
    """A missing optional dependency (or one of its modules) says what needs it and the
    extra that installs it; a package that is there but fails to import inside is not
    called missing."""
    monkeypatch.setitem(sys.modules, "deltalake", None)
    with pytest.raises(ImportError, match=r"^dcpfast.mirror needs deltalake: "
                       r"pip install 'dcpfast\[delta\]'$"):
        errors.optional("deltalake", "delta", "dcpfast.mirror")
    with pytest.raises(ImportError, match=r"the page needs no_such_package: "
                       r".*dcpfast\[report\]"):
        errors.optional("no_such_package.embed", "report", "the page")
    (tmp_path / "brokenpkg").mkdir()
    (tmp_path / "brokenpkg" / "__init__.py").write_text("import a_module_nobody_has\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="a_module_nobody_has"):
        errors.optional("brokenpkg", "x", "y")
    assert errors.optional("json", "x", "y") is sys.modules["json"]
