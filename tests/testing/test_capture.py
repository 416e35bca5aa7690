"""Packet captures written by ``dcpfast.testing.capture``, as an independent reader (dpkt)
reads them."""

from __future__ import annotations

import io

import pytest

from dcpfast import testing as t
from tests.pcap.test_reader import CLIENT_BYTES, SERVER_BYTES


def test_writer_agrees_with_dpkt():
    dpkt = pytest.importorskip("dpkt")
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(999,), seed=3)
    packets = t.tcp_packets(segs, vlans=(9,))
    for capture, reader in ((t.pcap_file(packets, nanoseconds=True), dpkt.pcap.Reader),
                            (t.pcapng_file(packets, tsresol=9, extra_blocks=True),
                             dpkt.pcapng.Reader)):
        seen = list(reader(io.BytesIO(capture)))
        assert len(seen) == len(packets)
        for (ts, frame), seg in zip(seen, segs):
            eth = dpkt.ethernet.Ethernet(frame)
            tcp = eth.data.data
            assert isinstance(tcp, dpkt.tcp.TCP)
            assert bytes(tcp.data) == seg.payload and tcp.flags == seg.flags
            assert tcp.dport == (11210 if seg.client else 50123)
