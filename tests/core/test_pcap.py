"""The packet walker (``cpcap``) and its pure-Python twin (``pypcap``) walk the same records
to the same segments, statuses and counters, on every link type and pcapng timestamp
resolution, damaged or cut."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from dcpfast import packets
from dcpfast import testing as t
from tests.cores import COMPILED, TWINS
from tests.pcap.test_reader import CLIENT_BYTES, SERVER_BYTES, conversation_capture

_pcap_py = TWINS["pcap"]
_pcap = COMPILED["pcap"] if COMPILED else None


def _walk(core, capture, fmt, links, tsres, rows=64):
    cols = (np.zeros(rows, np.int64), np.zeros((rows, 40), np.uint8), np.zeros(rows, np.uint32),
            np.zeros(rows, np.uint8), np.zeros(rows, np.int64), np.zeros(rows, np.int32))
    counters = np.zeros(5, np.int64)
    buf = np.frombuffer(capture, np.uint8)
    pos = 24 if fmt == 0 else 0
    out = []
    while True:
        n, pos, status, detail = core.walk(buf, pos, fmt, False, np.array(links, np.int32),
                                           np.array(tsres, np.uint8),
                                           np.zeros(len(links), np.int64), *cols, counters)
        out.append((n, pos, status, detail, [c[:n].tolist() for c in cols]))
        if status != packets.WalkStatus.FULL:
            return out, counters.tolist()


@pytest.mark.skipif(_pcap is None, reason="the compiled walker is not built")
def test_walker_twins_agree():
    rng = random.Random(3)
    for link in (0, 1, 101, 108, 113, 276):
        capture = bytearray(conversation_capture(link=link, vlans=(5,) if link == 1 else (),
                                                 sizes=(200,)))
        for trial in range(30):
            data = bytearray(capture)
            for _ in range(trial):
                data[rng.randrange(24, len(data))] = rng.randrange(256)
            data = bytes(data[:rng.randrange(24, len(data) + 1)] if trial % 3 == 0 else data)
            assert _walk(_pcap, data, 0, [link], [6]) == _walk(_pcap_py, data, 0, [link], [6])
    packets = t.tcp_packets(t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES))
    for code in (0, 6, 9, 12, 0x80 | 10, 0x80 | 40, 0x80 | 70, 30):
        ng = t.pcapng_file(packets[:10], tsresol=code if code < 128 or code < 0x80 | 41 else None)
        # skip the section header and interface block, then walk the packet blocks
        shb = struct.unpack_from("<I", ng, 4)[0]
        idb = struct.unpack_from("<I", ng, shb + 4)[0]
        body = ng[shb + idb:]
        assert _walk(_pcap, body, 1, [1], [code]) == _walk(_pcap_py, body, 1, [1], [code])
