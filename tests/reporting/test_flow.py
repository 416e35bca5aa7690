"""Flow control of a report's connection: the Control ``connection_buffer_size`` is taken
as the server takes it (a decimal integer from 0 to 2**32 - 1); any other value is left
out with a warning, never a traceback or a figure no table can hold."""

from __future__ import annotations

import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.reporting.flow import FlowControl
from tests.report_scenarios import known


@pytest.mark.parametrize("value, taken", [
    (b"65536", 65536), (b" 1024\n", 1024), (b"0", 0), (b"4294967295", 4294967295),
    (b"4294967296", None), (b"9" * 400, None), (b"9" * 5000, None), (b"-5", None),
    (b"1_000", None), ("\u0661\u0662".encode(), None), (b"0x10", None),
])
def test_the_buffer_size_is_taken_as_the_server_takes_it(value, taken):
    flow = FlowControl()
    flow.learn(dcpfast.scan(t.control(b"connection_buffer_size", value)))
    assert flow.buffer_bytes == taken
    assert flow.refused == int(taken is None)
    flow.learn(dcpfast.scan(t.control(b"connection_buffer_size", b"4096")
                            + t.control(b"connection_buffer_size", value)))
    assert flow.buffer_bytes == (4096 if taken is None else taken)   # a refused one: no change


def test_a_buffer_size_of_hundreds_of_digits_is_left_out_with_a_warning(tmp_path):
    script = known()
    for sent in script.frames:
        if sent.what == "control":
            sent.data = t.control(b"connection_buffer_size", b"9" * 400, opaque=3)
    path = tmp_path / "huge.pcap"
    path.write_bytes(script.capture())
    found = dcpfast.report(path)
    (flow,) = found.figures["flow_control"]
    assert flow["buffer_bytes"] is None and flow["max_unacked_bytes"] > 0
    assert any("connection_buffer_size" in w for w in found.figures["warnings"])
    assert found.table("flow_control").num_rows == 1
    found.to_json()
