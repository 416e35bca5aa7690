"""What an input is when it is not DCP frames (``dcpfast.formats``), and the error that
names it where a scan meets it at the input's first byte."""

from __future__ import annotations

import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dcpfast
from dcpfast.formats import other_format
from dcpfast.testing import SAMPLE, SAMPLE_PCAP


def _parquet() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": [1, 2]}), sink)
    return sink.getvalue()


@pytest.mark.parametrize("head, what", [
    (b"# a note\nsome words\n", "text"),
    ('{"name": "h\u00f4tel"}'.encode(), "JSON text"),
    (b"  [1, 2, 3]", "JSON text"),
    ("caf\u00e9 \u2603".encode()[:-1], "text"),      # a character cut at the end
    (_parquet(), "a Parquet file"),
    (b"ARROW1\x00\x00", "an Arrow IPC file"),
    (b"PK\x03\x04rest", "a zip archive"),
    (b"\x7fELF\x02\x01", "an executable"),
    (SAMPLE_PCAP.read_bytes(), "a pcap capture (dcpfast.pcap.read_pcap reads it)"),
])
def test_what_other_inputs_are(head, what):
    assert other_format(head[:64]) == what


@pytest.mark.parametrize("head", [b"", SAMPLE.read_bytes()[:64], b"\x00\x01\x02text",
                                  b"text\x00with a zero", b"\xc3\x28 not UTF-8 at its start"])
def test_dcp_frames_and_noise_are_no_other_format(head):
    assert other_format(head) is None


@given(st.binary(max_size=64))
def test_dcp_frames_never_read_as_text(head):
    """A DCP magic byte is never text: an input that starts with one is never named as
    another format."""
    for magic in (0x80, 0x81, 0x82, 0x83, 0x08, 0x18):
        assert other_format(bytes([magic]) + head) is None


@pytest.mark.parametrize("data, what", [
    (b"# a note\nsome words\n", "text"), (_parquet(), "a Parquet file"),
    (SAMPLE_PCAP.read_bytes(), "a pcap capture")])
def test_the_first_bytes_error_names_the_format(data, what, tmp_path):
    """Strict mode's error at the input's first byte says what the input is instead, from
    a buffer, a file and a compressed file alike."""
    with pytest.raises(dcpfast.DcpFormatError, match=f"at byte 0: unknown magic 0x..: the "
                       f"input starts as {what}"):
        dcpfast.scan(data)
    (tmp_path / "in.gz").write_bytes(gzip.compress(data))
    with pytest.raises(dcpfast.DcpFormatError, match=f"the input starts as {what}"):
        list(dcpfast.iter_batches(tmp_path / "in.gz"))


def test_damage_past_the_start_is_not_named_as_a_format():
    """Text met after frames is damage in a dump, not a dump of another format."""
    with pytest.raises(dcpfast.DcpFormatError) as found:
        dcpfast.scan(SAMPLE.read_bytes() + b"# a note\n")
    assert found.value.offset > 0 and "starts as" not in str(found.value)
