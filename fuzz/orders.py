"""The reassembly harness's input: segments of a known DCP stream in any order, with
copies that differ, as a capture; and the stream by first principles (each byte from
the first segment that carries it).

Input: a mode byte (bits 0-1: capture bytes read per step; bit 2: a reorder window of a
few segments; bit 3: strict mode; bit 4: sequence numbers that wrap), then segments in
arrival order, three bytes each: the offset (16 bits, big-endian, modulo the stream's
length) and the length less one. Segment ``i`` carries the stream's bytes, its values'
bytes replaced by ``i + 1``: frames stay whole whichever copy wins, and show which did.
"""

from __future__ import annotations

from io import BytesIO

import numpy as np

from dcpfast import protocol
from dcpfast import testing as t
from dcpfast.errors import DcpFormatError
from dcpfast.pcap import read_pcap, reassembly

_VALUES = (0, 5, 40, 130, 7, 300, 20, 1, 64, 90, 3, 250, 16)
#: The stream, each frame's (offset, length), and which of its bytes are value bytes.
FRAMES = [t.mutation(b"doc%d" % i, bytes(n), by_seqno=i + 1) for i, n in enumerate(_VALUES)]
STREAM = b"".join(FRAMES)
SPANS: list[tuple[int, int]] = []
VALUE_BYTES = np.zeros(len(STREAM), bool)
_at = 0
for _f, _n in zip(FRAMES, _VALUES):
    SPANS.append((_at, len(_f)))
    VALUE_BYTES[_at + len(_f) - _n:_at + len(_f)] = True
    _at += len(_f)
MAX_SEGMENTS = 1000
BATCH_BYTES = (64, 300, 2000, 1 << 20)


class Case:
    """One input: the capture, its options and the stream by first principles."""

    def __init__(self, raw: bytes):
        mode, body = raw[0], raw[1:]
        self.batch_bytes = BATCH_BYTES[mode & 3]
        self.small_window = bool(mode & 4)
        self.errors = "strict" if mode & 8 else "skip"
        isn = (7, 0xFFFFFFFF - 700) if mode & 16 else (7, 1000)
        segments = [t.TcpSegment(False, -1, b"", t.TCP_SYN | t.TCP_ACK)]
        self.expected = np.zeros(len(STREAM), np.uint8)
        self.covered = np.zeros(len(STREAM), bool)
        for i in range(min(len(body) // 3, MAX_SEGMENTS)):
            lo = int.from_bytes(body[3 * i:3 * i + 2], "big") % len(STREAM)
            hi = min(len(STREAM), lo + body[3 * i + 2] + 1)
            payload = np.frombuffer(STREAM[lo:hi], np.uint8).copy()
            payload[VALUE_BYTES[lo:hi]] = (i + 1) & 0xFF
            fresh = ~self.covered[lo:hi]
            self.expected[lo:hi][fresh] = payload[fresh]
            self.covered[lo:hi] = True
            segments.append(t.TcpSegment(False, lo, payload.tobytes()))
        self.capture = t.pcap_file(t.tcp_packets(segments, isn=isn))

    def first_copies(self, offset: int, length: int) -> bytes | None:
        """The stream's bytes at ``offset`` as their first copies gave them; None where
        a byte of them never came."""
        if offset + length > len(STREAM) or not self.covered[offset:offset + length].all():
            return None
        return self.expected[offset:offset + length].tobytes()


def seeds() -> list[bytes]:
    """In order, reversed, shuffled, every other segment first, and with overlapping
    copies, in each mode."""
    import random

    cuts = list(range(0, len(STREAM), 97))
    whole = [(lo, min(97, len(STREAM) - lo)) for lo in cuts]
    tiny = [(lo, 1) for lo in range(0, len(STREAM), 3)][:300]
    shuffled = whole[:]
    random.Random(1).shuffle(shuffled)
    orders = [whole, whole[::-1], shuffled, whole[::2] + whole[1::2],
              whole[1:] + [(50, 256), (0, 200)] + whole[:1], tiny[::-1]]
    out = []
    for mode, order in enumerate(orders * 4):
        out.append(bytes([mode * 5 % 32]) + b"".join(
            lo.to_bytes(2, "big") + bytes([n - 1]) for lo, n in order))
    return out


def check(raw: bytes) -> None:
    """Decode one input and hold it against the first-principles stream."""
    case = Case(raw)
    window = reassembly.REORDER_WINDOW
    if case.small_window:
        reassembly.REORDER_WINDOW = 3 * (reassembly.HELD_SEGMENT_COST + 200)
    frames, errors = {}, []
    try:
        for b in read_pcap(BytesIO(case.capture), collections=False, errors=case.errors,
                           batch_bytes=case.batch_bytes):
            lengths = protocol.HEADER_SIZE + b["body_len"].astype("int64")
            for off, n in zip(b["offset"].tolist(), lengths.tolist()):
                got = bytes(b.data[off - b.base_offset:off - b.base_offset + n])
                assert got == case.first_copies(off, n), (off, n)
                frames[off] = n
            errors += b.errors
    except DcpFormatError:
        if case.covered.all() and not case.small_window:
            raise
        return
    finally:
        reassembly.REORDER_WINDOW = window
    if case.covered.all() and not case.small_window:
        assert frames == dict(SPANS) and errors == [], (frames, errors)
